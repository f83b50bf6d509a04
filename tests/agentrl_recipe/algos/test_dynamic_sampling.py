"""The sync replay buffer on a real TransferQueue: DAPO refill to full size, and the cap on generation rounds."""

from __future__ import annotations

import itertools
import logging

import pytest
from replay_helpers import DAPO, B, N, ScriptedRollout, groups_of, make_buffer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from agentrl_recipe.algos import dynamic_sampling
from agentrl_recipe.algos.dynamic_sampling import AgentRLReplayBuffer

LOGGER = dynamic_sampling.__name__


def test_zero_variance_groups_are_refilled_to_full_size(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.chain(["var", "zero", "zero", "var"], itertools.repeat("var")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups=DAPO)
    rollout.submit(B)  # the trainer's prepare_step
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    groups = groups_of(tq, batch)
    assert len(groups) == B and len(batch) == B * N
    assert all(len(set(accs)) > 1 for accs in groups.values())  # every group carries signal
    assert rollout.refills == [4]  # verl's 2 prompts per evicted group
    assert metrics["training/filter_groups/evicted_samples"] == 2  # verl's metric
    assert metrics["training/filter_groups/refill_prompts"] == 4
    assert metrics["training/filter_groups/gen_batches"] == 2.0
    assert metrics["training/filter_groups/cap_reached"] == 0.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == 0.0


def test_verl_builtin_buffer_ignores_the_cap(tq) -> None:
    """verl 0.9.1's sync ReplayBuffer never stops generating when every group is zero-variance (the bug we fix)."""
    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    rollout.refills = []

    def refill(n: int) -> int:
        if len(rollout.refills) >= 12:  # > max_num_gen_batches=10 rounds: it would go on forever
            raise RuntimeError("still refilling")
        return rollout.refill(n)

    buffer = ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=refill,
        poll_interval=0.01,
        filter_groups_metric="acc",
        train_batch_size=B,
        gen_batch_size=1,
        max_inflight_gen_batches=1,
    )
    rollout.submit(B)
    with pytest.raises(RuntimeError, match="still refilling"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)


def test_cap_stops_generation_with_a_warning(tq, caplog) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 3})
    rollout.submit(B)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == (3 - 1) * B  # the first batch + 2 refill batches, then no more
    assert len(groups_of(tq, batch)) == B  # still a full batch: zero-variance groups are kept at the cap
    assert metrics["training/filter_groups/cap_reached"] == 1.0
    assert metrics["training/filter_groups/gen_batches"] == 3.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == B
    assert "max_num_gen_batches=3" in caplog.text


def test_cap_prefers_groups_with_variance_and_trains_a_short_batch(tq, caplog) -> None:
    """Half of the first batch is still generating when the buffer starts; the budget runs out mid-refill, and
    once nothing is in flight the buffer trains on the groups it has rather than waiting forever."""
    rollout = ScriptedRollout(tq, itertools.chain(["zero"] * 4 + ["var"], itertools.repeat("zero")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 2})
    rollout.submit(2)
    rollout.submit(2, finished=False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == B
    groups = groups_of(tq, batch)
    assert len(groups) < B and metrics["training/filter_groups/batch_groups"] == len(groups)
    assert any(len(set(accs)) > 1 for accs in groups.values())  # the one group with signal is in
    assert "training this step on" in caplog.text
    # 2 zero groups, then the 2 late ones + 1 refilled zero group; verl's count survives the short path
    assert metrics["training/filter_groups/evicted_samples"] == 5


def test_nothing_to_train_on_at_the_cap_is_a_clear_error(tq) -> None:
    buffer = make_buffer(AgentRLReplayBuffer, ScriptedRollout(tq, []), filter_groups={**DAPO, "max_num_gen_batches": 1})
    with pytest.raises(RuntimeError, match="too easy or too hard"):
        buffer._short_batch(global_steps=1, partition_id="train", batch_size=B)
