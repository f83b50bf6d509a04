"""The trainer config's ``agentrl:`` block, resolved once per process into one :class:`RecipeConfig`.

verl's dataclass configs reject unknown fields and its DictConfig sections merge unknown keys silently, so the
plugin keeps its settings in one top-level ``agentrl:`` block whose every key is a field of a dataclass
(:data:`SECTIONS`, validated by ``agentrl-recipe configs check``), and one scalar key, ``agentrl.compat:
open_agentrl | agentrl`` (:mod:`agentrl_recipe.training.compat`).

Every component that sees the whole trainer config (the agent loop, the reward manager, the replay buffer) calls
:func:`resolve` and gets the same frozen object; the loop hands it to the tools (``use_recipe``), whose YAML is loaded
apart from the trainer config. The two components verl hands one section only (the loss: the actor's config; the
dataset: ``data``) read concrete values that the ``${agentrl_compat:KEY}`` resolver (:func:`compat_resolver`,
registered by the plugin) writes into their section when verl resolves the config. :meth:`RecipeConfig.behaviour` is
the one place a behaviour key meets ``agentrl.compat``.

The sandbox block goes through :meth:`SandboxConfig.from_dict` here only, so the tool and the code reward of a process
share one :class:`SandboxConfig` (and, through ``get_sandbox``, one pool).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from agentrl_recipe import names
from agentrl_recipe.training import compat
from agentrl_sandbox.config import REDACTED, SECRET_KEYS, SandboxConfig

T = TypeVar("T")
SANDBOX_ENV_PREFIX = "AGENTRL_SANDBOX_"  # the environment variables agentrl_sandbox.config reads


@dataclasses.dataclass(frozen=True)
class RecipeConfig:
    """``agentrl.*`` of one trainer config: the compat mode, the sandbox, and the plain sections."""

    compat: str = compat.DEFAULT_MODE
    sandbox: SandboxConfig = dataclasses.field(default_factory=lambda: SandboxConfig.from_dict({}))
    sections: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        compat.check_mode(self.compat)

    def behaviour(self, key: str, value: Any = None) -> Any:
        """``value`` when set, else the value :attr:`compat` gives behaviour ``key`` (the compat table)."""
        return compat.default(key, value, self.compat)

    def section(self, name: str) -> dict[str, Any]:
        """``agentrl.<name>`` as a plain dict ({} when absent)."""
        return dict(self.sections.get(name) or {})

    def settings(self, name: str) -> Any:
        """``agentrl.<name>`` built into its dataclass (:data:`SECTIONS`), unknown keys refused."""
        return _settings(self, name)

    @classmethod
    def from_block(cls, block: Mapping[str, Any] | None) -> RecipeConfig:
        block = dict(block or {})
        mode = block.pop("compat", None)
        sandbox = SandboxConfig.from_dict(block.get("sandbox"))  # the section stays: section("sandbox") = as written
        return dataclasses.replace(cls.for_mode(mode), sandbox=sandbox, sections=block)

    @classmethod
    def for_mode(cls, mode: str | None) -> RecipeConfig:
        """The defaults of compat ``mode`` (None: the default mode), nothing else set: the one place a missing
        ``agentrl.compat`` is defaulted."""
        return cls(compat=compat.DEFAULT_MODE if mode is None else mode)


@functools.lru_cache(maxsize=32)
def _from_json(block_json: str, sandbox_env: tuple[tuple[str, str], ...]) -> RecipeConfig:
    del sandbox_env  # part of the cache key: SandboxConfig.from_dict applies the AGENTRL_SANDBOX_* overrides
    return RecipeConfig.from_block(json.loads(block_json))


def _settings(recipe: RecipeConfig, name: str) -> Any:
    cls = SECTIONS[name]
    build = getattr(cls, "from_dict", None)  # a section whose dataclass converts or validates its own mapping
    where = f"{names.CONFIG_NAMESPACE}.{name}"
    settings = build(recipe.section(name)) if build else from_mapping(cls, recipe.section(name), where=where)
    resolve_behaviours = getattr(settings, "with_behaviours", None)  # sections with compat-defaulted keys
    return resolve_behaviours(recipe) if resolve_behaviours is not None else settings


def resolve(trainer_config: Any) -> RecipeConfig:
    """The :class:`RecipeConfig` of a trainer config (DictConfig or dict); the same object for the same block."""
    block = block_of(trainer_config)
    sandbox_env = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith(SANDBOX_ENV_PREFIX)))
    return _from_json(json.dumps(block, sort_keys=True, default=str), sandbox_env)


def standalone() -> RecipeConfig:
    """What a component uses without a trainer config (a tool under verl's stock loop, eval, tests)."""
    return resolve(None)


def block_of(trainer_config: Any) -> dict[str, Any]:
    """``trainer_config.agentrl`` as a plain dict ({} when absent)."""
    root = trainer_config.get(names.CONFIG_NAMESPACE) if hasattr(trainer_config, "get") else None
    return dict(to_plain(root)) if root is not None else {}


def section(trainer_config: Any, name: str) -> dict[str, Any]:
    """``trainer_config.agentrl.<name>`` as a plain dict ({} when absent)."""
    return resolve(trainer_config).section(name)


def compat_resolver(key: str, *, _root_: Any) -> Any:
    """``${agentrl_compat:KEY}``: the value the config's ``agentrl.compat`` gives behaviour ``KEY``, for the sections
    verl hands a component alone (the loss, the dataset)."""
    mode = _root_.get(names.CONFIG_NAMESPACE, {}).get("compat") if hasattr(_root_, "get") else None
    return RecipeConfig.for_mode(mode).behaviour(key)


def to_plain(value: Any) -> Any:
    """An OmegaConf node resolved to plain dicts/lists; any other value unchanged."""
    from omegaconf import OmegaConf  # this module stays cheap to import: verl's workers load the plugin

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def from_mapping(cls: type[T], values: Mapping[str, Any] | None, *, where: str) -> T:
    """Build dataclass ``cls`` from ``values``, failing loudly on unknown keys (``where`` names the config path)."""
    values = dict(values or {})
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown} in {where}; valid keys: {sorted(known)}")
    return cls(**values)


def redacted(trainer_config: Any, *, resolve: bool = False) -> Any:
    """A copy of a trainer config to print: every set ``agentrl.sandbox`` secret (``token``) shown as ``'***'``."""
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(trainer_config, resolve=resolve)
    sandbox = (plain.get(names.CONFIG_NAMESPACE) or {}).get("sandbox") if isinstance(plain, dict) else None
    if isinstance(sandbox, dict):
        sandbox.update({k: REDACTED for k in SECRET_KEYS if sandbox.get(k)})
    return OmegaConf.create(plain)


class _LazySections(Mapping[str, type]):
    """Section name -> dataclass, imported on first access (the algos package imports verl, which loads the plugin)."""

    def __init__(self, paths: dict[str, str]) -> None:
        self._paths = paths

    def __getitem__(self, name: str) -> type:
        module, _, attr = self._paths[name].partition(":")
        return getattr(importlib.import_module(module), attr)

    def __iter__(self) -> Iterator[str]:
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
        "trajectory_dump": "agentrl_recipe.training.trajectory_dump:TrajectoryDumpConfig",
    }
)
