"""Which trajectories share an optimizer update (issue 45 item 1): verl 0.5's order under ``batch_partition:
released``, verl 0.9.1's own ``PPOTrainer._balance_batch`` otherwise. If the adapter test fails, verl changed that
private method."""

from __future__ import annotations

import hashlib
import inspect
import json
import random
from types import SimpleNamespace

import pytest
from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1.trainer_base import PPOTrainer

from agentrl_recipe.training.algos import partition
from agentrl_recipe.training.verl_adapters import balance_batch

WORLD, DP, UPDATES = 8, 2, 4  # the paper's 8 GPUs, Ulysses SP 4 (dp 2), 64 × 16 / (16 × 16) updates


def step_lengths() -> list[int]:
    """1,024 prompt + response lengths of one step: 64 prompts (200-2560 tokens) × 16 responses (≤ 20480)."""
    rng = random.Random(45)
    out = []
    for _ in range(64):
        prompt = rng.randint(200, 2560)
        out += [prompt + min(20480, int(rng.lognormvariate(8.6, 0.9))) for _ in range(16)]
    return out


LENGTHS = step_lengths()
# Golden, computed with the released stack's own partitioner (Open-AgentRL 1fe5dbd, verl/utils/seqlen_balancing.py,
# as ray_trainer.py:978 calls it): the sha256 of the 4 updates' sorted members (json), their first members and means
RELEASED_SHA = "0d4b928637f275ae"
RELEASED_FIRST = [[2, 4, 8, 11, 12], [0, 1, 3, 5, 6], [18, 23, 27, 32, 42], [9, 10, 13, 14, 15]]
RELEASED_MEANS = [8473.1] * 4
VERL_MEANS = [8696.8, 8003.0, 8873.5, 8319.2]  # verl 0.9.1's v1 order: update i ≈ prompts 16i..16i+15


def sha(members: list[list[int]]) -> str:
    return hashlib.sha256(json.dumps(members).encode()).hexdigest()[:16]


def means(members: list[list[int]]) -> list[float]:
    return [round(sum(LENGTHS[i] for i in m) / len(m), 1) for m in members]


def step_batch(lengths: list[int]) -> KVBatchMeta:
    """verl's own batch handle (TransferQueue's KVBatchMeta): keys name the trajectories, tags carry seq_len."""
    return KVBatchMeta(
        partition_id="train", keys=[str(i) for i in range(len(lengths))], tags=[{"seq_len": n} for n in lengths]
    )


def order_of(batch: KVBatchMeta) -> list[int]:
    return [int(key) for key in batch.keys]


class FakeTrainer:
    """The members of a trainer verl's ``_balance_batch`` reads: 8 actor workers in 2 data-parallel groups."""

    def __init__(self) -> None:
        ranks = [r // (WORLD // DP) for r in range(WORLD)]  # each worker's data-parallel rank
        group = {"world_size": WORLD, "_dispatch_info": {}, "_query_dispatch_info": lambda _: ranks}
        self.actor_rollout_wg = SimpleNamespace(**group)
        self.tokenizer = SimpleNamespace(eos_token_id=0)

    def _get_required_batch_multiple(self, dp_size: int) -> int:
        return dp_size * UPDATES  # verl's: lcm(dp, the mini-batch) = 256 here, which 1,024 already is


def test_the_released_order_gives_the_released_memberships() -> None:
    released = partition.update_members(partition.released_order(LENGTHS, WORLD), DP, UPDATES)
    assert (sha(released), [m[:5] for m in released], means(released)) == (RELEASED_SHA, RELEASED_FIRST, RELEASED_MEANS)
    ours = partition.update_members(partition.verl_order(LENGTHS, DP), DP, UPDATES)
    assert means(ours) == VERL_MEANS
    assert sum(a == b for a, b in zip(released, ours, strict=True)) == 0  # no update has the same members


def test_verls_own_method_gives_the_verl_order() -> None:
    """Our model of verl 0.9.1's side is verl's method itself, run on the same lengths."""
    batch = PPOTrainer._balance_batch(FakeTrainer(), step_batch(LENGTHS), metrics={})
    assert order_of(batch) == partition.verl_order(LENGTHS, DP)


def test_installed_on_one_trainer_it_reorders_as_released_and_leaves_the_class_alone() -> None:
    trainer, other = FakeTrainer(), FakeTrainer()
    balance_batch.install(trainer, "released")
    assert (balance_batch.installed(trainer), balance_batch.installed(other)) == ("released", "verl")
    batch, metrics = step_batch(LENGTHS), {}
    assert trainer._balance_batch(batch, metrics=metrics) is batch
    assert partition.update_members(order_of(batch), DP, UPDATES) == partition.update_members(
        partition.released_order(LENGTHS, WORLD), DP, UPDATES
    )
    per_rank = [sum(LENGTHS[i] for i in order_of(batch)[k * 128 : (k + 1) * 128]) for k in range(WORLD)]
    balanced = (metrics["global_seqlen/balanced_min"], metrics["global_seqlen/balanced_max"])
    assert balanced == (min(per_rank), max(per_rank)) == (1084561, 1084562)  # 8 partitions, within one token
    assert "_balance_batch" not in vars(other) and PPOTrainer.__dict__["_balance_batch"] is not trainer._balance_batch
    balance_batch.install(trainer, "verl")
    assert balance_batch.installed(trainer) == "verl"
    with pytest.raises(ValueError, match="do not split into world_size=8"):
        partition.released_order(LENGTHS[:12], WORLD)


def test_verls_method_still_reads_what_the_adapter_reads() -> None:
    source = inspect.getsource(PPOTrainer._balance_batch)
    missing = [name for name in balance_batch.VERL_CALLS if name not in source]
    assert not missing, f"{balance_batch.SYMBOL} no longer uses {missing}: update the adapter"
    params = list(inspect.signature(PPOTrainer._balance_batch).parameters)
    assert params == ["self", "batch", "metrics", "logging_prefix", "keep_minibatch"], balance_batch.SYMBOL


# ---- micro-batches (issue 45 item 2): verl_adapters/micro_batches.py -----------------------------------------------
def micro_batch_weights(lens: list[int], parts: list[list[int]]) -> dict[int, float]:
    """Each trajectory's per-token weight under token_mean_scope micro_batch: its micro-batch's sequences / tokens."""
    return {i: len(p) / sum(lens[j] for j in p) for p in parts for i in p}


def test_a_rank_mini_batch_splits_as_verl_0_5_did() -> None:
    """Rank 0's first update (128 trajectories) at 23040 × SP 4 tokens: 12 token-balanced micro-batches (verl 0.5)
    against verl 0.9.1's own prepare_micro_batches: other members, per-token weights 0.842-1.112 of the released."""
    import torch
    from verl.utils import tensordict_utils as tu
    from verl.workers.engine.utils import prepare_micro_batches

    from agentrl_recipe.training.verl_adapters import micro_batches

    lens = [LENGTHS[i] for i in partition.released_order(LENGTHS, WORLD)[:128]]
    ids = torch.nested.nested_tensor([torch.zeros(n, dtype=torch.long) for n in lens], layout=torch.jagged)
    extra = {"use_dynamic_bsz": True, "max_token_len_per_gpu": 23040, "sp_size": 4}
    data = tu.get_tensordict({"input_ids": ids}, non_tensor_dict=extra)
    batches, released = micro_batches.released_prepare_micro_batches(data)
    assert [sum(lens[i] for i in p) for p in released] == [
        90433, 90377, 90373, 90337, 90400, 90428, 90445, 90329, 90368, 90356, 90311, 90405
    ]  # fmt: skip
    assert [b["input_ids"].offsets().diff().sum().item() for b in batches] == [
        sum(lens[i] for i in p) for p in released
    ]
    _, ours = prepare_micro_batches(data)
    assert len(ours) == 12 and sorted(map(sorted, ours)) != sorted(map(sorted, released))
    ratios = [micro_batch_weights(lens, ours)[i] / micro_batch_weights(lens, released)[i] for i in range(128)]
    assert (round(min(ratios), 3), round(max(ratios), 3), sum(abs(r - 1) > 0.1 for r in ratios)) == (0.842, 1.112, 14)


def test_the_loss_config_installs_the_split_and_the_loss_refuses_without_it() -> None:
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngine

    from agentrl_recipe.training.algos.losses import TCRPolicyLossConfig, check_micro_batches
    from agentrl_recipe.training.verl_adapters import micro_batches

    assert "prepare_micro_batches(" in inspect.getsource(FSDPEngine.forward_backward_batch), micro_batches.SYMBOL
    try:
        config = SimpleNamespace(policy_loss=TCRPolicyLossConfig(micro_batches="released"))
        assert micro_batches.installed()
        check_micro_batches(config)  # type: ignore[arg-type]
        micro_batches.uninstall()
        with pytest.raises(RuntimeError, match=r"micro_batches released, but .*prepare_micro_batches is verl's"):
            check_micro_batches(config)  # type: ignore[arg-type]
        check_micro_batches(SimpleNamespace(policy_loss=TCRPolicyLossConfig()))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="micro_batches must be one of"):
            TCRPolicyLossConfig(micro_batches="zigzag")
    finally:
        micro_batches.uninstall()
