"""verl's FSDP engine, ``verl.workers.engine.fsdp.transformer_impl.prepare_micro_batches`` (bound by name there):
verl 0.5's micro-batches under ``micro_batches: released``.

verl 0.9.1's ``FSDPEngine.forward_backward_batch`` splits each rank's mini-batch (``use_dynamic_bsz``) with
``prepare_micro_batches``: workload-balanced partitions, added until each fits ``max_token_len_per_gpu × sp``, the
largest-workload ones placed in the middle. verl 0.5 (what trained the checkpoint, seqlen_balancing.py:250-310 via
dp_actor.py:404) made ``ceil(tokens / max_token_len)`` of them (the max over the ranks), balanced by token count with
no size check, in decreasing Σ length². Under ``token_mean_scope: micro_batch`` the split decides each token's weight.

``install()`` rebinds the module's name to :func:`released_prepare_micro_batches` (verl's own function answers every
call it does not cover: no dynamic batch, grouped samples, pipeline stages). The actor's
``policy_loss.micro_batches`` (:class:`agentrl_recipe.training.algos.losses.TCRPolicyLossConfig`) installs it in the
worker that builds the actor config, before its first mini-batch; the loss checks it on every call (fail closed). The
test of this module fails, naming :data:`SYMBOL`, when verl's engine stops calling the name.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from verl.utils import tensordict_utils as tu
from verl.utils.seqlen_balancing import get_seqlen_balanced_partitions

SYMBOL = "verl.workers.engine.fsdp.transformer_impl.prepare_micro_batches"
MODULE = SYMBOL.rpartition(".")[0]


def _engine() -> Any:
    import importlib

    return importlib.import_module(MODULE)  # the FSDP engine: torch's FSDP stack, loaded in the workers anyway


def seq_lens(data: Any) -> list[int]:
    """Each sequence's token count (a packed batch's offsets, else its attention mask)."""
    input_ids = data["input_ids"]
    if input_ids.is_nested:
        return [int(n) for n in input_ids.offsets().diff().tolist()]
    return [int(n) for n in data["attention_mask"].sum(dim=1).tolist()]


def released_partitions(
    lens: list[int], max_token_len: int, dp_group: Any = None, sync: bool = True
) -> list[list[int]]:
    """verl 0.5's micro-batch indices: ``ceil(Σ / max_token_len)`` (max over ``dp_group``) token-balanced partitions,
    in decreasing Σ length²."""
    count = min(len(lens), math.ceil(sum(lens) / max_token_len))
    if sync and torch.distributed.is_initialized():
        shared = torch.tensor([count], device=_device())
        torch.distributed.all_reduce(shared, op=torch.distributed.ReduceOp.MAX, group=dp_group)
        count = int(shared.item())
    parts = get_seqlen_balanced_partitions(lens, k_partitions=count, equal_size=False)
    parts.sort(key=lambda p: (sum(lens[i] ** 2 for i in p), min(p) if p else 0), reverse=True)
    return parts


def _device() -> str:
    from verl.utils.device import get_device_name

    return get_device_name()


def released_prepare_micro_batches(
    data: Any,
    dp_group: Any = None,
    num_batches_divided_by: int | None = None,
    same_micro_num_in_dp: bool = True,
    min_num_micro_batch: int | None = None,
    use_dynamic_bsz_balance: bool = True,
) -> tuple[list[Any], list[list[int]] | None]:
    """verl 0.5's split of a dynamic batch; verl's own for the cases verl 0.5 had no counterpart of."""
    dynamic = tu.get_non_tensor_data(data=data, key="use_dynamic_bsz", default=True)
    grouped = tu.get_non_tensor_data(data=data, key="force_group_size", default=1) != 1
    if not dynamic or grouped or num_batches_divided_by or min_num_micro_batch:
        return _VERL(
            data, dp_group, num_batches_divided_by, same_micro_num_in_dp, min_num_micro_batch, use_dynamic_bsz_balance
        )
    sp_size = tu.get_non_tensor_data(data=data, key="sp_size", default=1)
    max_token_len = int(data["max_token_len_per_gpu"]) * int(sp_size)
    parts = released_partitions(seq_lens(data), max_token_len, dp_group, same_micro_num_in_dp)
    return [tu.index_select_tensor_dict(data, p) for p in parts], parts


_VERL: Any = None  # verl's function, kept when installing


def install() -> None:
    """Rebind the engine's ``prepare_micro_batches`` to the released split (idempotent)."""
    global _VERL
    engine = _engine()
    if engine.prepare_micro_batches is not released_prepare_micro_batches:
        _VERL = engine.prepare_micro_batches
        engine.prepare_micro_batches = released_prepare_micro_batches


def uninstall() -> None:
    engine = _engine()
    if engine.prepare_micro_batches is released_prepare_micro_batches:
        engine.prepare_micro_batches = _VERL


def installed() -> bool:
    return _engine().prepare_micro_batches is released_prepare_micro_batches
