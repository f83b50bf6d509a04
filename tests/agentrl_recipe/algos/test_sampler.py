"""The stable path configs name (``pkg://agentrl_recipe.algos.sampler``): verl loads both classes from it and
builds them from the shipped wiring; every name it re-exports is its home module's object."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from replay_helpers import MAX_LEN, trainer_config
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.import_utils import load_extern_object

from agentrl_recipe.algos import async_sampler, dynamic_sampling, sampler, sampler_config


def test_every_exported_name_is_its_home_modules_object() -> None:
    homes = (async_sampler, dynamic_sampling, sampler_config)
    for name in sampler.__all__:
        home = next(module for module in homes if hasattr(module, name))
        assert getattr(sampler, name) is getattr(home, name), name
    assert {sampler.SYNC_SAMPLER, sampler.ASYNC_SAMPLER} <= set(sampler.__all__)


@pytest.mark.parametrize("name", ["AgentRLReplayBuffer", "AgentRLReplayBufferAsync"])
def test_verl_loads_the_classes_from_the_configured_path(name: str) -> None:
    assert load_extern_object(sampler.SAMPLER_PATH, name) is getattr(sampler, name)  # verl's custom_sampler loader


def test_verl_trainer_builds_our_buffer_from_config() -> None:
    """verl's own PPOTrainer._build_replay_buffer loads the sampler from trainer.v1.sampler.custom_sampler."""
    cfg = trainer_config({"void_turn": True, "overlong_filter": True})
    trainer = SimpleNamespace(config=cfg, trainer_mode="sync", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert type(buffer) is sampler.AgentRLReplayBuffer
    assert buffer.settings.masks.enabled == ("void_turn", "overlong_filter")
    assert buffer.filter_groups_metric == "acc" and buffer.gen_batch_size == 1 and buffer.max_num_gen_batches == 10
    assert buffer.settings.max_response_length == MAX_LEN


def test_verl_trainer_builds_our_async_buffer_from_config() -> None:
    cfg = trainer_config({"infra_failure": True}, mode="colocate_async", sampler="AgentRLReplayBufferAsync")
    cfg.algorithm.filter_groups.max_num_gen_batches = 0  # the cap is sync-only
    trainer = SimpleNamespace(config=cfg, trainer_mode="colocate_async", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert type(buffer) is sampler.AgentRLReplayBufferAsync
    assert buffer.settings.masks.enabled == ("infra_failure",) and buffer.filter_groups_metric == "acc"
