"""The one place that registers agentrl_recipe's components with verl.

verl 0.9.1 imports this module (entry point group ``verl.plugins``) at the end of ``import verl`` in the
driver and in every Ray worker. verl swallows plugin import errors at DEBUG level, so a failure here is
logged at ERROR before it propagates, and ``agentrl-recipe doctor`` checks every name from a fresh process.

What is registered (names in :mod:`agentrl_recipe.names`):
- agent loop ``agentrl_tool_agent`` — stored by class path, so the loop module is imported lazily by the
  AgentLoopWorker that instantiates it (keeps ``import verl`` cheap in processes that never roll out);
- reward manager ``agentrl_reward``;
- policy loss ``agentrl_tcr`` and advantage estimator ``agentrl_grpo``;
- verl platform ``agentrl_cpu`` (``VERL_PLATFORM=agentrl_cpu``; :mod:`verl_cpu`), and — only when it is
  selected — the FSDP2 engines for the CPU device, the gloo process-group fix and the π_old snapshot fix.
- rollout ``agentrl_hf`` (:mod:`verl_cpu.hf_replica`): verl's ``RolloutReplicaRegistry`` (by
  loader) and its in-worker ``BaseRollout`` (:mod:`verl_cpu.rollout_registry`);
- checkpoint engine ``agentrl_ray`` (:mod:`verl_cpu.checkpoint_engine`): weights to a standalone
  rollout in other processes through Ray's object store (``separate_async`` on CPU), and the fix that lets
  ``separate_async`` start without hybrid replicas (:mod:`agentrl_recipe.verl_adapters.separate_async_logger`).
"""

from __future__ import annotations

import logging

from agentrl_recipe import names

logger = logging.getLogger("agentrl_recipe")

AGENT_LOOP_TARGET = "agentrl_recipe.agent_loop.loop.AgentRLToolAgentLoop"


def _register_agent_loop() -> None:
    from agentrl_recipe.verl_adapters.agent_loop_registry import register_agent_loop

    register_agent_loop(names.AGENT_LOOP, AGENT_LOOP_TARGET)


def _register_reward_manager() -> None:
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER, register

    from agentrl_recipe.rewards.manager import AgentRLRewardManager

    if REWARD_MANAGER.get(names.REWARD_MANAGER) is not AgentRLRewardManager:
        register(names.REWARD_MANAGER)(AgentRLRewardManager)


def _register_algorithms() -> None:
    from verl.trainer.ppo import core_algos

    from agentrl_recipe.algos.advantages import compute_grpo_masked_outcome_advantage
    from agentrl_recipe.algos.losses import compute_policy_loss_tcr
    from agentrl_recipe.verl_adapters import metric_aggregation

    # register_policy_loss overwrites silently, register_adv_est raises on a different function: check both ourselves.
    current_loss = core_algos.POLICY_LOSS_REGISTRY.get(names.POLICY_LOSS)
    if current_loss is not None and current_loss is not compute_policy_loss_tcr:
        raise ValueError(f"policy loss {names.POLICY_LOSS!r} is already registered by {current_loss.__module__}")
    core_algos.register_policy_loss(names.POLICY_LOSS)(compute_policy_loss_tcr)
    metric_aggregation.apply()  # agentrl_tcr's ratio_max/min keep MAX/MIN through verl's ppo_loss
    if core_algos.ADV_ESTIMATOR_REGISTRY.get(names.ADV_ESTIMATOR) is not compute_grpo_masked_outcome_advantage:
        core_algos.register_adv_est(names.ADV_ESTIMATOR)(compute_grpo_masked_outcome_advantage)


def _fix_separate_async() -> None:
    from agentrl_recipe.verl_adapters import separate_async_logger

    separate_async_logger.apply()  # separate_async without hybrid replicas dies on logger.info(flush=True)


def register_all() -> dict[str, str]:
    """Register every component; idempotent. Returns ``{kind: name}`` of what is registered."""
    try:
        _register_agent_loop()
        _register_reward_manager()
        _register_algorithms()
        _fix_separate_async()
    except Exception:
        logger.exception("agentrl_recipe plugin failed to register with verl; run `agentrl-recipe doctor`")
        raise
    logger.info("agentrl_recipe registered: %s", ", ".join(f"{k}={v}" for k, v in names.REGISTERED.items()))
    return dict(names.REGISTERED)


register_all()
