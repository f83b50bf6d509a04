"""The adapter over ``PPOTrainer._build_replay_buffer``: verl's own method, run on a config, derives for its built-in
buffers exactly what :mod:`agentrl_recipe.training.verl_adapters.ppo_trainer` derives, and gives a custom sampler only
``CUSTOM_SAMPLER_KWARGS``. If a test here fails, verl changed that private method: update the adapter."""

from __future__ import annotations

import inspect
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf
from verl.trainer.ppo.v1 import trainer_base
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

from agentrl_recipe.training.verl_adapters import ppo_trainer

B = 4


def _build(monkeypatch, mode: str, filter_groups: dict, refill_failed: bool, custom: bool = False) -> dict:
    """The keyword arguments verl's _build_replay_buffer passes the buffer class it picks."""
    seen: dict = {}

    def recorder(kind: str):
        def record(**kwargs):
            seen.update(kwargs, _class=kind)

        return record

    for name in ("ReplayBuffer", "ReplayBufferAsync", "load_extern_type"):
        assert hasattr(trainer_base, name), f"{ppo_trainer.SYMBOL}: verl's trainer_base no longer has {name}"
    monkeypatch.setattr(trainer_base, "ReplayBuffer", recorder("sync"))
    monkeypatch.setattr(trainer_base, "ReplayBufferAsync", recorder("async"))
    monkeypatch.setattr(trainer_base, "load_extern_type", lambda path, name: recorder("custom"))
    cfg = OmegaConf.create(
        {
            "data": {"train_batch_size": B},
            "algorithm": {"filter_groups": filter_groups},
            "reward": {"reward_model": {"enable": False, "enable_resource_pool": False}},
            "trainer": {
                "v1": {
                    "trainer_mode": mode,
                    mode: {},
                    "sampler": {
                        "max_off_policy_threshold": None,
                        "max_off_policy_strategy": "drop",
                        "sync_refill_failed_groups": refill_failed,
                        "custom_sampler": {"path": "pkg://x", "name": "X"} if custom else None,
                        "sampler_kwargs": {},
                    },
                }
            },
        }
    )
    trainer = SimpleNamespace(config=cfg, trainer_mode=mode, _add_prompts_to_generate=lambda n: n)
    trainer._resolve_filter_groups_metric = lambda: PPOTrainer._resolve_filter_groups_metric(trainer)
    PPOTrainer._build_replay_buffer(trainer)
    expected = "custom" if custom else "sync" if mode == "sync" else "async"
    assert seen.pop("_class") == expected, f"{ppo_trainer.SYMBOL} no longer builds the {expected} buffer here"
    return seen


def test_verl_still_has_the_private_method() -> None:
    method = getattr(PPOTrainer, ppo_trainer.SYMBOL.rpartition(".")[2], None)
    assert callable(method), f"{ppo_trainer.SYMBOL} is gone"
    assert list(inspect.signature(method).parameters) == ["self"], f"{ppo_trainer.SYMBOL} changed its signature"


def test_a_custom_sampler_gets_only_the_base_arguments(monkeypatch) -> None:
    seen = _build(monkeypatch, "sync", {"enable": True, "metric": "acc"}, False, custom=True)
    assert tuple(seen) == ppo_trainer.CUSTOM_SAMPLER_KWARGS, f"{ppo_trainer.SYMBOL} now gives a custom sampler {seen}"


GROUPS = [
    {"enable": False},
    {"enable": True, "metric": "acc", "max_inflight_gen_batches": 3},
    {"enable": True, "metric": "reward", "max_num_gen_batches": 0},
]


@pytest.mark.parametrize("groups", GROUPS)
@pytest.mark.parametrize("refill_failed", [False, True])
def test_sync_derivation_matches_verl(monkeypatch, groups, refill_failed) -> None:
    seen = _build(monkeypatch, "sync", groups, refill_failed)
    metric = groups.get("metric") if groups["enable"] else None
    ours = ppo_trainer.sync_buffer_kwargs(
        filter_groups_metric=metric,
        sync_refill_failed_groups=refill_failed,
        train_batch_size=B,
        max_inflight_gen_batches=groups.get("max_inflight_gen_batches", 1),
    )
    derived = {key: value for key, value in seen.items() if key not in ppo_trainer.CUSTOM_SAMPLER_KWARGS}
    assert derived == ours, f"{ppo_trainer.SYMBOL} derives {derived}, the adapter {ours}"


@pytest.mark.parametrize("groups", GROUPS)
def test_async_derivation_matches_verl(monkeypatch, groups) -> None:
    seen = _build(monkeypatch, "colocate_async", groups, False)
    metric = groups.get("metric") if groups["enable"] else None
    ours = ppo_trainer.async_buffer_kwargs(filter_groups_metric=metric, sync_refill_failed_groups=False)
    derived = {key: value for key, value in seen.items() if key not in ppo_trainer.CUSTOM_SAMPLER_KWARGS}
    assert derived == ours, f"{ppo_trainer.SYMBOL} derives {derived}, the adapter {ours}"
