"""The π_old snapshot fix: verl's ``verl.utils.fsdp_utils.fsdp2_sharded_save_to_cpu`` aliases the live FSDP2 weights
on CPU (the bug), ours copies them, so ``fsdp2_sharded_load_from_cpu`` brings back the weights before an update."""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
import verl.utils.fsdp_utils as verl_fsdp_utils

from verl_cpu import snapshot


@pytest.fixture
def sharded_model(tmp_path):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
        fully_shard(model, mesh=init_device_mesh("cpu", (1,)))
        yield model
    finally:
        dist.destroy_process_group()


def _optimizer_step(model: torch.nn.Module) -> None:
    with torch.no_grad():
        for param in model.parameters():
            param._local_tensor.add_(1.0)  # in place, as torch's optimizers update


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p._local_tensor.clone() for name, p in model.named_parameters()}


def test_verls_snapshot_follows_the_update_on_cpu(sharded_model):
    state, _ = snapshot._VERL_SAVE(sharded_model)  # verl's own function
    _optimizer_step(sharded_model)
    for name, param in sharded_model.named_parameters():
        assert torch.equal(state[name][0], param._local_tensor)  # the "old" weights moved with the new ones


def test_our_snapshot_restores_the_weights_before_the_update(sharded_model):
    before = _weights(sharded_model)
    state, spec = snapshot.fsdp2_sharded_save_to_cpu(sharded_model)
    _optimizer_step(sharded_model)
    after = _weights(sharded_model)
    verl_fsdp_utils.fsdp2_sharded_load_from_cpu(sharded_model, state, spec)  # DetachActorWorker.restore_model_from_cpu
    restored = _weights(sharded_model)
    assert all(torch.equal(restored[n], before[n]) and not torch.equal(restored[n], after[n]) for n in before)


def test_apply_replaces_the_name_detach_actor_worker_imports(monkeypatch):
    monkeypatch.setattr(verl_fsdp_utils, "fsdp2_sharded_save_to_cpu", snapshot._VERL_SAVE)
    assert not snapshot.applied()
    snapshot.apply()
    from verl.utils.fsdp_utils import fsdp2_sharded_save_to_cpu  # as DetachActorWorker._get_strategy_handlers does

    assert fsdp2_sharded_save_to_cpu is snapshot.fsdp2_sharded_save_to_cpu and snapshot.applied()
