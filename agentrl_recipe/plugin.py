"""The one place that registers agentrl_recipe's components with verl.

verl 0.9.1 imports this module (entry point group ``verl.plugins``) at the end of ``import verl`` in the
driver and in every Ray worker. verl swallows plugin import errors at DEBUG level, so a failure here is
logged at ERROR before it propagates, and ``agentrl-recipe doctor`` checks every name from a fresh process.

What is registered (names in :mod:`agentrl_recipe.names`):
- agent loop ``agentrl_tool_agent`` — stored by class path, so the loop module is imported lazily by the
  AgentLoopWorker that instantiates it (keeps ``import verl`` cheap in processes that never roll out);
- the OmegaConf resolvers ``agentrl_compat`` (the value ``agentrl.compat`` gives a behaviour key, for the sections
  verl hands a component alone) and ``agentrl_config_path`` (a shipped file's installed path, from any directory);
- policy loss ``agentrl_tcr`` and advantage estimator ``agentrl_grpo``;
- verl platform ``agentrl_cpu`` (``VERL_PLATFORM=agentrl_cpu``; :mod:`verl_cpu`), and — only when it is
  selected — the FSDP2 engines for the CPU device, the gloo process-group fix and the π_old snapshot fix.
- rollout ``agentrl_hf`` (:mod:`verl_cpu.hf_replica`): verl's ``RolloutReplicaRegistry`` (by
  loader) and its in-worker ``BaseRollout`` (:mod:`verl_cpu.rollout_registry`);
- checkpoint engine ``agentrl_ray`` (:mod:`verl_cpu.checkpoint_engine`): weights to a standalone
  rollout in other processes through Ray's object store (``separate_async`` on CPU), and the fix that lets
  ``separate_async`` start without hybrid replicas (:mod:`agentrl_recipe.training.verl_adapters.separate_async_logger`).
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from typing import Any

from omegaconf import OmegaConf

from agentrl_recipe import names

logger = logging.getLogger("agentrl_recipe")

AGENT_LOOP_TARGET = "agentrl_recipe.training.agent_loop.loop.AgentRLToolAgentLoop"


def _register(kind: str, name: str, ours: Any, current: Any, register: Callable[[Any], Any]) -> None:
    """Register ``ours`` as ``name`` unless it already is; refuse a name another component holds.

    verl's registries disagree on a taken name (``register_policy_loss`` overwrites silently, ``register_adv_est``
    raises only on a different function), so every kind goes through this one check."""
    if current == ours:  # the same object (or class path): already ours
        return
    if current is not None:
        raise ValueError(f"{kind} {name!r} is already registered by {getattr(current, '__module__', current)}")
    register(ours)


def _register_agent_loop() -> None:
    from agentrl_recipe.training.verl_adapters.agent_loop_registry import agent_loops, register_agent_loop

    entry = agent_loops().get(names.AGENT_LOOP)  # stored by class path: the loop module loads in rollout workers only
    current = entry.get("_target_") if isinstance(entry, dict) else entry
    _register("agent loop", names.AGENT_LOOP, AGENT_LOOP_TARGET, current,
              lambda target: register_agent_loop(names.AGENT_LOOP, target))  # fmt: skip


def _compat_value(key: str, *, _root_: Any) -> Any:
    from agentrl_recipe.training.recipe_config import compat_resolver  # loaded when a config asks, not on import

    return compat_resolver(key, _root_=_root_)


def _config_path(relative: str) -> str:
    from agentrl_recipe.config_paths import config_dir  # as above: every worker imports this module

    return str(config_dir() / relative)


RESOLVERS: dict[str, Callable[..., Any]] = {
    names.COMPAT_RESOLVER: _compat_value,
    names.CONFIG_PATH_RESOLVER: _config_path,
}


def registered_resolvers() -> dict[str, Callable[..., Any]]:
    """Our OmegaConf resolvers that OmegaConf holds (what ``doctor`` looks up)."""
    return {name: resolver for name, resolver in RESOLVERS.items() if OmegaConf.has_resolver(name)}


def _register_resolvers() -> None:
    for name, resolver in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver)


def _loaded_on_first_call(module: str, name: str) -> Callable[..., Any]:
    """``module.name``, imported when verl first calls it: the loss loads in the actor workers, the estimator in the
    trainer, and a plain ``import verl`` pays for neither. Named as the function it stands for (doctor shows that)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(importlib.import_module(module), name)(*args, **kwargs)

    call.__module__, call.__name__, call.__qualname__ = module, name, name
    return call


POLICY_LOSS_FN = _loaded_on_first_call("agentrl_recipe.training.algos.losses", "compute_policy_loss_tcr")
ADV_ESTIMATOR_FN = _loaded_on_first_call(
    "agentrl_recipe.training.algos.advantages", "compute_grpo_masked_outcome_advantage"
)


def _register_algorithms() -> None:
    from verl.trainer.ppo import core_algos

    from agentrl_recipe.training.verl_adapters import metric_aggregation

    loss, adv = names.POLICY_LOSS, names.ADV_ESTIMATOR
    _register("policy loss", loss, POLICY_LOSS_FN, core_algos.POLICY_LOSS_REGISTRY.get(loss),
              core_algos.register_policy_loss(loss))  # fmt: skip
    metric_aggregation.apply()  # agentrl_tcr's ratio_max/min keep MAX/MIN through verl's ppo_loss
    _register("advantage estimator", adv, ADV_ESTIMATOR_FN,
              core_algos.ADV_ESTIMATOR_REGISTRY.get(adv), core_algos.register_adv_est(adv))  # fmt: skip


def _fix_separate_async() -> None:
    from agentrl_recipe.training.verl_adapters import separate_async_logger

    separate_async_logger.apply()  # separate_async without hybrid replicas dies on logger.info(flush=True)


def register_all() -> dict[str, str]:
    """Register every component; idempotent. Returns ``{kind: name}`` of what is registered."""
    try:
        _register_agent_loop()
        _register_resolvers()
        _register_algorithms()
        _fix_separate_async()
    except Exception:
        logger.exception("agentrl_recipe plugin failed to register with verl; run `agentrl-recipe doctor`")
        raise
    logger.info("agentrl_recipe registered: %s", ", ".join(f"{k}={v}" for k, v in names.REGISTERED.items()))
    return dict(names.REGISTERED)


register_all()
