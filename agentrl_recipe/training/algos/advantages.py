"""Advantage estimator ``agentrl_grpo``: GRPO outcome advantage whose group statistics skip masked trajectories.

GRPO (paper Eq. 2; verl ``grpo``): a trajectory's score is the sum of its token-level rewards, and its advantage
is ``(score - mean_g) / (std_g + 1e-6)`` over its group g (the rollout.n samples of one prompt, keyed by ``uid``),
or ``score - mean_g`` with ``algorithm.norm_adv_by_std_in_grpo=false`` (Dr.GRPO), broadcast over its tokens.

What verl lacks: a trajectory masked out of training (sandbox infra failure, void turn, overlong filter,
malformed tool call — :mod:`agentrl_recipe.training.algos.masking`) still enters verl's group mean and std with whatever
reward it got, so a sandbox crash scored -1 shifts its 15 siblings' advantages (open-instruct PR #1887). Here:

- a trajectory is *masked* when its ``response_mask`` row is all zero — the replay buffer
  (:mod:`agentrl_recipe.training.algos.sampler`) zeroes it before the advantage step, and verl's estimator interface
  passes nothing else per trajectory (``token_level_rewards``, ``response_mask``, ``index``, ``config``);
- group mean and std are computed by verl's :func:`~verl.trainer.ppo.core_algos.compute_grpo_outcome_advantage`
  over the unmasked members only, so with no masked row the result is verl's ``grpo`` exactly;
- masked trajectories get advantage 0; being all-zero in ``response_mask`` (and ``loss_mask``) they also carry
  zero weight in the loss and are not counted in the token-mean denominator (see :mod:`.losses`);
- a group with every member masked yields zeros (no NaN); a group of ≥ 2 reduced to a single unmasked member has
  no baseline and yields 0 for it too (verl's singleton convention, mean 0 / std 1, would hand it its raw score).
  A prompt sampled once (rollout.n = 1) keeps verl's singleton convention.

Config keys (verl's ``algorithm.*``): ``adv_estimator: agentrl_grpo`` (paper: GRPO), ``norm_adv_by_std_in_grpo``
(default true; paper true). Every multi-output agent-loop session counts as one trajectory per output (our agent
loop emits one output per session).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo import core_algos

from agentrl_recipe import names
from agentrl_recipe.training import trace


def compute_grpo_masked_outcome_advantage(
    token_level_rewards: torch.Tensor,
    response_mask: torch.Tensor,
    index: np.ndarray | None = None,
    config: Any = None,
    epsilon: float = 1e-6,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """verl advantage-estimator fn (called by ``ray_trainer.compute_advantage``): returns (advantages, returns)."""
    if index is None:
        raise ValueError("agentrl_grpo needs the group index (uid) of every trajectory; the batch has no 'uid'")
    index = np.asarray(index, dtype=object)
    if len(index) != token_level_rewards.shape[0]:
        raise ValueError(f"index has {len(index)} entries for {token_level_rewards.shape[0]} trajectories")
    norm_by_std = bool(config.get("norm_adv_by_std_in_grpo", True)) if config is not None else True
    trace.mark(names.ADV_ESTIMATOR)

    valid = response_mask.sum(dim=-1) > 0
    advantages = torch.zeros_like(token_level_rewards, dtype=torch.float32)
    keep = valid.clone()
    group_sizes = Counter(index.tolist())
    valid_sizes = Counter(index[valid.cpu().numpy()].tolist())
    for row, uid in enumerate(index.tolist()):
        if keep[row] and valid_sizes[uid] == 1 and group_sizes[uid] > 1:
            keep[row] = False  # the lone survivor of a masked group: no baseline, no signal
    if keep.any():
        rows = keep.nonzero(as_tuple=True)[0]
        adv_kept, _ = core_algos.compute_grpo_outcome_advantage(
            token_level_rewards=token_level_rewards[rows],
            response_mask=response_mask[rows],
            index=index[rows.cpu().numpy()],
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_by_std,
        )
        advantages[rows] = adv_kept.to(advantages.dtype)
    return advantages, advantages
