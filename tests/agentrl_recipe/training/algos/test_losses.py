"""agentrl_tcr: hand-computed clip branches and aggregation modes, parity with verl's vanilla, masked rows."""

from __future__ import annotations

import math

import pytest
import torch

from agentrl_recipe import names
from agentrl_recipe.training.algos.losses import LOSS_TOKENS_PER_UPDATE

EPS_LOW, EPS_HIGH, C = 0.2, 0.28, 10.0

# (advantage, ratio, per-token loss by hand) — one token per clip branch
TOKENS = [
    (1.0, 1.5, -1.28),  # A > 0, r > 1+ε_high: clip-higher bound, -A·(1+ε_high)
    (1.0, 1.1, -1.1),  # inside the trust region: -A·r
    (-1.0, 0.5, 0.8),  # A < 0, r < 1-ε_low: lower clip, -A·(1-ε_low)
    (-1.0, 20.0, 10.0),  # A < 0, r > c: dual clip, -A·c
    (-2.0, 1.0, 2.0),  # A < 0 inside: -A·r
    (0.5, 0.5, -0.25),  # A > 0, r < 1-ε_low: the lower clip does not bind for A > 0
    (-1.0, 1.5, 1.5),  # A < 0, 1+ε_high < r < c: the upper clip does not bind for A < 0
]
SEQ0, SEQ1 = [t[2] for t in TOKENS[:4]], [t[2] for t in TOKENS[4:]]


def golden_batch() -> tuple[torch.Tensor, ...]:
    """Two sequences (4 tokens, 3 tokens + 1 padding token that would dominate any loss it leaked into)."""
    adv = torch.tensor([[t[0] for t in TOKENS[:4]], [*(t[0] for t in TOKENS[4:]), 5.0]], dtype=torch.float64)
    ratio = torch.tensor([[t[1] for t in TOKENS[:4]], [*(t[1] for t in TOKENS[4:]), 3.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]], dtype=torch.float64)
    old = torch.full_like(adv, -1.0)
    return old, old + torch.log(ratio), adv, mask


@pytest.fixture(scope="module")
def tcr():
    from verl.trainer.ppo import core_algos

    import agentrl_recipe.plugin  # noqa: F401  (verl's entry point already imported it; this surfaces a failure)

    return core_algos.get_policy_loss_fn(names.POLICY_LOSS)


def test_registered_through_verl(tcr) -> None:
    """verl holds a function that loads ours on its first call (plugin.POLICY_LOSS_FN) and returns its result."""
    from agentrl_recipe import plugin
    from agentrl_recipe.training.algos.losses import compute_policy_loss_tcr

    assert tcr is plugin.POLICY_LOSS_FN
    assert (tcr.__module__, tcr.__qualname__) == (compute_policy_loss_tcr.__module__, "compute_policy_loss_tcr")
    # every other test here calls `tcr`: the delegation is what they measure


@pytest.mark.parametrize(
    ("mode", "batch_info", "expected"),
    [
        ("token-mean", {}, sum(SEQ0 + SEQ1) / 7),
        ("token-mean", {"dp_size": 2, "batch_num_tokens": 10}, sum(SEQ0 + SEQ1) / 10 * 2),
        ("token-sum", {}, sum(SEQ0 + SEQ1)),
        ("seq-mean-token-sum", {}, (sum(SEQ0) + sum(SEQ1)) / 2),
        ("seq-mean-token-sum", {"global_batch_size": 4}, (sum(SEQ0) + sum(SEQ1)) / 4),
        ("seq-mean-token-mean", {}, (sum(SEQ0) / 4 + sum(SEQ1) / 3) / 2),
        ("seq-mean-token-sum-norm", {}, (sum(SEQ0) + sum(SEQ1)) / 2 / 4),
        ("seq-mean-token-sum-norm", {"loss_scale_factor": 10}, (sum(SEQ0) + sum(SEQ1)) / 2 / 10),
    ],
)
def test_golden_loss_every_branch_and_mode(tcr, actor_config, mode: str, batch_info: dict, expected: float) -> None:
    config = actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C, loss_agg_mode=mode)
    config.global_batch_info.update(batch_info)
    loss, _ = tcr(*golden_batch(), loss_agg_mode=mode, config=config)
    assert loss.item() == pytest.approx(expected, abs=1e-7)  # verl adds 1e-8 to per-seq token counts


def test_golden_per_token_losses_are_the_clip_branches(tcr, actor_config) -> None:
    # One sequence per token: with seq-mean-token-sum over one row the loss is that token's loss.
    config = actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C)
    for adv, ratio, expected in TOKENS:
        a = torch.tensor([[adv]], dtype=torch.float64)
        old = torch.zeros_like(a)
        loss, _ = tcr(old, old + math.log(ratio), a, torch.ones_like(a), loss_agg_mode="token-mean", config=config)
        assert loss.item() == pytest.approx(expected, abs=1e-9), (adv, ratio)


def test_golden_metrics_split_the_clip_branches(tcr, actor_config) -> None:
    config = actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C)
    old, logp, adv, mask = golden_batch()
    _, metrics = tcr(old, logp, adv, mask, loss_agg_mode="token-mean", config=config)
    assert metrics["actor/pg_clipfrac_low"] == pytest.approx(1 / 7)
    assert metrics["actor/pg_clipfrac_high"] == pytest.approx(1 / 7)
    assert metrics["actor/pg_clipfrac_dual"] == pytest.approx(1 / 7)
    # verl's own keys: pg_clipfrac lumps low + high, pg_clipfrac_lower is the dual clip
    assert metrics["actor/pg_clipfrac"] == pytest.approx(2 / 7)
    assert metrics["actor/pg_clipfrac_lower"] == pytest.approx(1 / 7)
    ratios = [t[1] for t in TOKENS]
    assert metrics["actor/ppo_kl"] == pytest.approx(sum(-math.log(r) for r in ratios) / 7)
    assert metrics["actor/ratio_max"].aggregate() == pytest.approx(20.0)  # the padding token's 3.0 is not a response
    assert metrics["actor/ratio_min"].aggregate() == pytest.approx(0.5)
    assert metrics["actor/ratio_mean"] == pytest.approx(sum(ratios) / 7)


AGG_MODES = ["token-mean", "token-sum", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("with_is_weights", [False, True])
def test_equals_verl_vanilla_on_random_inputs(tcr, actor_config, mode: str, with_is_weights: bool) -> None:
    from verl.trainer.ppo import core_algos

    vanilla = core_algos.get_policy_loss_fn("vanilla")
    gen = torch.Generator().manual_seed(hash((mode, with_is_weights)) % 2**31)
    for trial in range(5):
        bsz, length = 6, 9
        old = -torch.rand(bsz, length, generator=gen) * 3
        logp = old + torch.randn(bsz, length, generator=gen) * 0.6  # ratios spread over every clip branch
        adv = torch.randn(bsz, length, generator=gen) * 2
        mask = (torch.rand(bsz, length, generator=gen) > 0.3).float()
        mask[trial % bsz] = 0  # a fully masked row
        weights = torch.rand(bsz, length, generator=gen) * 2 if with_is_weights else None
        info = {"dp_size": 1 + trial % 2, "batch_num_tokens": int(mask.sum()) + trial, "global_batch_size": bsz + trial}
        losses, metric_sets = [], []
        for fn in (vanilla, tcr):
            config = actor_config(clip_ratio_high=0.28, clip_ratio_c=3.0 + trial, loss_agg_mode=mode)
            config.global_batch_info.update(info)
            loss, metrics = fn(old, logp, adv, mask, loss_agg_mode=mode, config=config, rollout_is_weights=weights)
            losses.append(loss)
            metric_sets.append(metrics)
        assert abs(losses[0].item() - losses[1].item()) <= 1e-6
        for key, value in metric_sets[0].items():
            assert metric_sets[1][key] == pytest.approx(value, abs=1e-6)


def test_masked_trajectory_is_out_of_the_token_mean_denominator(tcr, actor_config) -> None:
    """A trajectory whose response/loss mask is zeroed changes nothing: verl's engines count batch_num_tokens from
    the same loss_mask, so the loss equals the loss of the batch without it."""
    gen = torch.Generator().manual_seed(0)
    old = -torch.rand(4, 7, generator=gen)
    logp = old + torch.randn(4, 7, generator=gen) * 0.3
    adv = torch.randn(4, 7, generator=gen)
    mask = torch.ones(4, 7)
    masked = mask.clone()
    masked[2] = 0
    config = actor_config(clip_ratio_low=0.2, clip_ratio_high=0.28, clip_ratio_c=10.0)
    config.global_batch_info.update(dp_size=1, batch_num_tokens=int(masked.sum()))  # what FSDPEngine computes
    with_masked, _ = tcr(old, logp, adv, masked, loss_agg_mode="token-mean", config=config)
    keep = [0, 1, 3]
    config.global_batch_info.update(batch_num_tokens=int(mask[keep].sum()))
    without, _ = tcr(old[keep], logp[keep], adv[keep], mask[keep], loss_agg_mode="token-mean", config=config)
    assert with_masked.item() == pytest.approx(without.item(), abs=1e-7)
    # and the gradient reaches no token of the masked row
    logp = logp.clone().requires_grad_(True)
    config.global_batch_info.update(batch_num_tokens=int(masked.sum()))
    loss, _ = tcr(old, logp, adv, masked, loss_agg_mode="token-mean", config=config)
    loss.backward()
    assert torch.count_nonzero(logp.grad[2]) == 0 and torch.count_nonzero(logp.grad[0]) > 0


def test_rejects_a_non_actor_config(tcr) -> None:
    old, logp, adv, mask = golden_batch()
    with pytest.raises(TypeError, match="ActorConfig"):
        tcr(old, logp, adv, mask, loss_agg_mode="token-mean", config=None)


def _actor_batch(masked_rows: set[int], rows: tuple[int, ...] = (0, 1, 2)):
    """Nested TensorDict + model output as verl's engine hands them to workers.utils.losses.ppo_loss."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    gen = torch.Generator().manual_seed(3)
    prompt_lens, response_lens = [3, 2, 4], [4, 5, 3]
    old = [-torch.rand(n, generator=gen) for n in response_lens]
    new = [o + torch.randn(len(o), generator=gen) * 0.4 for o in old]
    adv = [torch.full((n,), float(torch.randn(1, generator=gen))) for n in response_lens]
    mask = [torch.full((n,), int(i not in masked_rows), dtype=torch.int64) for i, n in enumerate(response_lens)]

    def nested(values):
        return torch.nested.as_nested_tensor([values[i] for i in rows], layout=torch.jagged)

    data = TensorDict(
        {
            "prompts": nested([torch.ones(n, dtype=torch.int64) for n in prompt_lens]),
            "responses": nested([torch.ones(n, dtype=torch.int64) for n in response_lens]),
            "response_mask": nested(mask),
            "loss_mask": nested(mask),
            "old_log_probs": nested(old),
            "advantages": nested([a * m for a, m in zip(adv, mask, strict=True)]),
        },
        batch_size=len(rows),
    )
    # FSDPEngine.forward_backward_batch: batch_num_tokens = loss_mask.sum() (all-reduced over dp)
    num_tokens = int(data["loss_mask"].values().sum())
    tu.assign_non_tensor(data, dp_size=1, batch_num_tokens=num_tokens, global_batch_size=len(rows))
    # model output over prompt + response, shifted by one token: log-prob of response token t sits at t-1
    log_probs = [torch.cat([torch.zeros(p - 1), n, torch.zeros(1)]) for p, n in zip(prompt_lens, new, strict=True)]
    return data, {"log_probs": nested(log_probs)}


@pytest.mark.parametrize("masked_rows", [set(), {1}])
def test_through_verl_ppo_loss(actor_config, masked_rows: set[int]) -> None:
    """verl's actor loss (workers.utils.losses.ppo_loss) selects agentrl_tcr by policy_loss.loss_mode; a masked
    trajectory leaves the loss exactly as if it were not in the batch."""
    from verl.workers.utils.losses import ppo_loss

    def loss(mode: str, rows: tuple[int, ...] = (0, 1, 2), masked: set[int] = masked_rows):
        config = actor_config(clip_ratio_high=0.28, clip_ratio_c=10.0, policy_loss={"loss_mode": mode})
        data, output = _actor_batch(masked, rows)
        return ppo_loss(config, output, data)

    (loss_vanilla, metrics_vanilla), (loss_tcr, metrics_tcr) = loss("vanilla"), loss(names.POLICY_LOSS)
    assert abs(loss_vanilla.item() - loss_tcr.item()) <= 1e-6
    assert "actor/pg_clipfrac_high" in metrics_tcr and "actor/pg_clipfrac_high" not in metrics_vanilla
    if masked_rows:
        loss_kept, _ = loss(names.POLICY_LOSS, rows=(0, 2))
        assert loss_tcr.item() == pytest.approx(loss_kept.item(), abs=1e-6)
        assert loss_tcr.item() != pytest.approx(loss(names.POLICY_LOSS, masked=set())[0].item())  # the mask matters


def test_ratio_extremes_are_true_max_min_over_micro_batches(actor_config) -> None:
    """Through verl's ppo_loss, one micro-batch per row, aggregated the way verl's engine worker does
    (Metric.aggregate_dp): the max/min of every response token of the update, not the mean of per-micro-batch ones."""
    from verl.utils.metric import AggregationType, Metric
    from verl.workers.utils.losses import ppo_loss

    config = actor_config(clip_ratio_high=0.28, clip_ratio_c=10.0, policy_loss={"loss_mode": names.POLICY_LOSS})
    per_micro = {"actor/ratio_max": [], "actor/ratio_min": []}
    ratios = []
    for row in (0, 1, 2):
        data, output = _actor_batch(set(), (row,))
        _, metrics = ppo_loss(config, output, data)
        for key in per_micro:
            assert metrics[key].aggregation == (AggregationType.MAX if key.endswith("max") else AggregationType.MIN)
            per_micro[key].append(metrics[key])
        old = data["old_log_probs"].values()
        new = output["log_probs"].values()[data["prompts"].offsets()[1] - 1 :][: len(old)]
        ratios.append(torch.exp(new - old))
    every = torch.cat(ratios)
    for key, expected in (("actor/ratio_max", every.max()), ("actor/ratio_min", every.min())):
        rank = Metric(per_micro[key][0].aggregation)
        for metric in per_micro[key]:
            rank.append(metric)
        assert Metric.aggregate_dp([rank]) == pytest.approx(expected.item(), rel=1e-6)
        assert Metric.aggregate_dp([rank]) != pytest.approx(sum(m.aggregate() for m in per_micro[key]) / 3)


def test_fully_masked_micro_batch_reports_every_key(tcr, actor_config) -> None:
    config = actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C)
    old, logp, adv, mask = golden_batch()
    _, metrics = tcr(old, logp, adv, torch.zeros_like(mask), loss_agg_mode="token-mean", config=config)
    assert metrics["actor/ratio_max"].aggregate() == metrics["actor/ratio_min"].aggregate() == 1.0
    assert metrics["actor/ratio_mean"] == 1.0


def test_a_mini_batch_without_loss_tokens_contributes_zero_not_nan(tcr, actor_config) -> None:
    """Every trajectory of the mini-batch masked (batch_num_tokens 0): verl's agg_loss gives 0/0 = NaN, which made
    the step's mean actor/pg_loss NaN; the loss is 0 and the gradient 0 on every token."""
    config = actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C)
    config.global_batch_info.update(dp_size=1, batch_num_tokens=0)
    old, logp, adv, mask = golden_batch()
    logp = logp.clone().requires_grad_(True)
    loss, metrics = tcr(old, logp, adv, torch.zeros_like(mask), loss_agg_mode="token-mean", config=config)
    loss.backward()
    assert loss.item() == 0.0
    assert torch.count_nonzero(logp.grad) == 0
    assert metrics[LOSS_TOKENS_PER_UPDATE] == 0.0


def test_loss_metrics_survive_verls_reduction_over_mini_batches(actor_config) -> None:
    """Two updates (mini-batches) through verl's ppo_loss, reduced as verl's engine worker and trainer do
    (Metric.aggregate_dp per update, then reduce_metrics over updates). reduce_metrics picks np.min/np.max for any key
    that merely contains "min"/"max" — the first name of the token count, `loss_denominator_tokens`, came out as the
    smallest update's count. Every mean-aggregated metric we add must come out as the mean."""
    from verl.utils.metric import AggregationType, Metric, reduce_metrics
    from verl.utils.py_functional import append_to_dict
    from verl.workers.utils.losses import ppo_loss

    from agentrl_recipe.training.algos.losses import LOSS_TOKENS_PER_UPDATE

    config = actor_config(clip_ratio_high=0.28, clip_ratio_c=10.0, policy_loss={"loss_mode": names.POLICY_LOSS})
    per_update, token_counts = {}, []
    for rows in ((0,), (1, 2)):
        data, output = _actor_batch(set(), rows)
        token_counts.append(data["batch_num_tokens"])
        _, metrics = ppo_loss(config, output, data)
        append_to_dict(per_update, {key: Metric.aggregate_dp([value]) for key, value in metrics.items()})
    reduced = reduce_metrics(per_update)
    assert token_counts[0] != token_counts[1]
    assert reduced[LOSS_TOKENS_PER_UPDATE] * 2 == sum(token_counts)
    data, output = _actor_batch(set(), (0,))
    vanilla_keys = set(ppo_loss(actor_config(), output, data)[1])
    ours = {key for key, value in metrics.items() if value.aggregation == AggregationType.MEAN} - vanilla_keys
    assert LOSS_TOKENS_PER_UPDATE in ours
    assert not [key for key in ours if "min" in key or "max" in key]


def scoped_config(actor_config, scope: str):
    from agentrl_recipe.training.algos.losses import TCRPolicyLossConfig

    policy_loss = TCRPolicyLossConfig(loss_mode=names.POLICY_LOSS, token_mean_scope=scope)
    return actor_config(clip_ratio_low=EPS_LOW, clip_ratio_high=EPS_HIGH, clip_ratio_c=C, policy_loss=policy_loss)


def micro_batch(lengths: list[int], advantage: float, width: int = 4) -> tuple[torch.Tensor, ...]:
    """Sequences of the given token counts, ratio 1 (per-token loss −A), padded to ``width``."""
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths], dtype=torch.float64)
    old = torch.full_like(mask, -1.0)
    return old, old.clone(), torch.full_like(mask, advantage), mask


GOLDEN_MICRO_BATCHES = [
    ([1, 1], -1.0),
    ([3, 3], 0.0),
    ([2, 2], 0.0),
    ([4, 4], 0.0),
]  # one mini-batch: 8 seqs, 20 tokens


@pytest.mark.parametrize(("scope", "expected"), [("micro_batch", 2 / 8 * 1.0), ("mini_batch", 2 / 20)])
def test_golden_token_mean_scope(tcr, actor_config, scope: str, expected: float) -> None:
    """Released (verl 0.5): each micro-batch's token mean × its share of the mini-batch's sequences; verl 0.9.1: one
    mean over the mini-batch's tokens. The short micro-batch's loss weighs 2.5× more under the released scope."""
    config = scoped_config(actor_config, scope)
    config.global_batch_info.update(dp_size=1, batch_num_tokens=20, global_batch_size=8)
    total = 0.0
    for lengths, advantage in GOLDEN_MICRO_BATCHES:
        loss, _ = tcr(*micro_batch(lengths, advantage), loss_agg_mode="token-mean", config=config)
        total += loss.item()
    assert total == pytest.approx(expected, abs=1e-12)


def released_token_losses(old: torch.Tensor, logp: torch.Tensor, adv: torch.Tensor) -> torch.Tensor:
    """Per-token clipped loss, written out (verl 0.5's compute_policy_loss with dual clip)."""
    ratio = torch.exp(torch.clamp(logp - old, -20.0, 20.0))
    clipped = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - EPS_LOW, 1 + EPS_HIGH))
    return torch.where(adv < 0, torch.minimum(-adv * C, clipped), clipped)


@pytest.mark.parametrize("dp", [1, 2])
def test_micro_batch_scope_equals_verl05_on_random_inputs(tcr, actor_config, dp: int) -> None:
    """verl 0.5 dp_actor.py: loss = masked_mean(L over the micro-batch) · n_mb / (N / dp) on each rank, the ranks'
    gradients averaged; ours over the same split, with verl 0.9.1's global_batch_info, gives the same value."""
    gen = torch.Generator().manual_seed(dp)
    n, width = 12, 7
    old = -torch.rand(n, width, generator=gen, dtype=torch.float64)
    logp = old + torch.randn(n, width, generator=gen, dtype=torch.float64) * 0.5
    adv = torch.randn(n, width, generator=gen, dtype=torch.float64)
    mask = (torch.rand(n, width, generator=gen) > 0.4).double()
    mask[3] = 0  # a sequence without tokens
    mask[5] = 0  # ... and a micro-batch without tokens
    splits = [[0, 1, 2], [3, 4], [5], [6, 7, 8, 9, 10, 11]]  # dp 2: the first two on rank 0, the rest on rank 1
    config = scoped_config(actor_config, "micro_batch")
    config.global_batch_info.update(dp_size=dp, batch_num_tokens=int(mask.sum()), global_batch_size=n)
    ours = released = 0.0
    for rows in splits:
        loss, _ = tcr(old[rows], logp[rows], adv[rows], mask[rows], loss_agg_mode="token-mean", config=config)
        ours += loss.item() / dp  # FSDP averages the ranks' gradients
        losses = released_token_losses(old[rows], logp[rows], adv[rows])
        micro_mean = (losses * mask[rows]).sum() / (mask[rows].sum() + 1e-8)  # verl 0.5 masked_mean
        released += micro_mean.item() * len(rows) / (n / dp) / dp
    assert ours == pytest.approx(released, abs=1e-9)
    global_mean = (released_token_losses(old, logp, adv) * mask).sum() / mask.sum()
    assert abs(ours - global_mean.item()) > 1e-3  # the two scopes differ on these inputs


def test_token_mean_scope_resolution(actor_config) -> None:
    import verl  # noqa: F401  (loads the plugin: its ${agentrl_compat:...} resolver)
    from omegaconf import OmegaConf

    from agentrl_recipe.training.algos.losses import TCRPolicyLossConfig, token_mean_scope

    assert TCRPolicyLossConfig().token_mean_scope == "mini_batch"
    assert token_mean_scope(actor_config()) == "mini_batch"  # verl's own PolicyLossConfig: verl's scope
    with pytest.raises(ValueError, match="token_mean_scope must be one of"):
        TCRPolicyLossConfig(token_mean_scope="sequence")
    for mode, scope in (("open_agentrl", "micro_batch"), ("agentrl", "mini_batch"), (None, "mini_batch")):
        cfg = OmegaConf.create({"agentrl": {"compat": mode}, "scope": "${agentrl_compat:token_mean_scope}"})
        assert cfg.scope == scope  # what grpo_tcr.yaml writes into policy_loss.token_mean_scope
    with pytest.raises(Exception, match="compat must be one of"):
        _ = OmegaConf.create({"agentrl": {"compat": "verl"}, "scope": "${agentrl_compat:token_mean_scope}"}).scope


def test_micro_batch_scope_leaves_other_agg_modes_alone(tcr, actor_config) -> None:
    config = scoped_config(actor_config, "micro_batch")
    config.global_batch_info.update(global_batch_size=4)
    loss, _ = tcr(*golden_batch(), loss_agg_mode="seq-mean-token-mean", config=config)
    assert loss.item() == pytest.approx((sum(SEQ0) / 4 + sum(SEQ1) / 3) / 4, abs=1e-7)
