"""The samplers' settings (``trainer.v1.sampler.sampler_kwargs``) and the config check that they are wired.

:class:`SamplerSettings` is what :mod:`agentrl_recipe.algos.sampler`'s replay buffers read from their
``sampler_kwargs``; every value is interpolated from its one config home (:data:`WIRING`), and a missing one is an
error, since an unwired switch would silently do nothing. :func:`check_trainer_config` (``configs check``) reports a
config whose masks, RoC, infra guard or dynamic-sampling cap would not reach the sampler.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentrl_recipe.algos import roc
from agentrl_recipe.algos.infra_guard import InfraGuardConfig
from agentrl_recipe.algos.masking import MaskConfig
from agentrl_recipe.config import from_mapping, section, to_plain

SAMPLER_PATH = "pkg://agentrl_recipe.algos.sampler"
SYNC_SAMPLER = "AgentRLReplayBuffer"
ASYNC_SAMPLER = "AgentRLReplayBufferAsync"

# sampler_kwargs key -> the config value it must be interpolated from. Optional: roc (RoC stays off without it;
# `configs check` reports an agentrl.roc that is on but not wired) and sync_refill_failed_groups.
WIRING = {
    "masks": "${agentrl.masks}",
    "filter_groups": "${algorithm.filter_groups}",
    "train_batch_size": "${data.train_batch_size}",
    "max_response_length": "${data.max_response_length}",
}


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
    """``trainer.v1.sampler.sampler_kwargs`` of the agentrl samplers (see :mod:`agentrl_recipe.algos.sampler`)."""

    masks: MaskConfig = dataclasses.field(default_factory=MaskConfig)
    roc: roc.RoCConfig = dataclasses.field(default_factory=roc.RoCConfig)
    infra_guard: InfraGuardConfig = dataclasses.field(default_factory=InfraGuardConfig)  # ${agentrl.infra_guard}
    filter_groups: FilterGroups = dataclasses.field(default_factory=FilterGroups)
    train_batch_size: int | None = None
    max_response_length: int | None = None
    sync_refill_failed_groups: bool = False

    @classmethod
    def from_kwargs(cls, sampler_kwargs: Any) -> SamplerSettings:
        values = _to_plain(sampler_kwargs) or {}
        where = "trainer.v1.sampler.sampler_kwargs"
        missing = [key for key in WIRING if key not in values]
        if missing:  # an unwired switch would silently do nothing
            wiring = ", ".join(f"{key}: {WIRING[key]}" for key in missing)
            raise ValueError(f"{where} lacks {missing}; wire them from their config home: {{{wiring}}}")
        settings = from_mapping(cls, values, where=where)
        settings.masks = MaskConfig.from_dict(_to_plain(settings.masks))
        settings.roc = roc.RoCConfig.from_dict(_to_plain(settings.roc))
        settings.infra_guard = InfraGuardConfig.from_dict(_to_plain(settings.infra_guard))
        groups = {k: v for k, v in (_to_plain(settings.filter_groups) or {}).items() if k != "_target_"}
        settings.filter_groups = from_mapping(FilterGroups, groups, where=f"{where}.filter_groups")
        if settings.filter_groups.enable and not settings.train_batch_size:
            raise ValueError(f"{where}.train_batch_size (${{data.train_batch_size}}) is required for filter_groups")
        return settings


def _to_plain(value: Any) -> Any:
    if value is None or isinstance(value, MaskConfig | FilterGroups | roc.RoCConfig | InfraGuardConfig):
        return dataclasses.asdict(value) if value is not None else None
    value = to_plain(value)
    return dict(value) if isinstance(value, Mapping) else value


def check_trainer_config(cfg: Any) -> list[str]:
    """Problems that would make a mask, RoC or the dynamic-sampling cap silently do nothing (empty list = fine)."""
    masks = MaskConfig.from_trainer_config(cfg)
    roc_config = roc.RoCConfig.from_dict(section(cfg, "roc"))
    guard_values = section(cfg, "infra_guard")  # only a config that sets it is checked for its wiring
    guard = InfraGuardConfig.from_dict(guard_values)
    groups = cfg.get("algorithm", {}).get("filter_groups", {}) or {}
    wants_sampler = (
        bool(masks.enabled)
        or roc_config.enable
        or bool(guard_values and guard.enable)
        or (groups.get("enable", False) and groups.get("max_num_gen_batches", 0) > 0)
    )
    if not wants_sampler:
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
        return [f"trainer.v1.sampler.sampler_kwargs: {err}"]
    homes = {**WIRING, "roc": "${agentrl.roc}", "filter_groups.enable": WIRING["filter_groups"]}
    wired = {
        "masks": (settings.masks, masks),
        "roc": (settings.roc, roc_config),
        "filter_groups.enable": (settings.filter_groups.enable, bool(groups.get("enable", False))),
    }
    if guard_values:
        homes["infra_guard"] = "${agentrl.infra_guard}"
        wired["infra_guard"] = (settings.infra_guard, guard)
    return [
        f"trainer.v1.sampler.sampler_kwargs.{key} does not match its config home; wire it as {homes[key]}"
        for key, (seen, configured) in wired.items()
        if seen != configured
    ]
