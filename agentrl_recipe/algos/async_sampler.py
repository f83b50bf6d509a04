"""The async replay buffer: verl's ``ReplayBufferAsync`` + trajectory masks (only its public constructor and
``sample`` are used; the sync-only cap lives in :mod:`agentrl_recipe.algos.dynamic_sampling`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync

from agentrl_recipe import trace
from agentrl_recipe.algos.batch_masking import MaskingMixin
from agentrl_recipe.algos.sampler_config import SamplerSettings
from agentrl_recipe.verl_adapters.ppo_trainer import async_buffer_kwargs


class AgentRLReplayBufferAsync(MaskingMixin, ReplayBufferAsync):
    """verl's async ReplayBuffer + trajectory masks (``trainer.v1.trainer_mode`` colocate_async / separate_async).

    Async DAPO in verl refills exactly one prompt per evicted group, absorbed by the warm-up window; the
    ``max_num_gen_batches`` cap is sync-only and is rejected here rather than ignored.
    """

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
        if groups.enable and groups.max_num_gen_batches > 0:
            raise ValueError(
                "algorithm.filter_groups.max_num_gen_batches caps sync dynamic sampling only; set it to 0 for "
                f"trainer.v1.trainer_mode={trainer_mode!r}"
            )
        kwargs.update(
            async_buffer_kwargs(
                filter_groups_metric=groups.metric if groups.enable else None,
                sync_refill_failed_groups=self.settings.sync_refill_failed_groups,
            )
        )
        super().__init__(
            trainer_mode=trainer_mode,
            trainer_config=trainer_config,
            max_off_policy_threshold=max_off_policy_threshold,
            max_off_policy_strategy=max_off_policy_strategy,
            sampler_kwargs=sampler_kwargs,
            refill_fn=refill_fn,
            **kwargs,
        )

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        batch, metrics = super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        trace.mark(type(self).__name__)
        metrics.update(self._apply_masks(batch))
        return batch, metrics
