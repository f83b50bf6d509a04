"""The plugin's own config namespace, ``agentrl.*``, next to verl's keys in the same hydra config.

verl's dataclass configs reject unknown fields and its DictConfig sections merge unknown keys silently, so the
plugin keeps its settings in one top-level ``agentrl:`` block whose every key is a field of a dataclass below.
``agentrl-recipe configs check`` validates a config's ``agentrl`` block against :data:`SECTIONS`, and its one scalar
key, ``agentrl.compat: open_agentrl | agentrl`` (default agentrl): ``open_agentrl`` reproduces the released
Open-AgentRL code's behaviour (the paper-run configs), ``agentrl`` turns on this recipe's fixes (the ``*_fixed``
presets). It sets the defaults of the reward, tool and agent-loop behaviour keys; the table is in
:mod:`agentrl_recipe.training.compat`.

Each component reads its section with :func:`section` (e.g. ``RewardKwargs.from_trainer_config(cfg)``).
Environment variables override config values where noted, so one value set for a whole Ray cluster reaches the
rollout tool and the code reward alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeVar

from agentrl_recipe import names
from agentrl_sandbox.config import REDACTED, SECRET_KEYS, SandboxConfig

T = TypeVar("T")


def section(trainer_config: Any, name: str) -> dict[str, Any]:
    """Return ``trainer_config.agentrl.<name>`` as a plain dict ({} when absent). Accepts DictConfig or dict."""
    if trainer_config is None:
        return {}
    root = trainer_config.get(names.CONFIG_NAMESPACE) if hasattr(trainer_config, "get") else None
    if root is None:
        return {}
    value = root.get(name) if hasattr(root, "get") else None
    return {} if value is None else dict(to_plain(value))


def to_plain(value: Any) -> Any:
    """An OmegaConf node resolved to plain dicts/lists; any other value unchanged."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def from_mapping(cls: type[T], values: Mapping[str, Any] | None, *, where: str) -> T:
    """Build dataclass ``cls`` from ``values``, failing loudly on unknown keys (``where`` names the config path)."""
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; valid keys: {sorted(known)}")
    return cls(**values)


def sandbox_config(trainer_config: Any) -> SandboxConfig:
    """``agentrl.sandbox`` of a trainer config, environment overrides applied: one block for tool and reward."""
    return SandboxConfig.from_dict(section(trainer_config, "sandbox"))


def redacted(trainer_config: Any, *, resolve: bool = False) -> Any:
    """A copy of a trainer config to print: every set ``agentrl.sandbox`` secret (``token``) shown as ``'***'``."""
    from omegaconf import OmegaConf  # as in to_plain: this module stays cheap to import

    plain = OmegaConf.to_container(trainer_config, resolve=resolve)
    sandbox = (plain.get(names.CONFIG_NAMESPACE) or {}).get("sandbox") if isinstance(plain, dict) else None
    if isinstance(sandbox, dict):
        sandbox.update({k: REDACTED for k in SECRET_KEYS if sandbox.get(k)})
    return OmegaConf.create(plain)


# Section name -> dataclass, for `configs check`. Components add their section here when they define one.
class _LazySections(Mapping):
    """Section name -> dataclass, resolved on first access so this module stays cheap to import (the algos
    package imports verl, and verl imports the plugin)."""

    def __init__(self, paths: dict[str, str]) -> None:
        self._paths = paths

    def __getitem__(self, name: str) -> type:
        import importlib

        module, _, attr = self._paths[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def __iter__(self):
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


SECTIONS: Mapping[str, type] = _LazySections(
    {
        "sandbox": "agentrl_sandbox.config:SandboxConfig",
        "masks": "agentrl_recipe.training.algos.masking:MaskConfig",
        "roc": "agentrl_recipe.training.algos.roc:RoCConfig",
        "infra_guard": "agentrl_recipe.training.algos.infra_guard:InfraGuardConfig",
        "agent_loop": "agentrl_recipe.training.agent_loop.settings:AgentLoopSettings",
    }
)
