"""The replay buffers of :mod:`agentrl_recipe.training.algos.sampler`: the path verl loads them from, their settings and
config check, dynamic sampling with the cap (sync buffer), masks and RoC on a sampled batch, and the async buffer — the
buffers on a real TransferQueue fed by a scripted rollout (:mod:`replay_helpers`)."""

from __future__ import annotations

import itertools
import logging
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from replay_helpers import (
    DAPO,
    MAX_LEN,
    B,
    N,
    ScriptedRollout,
    groups_of,
    make_buffer,
    step_metrics,
    trainer_config,
)
from verl.trainer.ppo.rollout_corr_helper import compute_rollout_correction_and_rejection_mask
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
from verl.trainer.ppo.v1.trainer_base import PPOTrainer
from verl.utils.import_utils import load_extern_object

from agentrl_recipe import fields, names
from agentrl_recipe.training.algos import sampler
from agentrl_recipe.training.algos.infra_guard import InfraGuardConfig
from agentrl_recipe.training.algos.masking import MaskConfig
from agentrl_recipe.training.algos.sampler import (
    AgentRLReplayBuffer,
    AgentRLReplayBufferAsync,
    SamplerSettings,
    check_trainer_config,
)

LOGGER = sampler.__name__


# ---- the path configs name (pkg://agentrl_recipe.training.algos.sampler)
# ----------------------------------------------------
def test_the_configured_path_and_names_are_this_modules_own() -> None:
    assert names.SAMPLER_PATH.removeprefix("pkg://") == sampler.__name__
    for name in (names.SYNC_SAMPLER, names.ASYNC_SAMPLER):
        assert getattr(sampler, name).__module__ == sampler.__name__, name


@pytest.mark.parametrize("name", ["AgentRLReplayBuffer", "AgentRLReplayBufferAsync"])
def test_verl_loads_the_classes_from_the_configured_path(name: str) -> None:
    assert load_extern_object(names.SAMPLER_PATH, name) is getattr(sampler, name)  # verl's custom_sampler loader


def test_verl_trainer_builds_our_buffer_from_config() -> None:
    """verl's own PPOTrainer._build_replay_buffer loads the sampler from trainer.v1.sampler.custom_sampler."""
    cfg = trainer_config({"void_turn": True, "overlong_filter": True})
    trainer = SimpleNamespace(config=cfg, trainer_mode="sync", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert type(buffer) is sampler.AgentRLReplayBuffer
    assert buffer.settings.masks.enabled == ("void_turn", "overlong_filter")
    assert buffer.filter_groups_metric == "acc" and buffer.gen_batch_size == 1 and buffer.max_num_gen_batches == 10
    assert buffer.settings.max_response_length == MAX_LEN


def buffer_kwargs(cfg) -> dict:
    return OmegaConf.to_container(cfg.trainer.v1.sampler.sampler_kwargs, resolve=True)


class _Trainer(SimpleNamespace):
    def _add_prompts_to_generate(self, n: int) -> int:  # a bound method, as verl passes it
        return n


@pytest.mark.parametrize(("compat", "expected"), [("open_agentrl", "released"), ("agentrl", "verl")])
def test_the_buffer_gives_its_trainer_the_partition_compat_says(compat: str, expected: str) -> None:
    """Issue 45 item 1: verl's _build_replay_buffer builds our buffer, which gives that trainer instance the order."""
    from agentrl_recipe.training.verl_adapters import balance_batch

    cfg = trainer_config({})
    cfg.agentrl.compat = compat
    trainer = _Trainer(config=cfg, trainer_mode="sync")
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert (buffer.settings.batch_partition, balance_batch.installed(trainer)) == (expected, expected)
    with pytest.raises(ValueError, match="batch_partition released needs the trainer's refill_fn"):
        sampler.install_partition(None, "released")
    with pytest.raises(ValueError, match="batch_partition must be one of"):
        SamplerSettings.from_kwargs({**buffer_kwargs(cfg), "batch_partition": "zigzag"})


def test_verl_trainer_builds_our_async_buffer_from_config() -> None:
    cfg = trainer_config({"infra_failure": True}, mode="colocate_async", sampler="AgentRLReplayBufferAsync")
    cfg.algorithm.filter_groups.max_num_gen_batches = 0  # the cap is sync-only
    trainer = SimpleNamespace(config=cfg, trainer_mode="colocate_async", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert type(buffer) is sampler.AgentRLReplayBufferAsync
    assert buffer.settings.masks.enabled == ("infra_failure",) and buffer.filter_groups_metric == "acc"
    assert buffer._calls_per_step == 1
    # separate_async: verl samples a step in parameter_sync_step calls and hands the buffer that mode's section
    cfg.trainer.v1.trainer_mode = "separate_async"
    cfg.trainer.v1.separate_async = {"parameter_sync_step": 2}
    separate = SimpleNamespace(config=cfg, trainer_mode="separate_async", _add_prompts_to_generate=lambda n: n)
    assert PPOTrainer._build_replay_buffer(separate)._calls_per_step == 2


# ---- settings (sampler_kwargs) and the config check ------------------------------------------------------------------
def test_sampler_kwargs_are_validated() -> None:
    wired = {
        "masks": {},
        "filter_groups": {},
        "train_batch_size": 4,
        "max_response_length": 8,
        "batch_partition": "verl",
    }
    assert SamplerSettings.from_kwargs(wired).masks.enabled == ()
    with pytest.raises(ValueError, match=r"masks: \$\{agentrl.masks\}"):  # unwired: would silently do nothing
        SamplerSettings.from_kwargs({k: v for k, v in wired.items() if k != "masks"})
    with pytest.raises(ValueError, match="void_turns"):
        SamplerSettings.from_kwargs({**wired, "masks": {"void_turns": True}})
    with pytest.raises(ValueError, match="metric"):
        SamplerSettings.from_kwargs({**wired, "filter_groups": {"enable": True}})
    with pytest.raises(ValueError, match="max_num_gen_batches must be ≥ 0"):
        SamplerSettings.from_kwargs({**wired, "filter_groups": {"max_num_gen_batches": -1}})
    with pytest.raises(ValueError, match="train_batch_size"):
        SamplerSettings.from_kwargs(
            {**wired, "filter_groups": {"enable": True, "metric": "acc"}, "train_batch_size": None}
        )
    with pytest.raises(ValueError, match="unknown key"):
        SamplerSettings.from_kwargs({**wired, "mask": {}})


def test_sampler_kwargs_carry_the_guard() -> None:
    kwargs = {
        "masks": {},
        "filter_groups": {"enable": False},
        "train_batch_size": 4,
        "max_response_length": 8,
        "batch_partition": "released",
        "infra_guard": {"max_rate": 0.05},
    }
    assert SamplerSettings.from_kwargs(kwargs).infra_guard == InfraGuardConfig(max_rate=0.05)
    del kwargs["infra_guard"]
    assert SamplerSettings.from_kwargs(kwargs).infra_guard == InfraGuardConfig()  # on by default


def test_the_shipped_wiring_passes_the_check() -> None:
    assert check_trainer_config(trainer_config({"void_turn": True, "overlong_filter": True})) == []


def test_check_trainer_config_reports_a_mask_that_would_do_nothing() -> None:
    cfg = trainer_config({"infra_failure": True})
    cfg.trainer.v1.sampler.custom_sampler.path = None  # verl's built-in buffer: the mask would be ignored
    assert any("custom_sampler" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"infra_failure": True}, mode="colocate_async")  # sync sampler in an async mode
    assert any("AgentRLReplayBufferAsync" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"infra_failure": True})
    cfg.trainer.use_v1 = False
    assert any("use_v1" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"void_turn": True})
    cfg.agentrl.roc = {"enable": True, "keep_per_group": 8}
    del cfg.trainer.v1.sampler.sampler_kwargs["roc"]  # RoC on but not wired: the sampler would never see it
    assert any("sampler_kwargs.roc" in problem for problem in check_trainer_config(cfg))
    cfg = trainer_config({"void_turn": True})
    cfg.trainer.v1.sampler.sampler_kwargs.masks = {"void_turn": False}  # not interpolated from agentrl.masks
    assert check_trainer_config(cfg) == [
        "trainer.v1.sampler.sampler_kwargs.masks does not match its config home; wire it as ${agentrl.masks}"
    ]
    cfg = trainer_config({"void_turn": True})
    del cfg.trainer.v1.sampler.sampler_kwargs["train_batch_size"]
    assert [p.split(":")[0] for p in check_trainer_config(cfg)] == ["trainer.v1.sampler.sampler_kwargs"]
    cfg = trainer_config({})
    cfg.algorithm.filter_groups.enable = False
    assert check_trainer_config(cfg) == []  # nothing needs the sampler


# ---- the sync buffer: DAPO refill to full size, and the cap on generation rounds -------------------------------------
def test_zero_variance_groups_are_refilled_to_full_size(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.chain(["var", "zero", "zero", "var"], itertools.repeat("var")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups=DAPO)
    rollout.submit(B)  # the trainer's prepare_step
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    groups = groups_of(tq, batch)
    assert len(groups) == B and len(batch) == B * N
    assert all(len(set(accs)) > 1 for accs in groups.values())  # every group carries signal
    assert rollout.refills == [4]  # verl's 2 prompts per evicted group
    assert metrics["training/filter_groups/evicted_samples"] == 2  # verl's metric
    assert metrics["training/filter_groups/refill_prompts"] == 4
    assert metrics["training/filter_groups/gen_batches"] == 2.0
    assert metrics["training/filter_groups/cap_reached"] == 0.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == 0.0


def test_verl_builtin_buffer_ignores_the_cap(tq) -> None:
    """verl 0.9.1's sync ReplayBuffer never stops generating when every group is zero-variance (the bug we fix)."""
    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    rollout.refills = []

    def refill(n: int) -> int:
        if len(rollout.refills) >= 12:  # > max_num_gen_batches=10 rounds: it would go on forever
            raise RuntimeError("still refilling")
        return rollout.refill(n)

    buffer = ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=refill,
        poll_interval=0.01,
        filter_groups_metric="acc",
        train_batch_size=B,
        gen_batch_size=1,
        max_inflight_gen_batches=1,
    )
    rollout.submit(B)
    with pytest.raises(RuntimeError, match="still refilling"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)


def test_cap_stops_generation_with_a_warning(tq, caplog) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 3})
    rollout.submit(B)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == (3 - 1) * B  # the first batch + 2 refill batches, then no more
    assert len(groups_of(tq, batch)) == B  # still a full batch: zero-variance groups are kept at the cap
    assert metrics["training/filter_groups/cap_reached"] == 1.0
    assert metrics["training/filter_groups/gen_batches"] == 3.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == B
    assert "max_num_gen_batches=3" in caplog.text


def test_cap_prefers_groups_with_variance_and_trains_a_short_batch(tq, caplog) -> None:
    """Half of the first batch is still generating when the buffer starts; the budget runs out mid-refill, and
    once nothing is in flight the buffer trains on the groups it has rather than waiting forever."""
    rollout = ScriptedRollout(tq, itertools.chain(["zero"] * 4 + ["var"], itertools.repeat("zero")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 2})
    rollout.submit(2)
    rollout.submit(2, finished=False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == B
    groups = groups_of(tq, batch)
    assert len(groups) < B and metrics["training/filter_groups/batch_groups"] == len(groups)
    assert any(len(set(accs)) > 1 for accs in groups.values())  # the one group with signal is in
    assert "training this step on" in caplog.text
    # 2 zero groups, then the 2 late ones + 1 refilled zero group; verl's count survives the short path
    assert metrics["training/filter_groups/evicted_samples"] == 5


def test_nothing_to_train_on_at_the_cap_is_a_clear_error(tq) -> None:
    buffer = make_buffer(AgentRLReplayBuffer, ScriptedRollout(tq, []), filter_groups={**DAPO, "max_num_gen_batches": 1})
    with pytest.raises(RuntimeError, match="too easy or too hard"):
        buffer._short_batch(global_steps=1, partition_id="train", batch_size=B)


# ---- masks and RoC on a sampled batch (through the sync buffer) ------------------------------------------------------
def test_masks_zero_response_and_loss_masks_in_transfer_queue(tq) -> None:
    extra = {(0, 1): {fields.VOID_TURN.column: True}, (1, 0): {fields.TOOL_INFRA_FAILURE.column: True}}
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, masks={"void_turn": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    metrics = step_metrics(metrics)
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["response_mask", "loss_mask"])
    extras = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])["extra_fields"]
    for row, extra in enumerate(extras):
        void = bool(getattr(extra, "data", extra).get(fields.VOID_TURN.column))
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
    tools = {fields.TOOL_CALLS.column: 4}
    extra = {(0, 0): {**tools, fields.TOOL_FAILURES.column: 3}, (0, 1): {**tools, fields.TOOL_FAILURES.column: 0}}
    rollout = ScriptedRollout(tq, iter([[1.0, 1.0, 0.0, 0.0]]), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, roc={"enable": True, "keep_per_group": 2})
    rollout.submit(1)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=1)
    metrics = step_metrics(metrics)
    masks = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["loss_mask"])["loss_mask"]
    kept = {key.split("_")[1]: bool(row.sum() > 0) for key, row in zip(batch.keys, masks.unbind(), strict=True)}
    assert kept["0"] is False and kept["1"] is True  # the clean correct one
    assert sum(kept.values()) == 2
    assert metrics["training/roc/dropped_trajectories"] == 2
    assert metrics["training/roc/correct_penalty_mean"] == pytest.approx(0.375)
    assert metrics["training/roc/kept_correct_penalty_mean"] == 0.0


# ---- the async buffer: masks, and the sync-only cap rejected ---------------------------------------------------------
def test_async_buffer_applies_masks_and_rejects_the_sync_cap(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra={(0, 0): {fields.TOOL_INFRA_FAILURE.column: True}})
    with pytest.raises(ValueError, match="sync dynamic sampling only"):
        make_buffer(AgentRLReplayBufferAsync, rollout, filter_groups=DAPO)
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks={"infra_failure": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert len(batch) == B * N and step_metrics(metrics)["training/masks/masked_trajectories"] == 1
    assert buffer.filter_groups_metric is None and buffer.sync_refill_failed_groups is False


def test_a_step_sampled_in_two_mini_batches_reports_its_sums_and_its_rates(tq) -> None:
    """separate_async samples a step in parameter_sync_step mini-batches; verl's MetricsAggregator combines them.
    Counts are the step's sums, rates the step's ratio, percentiles the step's; nothing is averaged per mini-batch."""
    extra = {(p, s): {fields.VOID_TURN.column: False} for p in range(3 * B) for s in range(N)}  # the agent loop's
    extra[0, 0] = {fields.VOID_TURN.column: True}  # 3 tokens
    extra[2, 1] = {fields.VOID_TURN.column: True}  # 4 tokens
    extra[3, 0] = {fields.VOID_TURN.column: False, fields.TOOL_INFRA_FAILURE.column: True}  # flagged; its switch is off
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    config = {"parameter_sync_step": 2}  # verl passes config.trainer.v1.<trainer_mode> (trainer_base.py)
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks={"void_turn": True}, mode="separate_async",
                         config=config)  # fmt: skip
    rollout.submit(B)
    calls = [buffer.sample(global_steps=1, partition_id="train", batch_size=B // 2)[1] for _ in range(2)]
    assert "training/masks/masked_ratio" not in calls[0]  # rates come once, over the whole step
    step = step_metrics(*calls, sample_counts=[B // 2 * N] * 2)
    assert step["training/masks/masked_trajectories"] == 2
    assert step["training/masks/masked_ratio"] == pytest.approx(2 / (B * N))
    assert step["training/masks/infra_failure_ratio"] == pytest.approx(1 / (B * N))
    assert step["training/masks/loss_tokens"] == B * (3 + 4)
    assert step["training/masks/loss_tokens_kept"] == B * (3 + 4) - 3 - 4
    assert step["training/infra_guard/step_rate"] == pytest.approx(1 / (B * N))
    assert step["reward/math_dapo/acc"] == pytest.approx(1 / N)
    # a step sampled in fewer calls than parameter_sync_step would report wrong metrics: refused
    rollout.submit(2 * B)
    assert "training/masks/masked_ratio" not in buffer.sample(global_steps=2, partition_id="train", batch_size=2)[1]
    with pytest.raises(RuntimeError, match="step 2 was sampled in 1 calls, not parameter_sync_step=2"):
        buffer.sample(global_steps=3, partition_id="train", batch_size=2)


# ---- a batch the masks take whole: dropped and replaced, within a bound ----------------------------------------------
def _void_prompts(first: int, count: int, total: int = 8 * B) -> dict:
    """The agent loop's void-turn flag for prompts 0 .. ``total`` - 1: every session of prompts ``first`` ..
    ``first + count - 1`` void, the others clean."""
    void = range(first, first + count)
    return {(p, s): {fields.VOID_TURN.column: p in void} for p in range(total) for s in range(N)}


def _train_keys(tq) -> set[str]:
    return set((tq.kv_list() or {}).get("train", {}))


def test_verl_rollout_correction_raises_on_a_batch_with_no_loss_token() -> None:
    """Why a fully masked batch must never reach verl: its rollout correction (on in every async preset) raises."""
    log_probs = torch.zeros(2, 3)
    with pytest.raises(ValueError, match="at least one valid token"):
        compute_rollout_correction_and_rejection_mask(
            old_log_prob=log_probs, rollout_log_prob=log_probs, response_mask=torch.zeros(2, 3), rollout_is="token"
        )


def test_async_buffer_replaces_a_fully_masked_mini_batch_and_counts_it(tq, caplog) -> None:
    """Every trajectory of the first mini-batch is a void turn: it leaves TransferQueue, B fresh prompts are submitted
    and the buffer trains on them; twice, with a bound of 1 in a row (the streak restarts after a kept batch)."""
    extra = _void_prompts(0, B)
    extra.update({key: value for key, value in _void_prompts(2 * B, B).items() if value[fields.VOID_TURN.column]})
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    masks = {"void_turn": True, "max_fully_masked_batches": 1}
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks=masks)
    for call in range(2):
        before = _train_keys(tq)  # the previous call's batch stays: verl's trainer clears it, not the buffer
        rollout.submit(B)  # all void
        void_keys = {key for key in _train_keys(tq) - before if "_" in key}  # trajectories, not prompts
        with caplog.at_level(logging.WARNING, logger=LOGGER):
            batch, metrics = buffer.sample(global_steps=call + 1, partition_id="train", batch_size=B)
        assert rollout.refills == [B] * (call + 1)  # one prompt per dropped group
        assert not set(batch.keys) & void_keys and not void_keys & _train_keys(tq)  # dropped, and gone from TQ
        step = step_metrics(metrics)
        assert step["training/masks/fully_masked_batches"] == 1
        assert step["training/masks/fully_masked_trajectories"] == B * N
        assert step["training/masks/masked_trajectories"] == 0  # of the batch trained on: the replacement, clean
        assert step["training/masks/loss_tokens_kept"] == step["training/masks/loss_tokens"] == B * (3 + 4)
        masks_now = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["loss_mask"])["loss_mask"]
        assert all(row.sum() > 0 for row in masks_now.unbind())
    assert caplog.text.count("every trajectory of a sampled batch was masked") == 2
    assert "void_turn 8" in caplog.text and "1 of agentrl.masks.max_fully_masked_batches=1 in a row" in caplog.text


def test_fully_masked_batches_past_the_bound_stop_the_run_with_one_line(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=_void_prompts(0, 4 * B))
    masks = {"void_turn": True, "overlong_filter": True, "max_fully_masked_batches": 2}
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks=masks)
    rollout.submit(B)
    with pytest.raises(sampler.FullyMaskedBatches) as stop:
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert rollout.refills == [B, B]  # two replacements, the third fully masked batch stops the run
    message = str(stop.value)
    assert "\n" not in message
    assert message.startswith(
        "agentrl.masks: every trajectory of 3 sampled batches in a row was masked (24 trajectories; flagged by "
        "void_turn 24, overlong_filter 0), more than agentrl.masks.max_fully_masked_batches=2"
    )


def test_without_a_refill_function_a_fully_masked_batch_stops_at_once(tq) -> None:
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=_void_prompts(0, B))
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks={"void_turn": True})
    buffer.refill_fn = None
    rollout.submit(B)
    with pytest.raises(sampler.FullyMaskedBatches, match="and no refill function"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)


def test_sync_buffer_replaces_a_fully_masked_batch_with_a_new_generation(tq) -> None:
    """The sync step's whole batch masked (the same hole: verl's sync trainer runs the same rollout correction): a new
    batch of B prompts is generated through the trainer's refill, outside the DAPO budget."""
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=_void_prompts(0, B))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, masks={"void_turn": True}, filter_groups=DAPO)
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert rollout.refills == [B] and len(groups_of(tq, batch)) == B
    step = step_metrics(metrics)
    assert step["training/masks/fully_masked_batches"] == 1 and step["training/masks/masked_trajectories"] == 0
    assert metrics["training/filter_groups/gen_batches"] == 1.0  # the replacement's own budget, untouched
    # max_fully_masked_batches 0: the first fully masked batch stops the run
    strict = make_buffer(AgentRLReplayBuffer, rollout, masks={"void_turn": True, "max_fully_masked_batches": 0})
    rollout.extra = _void_prompts(rollout.prompts, B)
    rollout.submit(B)
    with pytest.raises(sampler.FullyMaskedBatches, match=r"1 sampled batches in a row.*max_fully_masked_batches=0"):
        strict.sample(global_steps=2, partition_id="train", batch_size=B)


def test_the_bound_is_validated() -> None:
    assert MaskConfig().max_fully_masked_batches == 5
    for bad in (-1, True, 1.5):
        with pytest.raises(ValueError, match="max_fully_masked_batches"):
            MaskConfig(max_fully_masked_batches=bad)
