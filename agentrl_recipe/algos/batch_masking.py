"""Trajectory masks and RoC on a sampled training batch, applied in TransferQueue (a mixin of both replay buffers).

**Masks** (:mod:`agentrl_recipe.algos.masking`). After verl selects the batch, the trajectories to mask get their
``response_mask`` *and* ``loss_mask`` zeroed in TransferQueue (the engines count the token-mean denominator
``batch_num_tokens`` from ``loss_mask``, the loss reads ``response_mask``; verl's agent loop stores both). Lengths
are kept, so nothing downstream shifts; the ``agentrl_grpo`` estimator reads an all-zero row as "masked".

**RoC** (:mod:`agentrl_recipe.algos.roc`, ``agentrl.roc``): rStar2-Agent's Resample-on-Correct, applied the same
way — the trajectories it drops from an oversampled group are masked.

Step metrics: ``training/masks/*`` (with ``loss_tokens`` / ``loss_tokens_kept``), ``training/roc/*``, the infra
guard's, and the step's tool and per-source reward metrics (:func:`agentrl_recipe.training_metrics.step_metrics`).
"""

from __future__ import annotations

import torch
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta

from agentrl_recipe.algos import roc
from agentrl_recipe.algos.infra_guard import InfraGuard
from agentrl_recipe.algos.masking import compute_trajectory_masks, trajectory_fields
from agentrl_recipe.algos.sampler_config import SamplerSettings
from agentrl_recipe.training_metrics import step_metrics

MASK_FIELDS = ("response_mask", "loss_mask")


def _loss_token_metrics(batch: KVBatchMeta, masked: list[bool]) -> dict[str, float]:
    """Response tokens the loss would count (``response_mask``) before and after this step's trajectory masks.

    verl's token-mean denominator (``actor/loss_tokens_per_update`` × the step's updates) equals
    ``training/masks/loss_tokens_kept``: that is what shows a masked trajectory left the mean.
    """
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
    tokens = [int(row.sum()) for row in data["response_mask"].unbind()]
    kept = sum(t for t, is_masked in zip(tokens, masked, strict=True) if not is_masked)
    return {"training/masks/loss_tokens": float(sum(tokens)), "training/masks/loss_tokens_kept": float(kept)}


def _zero_masks(batch: KVBatchMeta, masked: list[bool]) -> None:
    """Zero ``response_mask`` and ``loss_mask`` of the masked trajectories in TransferQueue, keeping their lengths."""
    masked_keys = [key for key, is_masked in zip(batch.keys, masked, strict=True) if is_masked]
    if not masked_keys:
        return
    partition = batch.partition_id
    current = tq.kv_batch_get(keys=masked_keys, partition_id=partition, select_fields=list(MASK_FIELDS))
    zeroed = {
        field: torch.nested.as_nested_tensor(
            [torch.zeros_like(row) for row in current[field].unbind()], layout=torch.jagged
        )
        for field in MASK_FIELDS
    }
    tq.kv_batch_put(keys=masked_keys, partition_id=partition, fields=TensorDict(zeroed, batch_size=len(masked_keys)))


class MaskingMixin:
    """Applies :mod:`agentrl_recipe.algos.masking` (and RoC) to a sampled training batch, in TransferQueue."""

    settings: SamplerSettings

    def _apply_masks(self, batch: KVBatchMeta) -> dict[str, float]:
        if batch.partition_id == "val" or not batch.keys:
            return {}
        data = tq.kv_batch_get(
            keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields", "data_source"]
        )
        records = [trajectory_fields(getattr(value, "data", value)) for value in data["extra_fields"]]
        data_sources = [getattr(value, "data", value) for value in data["data_source"]]
        lengths = [tag.get("response_len") for tag in batch.tags]
        if any(length is None for length in lengths):
            responses = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["responses"])
            lengths = responses["responses"].offsets().diff().tolist()
        result = compute_trajectory_masks(records, lengths, self.settings.max_response_length, self.settings.masks)
        masked = list(result.masked)
        metrics = result.metrics(prefix="training/masks")
        metrics.update(step_metrics(records, data_sources))  # tool and per-source reward metrics of the step
        if getattr(self, "_infra_guard", None) is None:
            self._infra_guard = InfraGuard(self.settings.infra_guard)
        metrics.update(self._infra_guard.observe(records))  # raises when the sandbox fails too often: fail closed
        if self.settings.roc.enable:
            metrics.update(self._apply_roc(batch, records, masked))
        metrics.update(_loss_token_metrics(batch, masked))
        _zero_masks(batch, masked)
        return metrics

    def _apply_roc(self, batch: KVBatchMeta, records: list[dict], masked: list[bool]) -> dict[str, float]:
        """Resample-on-Correct among the unmasked trajectories; marks the dropped ones in ``masked``."""
        config = self.settings.roc
        if config.metric == "reward":
            scores = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["rm_scores"])
            values = [float(row.sum()) for row in scores["rm_scores"].unbind()]
        else:
            missing = [key for key, record in zip(batch.keys, records, strict=True) if config.metric not in record]
            if missing:
                raise ValueError(
                    f"agentrl.roc.metric {config.metric!r} missing from reward_extra_info of {missing[:3]}"
                )
            values = [float(record[config.metric]) for record in records]
        rows = [row for row, is_masked in enumerate(masked) if not is_masked]
        uids = [batch.keys[row].split("_")[0] for row in rows]
        kept = roc.select(uids, [values[row] > 0 for row in rows], [records[row] for row in rows], config)
        penalties = [roc.penalty(records[row]) for row in rows if values[row] > 0]
        kept_penalties = [roc.penalty(records[row]) for row, k in zip(rows, kept, strict=True) if k and values[row] > 0]
        for row, k in zip(rows, kept, strict=True):
            masked[row] = masked[row] or not k
        return {
            "training/roc/dropped_trajectories": float(len(kept) - sum(kept)),
            "training/roc/correct_penalty_mean": sum(penalties) / max(len(penalties), 1),
            "training/roc/kept_correct_penalty_mean": sum(kept_penalties) / max(len(kept_penalties), 1),
        }
