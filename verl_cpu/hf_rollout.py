"""The in-worker side of the ``agentrl_hf`` rollout: verl's ``BaseRollout`` in each trainer (or checkpoint-engine)
worker, which hands the actor's weights to the replica's server actor.

Hybrid mode with ``checkpoint_engine.backend=naive``: after every update ``ActorRolloutRefWorker.update_weights``
(``verl/workers/engine_workers.py``) calls ``update_weights(engine.get_per_tensor_param(), ...)`` on *every* rank.
Producing a full tensor from an FSDP shard is a collective, so every rank drains the generator; the replica's
leader rank (``rollout_rank == 0``) keeps one CPU copy of each tensor and sends that one state dict to its server
actor, which loads it between decode batches. Standalone mode (``separate_async``): verl's ``CheckpointEngineWorker``
hands the weights its checkpoint engine received (``agentrl_ray`` on CPU: :mod:`.checkpoint_engine`) to the same
method.

``resume`` / ``release`` do nothing: the server keeps its model in host memory (nothing to free on a device).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import AsyncIterable, Iterable
from typing import Any

import ray
import torch
from torch.distributed.tensor import DTensor
from verl.workers.rollout.base import BaseRollout

from verl_cpu import names

logger = logging.getLogger(__name__)

RESUME_TAGS = frozenset({"weights", "kv_cache"})


def server_name(replica_rank: int, kind: str = "", name_suffix: str = "") -> str:
    """Ray actor name of a replica's server (one per replica); ``kind`` is ``""``, ``"reward_"`` or ``"teacher_"``
    and ``name_suffix`` is ``RolloutReplica.name_suffix``, as verl's vLLM replica names its servers."""
    return f"{names.ROLLOUT_REPLICA}_server_{kind}{replica_rank}{name_suffix}"


def rollout_world_size(config: Any) -> int:
    """Trainer ranks per replica, as verl counts them (``llm_server.py::_initialize_llm_servers``)."""
    return config.tensor_model_parallel_size * config.data_parallel_size * config.pipeline_model_parallel_size


async def drain_weights(weights: Iterable | AsyncIterable, *, keep: bool) -> dict[str, torch.Tensor]:
    """Run the weight generator to the end (every rank must: a DTensor's ``full_tensor`` is a collective).

    Returns ``{name: CPU copy}`` when ``keep`` (the leader), else ``{}``.
    """
    state: dict[str, torch.Tensor] = {}

    def take(name: str, tensor: torch.Tensor) -> None:
        if isinstance(tensor, DTensor):
            tensor = tensor.full_tensor()
        if keep:  # copy=True: on CPU the engine's tensors alias the live parameters the optimizer will change
            state[name] = tensor.detach().to("cpu", copy=True)

    if isinstance(weights, AsyncIterable):
        async for name, tensor in weights:
            take(name, tensor)
    else:
        for name, tensor in weights:
            take(name, tensor)
    return state


class HFServerAdapter(BaseRollout):
    """``BaseRollout`` for ``actor_rollout_ref.rollout.name: agentrl_hf`` (registered in verl's
    ``_ROLLOUT_REGISTRY`` by :mod:`verl_cpu.rollout_registry`)."""

    def __init__(self, config: Any, model_config: Any, device_mesh: Any = None, replica_rank: int = -1, **kwargs: Any):
        super().__init__(config, model_config, device_mesh)
        rank = int(os.environ.get("RANK", "0"))
        world = rollout_world_size(self.config)
        self.replica_rank = rank // world if replica_rank == -1 else replica_rank
        self.rollout_rank = rank % world
        self.is_leader_rank = self.rollout_rank == 0  # read by verl's CheckpointEngineWorker.is_leader_rank
        self._server: Any = None

    def _server_handle(self) -> Any:
        if self._server is None:
            self._server = ray.get_actor(server_name(self.replica_rank))
        return self._server

    async def resume(self, tags: list[str]) -> None:
        unknown = set(tags) - RESUME_TAGS
        if unknown:
            raise ValueError(f"unknown resume tags {sorted(unknown)}; verl sends {sorted(RESUME_TAGS)}")

    async def release(self) -> None:
        return None

    async def update_weights(
        self,
        weights: Iterable | AsyncIterable,
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        peft_config: Any = None,
        **kwargs: Any,
    ) -> None:
        if wire_format != "named_tensors":
            raise NotImplementedError(f"{names.ROLLOUT_REPLICA} takes named tensors, not wire_format={wire_format}")
        if peft_config is not None:
            raise NotImplementedError(
                f"{names.ROLLOUT_REPLICA} serves full weights only: set actor_rollout_ref.model.lora.merge=true"
            )
        start = time.perf_counter()
        state = await drain_weights(weights, keep=self.is_leader_rank)
        if not self.is_leader_rank:
            return
        if not state:
            raise RuntimeError(f"{names.ROLLOUT_REPLICA}: the weight generator yielded no tensors")
        await self._server_handle().update_weights.remote(state, global_steps=global_steps)
        logger.info(
            "%s replica %d: %d tensors in %.2fs",
            names.ROLLOUT_REPLICA,
            self.replica_rank,
            len(state),
            time.perf_counter() - start,
        )
