"""Runtime fix of verl 0.9.1 on the CPU platform: the π_old snapshot of separate_async's decoupled PPO.

Exists only for a verl bug: delete once verl has upstream/0011-fsdp2-cpu-snapshot-copies.patch.

``trainer.v1.trainer_mode: separate_async`` with ``parameter_sync_step > 1`` keeps the weights of the step's first
mini-batch as π_old (``PPOTrainerSeparateAsync._compute_old_log_prob`` → ``DetachActorWorker.save_model_to_cpu`` /
``restore_model_from_cpu``). For FSDP2 the snapshot is ``verl.utils.fsdp_utils.fsdp2_sharded_save_to_cpu``, which
takes ``param._local_tensor.detach().cpu()``: a copy on a GPU, but on the CPU the *same* storage. The snapshot then
follows every optimizer step, restoring it is a no-op, and every mini-batch after the first gets the current
weights as π_old — without an error. This replaces the function, in ``verl.utils.fsdp_utils`` only and only when
``VERL_PLATFORM=agentrl_cpu``, by verl's own followed by a clone of each tensor that shares storage with a live
parameter. ``DetachActorWorker`` imports the name when it first saves, so the plugin's import-time patch is seen.

Upstream: UPSTREAM.md "CPU device: the separate_async π_old snapshot aliases the live weights"; delete this module
once verl copies (``.to("cpu", copy=True)``) in ``fsdp2_sharded_save_to_cpu``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import verl.utils.fsdp_utils as verl_fsdp_utils

_VERL_SAVE: Callable[..., Any] = verl_fsdp_utils.fsdp2_sharded_save_to_cpu


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def fsdp2_sharded_save_to_cpu(model: torch.nn.Module) -> tuple[dict[str, tuple[torch.Tensor, Any]], Any]:
    """verl's ``fsdp2_sharded_save_to_cpu`` whose tensors never alias the model's parameters."""
    state, global_spec = _VERL_SAVE(model)
    live = {_storage(getattr(p, "_local_tensor", p)) for p in model.parameters()}
    owned = {
        name: (tensor.clone() if _storage(tensor) in live else tensor, spec) for name, (tensor, spec) in state.items()
    }
    return owned, global_spec


def apply() -> None:
    """Install the replacement in ``verl.utils.fsdp_utils`` (idempotent)."""
    verl_fsdp_utils.fsdp2_sharded_save_to_cpu = fsdp2_sharded_save_to_cpu


def applied() -> bool:
    return verl_fsdp_utils.fsdp2_sharded_save_to_cpu is fsdp2_sharded_save_to_cpu
