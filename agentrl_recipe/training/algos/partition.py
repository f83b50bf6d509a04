"""Which trajectories of a step share an optimizer update, and which micro-batches they form: released vs verl 0.9.1.

``batch_partition`` (compat key; ``trainer.v1.sampler.sampler_kwargs.batch_partition``):

``released`` (compat ``open_agentrl``): verl 0.5 as Open-AgentRL ran it. ``trainer.balance_batch`` (default true)
reordered the step's batch by :func:`verl.utils.seqlen_balancing.get_seqlen_balanced_partitions` of the sequence
lengths (prompt + response tokens) into ``world_size`` equal-size partitions, each in index order
(ray_trainer.py:972-987,1111); the dispatch gave data-parallel rank ``d`` the ``d``-th contiguous ``1/dp`` of that
order (fsdp_workers.py:706, one SP group per rank), which its actor split into mini-batches of
``ppo_mini_batch_size · n / dp`` in order (dp_actor.py:395). On the paper's 8 GPUs with Ulysses SP 4 (dp 2), 1,024
trajectories and 4 updates: partition ``i`` (128 trajectories) of each of the two ranks is update ``i``, so every
update is a length-balanced cut of the whole step.

``verl`` (compat ``agentrl``): verl 0.9.1's v1 trainer (trainer_base.py ``_balance_batch``, always on): the same
partitioner on :func:`verl.utils.seqlen_balancing.calculate_workload` into ``dp`` partitions, so each rank's half
is split in index order and update ``i`` is (nearly) the step's prompts ``16i..16i+15``: updates differ in length.

The micro-batches of one rank's mini-batch are the other half of the released rule: ``policy_loss.micro_batches``
(:mod:`agentrl_recipe.training.verl_adapters.micro_batches`).

:mod:`agentrl_recipe.training.verl_adapters.balance_batch` gives a trainer the released order.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from verl.utils.seqlen_balancing import calculate_workload, get_seqlen_balanced_partitions

BATCH_PARTITIONS = ("released", "verl")


def released_order(seqlens: Sequence[int], world_size: int) -> list[int]:
    """The batch order verl 0.5's ``_balance_batch`` gave: ``world_size`` length-balanced partitions, concatenated."""
    if len(seqlens) % world_size:
        raise ValueError(
            f"batch_partition released: {len(seqlens)} trajectories do not split into world_size={world_size} "
            "equal partitions (verl 0.5 required it too)"
        )
    partitions = get_seqlen_balanced_partitions(list(seqlens), k_partitions=world_size, equal_size=True)
    return [i for partition in partitions for i in partition]


def verl_order(seqlens: Sequence[int], dp_size: int) -> list[int]:
    """The batch order verl 0.9.1's v1 ``_balance_batch`` gives: ``dp_size`` workload-balanced partitions."""
    workloads = calculate_workload(torch.tensor(list(seqlens), dtype=torch.int64)).tolist()
    partitions = get_seqlen_balanced_partitions(workloads, k_partitions=dp_size, equal_size=True)
    return [i for partition in partitions for i in partition]


def update_members(order: Sequence[int], dp_size: int, updates: int) -> list[list[int]]:
    """The trajectories of each optimizer update, given the batch order: rank ``d`` takes the ``d``-th contiguous
    ``1/dp_size`` of it, and splits it in order into ``updates`` mini-batches; update ``i`` is every rank's ``i``-th
    (sorted). The same in verl 0.5 and 0.9.1: only the order differs."""
    per_rank, rem = divmod(len(order), dp_size)
    per_update, rem2 = divmod(per_rank, updates)
    if rem or rem2:
        raise ValueError(f"{len(order)} trajectories do not split into {dp_size} ranks × {updates} updates")
    chunks = [order[d * per_rank : (d + 1) * per_rank] for d in range(dp_size)]
    return [sorted(i for chunk in chunks for i in chunk[u * per_update : (u + 1) * per_update]) for u in range(updates)]
