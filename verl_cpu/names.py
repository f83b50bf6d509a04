"""Every name verl_cpu registers with verl (each with the ``agentrl_`` prefix: verl's registries are flat), and the
switch that selects the CPU platform."""

import functools
import os

PLATFORM_ENV = "VERL_PLATFORM"  # verl's own switch (plugin/platform/platform_manager.py::_detect_platform_name)
PLATFORM = "agentrl_cpu"  # verl PlatformRegistry: VERL_PLATFORM=agentrl_cpu, or a host without accelerator
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
    """True when verl runs on the CPU platform in this process: ``VERL_PLATFORM=agentrl_cpu``, or no
    ``VERL_PLATFORM`` on a host where verl's own probes find nothing and would fall back to ``nvidia``, which cannot
    run: a CPU-only torch build and no other platform's accelerator (so a config copied out of this repository runs
    under a plain ``python -m verl.trainer.main_ppo``). Any other ``VERL_PLATFORM`` keeps verl's choice."""
    chosen = os.environ.get(PLATFORM_ENV, "").strip().lower()
    return chosen == PLATFORM if chosen else _no_accelerator()


@functools.cache
def _no_accelerator() -> bool:
    import torch  # loaded by verl before its plugins

    if torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None:
        return False  # a GPU build (maybe a CPU-only Ray actor on a GPU node): verl's own probes decide
    return not other_platform_detected()


def other_platform_detected() -> bool:
    """Whether one of verl's other registered platforms detects its accelerator here (verl's own probe)."""
    from verl.plugin.platform.platform_manager import PlatformRegistry

    for name in PlatformRegistry.registered_names():
        platform_cls = PlatformRegistry.get(name)
        if name == PLATFORM or platform_cls is None:
            continue
        try:
            if platform_cls().is_platform_available(use_smi_check=True):
                return True
        except Exception:  # verl's probe treats a failing platform as absent, and so does this one
            continue
    return False
