"""verl's in-worker rollout classes: ``verl.workers.rollout.base._ROLLOUT_REGISTRY`` (private, no register function).

``ActorRolloutRefWorker.init_model`` (``verl/workers/engine_workers.py``) and ``CheckpointEngineWorker``
(``verl/checkpoint_engine/base.py``) build the in-worker side of a rollout with
``get_rollout_class(rollout.name, rollout.mode)``, which looks ``(name, mode)`` up in that dict as a class path.
This module is the only place the plugin writes to it.
"""

from __future__ import annotations

from verl.workers.rollout import base as rollout_base

SYMBOL = "verl.workers.rollout.base._ROLLOUT_REGISTRY"
MODE = "async"  # verl 0.9.1's only rollout mode (server mode)


def _registry() -> dict[tuple[str, str], str]:
    registry = getattr(rollout_base, "_ROLLOUT_REGISTRY", None)
    if not isinstance(registry, dict) or ("vllm", MODE) not in registry:
        raise RuntimeError(f"{SYMBOL} is gone or changed shape in this verl; agentrl_recipe cannot register a rollout")
    return registry


def register_rollout_class(name: str, class_path: str) -> None:
    """Make ``get_rollout_class(name, "async")`` return the class at ``class_path`` (``module.Class``); idempotent."""
    registry = _registry()
    existing = registry.get((name, MODE))
    if existing is not None and existing != class_path:
        raise ValueError(f"rollout {name!r} is already registered in {SYMBOL} as {existing}")
    registry[(name, MODE)] = class_path


def registered_rollout_class(name: str) -> str | None:
    """The class path registered for ``name`` (``None`` if none)."""
    return _registry().get((name, MODE))


def registered_rollouts() -> set[tuple[str, str]]:
    """Every ``(name, mode)`` with an in-worker rollout class."""
    return set(_registry())
