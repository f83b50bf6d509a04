"""Float64 CPU references for our registered loss and advantage estimator (independent formulas, paper Eq. 2, 4-6)."""

from __future__ import annotations

import torch


def tcr_loss(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    eps_low: float,
    eps_high: float,
    clip_c: float,
) -> float:
    """GRPO-TCR's token-mean loss over one micro-batch that is the whole mini-batch (both token-mean scopes agree)."""
    old, new, adv, m = (t.double().cpu() for t in (old_log_prob, log_prob, advantages, mask))
    ratio = torch.exp(torch.clamp(new - old, -20.0, 20.0))
    clipped = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - eps_low, 1 + eps_high))
    per_token = torch.where(adv < 0, torch.minimum(clipped, -adv * clip_c), clipped)
    return float((per_token * m).sum() / m.sum())


def grpo_advantages(scores: torch.Tensor, groups: list[int], valid: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """(score - group mean) / (group std + eps) over each group's unmasked members; 0 for masked ones."""
    scores64 = scores.double().cpu()
    out = torch.zeros_like(scores64)
    for group in set(groups):
        rows = [i for i, g in enumerate(groups) if g == group and bool(valid[i])]
        if len(rows) < 2:
            continue
        members = scores64[rows]
        out[rows] = (members - members.mean()) / (members.std(unbiased=True) + eps)
    return out
