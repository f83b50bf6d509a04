"""Every name verl_cpu registers with verl (each with the ``agentrl_`` prefix: verl's registries are flat), and the
switch that selects the CPU platform."""

import os

PLATFORM_ENV = "VERL_PLATFORM"  # verl's own switch (plugin/platform/platform_manager.py::_detect_platform_name)
PLATFORM = "agentrl_cpu"  # verl.plugin.platform.PlatformRegistry; selected with VERL_PLATFORM=agentrl_cpu
ROLLOUT_REPLICA = "agentrl_hf"  # verl RolloutReplicaRegistry + rollout class registry (actor_rollout_ref.rollout.name)
# verl CheckpointEngineRegistry (actor_rollout_ref.rollout.checkpoint_engine.backend): weights to a standalone rollout
# through Ray's object store (verl_cpu/checkpoint_engine.py)
CHECKPOINT_ENGINE = "agentrl_ray"

REGISTERED = {
    "platform": PLATFORM,
    "rollout_replica": ROLLOUT_REPLICA,
    "checkpoint_engine": CHECKPOINT_ENGINE,
}


def cpu_platform_selected() -> bool:
    """True when this process asked verl for the CPU platform (``VERL_PLATFORM=agentrl_cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM
