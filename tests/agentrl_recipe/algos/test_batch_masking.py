"""Trajectory masks and RoC on a sampled batch (through the sync buffer, on a real TransferQueue)."""

from __future__ import annotations

import itertools

import pytest
from replay_helpers import B, N, ScriptedRollout, make_buffer

from agentrl_recipe import names
from agentrl_recipe.algos.dynamic_sampling import AgentRLReplayBuffer


def test_masks_zero_response_and_loss_masks_in_transfer_queue(tq) -> None:
    extra = {(0, 1): {names.FIELD_VOID_TURN: True}, (1, 0): {names.FIELD_TOOL_INFRA_FAILURE: True}}
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, masks={"void_turn": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["response_mask", "loss_mask"])
    extras = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])["extra_fields"]
    for row, extra in enumerate(extras):
        void = bool(getattr(extra, "data", extra).get(names.FIELD_VOID_TURN))
        for field in ("response_mask", "loss_mask"):
            values = data[field][row]
            assert len(values) in (3, 4)  # lengths kept
            assert bool(values.sum() == 0) is void  # only the void-turn trajectory; infra_failure is off
    assert metrics["training/masks/masked_trajectories"] == 1
    assert metrics["training/masks/void_turn_ratio"] == pytest.approx(1 / (B * N))
    assert metrics["training/masks/infra_failure_ratio"] == pytest.approx(1 / (B * N))
    assert metrics["training/masks/loss_tokens"] == B * (3 + 4)
    assert metrics["training/masks/loss_tokens_kept"] == B * (3 + 4) - 4  # the void-turn one is session 1: 4 tokens
    assert "training/filter_groups/cap_reached" not in metrics  # dynamic sampling is off
    # the step's reward metrics reach verl's tracker through the buffer's metrics
    assert metrics["reward/math_dapo/acc"] == pytest.approx(1 / N)


def test_roc_keeps_the_clean_correct_trajectories_by_masking_the_rest(tq) -> None:
    # one group of 4: two correct (session 0 with failing tool calls, session 1 clean), two incorrect
    tools = {names.FIELD_TOOL_CALLS: 4}
    extra = {(0, 0): {**tools, names.FIELD_TOOL_FAILURES: 3}, (0, 1): {**tools, names.FIELD_TOOL_FAILURES: 0}}
    rollout = ScriptedRollout(tq, iter([[1.0, 1.0, 0.0, 0.0]]), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, roc={"enable": True, "keep_per_group": 2})
    rollout.submit(1)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=1)
    masks = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["loss_mask"])["loss_mask"]
    kept = {key.split("_")[1]: bool(row.sum() > 0) for key, row in zip(batch.keys, masks.unbind(), strict=True)}
    assert kept["0"] is False and kept["1"] is True  # the clean correct one
    assert sum(kept.values()) == 2
    assert metrics["training/roc/dropped_trajectories"] == 2
    assert metrics["training/roc/correct_penalty_mean"] == pytest.approx(0.375)
    assert metrics["training/roc/kept_correct_penalty_mean"] == 0.0
