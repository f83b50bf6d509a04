"""The async replay buffer on a real TransferQueue: it applies the masks and rejects the sync-only cap."""

from __future__ import annotations

import itertools

import pytest
from replay_helpers import DAPO, B, N, ScriptedRollout, make_buffer

from agentrl_recipe import names
from agentrl_recipe.algos.async_sampler import AgentRLReplayBufferAsync


def test_async_buffer_applies_masks_and_rejects_the_sync_cap(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra={(0, 0): {names.FIELD_TOOL_INFRA_FAILURE: True}})
    with pytest.raises(ValueError, match="sync dynamic sampling only"):
        make_buffer(AgentRLReplayBufferAsync, rollout, filter_groups=DAPO)
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks={"infra_failure": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert len(batch) == B * N and metrics["training/masks/masked_trajectories"] == 1
    assert buffer.filter_groups_metric is None and buffer.sync_refill_failed_groups is False
