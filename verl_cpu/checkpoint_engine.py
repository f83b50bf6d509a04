"""``agentrl_ray``: a verl checkpoint engine that moves the trainer's weights to rollout workers in *other* processes
through Ray's object store, so ``trainer.v1.trainer_mode: separate_async`` runs where verl 0.9.1's engines for a
standalone rollout (``nccl``, ``nixl``, ``mooncake``, ``hccl``) cannot: on CPU.

verl drives it like any engine (``verl/checkpoint_engine/base.py``, ``CheckpointEngineManager.update_weights``, once
per sync): ``prepare`` on every trainer and rollout worker → ``build_topology`` → ``init_process_group`` →
``send_weights`` on the trainer ranks while the rollout's ``CheckpointEngineWorker`` s run ``receive_weights`` into
their server adapter → ``finalize``.

- Trainer rank 0 (``is_master``) packs the weight generator into buckets of ``update_weights_bucket_megabytes``
  (verl's ``split_weight_chunks``: a tensor larger than a bucket spans several), puts each bucket into the object
  store and posts its reference to a mailbox actor under (sync id, bucket index). The other trainer ranks walk the
  generator and send nothing: producing a full tensor is a collective over the FSDP group.
- Every rollout worker takes the references in order, pulls each bucket (Ray moves it between nodes) and yields
  ``(name, tensor)`` as verl's ``merge_weight_chunks`` rebuilds them. A receiver that sees no bucket within
  ``timeout_s`` (``engine_kwargs.agentrl_ray.timeout_s``) fails, naming the sync, instead of hanging the step.
- ``finalize`` drops the sync's references, so the object store frees its buckets.

The mailbox is one small async actor per master engine (``num_cpus=0``), created at the first ``prepare`` and owned
by the trainer's rank-0 process.

On GPU clusters the engine is correct but a CPU/debug backend: every tensor goes device → host → object store →
host, and the receiving adapter copies it back to its device (verl's vLLM adapter does). Use ``nccl`` there.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterable, Iterable
from typing import Any

import numpy as np
import ray
import torch
from torch.distributed.tensor import DTensor
from verl.checkpoint_engine.base import CheckpointEngine, TensorMeta, merge_weight_chunks, split_weight_chunks
from verl.workers.rollout.utils import ensure_async_iterator

from verl_cpu import names

ALIGN = 16  # bytes: every chunk starts aligned for its dtype's view (verl's merge views the bucket in place)
SENDER, NOT_SENDING = 0, -1  # trainer ranks: rank 0 sends, the others only walk the generator


class WeightMailbox:
    """Bucket references of one sync, posted by the sender and taken, in order, by every receiver."""

    def __init__(self) -> None:
        self._boxes: dict[tuple[int, int], dict[str, Any]] = {}
        self._posted: dict[tuple[int, int], asyncio.Event] = {}

    def _event(self, key: tuple[int, int]) -> asyncio.Event:
        return self._posted.setdefault(key, asyncio.Event())

    async def post(self, sync_id: int, index: int, box: dict[str, Any]) -> None:
        self._boxes[(sync_id, index)] = box  # the ObjectRef inside the dict is kept by reference, not resolved
        self._event((sync_id, index)).set()

    async def take(self, sync_id: int, index: int) -> dict[str, Any]:
        await self._event((sync_id, index)).wait()
        return self._boxes[(sync_id, index)]

    async def drop(self, sync_id: int) -> int:
        keys = [key for key in self._posted if key[0] == sync_id]
        for key in keys:
            self._boxes.pop(key, None)
            self._posted.pop(key, None)
        return len(keys)


class _Bucket:
    """Chunks of one bucket, copied into one host array when sealed (sized to what it holds, not the cap)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.metas: list[TensorMeta] = []
        self.chunks: list[torch.Tensor] = []
        self.used = 0

    def fits(self, nbytes: int) -> bool:
        return not self.metas or _aligned(self.used) + nbytes <= self.capacity

    def add(self, meta: TensorMeta, chunk: torch.Tensor) -> None:
        meta.offset = _aligned(self.used)
        self.metas.append(meta)
        self.chunks.append(chunk)
        self.used = meta.offset + meta.chunk_size

    def seal(self) -> np.ndarray:
        array = np.empty(self.used, dtype=np.uint8)
        host = torch.from_numpy(array)
        for meta, chunk in zip(self.metas, self.chunks, strict=True):
            host[meta.offset : meta.offset + meta.chunk_size].copy_(chunk)  # device → host on GPU
        return array


def _aligned(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


async def _full_tensors(weights: Iterable | AsyncIterable) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
    async for name, tensor in ensure_async_iterator(weights):
        if isinstance(tensor, DTensor):
            tensor = tensor.full_tensor()
        yield name, tensor.detach().contiguous()


class RayObjectStoreCheckpointEngine(CheckpointEngine):
    """verl ``CheckpointEngine`` registered as ``actor_rollout_ref.rollout.checkpoint_engine.backend: agentrl_ray``.

    Args:
        bucket_size: bytes per bucket (verl passes ``update_weights_bucket_megabytes << 20``).
        is_master: trainer rank 0 (verl sets it on the trainer side; rollout workers leave it False).
        timeout_s: how long a receiver waits for the next bucket before failing.
    """

    def __init__(self, bucket_size: int, is_master: bool = False, timeout_s: float = 600.0) -> None:
        if bucket_size <= 0:
            raise ValueError(f"{names.CHECKPOINT_ENGINE}: bucket_size must be > 0, got {bucket_size}")
        self.bucket_size = bucket_size
        self.is_master = is_master
        self.timeout_s = float(timeout_s)
        self.rank: int | None = None
        self.mailbox: Any = None
        self.sync_id = -1
        self._refs: list[ray.ObjectRef] = []

    # ------------------------------------------------------------------ topology
    def prepare(self) -> dict[str, Any]:
        if not self.is_master:
            return {}
        if self.mailbox is None:
            self.mailbox = ray.remote(WeightMailbox).options(num_cpus=0).remote()
        self.sync_id += 1
        return {"mailbox": self.mailbox, "sync_id": self.sync_id}

    @classmethod
    def build_topology(
        cls, actor_wg_world_size: int, rollout_world_size: int, metadata: list[dict]
    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
        master = metadata[0]
        if "mailbox" not in master:
            raise RuntimeError(f"{names.CHECKPOINT_ENGINE}: trainer rank 0 must be the master (is_master=True)")
        shared = {"mailbox": master["mailbox"], "sync_id": master["sync_id"]}
        actor = {"rank": [SENDER] + [NOT_SENDING] * (actor_wg_world_size - 1)}
        rollout = {"rank": list(range(1, rollout_world_size + 1))}
        for key, value in shared.items():
            actor[key] = [value] * actor_wg_world_size
            rollout[key] = [value] * rollout_world_size
        return actor, rollout

    def init_process_group(  # type: ignore[override]  # verl passes build_topology's keys as keywords
        self, rank: int, mailbox: Any, sync_id: int
    ) -> None:
        self.rank, self.mailbox, self.sync_id = rank, mailbox, sync_id

    def finalize(self) -> None:
        if self.rank == SENDER and self.mailbox is not None:
            self.mailbox.drop.remote(self.sync_id)  # fire and forget: every receiver has its buckets by now
        self._refs = []
        self.rank = None

    # ------------------------------------------------------------------ transfer
    @torch.no_grad()
    async def send_weights(self, weights: Iterable | AsyncIterable, global_steps: int | None = None) -> dict:
        if self.rank is None:
            raise RuntimeError(f"{names.CHECKPOINT_ENGINE}: send_weights before init_process_group")
        if self.rank != SENDER:
            async for _ in _full_tensors(weights):  # the collective each full tensor needs
                pass
            return {}
        start, sent, index = time.perf_counter(), 0, 0
        bucket = _Bucket(self.bucket_size)
        # verl annotates split/merge_weight_chunks with sync generators; both iterate async ones (`async for`)
        chunks = split_weight_chunks(_full_tensors(weights), self.bucket_size)  # type: ignore[arg-type]
        async for meta, chunk in chunks:
            if not bucket.fits(meta.chunk_size):
                sent += await self._post(bucket, index, is_last=False)
                bucket, index = _Bucket(self.bucket_size), index + 1
            bucket.add(meta, chunk)  # type: ignore[arg-type]  # verl's Optional: every chunk it yields is a tensor
        sent += await self._post(bucket, index, is_last=True)
        return {
            f"{names.CHECKPOINT_ENGINE}/sent_mb": sent / 2**20,
            f"{names.CHECKPOINT_ENGINE}/buckets": index + 1,
            f"{names.CHECKPOINT_ENGINE}/send_s": time.perf_counter() - start,
        }

    async def _post(self, bucket: _Bucket, index: int, *, is_last: bool) -> int:
        array = bucket.seal()
        ref = ray.put((bucket.metas, array))
        self._refs.append(ref)  # the sender owns the object: keep it alive until finalize
        await self.mailbox.post.remote(
            self.sync_id, index, {"ref": ref, "is_last": is_last, "bucket_size": self.bucket_size}
        )
        return array.nbytes

    @torch.no_grad()
    async def receive_weights(  # type: ignore[override]  # an async generator, as verl's own engines return
        self, global_steps: int | None = None
    ) -> AsyncGenerator[tuple[str, torch.Tensor], None]:
        if self.rank is None or self.rank == SENDER:
            raise RuntimeError(f"{names.CHECKPOINT_ENGINE}: receive_weights needs a rollout rank from build_topology")
        first = await self._take(0)
        merged = merge_weight_chunks(self._chunks(first), first["bucket_size"])  # type: ignore[arg-type]
        async for name, tensor in merged:
            yield name, tensor

    async def _take(self, index: int) -> dict[str, Any]:
        try:
            return await asyncio.wait_for(self.mailbox.take.remote(self.sync_id, index), self.timeout_s)
        except TimeoutError as exc:
            raise TimeoutError(
                f"{names.CHECKPOINT_ENGINE}: no bucket {index} of sync {self.sync_id} within {self.timeout_s:g}s "
                "(did trainer rank 0 fail in send_weights?)"
            ) from exc

    async def _chunks(self, box: dict[str, Any]) -> AsyncGenerator[tuple[TensorMeta, torch.Tensor], None]:
        index = 0
        while True:
            metas, array = await box["ref"]
            data = torch.from_numpy(array.copy())  # the object store's copy is read-only; the consumer may keep views
            for meta in metas:
                yield meta, data[meta.offset : meta.offset + meta.chunk_size]
            if box["is_last"]:
                return
            index += 1
            box = await self._take(index)
