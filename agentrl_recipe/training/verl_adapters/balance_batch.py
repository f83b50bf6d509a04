"""verl's v1 trainer, ``verl.trainer.ppo.v1.trainer_base.PPOTrainer._balance_batch`` (private): the released order.

verl 0.9.1 calls ``self._balance_batch(batch, metrics=...)`` on every sampled batch before old-log-prob: it pads the
batch to the required multiple, then reorders it into ``dp`` workload-balanced partitions; the order decides which
trajectories share an optimizer update (:mod:`agentrl_recipe.training.algos.partition`). Under
``batch_partition: released`` the recipe's replay buffer gives the trainer *instance* that built it (its
``refill_fn``'s owner) a ``_balance_batch`` of its own, which pads the same way and reorders into verl 0.5's
``world_size`` length-balanced partitions instead; the class, and every other trainer, keep verl's. It reads the
worker group's data-parallel size as verl's method does (``_dispatch_info`` / ``_query_dispatch_info``); the test of
this module fails, naming :data:`SYMBOL`, when verl's method stops doing so. On a verl upgrade, this module is the one
to change.
"""

from __future__ import annotations

import types
from typing import Any

from verl.trainer.ppo.padding_utils import upsample_batch_to_divisible_size
from verl.utils.seqlen_balancing import log_seqlen_unbalance

from agentrl_recipe.training.algos.partition import released_order

SYMBOL = "verl.trainer.ppo.v1.trainer_base.PPOTrainer._balance_batch"
# what verl's method calls, in its own source; the released one calls them the same way
VERL_CALLS = (
    "_dispatch_info",
    "_query_dispatch_info",
    "_get_required_batch_multiple",
    "upsample_batch_to_divisible_size",
)


def dp_size(trainer: Any) -> int:
    """The actor's data-parallel size, from the worker group's dispatch info (as verl's ``_balance_batch``)."""
    group = trainer.actor_rollout_wg
    if "actor" not in group._dispatch_info:
        group._dispatch_info["actor"] = group._query_dispatch_info("actor")
    return max(group._dispatch_info["actor"]) + 1


def released_balance_batch(
    trainer: Any,
    batch: Any,
    metrics: dict[str, Any],
    logging_prefix: str = "global_seqlen",
    keep_minibatch: bool = False,
) -> Any:
    """verl's padding, then verl 0.5's order: ``world_size`` length-balanced partitions of ``tags["seq_len"]``."""
    del keep_minibatch  # verl's own callers leave it False; the released order has no such mode
    multiple = trainer._get_required_batch_multiple(dp_size(trainer))
    batch = upsample_batch_to_divisible_size(batch, multiple, trainer.tokenizer.eos_token_id)
    seqlens = [int(tag["seq_len"]) for tag in batch.tags]
    world_size = trainer.actor_rollout_wg.world_size
    order = released_order(seqlens, world_size)
    batch.reorder(order)
    per = len(order) // world_size
    partitions = [order[k * per : (k + 1) * per] for k in range(world_size)]
    metrics.update(log_seqlen_unbalance(seqlen_list=seqlens, partitions=partitions, prefix=logging_prefix))
    return batch


def install(trainer: Any, partition: str) -> None:
    """Give ``trainer`` the ``partition`` order (``released``; ``verl`` keeps the class's method). Idempotent."""
    if partition == "verl":
        trainer.__dict__.pop("_balance_batch", None)
        return
    if partition != "released":
        raise ValueError(f"batch_partition must be 'released' or 'verl', got {partition!r}")
    trainer._balance_batch = types.MethodType(released_balance_batch, trainer)  # the instance's own, not the class's


def installed(trainer: Any) -> str:
    """The partition ``trainer`` applies: ``released`` when installed, else ``verl``."""
    method = trainer.__dict__.get("_balance_batch")
    return "released" if getattr(method, "__func__", None) is released_balance_batch else "verl"
