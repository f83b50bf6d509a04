"""Every shipped config composes against verl 0.9.1 and passes `configs check`; broken configs fail loudly.

verl's import (~15 s with the plugin) happens once per process: `registries()` is cached.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from agentrl_recipe.cli import configs
from agentrl_recipe.cli.configs.checks import CheckReport, check
from agentrl_recipe.cli.configs.files import compose, list_configs, locate

SHIPPED = [name for name, _, _ in list_configs()]


def _overlay(tmp_path: Path, base: str, body: dict, name: str = "user_cfg") -> Path:
    """A user config in its own directory that extends a shipped one (as `configs cp` + an edit would)."""
    path = configs.copy_config(base, tmp_path / f"{name}.yaml")
    data = yaml.safe_load(path.read_text())
    _merge(data, body)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _merge(into: dict, extra: dict) -> None:
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def _errors(report: CheckReport) -> str:
    return "\n".join(str(p) for p in report.errors)


def test_the_paper_runs_and_ablations_are_shipped() -> None:
    expected = {
        "agentrl_sft",
        "agentrl_rl",
        "agentrl_sft_qwen3_4b",
        "agentrl_sft_qwen2_7b",
        "agentrl_rl_qwen3_4b",
        "agentrl_rl_qwen3_4b_eps028",
        "agentrl_rl_qwen2_7b",
        "agentrl_rl_smoke",
        "ablations/grpo_t",
        "ablations/grpo_scr",
        "ablations/clip_high_0p28",
        "ablations/clip_high_0p315",
        "ablations/clip_high_0p35",
        "ablations/loss_agg_seq",
        "ablations/loss_agg_token",
        "ablations/sft_data_real",
        "ablations/sft_data_synthetic",
        "ablations/rl_data_diverse",
        "ablations/rl_data_math_only",
        "ablations/rl_data_model_aware",
        "ablations/rl_data_unfiltered",
        "ablations/entropy_bonus_on",
        "ablations/entropy_bonus_off",
        "ablations/no_clip_higher",
        "ablations/no_dual_clip",
        "ablations/no_overlong_shaping",
    }
    assert expected <= set(SHIPPED)
    assert not any(name.startswith(("recipe/", "tools/")) for name in SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_config_passes(name: str) -> None:
    report = check(name)
    assert report.ok, report.format()
    assert report.kind == ("sft" if "sft" in name else "rl")


def test_an_overlay_typo_fails_with_a_suggestion(tmp_path: Path) -> None:
    path = _overlay(tmp_path, "agentrl_rl", {"actor_rollout_ref": {"rollout": {"multi_trun": {"enable": True}}}})
    report = check(str(path))
    assert not report.ok
    assert "actor_rollout_ref.rollout.multi_trun.enable" in _errors(report)
    assert "did you mean actor_rollout_ref.rollout.multi_turn" in _errors(report)


def test_typos_in_the_plugin_namespaces_fail(tmp_path: Path) -> None:
    body = {"agentrl": {"sandbox": {"timeout": 5}, "sandbx": {}}, "reward": {"reward_kwargs": {"tool_bonuss": "off"}}}
    errors = _errors(check(str(_overlay(tmp_path, "agentrl_rl", body))))
    assert "agentrl.sandbox" in errors and "timeout" in errors
    assert "agentrl.sandbx: unknown section" in errors
    assert "reward.reward_kwargs" in errors and "tool_bonuss" in errors


def test_a_bad_plugin_value_fails(tmp_path: Path) -> None:
    body = {"reward": {"reward_kwargs": {"tool_bonus": "sometimes"}}}
    errors = _errors(check(str(_overlay(tmp_path, "agentrl_rl", body))))
    assert "tool_bonus" in errors and "sometimes" in errors


@pytest.mark.parametrize(
    ("base", "body", "replacement"),
    [
        ("agentrl_rl", {"reward_model": {"reward_manager": "dapo"}}, "reward.reward_manager.name"),
        ("agentrl_rl", {"reward_model": {"reward_kwargs": {"max_resp_len": 10}}}, "reward.reward_kwargs.max_resp_len"),
        ("agentrl_rl", {"custom_reward_function": {"path": "x.py"}}, "reward.custom_reward_function.path"),
        ("agentrl_rl", {"sandbox_fusion": {"url": "http://x:8080"}}, "agentrl.sandbox.url"),
        ("agentrl_sft", {"data": {"multiturn": {"enable": True}}}, "data.messages_key"),
        ("agentrl_sft", {"model": {"partial_pretrain": "Qwen/Qwen3-4B-Instruct-2507"}}, "model.path"),
    ],
)
def test_legacy_keys_fail_naming_the_replacement(tmp_path: Path, base: str, body: dict, replacement: str) -> None:
    report = check(str(_overlay(tmp_path, base, body)))
    assert not report.ok
    assert "legacy key" in _errors(report) and replacement in _errors(report)


def test_a_legacy_cli_override_fails_too() -> None:
    report = check("agentrl_rl", ["reward_model.reward_manager=dapo"])
    assert "use reward.reward_manager.name" in _errors(report)


def test_unregistered_names_and_missing_files_fail(tmp_path: Path) -> None:
    body = {
        "algorithm": {"adv_estimator": "agentrl_grpoo"},
        "actor_rollout_ref": {
            "actor": {"policy_loss": {"loss_mode": "tcr"}},
            "rollout": {"multi_turn": {"tool_config_path": "verl_configs/tools/nope.yaml"}},
        },
        "reward": {"reward_manager": {"name": "AgentRLRewardManagr"}},
        "data": {"custom_cls": {"path": "no_such_dataset.py", "name": "MyDataset"}},
    }
    errors = _errors(check(str(_overlay(tmp_path, "agentrl_rl", body))))
    assert "advantage estimator 'agentrl_grpoo' is not registered" in errors
    assert "policy loss 'tcr' is not registered" in errors
    assert "'AgentRLRewardManagr' from 'pkg://agentrl_recipe.training.rewards.manager' cannot be loaded" in errors
    assert "nope.yaml" in errors and "no_such_dataset.py" in errors


def test_token_budgets_are_checked_before_a_gpu_is_touched() -> None:
    report = check("agentrl_rl", ["actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096"])
    assert "ppo_max_token_len_per_gpu" in _errors(report) and "23040" in _errors(report)


def test_verl_validate_config_runs() -> None:
    # 64 prompts × n 16 = 1024 trajectories do not split over 1000 GPUs without dynamic batching.
    overrides = ["actor_rollout_ref.actor.use_dynamic_bsz=false", "trainer.n_gpus_per_node=1000"]
    report = check("agentrl_rl", overrides)
    assert "validate_config" in _errors(report) or "divisible" in _errors(report)


def test_strict_paths_turn_missing_data_into_errors() -> None:
    lenient = check("agentrl_rl", ["data.train_files=/nonexistent/train.parquet"])
    strict = check("agentrl_rl", ["data.train_files=/nonexistent/train.parquet"], strict_paths=True)
    assert lenient.ok and any("/nonexistent/train.parquet" in str(w) for w in lenient.warnings)
    assert not strict.ok and "/nonexistent/train.parquet" in _errors(strict)


def test_copy_keeps_the_composed_config(tmp_path: Path) -> None:
    from omegaconf import OmegaConf

    copied = configs.copy_config("ablations/grpo_t", tmp_path)
    assert copied == tmp_path / "grpo_t.yaml"
    with pytest.raises(FileExistsError):
        configs.copy_config("ablations/grpo_t", tmp_path)
    original, _ = compose("ablations/grpo_t")
    mine, _ = compose(str(copied))
    assert OmegaConf.to_container(original) == OmegaConf.to_container(mine)
    assert check(str(copied)).ok


def test_cli_list_show_check(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    def run(*argv: str) -> int:
        parser = argparse.ArgumentParser()
        configs.add_arguments(parser)
        return configs.main(parser.parse_args(list(argv)))

    assert run("list") == 0
    listing = capsys.readouterr().out
    assert "agentrl_rl_qwen3_4b" in listing and "DemyAgent-4B" in listing and "ablations/grpo_scr" in listing
    assert run("show", "agentrl_rl_qwen3_4b") == 0
    assert "clip_ratio_high: 0.315" in capsys.readouterr().out
    assert run("show", "agentrl_rl_qwen3_4b", "--composed", "--resolve") == 0
    assert "max_resp_len: 20480" in capsys.readouterr().out
    bad = _overlay(tmp_path, "agentrl_rl", {"trainer": {"totl_epochs": 1}})
    assert run("check", "agentrl_rl", str(bad)) == 1
    out = capsys.readouterr().out
    assert "OK agentrl_rl" in out and "FAIL" in out and "trainer.totl_epochs" in out and "1/2 configs pass" in out
    with pytest.raises(FileNotFoundError, match="did you mean agentrl_rl_qwen3_4b"):
        locate("agentrl_rl_qwen3_4")
