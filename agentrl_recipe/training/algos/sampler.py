"""The v1 replay buffers of the recipe: trajectory masks + DAPO dynamic sampling with a cap on generation rounds.

verl 0.9.1's v1 trainer (``trainer.use_v1=true``, the default) samples every training batch from
:class:`verl.trainer.ppo.v1.replay_buffer.ReplayBuffer` and lets a config swap in a subclass
(``trainer.v1.sampler.custom_sampler.{path,name}``) — the one plugin hook that sees a whole batch, with the agent
loop's ``extra_fields`` and the reward's ``reward_extra_info``, *before* old-log-prob, advantage and actor update.
verl loads the class as ``getattr(import_module(path), name)``. This module holds:

- :class:`SamplerSettings` (the ``sampler_kwargs``) and :func:`check_trainer_config` (``configs check``);
- :class:`MaskingMixin` — trajectory masks, RoC and the infra guard on the sampled batch, in TransferQueue;
- :class:`AgentRLReplayBuffer` — the sync buffer, with the ``max_num_gen_batches`` cap on dynamic sampling;
- :class:`AgentRLReplayBufferAsync` — the async buffer, for the ``*_async`` trainer modes.

Config (the shipped ``verl_configs/recipe/grpo_tcr.yaml`` wires it; values are interpolated from their one home,
:data:`WIRING`; a missing one is an error, since an unwired switch would silently do nothing)::

    trainer.v1.sampler.custom_sampler.path: pkg://agentrl_recipe.training.algos.sampler
    trainer.v1.sampler.custom_sampler.name: AgentRLReplayBuffer      # AgentRLReplayBufferAsync for *_async modes
    trainer.v1.sampler.sampler_kwargs:
      masks: ${agentrl.masks}                              # agentrl.masks.* switches (MaskConfig)
      batch_partition: ${agentrl_compat:batch_partition}   # which trajectories share an update (algos/partition.py)
      roc: ${agentrl.roc}                                  # optional: agentrl.roc.* (rStar2 RoC, RoCConfig)
      filter_groups: ${algorithm.filter_groups}            # verl's FilterGroupsConfig (dynamic sampling, below)
      train_batch_size: ${data.train_batch_size}
      max_response_length: ${data.max_response_length}     # for agentrl.masks.overlong_filter
      sync_refill_failed_groups: ${trainer.v1.sampler.sync_refill_failed_groups}
      trajectory_dump: ${agentrl.trajectory_dump}          # optional: the per-step dump `agentrl-recipe view` reads

**Masks** (:mod:`agentrl_recipe.training.algos.masking`). After verl selects the batch, the trajectories to mask get
their
``response_mask`` *and* ``loss_mask`` zeroed in TransferQueue (the engines count the token-mean denominator
``batch_num_tokens`` from ``loss_mask``, the loss reads ``response_mask``; verl's agent loop stores both). Lengths
are kept, so nothing downstream shifts; the ``agentrl_grpo`` estimator reads an all-zero row as "masked".
**RoC** (:mod:`agentrl_recipe.training.algos.roc`, ``agentrl.roc``) is applied the same way: the trajectories it drops
from an oversampled group are masked. A sampled batch (sync: the step's; async: a mini-batch) that the masks and RoC
take whole carries no loss token and would crash verl's rollout correction: both buffers drop it, submit as many fresh
prompts, and sample again, stopping the run past ``agentrl.masks.max_fully_masked_batches`` in a row
(:meth:`MaskingMixin._sample_masked`; the choice is argued in :mod:`agentrl_recipe.training.algos.masking`).

**Dynamic sampling** (DAPO filter-groups). verl's sync ReplayBuffer already does the filtering right: finished
groups whose ``algorithm.filter_groups.metric`` is identical across the group are evicted, 2 prompts are refilled
per evicted group (bounded by ``max_inflight_gen_batches`` × train_batch_size in flight), and it waits until
``train_batch_size`` groups with variance exist, discarding the surplus. What it lacks is the cap: it ignores
``max_num_gen_batches`` (with a warning) and keeps generating forever when every group is zero-variance (a data set
too easy or too hard for the model). :class:`AgentRLReplayBuffer` restores DAPO's cap: at most
``max_num_gen_batches`` × ``train_batch_size`` prompts are generated per step (the first batch included; 0 = no cap,
DAPO's convention). At the cap it stops refilling and stops evicting, prefers groups with variance when it selects,
and, if fewer than ``train_batch_size`` groups exist once nothing is in flight, trains on those (verl pads the batch
with its no-op rows) — each with a WARNING that says how many groups carried signal. Groups are never silently
dropped. Group variance is judged before masking: a group whose only informative member is later masked still
counts as informative (its remaining members then get zero advantage from ``agentrl_grpo``). The async buffer
rejects the cap rather than ignoring it.

Keys (verl's ``algorithm.filter_groups.*``; verl default → paper [code] value):

- ``enable``: false → false (the released script sets it but never passes it: "too expensive for agentic RL").
- ``metric``: reward → acc. The per-trajectory value whose group variance must be > 0 (``reward`` = rm_scores,
  anything else = a ``reward_extra_info`` key).
- ``max_num_gen_batches``: 0 (ignored by verl's v1 buffer) → 10. Cap on generated prompt batches per step, the
  first included; 0 = no cap. Honoured by the sync buffer.
- ``max_inflight_gen_batches``: 1 → —. verl's bound on concurrently generating batches.

Step metrics: ``training/filter_groups/{gen_batches, refill_prompts, cap_reached, zero_variance_groups_kept,
batch_groups}`` next to verl's ``training/filter_groups/evicted_samples``, ``training/masks/*`` (with
``loss_tokens`` / ``loss_tokens_kept``, ``fully_masked_{batches,trajectories}``), ``training/roc/*``,
``training/infra_guard/*``, ``training/grader_error_guard/*``, and the step's tool, sandbox and per-source reward
metrics (:func:`agentrl_recipe.training.metrics.step_metrics`). verl's private sampling steps are reached only through
:class:`agentrl_recipe.training.verl_adapters.replay_buffer.HookedReplayBuffer`'s hooks. The legacy
trainer (``trainer.use_v1=false``) has no such hook; :func:`check_trainer_config` reports that.
"""

from __future__ import annotations

import dataclasses
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import torch
import transfer_queue as tq
from tensordict import TensorDict
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
from verl.utils.metric import AggregationType, Metric

from agentrl_recipe import fields
from agentrl_recipe.names import ASYNC_SAMPLER, SAMPLER_PATH, SYNC_SAMPLER
from agentrl_recipe.training import trace
from agentrl_recipe.training.algos import roc
from agentrl_recipe.training.algos.infra_guard import (
    GRADER_ERROR_PREFIX,
    GraderErrorGuard,
    InfraGuard,
    InfraGuardConfig,
    is_infra_failure,
)
from agentrl_recipe.training.algos.infra_guard import METRIC_PREFIX as INFRA_GUARD_PREFIX
from agentrl_recipe.training.algos.masking import MaskConfig, compute_trajectory_masks, trajectory_fields
from agentrl_recipe.training.algos.partition import BATCH_PARTITIONS
from agentrl_recipe.training.metrics import is_count, step_metrics
from agentrl_recipe.training.recipe_config import from_mapping, resolve, to_plain
from agentrl_recipe.training.trajectory_dump import TrajectoryDump, TrajectoryDumpConfig
from agentrl_recipe.training.verl_adapters import balance_batch, metrics_aggregator
from agentrl_recipe.training.verl_adapters.ppo_trainer import async_buffer_kwargs, sync_buffer_kwargs
from agentrl_recipe.training.verl_adapters.replay_buffer import (
    EvictionReasons,
    HookedReplayBuffer,
    accumulate_eviction_metrics,
)

logger = logging.getLogger(__name__)

# sampler_kwargs key -> the config value it must be interpolated from. Optional: roc (RoC stays off without it;
# `configs check` reports an agentrl.roc that is on but not wired) and sync_refill_failed_groups.
WIRING = {
    "masks": "${agentrl.masks}",
    "batch_partition": "${agentrl_compat:batch_partition}",
    "filter_groups": "${algorithm.filter_groups}",
    "train_batch_size": "${data.train_batch_size}",
    "max_response_length": "${data.max_response_length}",
}
SETTINGS_WHERE = "trainer.v1.sampler.sampler_kwargs"
MASK_FIELDS = ("response_mask", "loss_mask")
FULLY_MASKED_PREFIX = "training/masks/fully_masked"  # _batches, _trajectories: dropped and replaced (masking.py)
STALE_EVICTIONS = "training/off_policy/evicted_samples"  # verl's count of stale groups evicted in a draw


# ---- settings (sampler_kwargs) and the config check -----------------------------------------------------------------
@dataclasses.dataclass
class FilterGroups:
    """verl's ``algorithm.filter_groups`` (FilterGroupsConfig), as the sampler reads it."""

    enable: bool = False
    metric: str | None = None
    max_num_gen_batches: int = 0
    max_inflight_gen_batches: int = 1

    def __post_init__(self) -> None:
        if self.enable and not self.metric:
            raise ValueError("algorithm.filter_groups.metric must be set when filter_groups.enable is true")
        if self.max_num_gen_batches < 0 or self.max_inflight_gen_batches < 1:
            raise ValueError(
                f"algorithm.filter_groups: max_num_gen_batches must be ≥ 0 and max_inflight_gen_batches ≥ 1, got "
                f"{self.max_num_gen_batches} / {self.max_inflight_gen_batches}"
            )


@dataclasses.dataclass
class SamplerSettings:
    """``trainer.v1.sampler.sampler_kwargs`` of the agentrl replay buffers."""

    masks: MaskConfig = dataclasses.field(default_factory=MaskConfig)
    roc: roc.RoCConfig = dataclasses.field(default_factory=roc.RoCConfig)
    infra_guard: InfraGuardConfig = dataclasses.field(default_factory=InfraGuardConfig)  # ${agentrl.infra_guard}
    filter_groups: FilterGroups = dataclasses.field(default_factory=FilterGroups)
    train_batch_size: int | None = None
    max_response_length: int | None = None
    sync_refill_failed_groups: bool = False
    trajectory_dump: TrajectoryDumpConfig = dataclasses.field(default_factory=TrajectoryDumpConfig)
    # which trajectories share an update (algos/partition.py): released ([code] verl 0.5) | verl (0.9.1's)
    batch_partition: str = "verl"

    @classmethod
    def from_kwargs(cls, sampler_kwargs: Any) -> SamplerSettings:
        values = _to_plain(sampler_kwargs) or {}
        missing = [key for key in WIRING if key not in values]
        if missing:  # an unwired switch would silently do nothing
            wiring = ", ".join(f"{key}: {WIRING[key]}" for key in missing)
            raise ValueError(f"{SETTINGS_WHERE} lacks {missing}; wire them from their config home: {{{wiring}}}")
        settings = from_mapping(cls, values, where=SETTINGS_WHERE)
        settings.masks = MaskConfig.from_dict(_to_plain(settings.masks))
        settings.roc = roc.RoCConfig.from_dict(_to_plain(settings.roc))
        settings.infra_guard = InfraGuardConfig.from_dict(_to_plain(settings.infra_guard))
        settings.trajectory_dump = TrajectoryDumpConfig.from_dict(_to_plain(settings.trajectory_dump))
        groups = {k: v for k, v in (_to_plain(settings.filter_groups) or {}).items() if k != "_target_"}
        settings.filter_groups = from_mapping(FilterGroups, groups, where=f"{SETTINGS_WHERE}.filter_groups")
        if settings.batch_partition not in BATCH_PARTITIONS:
            raise ValueError(
                f"{SETTINGS_WHERE}.batch_partition must be one of {BATCH_PARTITIONS}, got {settings.batch_partition!r}"
            )
        if settings.filter_groups.enable and not settings.train_batch_size:
            raise ValueError(
                f"{SETTINGS_WHERE}.train_batch_size (${{data.train_batch_size}}) is required for filter_groups"
            )
        return settings


def _to_plain(value: Any) -> Any:
    if value is None or isinstance(
        value, MaskConfig | FilterGroups | roc.RoCConfig | InfraGuardConfig | TrajectoryDumpConfig
    ):
        return dataclasses.asdict(value) if value is not None else None
    value = to_plain(value)
    return dict(value) if isinstance(value, Mapping) else value


@dataclasses.dataclass
class _Configured:
    """What a trainer config sets in the config homes the sampler kwargs must be wired from."""

    masks: MaskConfig
    roc: roc.RoCConfig
    guard: InfraGuardConfig
    guard_set: bool  # only a config that sets agentrl.infra_guard is checked for its wiring
    groups: Mapping[str, Any]

    @classmethod
    def read(cls, cfg: Any) -> _Configured:
        recipe = resolve(cfg)
        return cls(
            masks=recipe.settings("masks"),
            roc=recipe.settings("roc"),
            guard=recipe.settings("infra_guard"),
            guard_set=bool(recipe.section("infra_guard")),
            groups=cfg.get("algorithm", {}).get("filter_groups", {}) or {},
        )

    def wants_sampler(self) -> bool:
        capped = self.groups.get("enable", False) and self.groups.get("max_num_gen_batches", 0) > 0
        return bool(self.masks.enabled) or self.roc.enable or (self.guard_set and self.guard.enable) or capped


def check_trainer_config(cfg: Any) -> list[str]:
    """Problems that would make a mask, RoC or the dynamic-sampling cap silently do nothing (empty list = fine)."""
    configured = _Configured.read(cfg)
    if not configured.wants_sampler():
        return []
    trainer = cfg.get("trainer", {})
    if not trainer.get("use_v1", True):
        return ["agentrl.masks and the dynamic-sampling cap need verl's v1 trainer (trainer.use_v1=true)"]
    sampler = trainer.get("v1", {}).get("sampler", {})
    custom = sampler.get("custom_sampler", {}) or {}
    mode = trainer.get("v1", {}).get("trainer_mode", "sync")
    expected = SYNC_SAMPLER if mode == "sync" else ASYNC_SAMPLER
    if custom.get("path") != SAMPLER_PATH or custom.get("name") != expected:
        return [
            f"agentrl.masks / filter_groups.max_num_gen_batches need trainer.v1.sampler.custom_sampler = "
            f"{{path: {SAMPLER_PATH}, name: {expected}}} (got {dict(custom)})"
        ]
    try:
        settings = SamplerSettings.from_kwargs(sampler.get("sampler_kwargs"))
    except (TypeError, ValueError) as err:
        return [f"{SETTINGS_WHERE}: {err}"]
    return _wiring_problems(settings, configured)


def _wiring_problems(settings: SamplerSettings, configured: _Configured) -> list[str]:
    """The sampler kwargs that differ from their config home (not interpolated from it)."""
    homes = {**WIRING, "roc": "${agentrl.roc}", "filter_groups.enable": WIRING["filter_groups"]}
    wired = {
        "masks": (settings.masks, configured.masks),
        "roc": (settings.roc, configured.roc),
        "filter_groups.enable": (settings.filter_groups.enable, bool(configured.groups.get("enable", False))),
    }
    if configured.guard_set:
        homes["infra_guard"] = "${agentrl.infra_guard}"
        wired["infra_guard"] = (settings.infra_guard, configured.guard)
    return [
        f"{SETTINGS_WHERE}.{key} does not match its config home; wire it as {homes[key]}"
        for key, (seen, home) in wired.items()
        if seen != home
    ]


def install_partition(refill_fn: Callable[[int], int] | None, partition: str) -> None:
    """Give the trainer that built this buffer (``refill_fn``'s owner, verl's ``_add_prompts_to_generate``) the
    ``batch_partition`` order (:mod:`agentrl_recipe.training.verl_adapters.balance_batch`)."""
    trainer = getattr(refill_fn, "__self__", None)
    if trainer is None:
        if partition == "released":
            raise ValueError(
                f"{SETTINGS_WHERE}.batch_partition released needs the trainer's refill_fn (verl passes it)"
            )
        return
    balance_batch.install(trainer, partition)


# ---- masks, RoC and the infra guard on a sampled batch (both buffers) ----------------------------------------------
def _response_tokens(batch: KVBatchMeta) -> list[int]:
    """Per trajectory: the response tokens the loss would count (``response_mask``) before any trajectory mask."""
    data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["response_mask"])
    return [int(row.sum()) for row in data["response_mask"].unbind()]


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


def _read_trajectories(batch: KVBatchMeta) -> tuple[list[dict], list[Any], list[int]]:
    """Per trajectory: its mask-relevant fields (:func:`trajectory_fields`), data source and response length."""
    data = tq.kv_batch_get(
        keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields", "data_source"]
    )
    records = [trajectory_fields(getattr(value, "data", value)) for value in data["extra_fields"]]
    data_sources = [getattr(value, "data", value) for value in data["data_source"]]
    lengths = [tag.get("response_len") for tag in batch.tags]
    if any(length is None for length in lengths):
        responses = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["responses"])
        lengths = responses["responses"].offsets().diff().tolist()
    return records, data_sources, lengths


@dataclasses.dataclass
class StepSamples:
    """The trained trajectories of one step and what the buffer decided for each, over its sample calls.

    verl's v1 trainer samples a step in ``parameter_sync_step`` mini-batches (separate_async: 2 on CPU, 4 in the GPU
    preset) and combines their metrics with ``MetricsAggregator``. The step's metrics are computed here over all of
    the step's trajectories: a count is the step's sum, a rate is recomputed from the step's numerator and
    denominator, a p50/p99 comes from the step's samples (:meth:`metrics`).
    """

    records: list[dict] = dataclasses.field(default_factory=list)
    data_sources: list[Any] = dataclasses.field(default_factory=list)
    lengths: list[int] = dataclasses.field(default_factory=list)
    tokens: list[int] = dataclasses.field(default_factory=list)  # response_mask tokens before masking
    masked: list[bool] = dataclasses.field(default_factory=list)  # finally masked (masks and RoC)
    roc_dropped: list[bool] = dataclasses.field(default_factory=list)
    roc_penalties: list[float] = dataclasses.field(default_factory=list)  # correct trajectories RoC chose among
    roc_kept_penalties: list[float] = dataclasses.field(default_factory=list)
    roc: bool = False

    def kept_tokens(self) -> int:
        """Loss tokens left after masking: 0 means verl would get a batch with no valid ``response_mask`` token."""
        return sum(t for t, is_masked in zip(self.tokens, self.masked, strict=True) if not is_masked)

    def extend(self, other: StepSamples) -> None:
        for field in dataclasses.fields(self):
            if field.name != "roc":
                getattr(self, field.name).extend(getattr(other, field.name))
        self.roc = self.roc or other.roc

    def metrics(self, settings: SamplerSettings) -> dict[str, float]:
        """The step metrics of these trajectories (``training/masks/*``, ``training/roc/*``, tools, sandbox, reward)."""
        result = compute_trajectory_masks(self.records, self.lengths, settings.max_response_length, settings.masks)
        out = result.metrics(prefix="training/masks")  # the masks' reasons; RoC's drops are in training/roc/*
        out.update(step_metrics(self.records, self.data_sources))  # tool, sandbox and per-source reward metrics
        n = max(len(self.records), 1)
        out[f"{INFRA_GUARD_PREFIX}/step_rate"] = sum(is_infra_failure(r) for r in self.records) / n
        out[f"{GRADER_ERROR_PREFIX}/step_rate"] = sum(bool(r.get(fields.GRADER_ERROR.column)) for r in self.records) / n
        if self.roc:
            out["training/roc/dropped_trajectories"] = float(sum(self.roc_dropped))
            out["training/roc/correct_penalty_mean"] = sum(self.roc_penalties) / max(len(self.roc_penalties), 1)
            kept = self.roc_kept_penalties
            out["training/roc/kept_correct_penalty_mean"] = sum(kept) / max(len(kept), 1)
        # verl's token-mean denominator (actor/loss_tokens_per_update × the step's updates) equals loss_tokens_kept:
        # that is what shows a masked trajectory left the mean
        out["training/masks/loss_tokens"] = float(sum(self.tokens))
        out["training/masks/loss_tokens_kept"] = float(self.kept_tokens())
        return out


def parameter_sync_steps(trainer_config: Any) -> int:
    """Sample calls per training step: verl's ``PPOTrainer.parameter_sync_step``, read as trainer_base.py reads it.

    verl hands a replay buffer ``trainer_config = config.trainer.v1.<trainer_mode>`` (the mode's own section).
    """
    return int((trainer_config or {}).get("parameter_sync_step", 1))


class FullyMaskedBatches(RuntimeError):
    """The masks took every trajectory of more batches in a row than ``agentrl.masks.max_fully_masked_batches``."""


@dataclasses.dataclass
class FullyMaskedStreak:
    """Sampled batches whose every trajectory was masked, one after the other (reset by a batch with loss tokens)."""

    batches: int = 0
    trajectories: int = 0
    flagged: Counter = dataclasses.field(default_factory=Counter)  # enabled mask -> trajectories it flagged
    roc_dropped: int = 0

    def add(self, samples: StepSamples, settings: SamplerSettings) -> None:
        lengths, limit = samples.lengths, settings.max_response_length
        result = compute_trajectory_masks(samples.records, lengths, limit, settings.masks)
        self.batches += 1
        self.trajectories += len(samples.records)
        self.flagged.update({reason: sum(result.flagged.get(reason, ())) for reason in settings.masks.enabled})
        self.roc_dropped += sum(samples.roc_dropped)

    def describe(self) -> str:
        masks = ", ".join(f"{reason} {count}" for reason, count in self.flagged.items()) or "none on"
        roc = f"; RoC dropped {self.roc_dropped}" if self.roc_dropped else ""
        return f"{self.trajectories} trajectories; flagged by {masks}{roc}"


class MaskingMixin:
    """Applies :mod:`agentrl_recipe.training.algos.masking` (and RoC, and the infra guard) to a sampled training batch.

    Each sample call masks its own mini-batch at once; the step's metrics (:class:`StepSamples`) are returned by the
    step's last sample call, except counts, which every call returns as ``Metric(SUM)`` of its own trajectories for
    verl's ``MetricsAggregator`` to sum (with :mod:`agentrl_recipe.training.verl_adapters.metrics_aggregator`). A batch
    the masks take whole is dropped and replaced (:meth:`_sample_masked`; ``agentrl.masks.max_fully_masked_batches``).
    """

    settings: SamplerSettings
    _infra_guard: InfraGuard
    _grader_error_guard: GraderErrorGuard
    _calls_per_step: int
    _step: StepSamples | None
    _step_id: int | None
    _step_calls: int
    _fully_masked: FullyMaskedStreak
    _trajectory_dump: TrajectoryDump

    def _load_settings(self, sampler_kwargs: Any, trainer_config: Any) -> SamplerSettings:
        metrics_aggregator.apply()  # this process runs verl's MetricsAggregator over what sample() returns
        self.settings = SamplerSettings.from_kwargs(sampler_kwargs)
        self._infra_guard = InfraGuard(self.settings.infra_guard)
        self._grader_error_guard = GraderErrorGuard(self.settings.infra_guard)
        self._calls_per_step = parameter_sync_steps(trainer_config)
        self._step, self._step_id, self._step_calls = None, None, 0
        self._fully_masked = FullyMaskedStreak()
        self._trajectory_dump = TrajectoryDump(self.settings.trajectory_dump)
        return self.settings

    def _replacement_refill(self) -> Callable[[int], int] | None:
        """The trainer's function that submits fresh prompts, to replace a dropped batch's groups."""
        raise NotImplementedError

    def _sample_masked(
        self, draw: Callable[[], tuple[KVBatchMeta, dict]], global_steps: int
    ) -> tuple[KVBatchMeta, dict]:
        """``draw()`` (verl's sampling) until a batch keeps a loss token, then that batch masked, with the metrics.

        A batch the masks and RoC take whole is dropped: its trajectories leave TransferQueue, as many fresh prompts
        are submitted, and the next batch is drawn (verl's eviction metrics of every draw are kept). More than
        ``agentrl.masks.max_fully_masked_batches`` such batches in a row stop the run (:class:`FullyMaskedBatches`).
        """
        evictions: dict = {}
        dropped_batches = dropped_trajectories = 0
        while True:
            batch, metrics = draw()
            if batch.partition_id == "val" or not batch.keys:
                return batch, metrics
            samples, guards = self._decide(batch, global_steps)
            if samples.kept_tokens() > 0:
                break
            self._drop_fully_masked(batch, samples)
            dropped_batches, dropped_trajectories = dropped_batches + 1, dropped_trajectories + len(batch.keys)
            accumulate_eviction_metrics(evictions, metrics, int(metrics.get(STALE_EVICTIONS, 0)))
        self._fully_masked = FullyMaskedStreak()
        accumulate_eviction_metrics(evictions, metrics, int(metrics.get(STALE_EVICTIONS, 0)))
        evictions.update(self._commit(batch, samples, guards, global_steps))
        evictions[f"{FULLY_MASKED_PREFIX}_batches"] = Metric(AggregationType.SUM, float(dropped_batches))
        evictions[f"{FULLY_MASKED_PREFIX}_trajectories"] = Metric(AggregationType.SUM, float(dropped_trajectories))
        return batch, evictions

    def _drop_fully_masked(self, batch: KVBatchMeta, samples: StepSamples) -> None:
        """Drop a batch the masks took whole and submit as many prompts; stop the run past the bound."""
        streak, limit = self._fully_masked, self.settings.masks.max_fully_masked_batches
        streak.add(samples, self.settings)
        refill = self._replacement_refill()
        uids = {key.split("_")[0] for key in batch.keys}
        if streak.batches > limit or refill is None:
            why = f"more than agentrl.masks.max_fully_masked_batches={limit}"
            if refill is None:
                why = "and no refill function to replace them"
            raise FullyMaskedBatches(
                f"agentrl.masks: every trajectory of {streak.batches} sampled batches in a row was masked "
                f"({streak.describe()}), {why}: nothing is left to train on — the masks take all the policy makes; "
                "fix what they flag or turn one off (training/masks/*_ratio)"
            )
        logger.warning(
            "[agentrl] every trajectory of a sampled batch was masked (%s): dropped, %d prompts submitted in its place "
            "(%d of agentrl.masks.max_fully_masked_batches=%d in a row)",
            streak.describe(),
            len(uids),
            streak.batches,
            limit,
        )
        tq.kv_clear(keys=batch.keys, partition_id=batch.partition_id)
        refill(len(uids))

    def _decide(self, batch: KVBatchMeta, global_steps: int) -> tuple[StepSamples, dict[str, float]]:
        """What the masks, RoC and the guards decide for a sampled batch (TransferQueue untouched)."""
        records, data_sources, lengths = _read_trajectories(batch)
        result = compute_trajectory_masks(records, lengths, self.settings.max_response_length, self.settings.masks)
        samples = StepSamples(records=records, data_sources=data_sources, lengths=lengths, masked=list(result.masked))
        guards = self._infra_guard.observe(records, global_steps)  # raises when the sandbox fails too often
        guards.update(self._grader_error_guard.observe(records, global_steps))  # raises when grading raises too often
        if self.settings.roc.enable:
            self._apply_roc(batch, samples)
        samples.tokens = _response_tokens(batch)
        return samples, guards

    def _commit(
        self, batch: KVBatchMeta, samples: StepSamples, guards: dict[str, float], global_steps: int
    ) -> dict[str, Any]:
        """Zero the masked trajectories' masks in TransferQueue; this call's counts, and the step's metrics when it
        is the step's last call."""
        if self.settings.trajectory_dump.wants(global_steps):  # before the masks zero response_mask
            s = self.settings
            flags = compute_trajectory_masks(samples.records, samples.lengths, s.max_response_length, s.masks).flagged
            self._trajectory_dump.write(batch, samples.records, samples.masked, flags, global_steps)
        _zero_masks(batch, samples.masked)
        out: dict[str, Any] = {
            key: Metric(AggregationType.SUM, value)
            for key, value in samples.metrics(self.settings).items()
            if is_count(key)
        }
        step = self._collect(samples, global_steps)
        if step is not None:
            out.update({key: v for key, v in step.metrics(self.settings).items() if not is_count(key)})
            out.update({key: v for key, v in guards.items() if key.endswith("/window_rate")})
        return out

    def _collect(self, samples: StepSamples, global_steps: int) -> StepSamples | None:
        """Add a sample call's trajectories to its step; the whole step once its last call is in, else None."""
        if self._step is None or self._step_id != global_steps:
            if self._step is not None:  # a step whose metrics were never reported: they would be wrong or missing
                raise RuntimeError(
                    f"step {self._step_id} was sampled in {self._step_calls} calls, not parameter_sync_step="
                    f"{self._calls_per_step}; its metrics cannot be reported"
                )
            self._step, self._step_id, self._step_calls = StepSamples(), global_steps, 0
        self._step.extend(samples)
        self._step_calls += 1
        if self._step_calls < self._calls_per_step:
            return None
        step, self._step, self._step_id = self._step, None, None
        return step

    def _roc_values(self, batch: KVBatchMeta, records: list[dict]) -> list[float]:
        """Each trajectory's value in ``agentrl.roc.metric`` (> 0: correct)."""
        metric = self.settings.roc.metric
        if metric == "reward":
            scores = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["rm_scores"])
            return [float(row.sum()) for row in scores["rm_scores"].unbind()]
        missing = [key for key, record in zip(batch.keys, records, strict=True) if metric not in record]
        if missing:
            raise ValueError(f"agentrl.roc.metric {metric!r} missing from reward_extra_info of {missing[:3]}")
        return [float(record[metric]) for record in records]

    def _apply_roc(self, batch: KVBatchMeta, samples: StepSamples) -> None:
        """Resample-on-Correct among the unmasked trajectories; marks the dropped ones in ``samples.masked``."""
        records, masked = samples.records, samples.masked
        values = self._roc_values(batch, records)
        rows = [row for row, is_masked in enumerate(masked) if not is_masked]
        uids = [batch.keys[row].split("_")[0] for row in rows]
        kept = roc.select(uids, [values[row] > 0 for row in rows], [records[row] for row in rows], self.settings.roc)
        samples.roc = True
        samples.roc_penalties = [roc.penalty(records[row]) for row in rows if values[row] > 0]
        samples.roc_kept_penalties = [
            roc.penalty(records[row]) for row, k in zip(rows, kept, strict=True) if k and values[row] > 0
        ]
        samples.roc_dropped = [not k for k in kept]
        for row, k in zip(rows, kept, strict=True):
            masked[row] = masked[row] or not k


# ---- the sync buffer: dynamic sampling with the max_num_gen_batches cap ---------------------------------------------
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
        settings = self._load_settings(sampler_kwargs, trainer_config)
        install_partition(refill_fn, settings.batch_partition)
        groups = settings.filter_groups
        metric = groups.metric if groups.enable else None
        self._trainer_refill = refill_fn
        # the arguments verl's PPOTrainer gives its built-in sync buffer (but not a custom sampler)
        kwargs.update(
            sync_buffer_kwargs(
                filter_groups_metric=metric,
                sync_refill_failed_groups=settings.sync_refill_failed_groups,
                train_batch_size=settings.train_batch_size,
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

    def _start_step(self, training: bool) -> None:
        """A fresh generation budget: ``max_num_gen_batches - 1`` refill batches after the first."""
        self._cap_reached = False
        self._refilled = 0
        self._refill_budget = None
        self._evictions = {}
        if training and self.max_num_gen_batches > 0:
            assert self.train_batch_size is not None
            self._refill_budget = (self.max_num_gen_batches - 1) * self.train_batch_size

    def _draw(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """verl's sync sampling under a fresh generation budget (the short batch at the cap)."""
        self._start_step(partition_id != "val")
        try:
            return super().sample(global_steps=global_steps, partition_id=partition_id, batch_size=batch_size)
        except _CapReached:
            return self._short_batch(global_steps, partition_id, batch_size)

    def _replacement_refill(self) -> Callable[[int], int] | None:
        return self._trainer_refill  # outside the DAPO budget: a replaced batch starts a fresh one (_draw)

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """verl's sync sampling under this step's generation budget, then the trajectory masks (a batch the masks take
        whole is replaced by a freshly generated one: :meth:`MaskingMixin._sample_masked`)."""
        trace.mark(type(self).__name__)
        if partition_id == "val":
            return self._draw(global_steps, partition_id, batch_size)
        batch, metrics = self._sample_masked(lambda: self._draw(global_steps, partition_id, batch_size), global_steps)
        if self.filter_groups_metric is not None:  # of the batch trained on (its last generation budget)
            metrics.update(self._filter_groups_metrics(partition_id, batch, batch_size))
        return batch, metrics


# ---- the async buffer ------------------------------------------------------------------------------------------------
class AgentRLReplayBufferAsync(MaskingMixin, ReplayBufferAsync):
    """verl's async ReplayBuffer + trajectory masks (``trainer.v1.trainer_mode`` colocate_async / separate_async).

    Only verl's public constructor and ``sample`` are used. Async DAPO in verl refills exactly one prompt per evicted
    group, absorbed by the warm-up window; the ``max_num_gen_batches`` cap is sync-only and is rejected here rather
    than ignored.
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
        settings = self._load_settings(sampler_kwargs, trainer_config)
        install_partition(refill_fn, settings.batch_partition)
        groups = settings.filter_groups
        if groups.enable and groups.max_num_gen_batches > 0:
            raise ValueError(
                "algorithm.filter_groups.max_num_gen_batches caps sync dynamic sampling only; set it to 0 for "
                f"trainer.v1.trainer_mode={trainer_mode!r}"
            )
        kwargs.update(
            async_buffer_kwargs(
                filter_groups_metric=groups.metric if groups.enable else None,
                sync_refill_failed_groups=settings.sync_refill_failed_groups,
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

    def _replacement_refill(self) -> Callable[[int], int] | None:
        return self.refill_fn  # one prompt per dropped group, as verl's async eviction refills

    def sample(self, global_steps: int, partition_id: str, batch_size: int) -> tuple[KVBatchMeta, dict]:
        """verl's async sampling, then the trajectory masks (a mini-batch the masks take whole is replaced:
        :meth:`MaskingMixin._sample_masked`)."""
        trace.mark(type(self).__name__)

        def draw() -> tuple[KVBatchMeta, dict]:
            return ReplayBufferAsync.sample(
                self, global_steps=global_steps, partition_id=partition_id, batch_size=batch_size
            )

        return self._sample_masked(draw, global_steps)
