"""Both sides of a verl checkpoint engine as Ray actors, for the tests (uniquely named module: the Ray workers import
it through the PYTHONPATH the tests give them).

``EnginePeer`` holds one engine built the way verl builds it (``CheckpointEngineRegistry.new``) and plays a trainer
rank (``send``) or a rollout worker (``receive``). ``PeerGroup`` is the part of verl's trainer worker group that
``CheckpointEngineManager`` calls — ``world_size``, ``execute_checkpoint_engine`` and ``update_weights`` — over
``EnginePeer`` actors that send fixed weights.
"""

from __future__ import annotations

from typing import Any

import ray
import torch


class EnginePeer:
    def __init__(self, backend: str, bucket_size: int, is_master: bool = False, **engine_kwargs: Any):
        import verl  # noqa: F401  (loads the plugin, as in every verl worker)
        from verl.checkpoint_engine import CheckpointEngineRegistry

        self.engine = CheckpointEngineRegistry.new(
            backend, bucket_size=bucket_size, is_master=is_master, **engine_kwargs
        )

    def execute(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.engine, method)(*args, **kwargs)

    async def send(self, weights: list[tuple[str, torch.Tensor]], global_steps: int | None = None) -> dict:
        return await self.engine.send_weights(iter(weights), global_steps=global_steps)

    async def receive(self) -> list[tuple[str, torch.Tensor]]:
        return [(name, tensor.clone()) async for name, tensor in self.engine.receive_weights()]


class PeerGroup:
    """A trainer worker group of ``EnginePeer`` actors; every rank walks the same weights, rank 0 sends them."""

    def __init__(self, peers: list[Any], weights: list[tuple[str, torch.Tensor]]):
        self.peers = peers
        self.weights = ray.put(weights)
        self.modes: list[str] = []

    @property
    def world_size(self) -> int:
        return len(self.peers)

    def execute_checkpoint_engine(self, method: list[str], **kwargs: list[Any]) -> list[ray.ObjectRef]:
        return [
            peer.execute.remote(method[i], **{key: values[i] for key, values in kwargs.items()})
            for i, peer in enumerate(self.peers)
        ]

    def update_weights(self, global_steps: int | None = None, mode: str = "auto") -> list[ray.ObjectRef]:
        self.modes.append(mode)
        return [peer.send.remote(self.weights, global_steps) for peer in self.peers]
