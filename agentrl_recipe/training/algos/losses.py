"""Policy loss ``agentrl_tcr``: the GRPO-TCR objective with metrics that tell its clip branches apart.

GRPO-TCR's objective (paper Eq. 4-6) is the PPO clipped surrogate with a per-token ratio, token-level aggregation,
asymmetric clip ("clip-higher") and dual clip for negative advantages::

    r = exp(clamp(logp - old_logp, -20, 20))
    L = max(-A·r, -A·clip(r, 1-ε_low, 1+ε_high))          (A ≥ 0)
    L = min(max(-A·r, -A·clip(r, 1-ε_low, 1+ε_high)), -A·c)   (A < 0, dual clip)
    loss = agg_loss(L, response_mask, loss_agg_mode, **global_batch_info)

verl 0.9.1's ``vanilla`` loss computes exactly this, correctly, for every ``loss_agg_mode``
(token-mean, token-sum, seq-mean-token-sum, seq-mean-token-mean, seq-mean-token-sum-norm) with the global
normalisation of ``ActorConfig.global_batch_info``. So the loss value comes from verl's
:func:`~verl.trainer.ppo.core_algos.compute_policy_loss_vanilla` and is identical to ``vanilla`` by construction;
the plugin adds what verl does not report:

- ``actor/pg_clipfrac_low``: token fraction with A < 0 and r < 1-ε_low (the lower clip is active);
- ``actor/pg_clipfrac_high``: token fraction with A > 0 and r > 1+ε_high (the clip-higher bound is active);
- ``actor/pg_clipfrac_dual``: token fraction with A < 0 and r > c (the dual clip is active);
- ``actor/ratio_max``, ``actor/ratio_min``, ``actor/ratio_mean`` over response tokens. The max and min are the
  true extremes of the whole update: they are returned as verl ``Metric``s with MAX / MIN aggregation, which verl
  keeps over micro-batches and data-parallel ranks once :mod:`agentrl_recipe.training.verl_adapters.metric_aggregation`
  lets
  ``ppo_loss`` pass them through (verl would average the per-micro-batch extremes); the trainer then takes max / min
  over mini-batches by key name. All six values leave the GPU in one transfer per micro-batch.

verl's own keys stay: ``actor/pg_clipfrac`` (= low + high, verl lumps them), ``actor/pg_clipfrac_lower``
(= dual; the name is verl's) and ``actor/ppo_kl`` (approximate KL, mean of old_logp - logp).

Masked trajectories (:mod:`agentrl_recipe.training.algos.masking`) reach this function with an all-zero response_mask,
so they add nothing to the numerator, and verl's engines count ``batch_num_tokens`` from the same mask, so they are
not in the token-mean denominator either. (In the seq-mean modes verl divides by the fixed mini-batch size, which
still counts them: a masked trajectory there scales the step down instead of being dropped.)

Config keys (all verl's, under ``actor_rollout_ref.actor``; paper values from arXiv 2510.11701 / released code):

- ``policy_loss.loss_mode``: verl default vanilla; ours ``agentrl_tcr`` (selects this function).
- ``clip_ratio_low`` (ε_low): verl 0.2; paper 0.2.
- ``clip_ratio_high`` (ε_high, "clip-higher"): verl 0.2; paper 0.28 ([code], §4.1), 0.315 for DemyAgent-4B (§6).
- ``clip_ratio_c`` (dual-clip bound c for A < 0, must be > 1): verl 3.0; paper 10.0.
- ``loss_agg_mode``: verl token-mean; paper token-mean ("T"); the ablations use seq-mean-token-mean /
  seq-mean-token-sum.
- ``policy_loss.token_mean_scope`` (:class:`TCRPolicyLossConfig`, selected by ``policy_loss._target_``): what
  token-mean averages over. ``mini_batch`` (verl 0.9.1, agentrl): all the mini-batch's response tokens
  (``batch_num_tokens``). ``micro_batch`` (open_agentrl, [code] verl 0.5 ``dp_actor.py:424-428,480``: ``policy_loss *
  (micro-batch sequences / mini-batch sequences)`` with ``agg_loss`` over the micro-batch's own tokens): each
  micro-batch's token mean, weighted by its sequence count — a short-answer micro-batch's tokens weigh more. null =
  from ``policy_loss.compat`` (``${agentrl.compat}``). Token-mean only; the entropy and KL terms keep verl's scope.

With ratio 1 and loss −A per token, 4 micro-batches of 2 sequences (1+1, 3+3, 2+2, 4+4 tokens; A = −1 on the first
micro-batch, 0 elsewhere): ``micro_batch`` gives 2/8 · 1 = 0.25, ``mini_batch`` 2/20 = 0.1
(tests/agentrl_recipe/training/algos/test_losses.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from verl.trainer.ppo import core_algos
from verl.utils import torch_functional as verl_F
from verl.utils.metric import AggregationType, Metric
from verl.workers.config import ActorConfig, PolicyLossConfig

from agentrl_recipe import names
from agentrl_recipe.training import trace
from agentrl_recipe.training.verl_adapters import micro_batches as micro_batches_adapter

# The tokens one optimizer update divides its loss by, averaged over the step's updates by verl's trainer
# (`reduce_metrics`). No "min"/"max" in the name: `reduce_metrics` takes np.min over mini-batches for any key that
# contains "min", so the first name, `loss_denominator_tokens`, came out as the smallest mini-batch's count.
LOSS_TOKENS_PER_UPDATE = "actor/loss_tokens_per_update"


TOKEN_MEAN_SCOPES = ("micro_batch", "mini_batch")
MICRO_BATCHES = ("released", "verl")


@dataclasses.dataclass
class TCRPolicyLossConfig(PolicyLossConfig):
    """verl's ``actor.policy_loss`` + agentrl_tcr's keys (``_target_`` in verl_configs/recipe/grpo_tcr.yaml)."""

    # open_agentrl micro_batch ([code]), agentrl mini_batch (verl's). The loss sees only the actor's config: the
    # shipped configs set it with ${agentrl_compat:token_mean_scope}, the value agentrl.compat gives it.
    token_mean_scope: str = "mini_batch"
    # How a rank's mini-batch splits into micro-batches: open_agentrl released ([code] verl 0.5: token-balanced),
    # agentrl verl (0.9.1's). Built in the actor worker before its first update: released installs the split there
    # (agentrl_recipe/training/verl_adapters/micro_batches.py); the loss checks it on every call.
    micro_batches: str = "verl"

    def __post_init__(self) -> None:
        if self.token_mean_scope not in TOKEN_MEAN_SCOPES:
            raise ValueError(
                f"actor_rollout_ref.actor.policy_loss.token_mean_scope must be one of {TOKEN_MEAN_SCOPES}, "
                f"got {self.token_mean_scope!r}"
            )
        if self.micro_batches not in MICRO_BATCHES:
            raise ValueError(
                f"actor_rollout_ref.actor.policy_loss.micro_batches must be one of {MICRO_BATCHES}, "
                f"got {self.micro_batches!r}"
            )
        if self.micro_batches == "released":
            micro_batches_adapter.install()


def token_mean_scope(config: ActorConfig) -> str:
    """The actor's token-mean scope: verl's (mini_batch) unless its policy_loss is a :class:`TCRPolicyLossConfig`."""
    policy_loss = config.policy_loss
    return policy_loss.token_mean_scope if isinstance(policy_loss, TCRPolicyLossConfig) else "mini_batch"


def check_micro_batches(config: ActorConfig) -> None:
    """Fail closed when ``policy_loss.micro_batches`` is released but this worker's engine splits as verl 0.9.1."""
    policy_loss = config.policy_loss
    released = isinstance(policy_loss, TCRPolicyLossConfig) and policy_loss.micro_batches == "released"
    if released and not micro_batches_adapter.installed():
        raise RuntimeError(
            f"policy_loss.micro_batches released, but {micro_batches_adapter.SYMBOL} is verl's in this worker"
        )


def micro_batch_scale(response_mask: torch.Tensor, global_batch_info: dict[str, Any]) -> torch.Tensor:
    """Factor turning verl's mini-batch token-mean of one micro-batch into verl 0.5's micro-batch scope.

    verl 0.9.1: Σ_mb(mask·L) / B · dp (B = the mini-batch's tokens, dp ranks averaged by FSDP). verl 0.5:
    Σ_mb(mask·L) / t_mb · n_mb / (N / dp), with t_mb, n_mb the micro-batch's tokens and sequences and N the mini-batch's
    sequences over all ranks (``global_batch_size``). The ratio is B · n_mb / (t_mb · N); 0 for a micro-batch
    without tokens (verl 0.5's masked mean of nothing).
    """
    total = global_batch_info.get("global_batch_size")
    if not total:
        raise ValueError("token_mean_scope micro_batch needs global_batch_info['global_batch_size'] (verl's ppo_loss)")
    tokens = response_mask.sum()
    batch_tokens = global_batch_info.get("batch_num_tokens")
    batch_tokens = tokens if batch_tokens is None else batch_tokens  # agg_loss's own fallback (dp 1)
    scale = batch_tokens * response_mask.shape[0] / (tokens.clamp(min=1) * total)
    return torch.where(tokens > 0, scale, torch.zeros_like(scale))


def _clip_bounds(config: ActorConfig) -> tuple[float, float, float]:
    low = config.clip_ratio_low if config.clip_ratio_low is not None else config.clip_ratio
    high = config.clip_ratio_high if config.clip_ratio_high is not None else config.clip_ratio
    return float(low), float(high), float(config.get("clip_ratio_c", 3.0))


@torch.no_grad()
def clip_branch_metrics(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_ratio_low: float,
    clip_ratio_high: float,
    clip_ratio_c: float,
) -> dict[str, float | Metric]:
    """Token fractions (over ``response_mask``) in each clip branch, and ratio statistics.

    A micro-batch without response tokens (every trajectory masked) reports ratio 1 (an unchanged policy), so every
    micro-batch carries every key (verl's data-parallel aggregation needs equal-length lists).
    """
    mask = response_mask.bool()
    ratio = torch.exp(torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0))  # the ratio verl's loss uses
    low = (advantages < 0) & (ratio < 1 - clip_ratio_low)
    high = (advantages > 0) & (ratio > 1 + clip_ratio_high)
    dual = (advantages < 0) & (ratio > clip_ratio_c)
    valid = torch.where(mask, ratio, torch.ones_like(ratio))  # no data-dependent indexing: no sync before .tolist()
    has_tokens = mask.any()
    stats = torch.stack(
        [
            verl_F.masked_mean(low.float(), mask),
            verl_F.masked_mean(high.float(), mask),
            verl_F.masked_mean(dual.float(), mask),
            torch.where(mask, ratio, torch.full_like(ratio, -torch.inf)).amax().where(has_tokens, 1.0),
            torch.where(mask, ratio, torch.full_like(ratio, torch.inf)).amin().where(has_tokens, 1.0),
            verl_F.masked_mean(valid, mask).where(has_tokens, 1.0),
        ]
    ).tolist()  # the one device-to-host transfer of this function
    low_frac, high_frac, dual_frac, ratio_max, ratio_min, ratio_mean = stats
    return {
        "actor/pg_clipfrac_low": low_frac,
        "actor/pg_clipfrac_high": high_frac,
        "actor/pg_clipfrac_dual": dual_frac,
        "actor/ratio_max": Metric(AggregationType.MAX, ratio_max),
        "actor/ratio_min": Metric(AggregationType.MIN, ratio_min),
        "actor/ratio_mean": ratio_mean,
    }


def compute_policy_loss_tcr(
    old_log_prob: torch.Tensor,
    log_prob: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    loss_agg_mode: str = "token-mean",
    config: ActorConfig | None = None,
    rollout_is_weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, Any]]:
    """verl ``PolicyLossFn``: GRPO-TCR's clipped objective (verl's vanilla loss) plus split clip metrics.

    ``config`` must be the actor's :class:`~verl.workers.config.ActorConfig` (verl's ``ppo_loss`` passes it, with
    ``global_batch_info`` filled in); an ``AlgoConfig`` or ``None`` is a caller error and raises.
    """
    if config is None or not hasattr(config, "global_batch_info"):
        raise TypeError(
            f"{compute_policy_loss_tcr.__name__} needs the actor's ActorConfig (with global_batch_info), got "
            f"{type(config).__name__}"
        )
    trace.mark(names.POLICY_LOSS)
    # verl types the registered function as its positional PolicyLossFn alias; it takes these keywords.
    pg_loss, metrics = core_algos.compute_policy_loss_vanilla(  # type: ignore[call-arg]
        old_log_prob=old_log_prob,
        log_prob=log_prob,
        advantages=advantages,
        response_mask=response_mask,
        loss_agg_mode=loss_agg_mode,
        config=config,
        rollout_is_weights=rollout_is_weights,
    )
    check_micro_batches(config)
    if loss_agg_mode == "token-mean" and token_mean_scope(config) == "micro_batch":
        pg_loss = pg_loss * micro_batch_scale(response_mask, config.global_batch_info)  # verl logs pg_loss from it
    denominator = config.global_batch_info.get("batch_num_tokens")
    if loss_agg_mode == "token-mean" and denominator is not None and float(denominator) == 0:
        # A mini-batch whose every trajectory is masked: verl's agg_loss divides 0 by 0. Its gradient is zero either
        # way; the loss is the exact 0 it contributes, not a NaN that turns the step's mean actor/pg_loss into NaN.
        pg_loss = (log_prob * response_mask).sum()
    metrics.update(clip_branch_metrics(old_log_prob, log_prob, advantages, response_mask, *_clip_bounds(config)))
    # The token-mean denominator verl hands the loss (the mini-batch's unmasked response tokens): trajectory masks
    # shrink it, which is how a masked trajectory leaves the mean rather than diluting it.
    if denominator is not None:
        metrics[LOSS_TOKENS_PER_UPDATE] = float(denominator)
    return pg_loss, metrics
