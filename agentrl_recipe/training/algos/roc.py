"""rStar2-Agent's Resample-on-Correct (GRPO-RoC) as a switch: keep the cleanest correct trajectories of a group.

rStar2-Agent (arXiv 2508.20722) oversamples 2G rollouts per prompt and down-samples each group to G: incorrect
trajectories uniformly (so failure modes stay represented), correct ones preferring few tool errors and clean format
(outcome-only reward otherwise reinforces correct answers reached through 10-15% failing tool calls). Here the
down-sampling is a mask: the dropped trajectories of a sampled batch get a zero ``response_mask``/``loss_mask`` in the
replay buffer (:mod:`agentrl_recipe.training.algos.sampler`), so ``agentrl_grpo`` computes group statistics over the
kept G and the loss ignores the rest. (Their old log-probs are still computed: the saving rStar2 gets from a smaller
batch is not reproduced, the selection is.)

Keys (``agentrl.roc.*``; off in the paper we reproduce, on in rStar2 with rollout.n 32 → 16):

- ``enable`` (false): switch.
- ``keep_per_group`` (null): G, trajectories kept per group; set rollout.n to about 2G. Required when enabled.
- ``metric`` ("acc"): a trajectory is correct when this ``reward_extra_info`` value is > 0 (``reward``: rm_scores sum).
- ``min_negatives`` (2): incorrect trajectories always kept (when there are that many), as in rStar2.
- ``seed`` (0): seeds the uniform choice among incorrect trajectories and the tie-breaks, per group uid.

Penalty of a correct trajectory (lower is kept first): failed-tool-call ratio
(``agentrl_tool_failures`` / ``agentrl_tool_calls``) + 1 if any tool call was malformed + 1 for a void turn.
"""

from __future__ import annotations

import dataclasses
import random
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe import fields, names
from agentrl_recipe.training.recipe_config import from_mapping  # config names this module by string only (SECTIONS)


@dataclasses.dataclass
class RoCConfig:
    """``agentrl.roc``: rStar2-Agent's Resample-on-Correct down-sampling (off = the paper we reproduce)."""

    enable: bool = False
    keep_per_group: int | None = None  # G; rollout.n should be about 2G
    metric: str = "acc"  # reward_extra_info key (> 0 = correct), or "reward" for the rm_scores sum
    min_negatives: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        if self.enable and (self.keep_per_group is None or self.keep_per_group < 2):
            raise ValueError(f"agentrl.roc.keep_per_group must be ≥ 2 when roc is enabled, got {self.keep_per_group}")
        if self.min_negatives < 0:
            raise ValueError(f"agentrl.roc.min_negatives must be ≥ 0, got {self.min_negatives}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> RoCConfig:
        return from_mapping(cls, values, where=f"{names.CONFIG_NAMESPACE}.roc")


def penalty(record: Mapping[str, Any]) -> float:
    """Tool-error and format penalty of one trajectory (0 = clean)."""
    calls = float(record.get(fields.TOOL_CALLS.column) or 0)
    failures = float(record.get(fields.TOOL_FAILURES.column) or 0)
    value = failures / calls if calls > 0 else 0.0
    value += float(bool(record.get(fields.MALFORMED_TOOL_CALLS.column)))
    value += float(bool(record.get(fields.VOID_TURN.column)))
    return value


def select_group(
    uid: str, correct: Sequence[bool], records: Sequence[Mapping[str, Any]], config: RoCConfig
) -> list[bool]:
    """Which members of one group RoC keeps (all of them when the group is not larger than G)."""
    n = len(correct)
    keep_total = int(config.keep_per_group or n)
    if n <= keep_total:
        return [True] * n
    rng = random.Random(zlib.crc32(f"{config.seed}:{uid}".encode()))
    positives = [i for i in range(n) if correct[i]]
    negatives = [i for i in range(n) if not correct[i]]
    # keep the group's correct/incorrect proportion, with at least min_negatives incorrect ones (rStar2)
    keep_neg = min(len(negatives), max(round(keep_total * len(negatives) / n), config.min_negatives))
    if positives:
        keep_neg = min(keep_neg, keep_total - 1)  # never trade the group's last correct trajectory for a negative
    keep_pos = min(len(positives), keep_total - keep_neg)
    keep_neg = min(len(negatives), keep_total - keep_pos)
    ranked = sorted(positives, key=lambda i: (penalty(records[i]), rng.random()))
    kept = set(ranked[:keep_pos]) | set(rng.sample(negatives, keep_neg))
    return [i in kept for i in range(n)]


def select(
    uids: Sequence[str], correct: Sequence[bool], records: Sequence[Mapping[str, Any]], config: RoCConfig
) -> list[bool]:
    """Per trajectory of a batch: kept by RoC (groups are the trajectories sharing a uid)."""
    members: dict[str, list[int]] = {}
    for row, uid in enumerate(uids):
        members.setdefault(uid, []).append(row)
    keep = [True] * len(uids)
    for uid, rows in members.items():
        group_keep = select_group(uid, [correct[r] for r in rows], [records[r] for r in rows], config)
        for row, kept in zip(rows, group_keep, strict=True):
            keep[row] = kept
    return keep
