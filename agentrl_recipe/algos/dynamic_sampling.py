"""The sync replay buffer: trajectory masks + DAPO dynamic sampling with a cap on generation rounds.

**Dynamic sampling** (DAPO filter-groups). verl's sync ReplayBuffer already does the filtering right: finished
groups whose ``algorithm.filter_groups.metric`` is identical across the group are evicted, 2 prompts are refilled
per evicted group (bounded by ``max_inflight_gen_batches`` × train_batch_size in flight), and it waits until
``train_batch_size`` groups with variance exist, discarding the surplus. What it lacks is the cap: it ignores
``max_num_gen_batches`` (with a warning) and keeps generating forever when every group is zero-variance (a data set
too easy or too hard for the model). This subclass restores DAPO's cap: at most ``max_num_gen_batches`` ×
``train_batch_size`` prompts are generated per step (the first batch included; 0 = no cap, DAPO's convention).
At the cap it stops refilling and stops evicting, prefers groups with variance when it selects, and, if fewer than
``train_batch_size`` groups exist once nothing is in flight, trains on those (verl pads the batch with its no-op
rows) — each with a WARNING that says how many groups carried signal. Groups are never silently dropped.
Group variance is judged before masking: a group whose only informative member is later masked still counts as
informative (its remaining members then get zero advantage from ``agentrl_grpo``).

Keys (verl's ``algorithm.filter_groups.*``; verl default → paper [code] value):

- ``enable``: false → false (the released script sets it but never passes it: "too expensive for agentic RL").
- ``metric``: reward → acc. The per-trajectory value whose group variance must be > 0 (``reward`` = rm_scores,
  anything else = a ``reward_extra_info`` key).
- ``max_num_gen_batches``: 0 (ignored by verl's v1 buffer) → 10. Cap on generated prompt batches per step, the
  first included; 0 = no cap. Honoured by this sampler.
- ``max_inflight_gen_batches``: 1 → —. verl's bound on concurrently generating batches.

Step metrics: ``training/filter_groups/{gen_batches, refill_prompts, cap_reached, zero_variance_groups_kept,
batch_groups}`` next to verl's ``training/filter_groups/evicted_samples``. verl's private sampling steps are reached
only through :class:`agentrl_recipe.verl_adapters.replay_buffer.HookedReplayBuffer`'s hooks.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from typing import Any

from transfer_queue import KVBatchMeta

from agentrl_recipe import trace
from agentrl_recipe.algos.batch_masking import MaskingMixin
from agentrl_recipe.algos.sampler_config import SamplerSettings
from agentrl_recipe.verl_adapters.ppo_trainer import sync_buffer_kwargs
from agentrl_recipe.verl_adapters.replay_buffer import (
    EvictionReasons,
    HookedReplayBuffer,
    accumulate_eviction_metrics,
)

logger = logging.getLogger(__name__)


class _CapReached(Exception):
    """Raised inside verl's sampling loop when the cap is reached and nothing is left in flight."""


class AgentRLReplayBuffer(MaskingMixin, HookedReplayBuffer):
    """verl's sync ReplayBuffer + trajectory masks + the ``max_num_gen_batches`` cap on DAPO dynamic sampling."""

    def __init__(
        self,
        trainer_mode: str,
        trainer_config: Any,
        max_off_policy_threshold: int | None,
        max_off_policy_strategy: str,
        sampler_kwargs: Any,
        refill_fn: Callable[[int], int] | None = None,
        **kwargs: Any,
    ) -> None:
        self.settings = SamplerSettings.from_kwargs(sampler_kwargs)
        groups = self.settings.filter_groups
        metric = groups.metric if groups.enable else None
        self._trainer_refill = refill_fn
        # the arguments verl's PPOTrainer gives its built-in sync buffer (but not a custom sampler)
        kwargs.update(
            sync_buffer_kwargs(
                filter_groups_metric=metric,
                sync_refill_failed_groups=self.settings.sync_refill_failed_groups,
                train_batch_size=self.settings.train_batch_size,
                max_inflight_gen_batches=groups.max_inflight_gen_batches,
            )
        )
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            refill_fn=self._budgeted_refill if refill_fn is not None else None,
            **kwargs,
        )
        self.max_num_gen_batches = groups.max_num_gen_batches if metric else 0
        self._refill_budget: int | None = None
        self._refilled = 0
        self._cap_reached = False
        self._evictions: dict = {}  # this step's verl eviction metrics, kept for the short-batch path

    # ---- the cap -------------------------------------------------------------------------------------------------
    def _budgeted_refill(self, num_prompts: int) -> int:
        """verl's refill, limited to what is left of this step's generation budget."""
        allowed = num_prompts
        if self._refill_budget is not None:
            allowed = min(num_prompts, self._refill_budget - self._refilled)
        if allowed < num_prompts:
            self._note_cap()
        if allowed <= 0:
            return 0
        self._refilled += allowed
        assert self._trainer_refill is not None
        return self._trainer_refill(allowed)

    def _note_cap(self) -> None:
        if not self._cap_reached:
            self._cap_reached = True
            logger.warning(
                "[agentrl] dynamic sampling reached algorithm.filter_groups.max_num_gen_batches=%d (%d prompts "
                "refilled this step): generation stops, zero-variance groups are kept from now on this step",
                self.max_num_gen_batches,
                self._refilled,
            )

    def _cap_active(self) -> bool:
        if self._refill_budget is not None and self._refilled >= self._refill_budget:
            self._note_cap()  # a spent budget is a reached cap, even before a refill is refused
        return self._cap_reached

    def _zero_variance(self, partition_id: str, uid: str) -> bool:
        return self.shared_metric_value(partition_id, uid) is not None

    # ---- hooks into verl's sampling loop -----------------------------------------------------------------------------
    def filter_eviction_reasons(self, partition_id: str, reasons: EvictionReasons) -> EvictionReasons:
        stale, dapo, failed, _counts = reasons
        if dapo and partition_id != "val" and self._cap_active():
            return stale, set(), failed, Counter()  # at the cap, zero-variance groups are kept
        return reasons

    def on_groups_evicted(self, stale_count: int, metrics: dict) -> None:
        accumulate_eviction_metrics(self._evictions, metrics, stale_count)

    def reorder_selection(
        self, partition_id: str, sampleable: set[str], batch_size: int, selected: list[str], steps: dict[str, int]
    ) -> list[str]:
        if self._cap_reached and self.filter_groups_metric is not None:
            # prefer groups with reward variance, then verl's oldest-first order
            ordered = sorted(sampleable, key=lambda uid: (self._zero_variance(partition_id, uid), steps.get(uid, 0)))
            return ordered[:batch_size]
        return selected

    def before_poll_wait(self, partition_id: str) -> None:
        nothing_in_flight = not self.pending_keys[partition_id] and not self.running_keys[partition_id]
        if partition_id != "val" and self._cap_reached and nothing_in_flight:
            raise _CapReached

    # ---- sampling --------------------------------------------------------------------------------------------------
    def _short_batch(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """At the cap with nothing in flight: train on the groups there are (verl pads the batch with no-op rows)."""
        self.sync_metadata()
        sampleable = self.sampleable_groups(partition_id, self.eviction_reasons(global_steps, partition_id))
        if not sampleable:
            raise RuntimeError(
                f"dynamic sampling: no group left to train on after max_num_gen_batches={self.max_num_gen_batches} "
                f"generation batches ({self._refilled} prompts refilled); every group had zero variance in "
                f"{self.filter_groups_metric!r}. The data is too easy or too hard for the model — filter it, or raise "
                "algorithm.filter_groups.max_num_gen_batches (0 = no cap)."
            )
        selected, snapshot, _ = self.select_groups(partition_id, sampleable, batch_size)
        logger.warning(
            "[agentrl] dynamic sampling: only %d of %d groups after max_num_gen_batches=%d; training this step on %d",
            len(selected),
            batch_size,
            self.max_num_gen_batches,
            len(selected),
        )
        return self.materialize_batch(partition_id, selected, snapshot), dict(self._evictions)

    def _filter_groups_metrics(self, partition_id: str, batch: KVBatchMeta, batch_size: int) -> dict[str, float]:
        uids = {key.split("_")[0] for key in batch.keys}
        zero_variance_kept = sum(self._zero_variance(partition_id, uid) for uid in uids)
        per_batch = self.train_batch_size or batch_size
        return {
            "training/filter_groups/refill_prompts": float(self._refilled),
            "training/filter_groups/gen_batches": 1.0 + self._refilled / per_batch,
            "training/filter_groups/cap_reached": float(self._cap_reached),
            "training/filter_groups/zero_variance_groups_kept": float(zero_variance_kept),
            "training/filter_groups/batch_groups": float(len(uids)),
        }

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """verl's sync sampling under this step's generation budget, then the trajectory masks."""
        trace.mark(type(self).__name__)
        training = partition_id != "val"
        self._cap_reached = False
        self._refilled = 0
        self._refill_budget = None
        self._evictions = {}
        if training and self.max_num_gen_batches > 0:
            assert self.train_batch_size is not None
            self._refill_budget = (self.max_num_gen_batches - 1) * self.train_batch_size
        try:
            batch, metrics = super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        except _CapReached:
            batch, metrics = self._short_batch(global_steps, partition_id, batch_size)
        if not training:
            return batch, metrics
        if self.filter_groups_metric is not None:
            metrics.update(self._filter_groups_metrics(partition_id, batch, batch_size))
        metrics.update(self._apply_masks(batch))
        return batch, metrics
