"""``agentrl_ray``: the trainer's weights reach rollout workers in other processes, bit for bit, through the protocol
verl's ``CheckpointEngineManager`` runs (prepare → build_topology → init_process_group → send ∥ receive → finalize).

The sender is a Ray actor built by verl's ``CheckpointEngineRegistry`` (another process, as trainer rank 0 is); one
receiver is another actor and one is this process, so the buckets cross processes both ways.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import ray
import torch
from engine_peers import EnginePeer
from fresh_python import run_python
from verl.checkpoint_engine import CheckpointEngineRegistry

from verl_cpu import names
from verl_cpu.checkpoint_engine import RayObjectStoreCheckpointEngine

HERE = Path(__file__).resolve().parent
BUCKET = 256  # bytes: the weights below need several buckets, and one tensor spans two


def weights(seed: int) -> list[tuple[str, torch.Tensor]]:
    """Odd sizes in three dtypes (chunks must be realigned), one tensor bigger than a bucket."""
    g = torch.Generator().manual_seed(seed)
    return [
        ("embed.bf16", torch.randn(3, 5, generator=g).to(torch.bfloat16)),  # 30 bytes
        ("layer.big", torch.randn(100, generator=g)),  # 400 bytes > BUCKET
        ("layer.index", torch.arange(7) + seed),  # int64
        ("norm.f32", torch.randn(2, 3, generator=g)),
    ]


@pytest.fixture(scope="module")
def peers():
    if ray.is_initialized():  # an earlier module's Ray (other runtime env)
        ray.shutdown()
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]), "RAY_AUTH_MODE": "disabled"}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env})
    try:
        actor = ray.remote(EnginePeer)
        sender = actor.remote(names.CHECKPOINT_ENGINE, BUCKET, is_master=True)
        receiver = actor.remote(names.CHECKPOINT_ENGINE, BUCKET)
        yield sender, receiver, RayObjectStoreCheckpointEngine(BUCKET)
    finally:
        ray.shutdown()


def _sync(sender, receiver, local: RayObjectStoreCheckpointEngine, sent: list, global_steps: int):
    """One weight sync as CheckpointEngineManager.build_process_group and update_weights run it."""
    metadata = ray.get([sender.execute.remote("prepare"), receiver.execute.remote("prepare")]) + [local.prepare()]
    actor_kwargs, rollout_kwargs = RayObjectStoreCheckpointEngine.build_topology(1, 2, metadata)
    ray.get(sender.execute.remote("init_process_group", **{k: v[0] for k, v in actor_kwargs.items()}))
    ray.get(receiver.execute.remote("init_process_group", **{k: v[0] for k, v in rollout_kwargs.items()}))
    local.init_process_group(**{k: v[1] for k, v in rollout_kwargs.items()})

    async def receive_here() -> list:
        return [(name, tensor.clone()) async for name, tensor in local.receive_weights()]

    stats_ref, remote_ref = sender.send.remote(sent, global_steps), receiver.receive.remote()
    here = asyncio.run(receive_here())
    stats, there = ray.get([stats_ref, remote_ref])
    ray.get([sender.execute.remote("finalize"), receiver.execute.remote("finalize")])
    local.finalize()
    return stats, there, here, rollout_kwargs["sync_id"][0]


def _assert_same(got: list, sent: list) -> None:
    assert [name for name, _ in got] == [name for name, _ in sent]
    for (name, tensor), (_, expected) in zip(got, sent, strict=True):
        assert tensor.dtype == expected.dtype and tensor.shape == expected.shape, name
        assert torch.equal(tensor, expected), name


@pytest.mark.slow
def test_every_receiver_gets_the_weights_bit_for_bit_sync_after_sync(peers):
    assert CheckpointEngineRegistry.get(names.CHECKPOINT_ENGINE) is RayObjectStoreCheckpointEngine
    for seed in (0, 1):  # the second sync reuses the mailbox under a new sync id
        sent = weights(seed)
        stats, there, here, sync_id = _sync(*peers, sent, global_steps=seed)
        assert sync_id == seed
        _assert_same(there, sent)
        _assert_same(here, sent)
        assert stats[f"{names.CHECKPOINT_ENGINE}/buckets"] >= 3
        assert stats[f"{names.CHECKPOINT_ENGINE}/sent_mb"] * 2**20 >= sum(t.nbytes for _, t in sent)


@pytest.mark.slow
def test_a_receiver_without_a_sender_fails_naming_the_sync(peers):
    sender, _, _ = peers
    metadata = ray.get(sender.execute.remote("prepare"))  # a fresh sync nobody sends
    orphan = RayObjectStoreCheckpointEngine(BUCKET, timeout_s=1)
    orphan.init_process_group(rank=1, mailbox=metadata["mailbox"], sync_id=metadata["sync_id"])

    async def receive() -> None:
        async for _ in orphan.receive_weights():
            pass

    with pytest.raises(TimeoutError, match=f"no bucket 0 of sync {metadata['sync_id']} within 1s"):
        asyncio.run(receive())


def test_a_trainer_rank_that_does_not_send_still_walks_the_generator():
    engine = RayObjectStoreCheckpointEngine(BUCKET)
    engine.init_process_group(rank=-1, mailbox=None, sync_id=0)
    walked: list[str] = []

    def generator():
        for name, tensor in weights(0):
            walked.append(name)  # on FSDP each step is a collective every rank must join
            yield name, tensor

    assert asyncio.run(engine.send_weights(generator())) == {}
    assert walked == [name for name, _ in weights(0)]


def test_misuse_fails_with_one_clear_line():
    with pytest.raises(ValueError, match="bucket_size"):
        RayObjectStoreCheckpointEngine(0)
    with pytest.raises(RuntimeError, match="before init_process_group"):
        asyncio.run(RayObjectStoreCheckpointEngine(BUCKET).send_weights(iter(weights(0))))
    with pytest.raises(RuntimeError, match="rank 0 must be the master"):
        RayObjectStoreCheckpointEngine.build_topology(1, 1, [{}, {}])
    topology = RayObjectStoreCheckpointEngine.build_topology(3, 2, [{"mailbox": "m", "sync_id": 4}, {}, {}, {}, {}])
    assert topology == (
        {"rank": [0, -1, -1], "mailbox": ["m"] * 3, "sync_id": [4] * 3},
        {"rank": [1, 2], "mailbox": ["m"] * 2, "sync_id": [4] * 2},
    )


@pytest.mark.slow
def test_a_process_whose_first_import_is_the_engine_module_registers_it():
    # the mailbox actor's Ray worker imports this module first; verl's plugin loader then imports it again
    code = (
        "import verl_cpu.checkpoint_engine as m\n"
        "from verl.checkpoint_engine import CheckpointEngineRegistry\n"
        f"assert CheckpointEngineRegistry.get({names.CHECKPOINT_ENGINE!r}) is m.RayObjectStoreCheckpointEngine\n"
    )
    proc = run_python(["-c", code])
    assert proc.returncode == 0, proc.stderr[-3000:]
