"""The samplers' settings (``sampler_kwargs``) and the config check that they are wired from their config homes."""

from __future__ import annotations

import pytest
from replay_helpers import trainer_config

from agentrl_recipe.algos.infra_guard import InfraGuardConfig
from agentrl_recipe.algos.sampler_config import SamplerSettings, check_trainer_config


def test_sampler_kwargs_are_validated() -> None:
    wired = {"masks": {}, "filter_groups": {}, "train_batch_size": 4, "max_response_length": 8}
    assert SamplerSettings.from_kwargs(wired).masks.enabled == ()
    with pytest.raises(ValueError, match=r"masks: \$\{agentrl.masks\}"):  # unwired: would silently do nothing
        SamplerSettings.from_kwargs({k: v for k, v in wired.items() if k != "masks"})
    with pytest.raises(ValueError, match="void_turns"):
        SamplerSettings.from_kwargs({**wired, "masks": {"void_turns": True}})
    with pytest.raises(ValueError, match="metric"):
        SamplerSettings.from_kwargs({**wired, "filter_groups": {"enable": True}})
    with pytest.raises(ValueError, match="max_num_gen_batches must be ≥ 0"):
        SamplerSettings.from_kwargs({**wired, "filter_groups": {"max_num_gen_batches": -1}})
    with pytest.raises(ValueError, match="train_batch_size"):
        SamplerSettings.from_kwargs(
            {**wired, "filter_groups": {"enable": True, "metric": "acc"}, "train_batch_size": None}
        )
    with pytest.raises(ValueError, match="unknown key"):
        SamplerSettings.from_kwargs({**wired, "mask": {}})


def test_sampler_kwargs_carry_the_guard() -> None:
    kwargs = {
        "masks": {},
        "filter_groups": {"enable": False},
        "train_batch_size": 4,
        "max_response_length": 8,
        "infra_guard": {"max_rate": 0.05},
    }
    assert SamplerSettings.from_kwargs(kwargs).infra_guard == InfraGuardConfig(max_rate=0.05)
    del kwargs["infra_guard"]
    assert SamplerSettings.from_kwargs(kwargs).infra_guard == InfraGuardConfig()  # on by default


def test_the_shipped_wiring_passes_the_check() -> None:
    assert check_trainer_config(trainer_config({"void_turn": True, "overlong_filter": True})) == []


def test_check_trainer_config_reports_a_mask_that_would_do_nothing() -> None:
    cfg = trainer_config({"infra_failure": True})
    cfg.trainer.v1.sampler.custom_sampler.path = None  # verl's built-in buffer: the mask would be ignored
    assert any("custom_sampler" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"infra_failure": True}, mode="colocate_async")  # sync sampler in an async mode
    assert any("AgentRLReplayBufferAsync" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"infra_failure": True})
    cfg.trainer.use_v1 = False
    assert any("use_v1" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"void_turn": True})
    cfg.agentrl.roc = {"enable": True, "keep_per_group": 8}
    del cfg.trainer.v1.sampler.sampler_kwargs["roc"]  # RoC on but not wired: the sampler would never see it
    assert any("sampler_kwargs.roc" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"void_turn": True})
    cfg.trainer.v1.sampler.sampler_kwargs.masks = {"void_turn": False}  # not interpolated from agentrl.masks
    assert check_trainer_config(cfg) == [
        "trainer.v1.sampler.sampler_kwargs.masks does not match its config home; wire it as ${agentrl.masks}"
    ]
    cfg = trainer_config({"void_turn": True})
    del cfg.trainer.v1.sampler.sampler_kwargs["train_batch_size"]
    assert [p.split(":")[0] for p in check_trainer_config(cfg)] == ["trainer.v1.sampler.sampler_kwargs"]
    cfg = trainer_config({})
    cfg.algorithm.filter_groups.enable = False
    assert check_trainer_config(cfg) == []  # nothing needs the sampler
