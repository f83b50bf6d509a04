"""The plugin's own config namespace, ``agentrl.*``, next to verl's keys in the same hydra config.

verl's dataclass configs reject unknown fields and its DictConfig sections merge unknown keys silently, so the
plugin keeps its settings in one top-level ``agentrl:`` block whose every key is a field of a dataclass below.
``agentrl-recipe configs check`` validates a config's ``agentrl`` block against :data:`SECTIONS`, and its one scalar
key, ``agentrl.compat: open_agentrl | agentrl`` (default agentrl): ``open_agentrl`` reproduces the released
Open-AgentRL code's behaviour (the paper-run configs), ``agentrl`` turns on this recipe's fixes (the ``*_fixed``
presets). It sets the defaults of the reward, tool and agent-loop behaviour keys; the table is in
:mod:`agentrl_recipe.core.compat`.

Each component reads its section with :func:`section` (e.g. ``SandboxConfig.from_trainer_config(cfg)``).
Environment variables override config values where noted, so one value set for a whole Ray cluster reaches the
rollout tool and the code reward alike.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from agentrl_recipe.core import names

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


@dataclasses.dataclass
class SandboxConfig:
    """``agentrl.sandbox``: where and how model-written code runs (tool calls, code rewards, data prep, eval).

    One block serves the rollout tool and the code reward — never two places. ``AGENTRL_SANDBOX_URL`` (when set)
    overrides ``url`` and selects the ``sandbox_fusion`` backend; ``AGENTRL_SANDBOX_BACKEND`` overrides ``backend``.
    """

    backend: str = "local"  # local (bubblewrap pool, default) | sandbox_fusion (HTTP client) | subprocess (debug only)
    # SandboxFusion-compatible endpoint(s), e.g. http://node:8080, or a list / comma-separated string of several:
    # the client spreads calls by least outstanding requests and takes failing servers out (backend=sandbox_fusion).
    url: str | list[str] | tuple[str, ...] | None = None
    # local pool: runs at once per process. None = this node's CPUs / the sandbox-using processes on it (the launcher
    # exports both, with this value, to every worker: AGENTRL_SANDBOX_POOL_SIZE / AGENTRL_SANDBOX_PROCESSES_PER_NODE).
    pool_size: int | None = None
    timeout_s: float = 30.0  # paper/tool: 30 s per call
    memory_mb: int = 2048  # paper/tool: 2 GB
    max_output_bytes: int = 1 << 20  # stdout/stderr kept per stream; the rest is dropped and status says so
    max_concurrency: int = 64  # in-flight requests per process (client and pool queue)
    retries: int = 3  # sandbox_fusion client: retries on connection errors / 5xx
    request_deadline_s: float = 120.0  # sandbox_fusion client: total deadline per call, retries included
    # sandbox_fusion client, our additions (the paper and the released code had one open server): the shared token of
    # `agentrl-recipe sandbox serve --token-file`, given here, in `token_file`, or in env AGENTRL_SANDBOX_TOKEN.
    token: str | None = None
    token_file: str | None = None
    health_interval_s: float = 2.0  # how often a server taken out of the fleet is pinged (/v1/ping) to re-admit it

    def __post_init__(self) -> None:
        if isinstance(self.url, list | tuple):  # OmegaConf lists arrive as lists; a tuple keeps the config hashable
            self.url = tuple(str(u) for u in self.url)

    @property
    def urls(self) -> list[str]:
        """Every server URL (a list, or one comma-separated string), without trailing slashes."""
        raw = self.url.split(",") if isinstance(self.url, str) else list(self.url or ())
        return [u.strip().rstrip("/") for u in raw if u.strip()]

    def resolve_token(self) -> str | None:
        """The shared token: ``token``, else the content of ``token_file`` (stripped), else None."""
        if self.token:
            return self.token
        if self.token_file:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
            if not token:
                raise ValueError(f"agentrl.sandbox.token_file {self.token_file} is empty")
            return token
        return None

    @classmethod
    def from_trainer_config(cls, trainer_config: Any) -> SandboxConfig:
        return cls.from_dict(section(trainer_config, "sandbox"))

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> SandboxConfig:
        cfg = from_mapping(cls, values, where=f"{names.CONFIG_NAMESPACE}.sandbox")
        return cfg.with_env_overrides()

    def with_env_overrides(self) -> SandboxConfig:
        env_url = os.environ.get(names.ENV_SANDBOX_URL)
        backend = os.environ.get(names.ENV_SANDBOX_BACKEND) or ("sandbox_fusion" if env_url else self.backend)
        token = os.environ.get(names.ENV_SANDBOX_TOKEN) or self.token
        pool_size = int(os.environ.get(names.ENV_SANDBOX_POOL_SIZE) or 0) or self.pool_size
        return dataclasses.replace(self, url=env_url or self.url, backend=backend, token=token, pool_size=pool_size)


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
        "sandbox": "agentrl_recipe.core.config:SandboxConfig",
        "masks": "agentrl_recipe.core.algos.masking:MaskConfig",
        "roc": "agentrl_recipe.core.algos.roc:RoCConfig",
        "infra_guard": "agentrl_recipe.core.algos.infra_guard:InfraGuardConfig",
        "agent_loop": "agentrl_recipe.core.agent_loop_config:AgentLoopSettings",
    }
)
