"""Fixtures for the algorithm tests: verl's ActorConfig, and a local Ray + TransferQueue for the replay buffer."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def actor_config():
    """Factory of verl ActorConfigs as the actor worker builds them (the loss gets this, never an AlgoConfig)."""
    from verl.workers.config import ActorConfig

    def make(**overrides):
        values = dict(strategy="fsdp", rollout_n=1, ppo_micro_batch_size_per_gpu=1)
        values.update(overrides)
        return ActorConfig(**values)

    return make


@pytest.fixture(scope="module")  # Ray down when the file ends: this worker's next file may start its own
def transfer_queue():
    """verl's v1 trainer stores trajectories in TransferQueue; start a real one (1 storage unit) on local Ray."""
    # imported here: only the replay-buffer tests need Ray, and importing it is slow
    import ray
    import transfer_queue as tq
    from omegaconf import OmegaConf

    started_ray = not ray.is_initialized()
    if started_ray:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    yield tq
    tq.close()
    if started_ray:
        ray.shutdown()


@pytest.fixture
def tq(transfer_queue):
    """The TransferQueue, emptied after each test."""
    yield transfer_queue
    listing = transfer_queue.kv_list() or {}
    for partition, items in listing.items():
        if items:
            transfer_queue.kv_clear(keys=list(items), partition_id=partition)
