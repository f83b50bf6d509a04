"""`configs check` rules for verl 0.9.1's v1 trainer modes and rollout correction (what would fail late or silently).

verl builds an async trainer from ``trainer.v1.trainer_mode`` (``sync`` / ``colocate_async`` / ``separate_async``,
``verl/trainer/ppo/v1/trainer_{sync,colocate_async,separate_async}.py``) and asserts most of its preconditions
only after the Ray cluster, TransferQueue and the workers are up — or never: a sync replay buffer in an async mode,
IS weights without rollout log-probs, or a dynamic-sampling cap in async mode are accepted and do nothing. These
rules catch them before launch; :func:`check` returns ``(errors, warnings)`` as ``(key, message)`` pairs.
"""

from __future__ import annotations

import re
from typing import Any

from agentrl_recipe.cli.configs.files import value_or
from agentrl_recipe.names import ASYNC_SAMPLER, SAMPLER_PATH, SYNC_SAMPLER
from verl_cpu import names as cpu_names

ASYNC_MODES = ("colocate_async", "separate_async")
Finding = tuple[str, str]
_V1 = "trainer.v1"
_RC = "algorithm.rollout_correction"
_ARR = "actor_rollout_ref"


def check(cfg: Any) -> tuple[list[Finding], list[Finding]]:
    """Errors and warnings of the trainer mode, the replay buffer it needs and ``algorithm.rollout_correction``."""
    errors: list[Finding] = []
    warnings: list[Finding] = []
    mode = value_or(cfg, f"{_V1}.trainer_mode", "sync")
    errors += _sampler_class(cfg, mode)
    errors += _rollout_correction(cfg)
    if mode not in ASYNC_MODES:
        return errors, warnings
    if not value_or(cfg, "trainer.use_v1", True):
        errors.append(("trainer.use_v1", f"trainer_mode={mode} exists only in verl's v1 trainer (use_v1=true)"))
    errors += _dynamic_sampling(cfg, mode)
    errors += _staleness(cfg)
    if value_or(cfg, f"{_RC}.rollout_is") is None:
        warnings.append(
            (
                f"{_RC}.rollout_is",
                f"trainer_mode={mode} trains on tokens sampled by older weights and nothing reweights them; "
                "set rollout_is: token (and rollout_is_threshold) as recipe/async/*.yaml do",
            )
        )
    engine_errors, engine_warnings = _checkpoint_engine(cfg)
    errors += engine_errors
    warnings += engine_warnings
    if mode == "colocate_async":
        if not value_or(cfg, f"{_ARR}.hybrid_engine", True):
            errors.append((f"{_ARR}.hybrid_engine", "colocate_async shares the actor's GPUs: it needs true"))
    else:
        separate_errors, separate_warnings = _separate(cfg)
        errors += separate_errors
        warnings += separate_warnings
    return errors, warnings


def _sampler_class(cfg: Any, mode: str) -> list[Finding]:
    """The plugin's sync buffer in an async mode (or the reverse) runs the wrong sampling policy without a word."""
    custom = value_or(cfg, f"{_V1}.sampler.custom_sampler", {}) or {}
    if custom.get("path") != SAMPLER_PATH or custom.get("name") not in (SYNC_SAMPLER, ASYNC_SAMPLER):
        return []
    expected = ASYNC_SAMPLER if mode in ASYNC_MODES else SYNC_SAMPLER
    if custom.get("name") == expected:
        return []
    return [
        (
            f"{_V1}.sampler.custom_sampler.name",
            f"trainer_mode={mode} needs {expected} (got {custom.get('name')}): verl instantiates the named class as "
            "is, and the other one samples with the other mode's policy (staleness, refills)",
        )
    ]


def _dynamic_sampling(cfg: Any, mode: str) -> list[Finding]:
    groups = value_or(cfg, "algorithm.filter_groups", {}) or {}
    if not groups.get("enable", False) or not groups.get("max_num_gen_batches", 0):
        return []
    return [
        (
            "algorithm.filter_groups.max_num_gen_batches",
            f"DAPO's cap on generation batches is sync-only; in trainer_mode={mode} verl's async buffer replaces each "
            "zero-variance group with one fresh prompt from the rolling warm-up window, so there is no per-step batch "
            "count to cap. Set it to 0 (no cap), or train with trainer_mode=sync",
        )
    ]


def _staleness(cfg: Any) -> list[Finding]:
    sampler = f"{_V1}.sampler"
    threshold = value_or(cfg, f"{sampler}.max_off_policy_threshold")
    if threshold is None:
        return [
            (
                f"{sampler}.max_off_policy_threshold",
                "null leaves staleness unbounded (a trajectory may be trained any number of versions late); set a "
                "bound (recipe/async/*.yaml use 2: one step off-policy)",
            )
        ]
    if not isinstance(threshold, int) or threshold < 1:
        return [(f"{sampler}.max_off_policy_threshold", f"must be an integer ≥ 1, got {threshold!r}")]
    strategy = value_or(cfg, f"{sampler}.max_off_policy_strategy", "drop")
    if strategy not in ("drop", "wait"):
        return [(f"{sampler}.max_off_policy_strategy", f"must be drop or wait, got {strategy!r}")]
    return []


def _rollout_correction(cfg: Any) -> list[Finding]:
    """IS / RS settings that verl's v1 trainer would skip without a word."""
    rollout_is, rollout_rs = value_or(cfg, f"{_RC}.rollout_is"), value_or(cfg, f"{_RC}.rollout_rs")
    if rollout_is is None and rollout_rs is None:
        return []
    errors: list[Finding] = []
    if rollout_is is not None and rollout_is not in ("token", "sequence"):
        errors.append((f"{_RC}.rollout_is", f"must be token, sequence or null, got {rollout_is!r}"))
    if not value_or(cfg, f"{_ARR}.rollout.calculate_log_probs", False):
        errors.append(
            (
                f"{_ARR}.rollout.calculate_log_probs",
                "rollout correction needs the rollout's log-probs (true); without them verl skips the IS weights and "
                "rejection sampling silently (trainer_base._compute_advantage)",
            )
        )
    if value_or(cfg, f"{_RC}.bypass_mode", False):
        errors.append(
            (
                f"{_RC}.bypass_mode",
                "verl's v1 trainer computes no IS weights or rejection mask in bypass mode (it only copies the rollout "
                "log-probs to old_log_probs); use bypass_mode: false (decoupled) for rollout_is / rollout_rs",
            )
        )
    return errors


def _separate(cfg: Any) -> tuple[list[Finding], list[Finding]]:
    """verl's PPOTrainerSeparateAsync.__init__ assertions, checked before the cluster is up."""
    errors: list[Finding] = []
    warnings: list[Finding] = []
    sync_step = value_or(cfg, f"{_V1}.separate_async.parameter_sync_step", 1)
    batch = value_or(cfg, "data.train_batch_size")
    mini = value_or(cfg, f"{_ARR}.actor.ppo_mini_batch_size")
    if batch is not None and mini is not None and batch != sync_step * mini:
        errors.append(
            (
                f"{_V1}.separate_async.parameter_sync_step",
                f"separate_async needs train_batch_size ({batch}) = parameter_sync_step ({sync_step}) × "
                f"ppo_mini_batch_size ({mini})",
            )
        )
    for key in ("nnodes", "n_gpus_per_node"):
        if not value_or(cfg, f"{_ARR}.rollout.{key}", 0):
            errors.append((f"{_ARR}.rollout.{key}", "separate_async needs a standalone rollout pool (> 0)"))
    backend_errors, backend_warnings = _weight_transport(cfg)
    errors += backend_errors + _logical_gpus(cfg)
    warnings += backend_warnings
    switch = f"{_V1}.separate_async.hybrid_rollout.enable_switch"
    if value_or(cfg, switch, False) and not value_or(cfg, f"{_ARR}.hybrid_engine", True):
        warnings.append((switch, "ignored by verl with actor_rollout_ref.hybrid_engine=false (no hybrid replicas)"))
    return errors, warnings


def _on_cpu(cfg: Any) -> bool:
    return value_or(cfg, "trainer.device", "cuda") == "cpu"


def _weight_transport(cfg: Any) -> tuple[list[Finding], list[Finding]]:
    """The checkpoint engine must reach another process, and exist on this device."""
    key = f"{_ARR}.rollout.checkpoint_engine.backend"
    backend = value_or(cfg, key, "naive")
    if backend == "naive":
        return [
            (
                key,
                "separate_async sends weights to other processes: naive (in-process) cannot; use nccl on GPUs, "
                f"{cpu_names.CHECKPOINT_ENGINE} on CPU",
            )
        ], []
    if _on_cpu(cfg) and backend != cpu_names.CHECKPOINT_ENGINE:
        return [
            (
                key,
                f"{backend} needs an accelerator (verl 0.9.1's engines to a standalone rollout are GPU-only); on CPU "
                f"use {cpu_names.CHECKPOINT_ENGINE} (+recipe/async=separate_async_cpu)",
            )
        ], []
    if not _on_cpu(cfg) and backend == cpu_names.CHECKPOINT_ENGINE:
        return [], [
            (
                key,
                f"{cpu_names.CHECKPOINT_ENGINE} is a CPU/debug backend: every weight goes through host memory and "
                "Ray's object store; use nccl on GPUs",
            )
        ]
    return [], []


ENGINE_KEY = f"{_ARR}.rollout.checkpoint_engine.backend"
GPU_EXTRA_FIX = "pip install .[gpu]"


def checkpoint_engine_problem(backend: str) -> str | None:
    """None when verl's ``CheckpointEngineRegistry`` has ``backend`` in this process, else one line: why, and the fix.

    verl registers an engine only when its module imports: ``nccl`` (and ``nixl``) need cupy, which the ``gpu`` extra
    installs; without it, verl fails at the first weight sync, after the cluster and the workers are up.
    """
    import verl.checkpoint_engine  # noqa: F401  (imports every engine module; failures are recorded, not raised)
    from verl.checkpoint_engine.base import CheckpointEngineRegistry

    try:
        CheckpointEngineRegistry.get(backend)
        return None
    except ValueError as err:
        reason = re.search(rf"\b{re.escape(backend)}_checkpoint_engine: ([^,]+)", str(err))
        why = f" ({reason.group(1).strip()})" if reason else ""
        return (
            f"checkpoint engine {backend!r} is not registered in verl's CheckpointEngineRegistry{why}; install it: "
            f"{GPU_EXTRA_FIX}"
        )


def _cuda_here() -> bool:
    import torch

    return bool(torch.cuda.is_available())


def _checkpoint_engine(cfg: Any) -> tuple[list[Finding], list[Finding]]:
    """An async mode's checkpoint engine must be registered where the run starts. A GPU config checked on a machine
    without CUDA (a laptop, CI) gets a warning: its nodes may have the engine; preflight there refuses it."""
    backend = str(value_or(cfg, ENGINE_KEY, "naive"))
    if _on_cpu(cfg) and backend not in ("naive", cpu_names.CHECKPOINT_ENGINE):
        return [], []  # a GPU engine on CPU: _weight_transport names the CPU one (cupy would not help)
    problem = checkpoint_engine_problem(backend)
    if problem is None:
        return [], []
    if not _on_cpu(cfg) and not _cuda_here():
        return [], [(ENGINE_KEY, f"{problem} on the GPU nodes (not checkable here: no CUDA)")]
    return [(ENGINE_KEY, problem)], []


def _logical_gpus(cfg: Any) -> list[Finding]:
    """On CPU, Ray places the trainer and the standalone pool by logical GPUs: too few and the pool never starts."""
    have = value_or(cfg, "ray_kwargs.ray_init.num_gpus")
    if not _on_cpu(cfg) or have is None:  # None: an existing cluster's own resources (ray.init takes none)
        return []
    trainer = value_or(cfg, "trainer.nnodes", 1) * value_or(cfg, "trainer.n_gpus_per_node", 1)
    rollout = value_or(cfg, f"{_ARR}.rollout.nnodes", 0) * value_or(cfg, f"{_ARR}.rollout.n_gpus_per_node", 0)
    if have >= trainer + rollout:
        return []
    return [
        (
            "ray_kwargs.ray_init.num_gpus",
            f"separate_async on CPU places {trainer} trainer + {rollout} rollout processes by logical Ray GPUs; "
            f"{have} leaves the standalone pool waiting forever: set {trainer + rollout}",
        )
    ]
