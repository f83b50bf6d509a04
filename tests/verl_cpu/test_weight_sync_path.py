"""The weight-sync path per Ray cluster (:mod:`verl_cpu.weight_sync_path`) on verl's real ``ServerAdapter`` (the
sender's end), ``vLLMHttpServer`` (which exports the job id to its vLLM workers) and
``vLLMColocateWorkerExtension._get_zmq_handle`` (the receiver's end), built from a composed CPU config, and verl's real
bucketed sender and receiver over the paths they give.

Two clusters are two Ray runtime contexts with the same job id (every cluster's first job is ``01000000``) and their
own GCS address. The tests' job id is this process's pid in hex, so their socket paths cannot meet a trainer running
beside them in the suite.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
import ray
import torch
from verl.workers.rollout.replica import RolloutMode
from verl.workers.rollout.vllm_rollout import bucketed_weight_transfer, utils, vllm_async_server, vllm_rollout

from agentrl_recipe.offline.rollout import compose_config
from verl_cpu import weight_sync_path
from verl_cpu.weight_sender_timeout import TIMEOUT_ENV, WeightSyncTimeout
from verl_cpu.weight_sync_path import JOB_ID_ENV

JOB_ID = f"{os.getpid():08x}"
BOUND_S = 60.0


@dataclass(frozen=True)
class FakeCluster:
    """What ``ray.get_runtime_context()`` answers in a process of one cluster."""

    gcs_address: str

    def get_job_id(self) -> str:
        return JOB_ID


CLUSTER_A, CLUSTER_B = FakeCluster("192.0.2.2:6379"), FakeCluster("192.0.2.2:6380")


@pytest.fixture
def rollout_config(tiny_model_dir: Path):
    return compose_config(tiny_model_dir, prompt_length=32, response_length=12).actor_rollout_ref


@pytest.fixture
def in_cluster(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[FakeCluster], None]]:
    """Switch the runtime context this process reports; the environment verl's classes write is put back after."""
    saved = dict(os.environ)
    os.environ.update(RANK="0", RAY_LOCAL_WORLD_SIZE="1")
    yield lambda cluster: monkeypatch.setattr(ray, "get_runtime_context", lambda: cluster)
    os.environ.clear()
    os.environ.update(saved)


def _sender_path(rollout_config, init: Callable[..., None] = vllm_rollout.ServerAdapter.__init__) -> str:
    adapter = vllm_rollout.ServerAdapter.__new__(vllm_rollout.ServerAdapter)
    init(adapter, config=rollout_config.rollout, model_config=rollout_config.model, device_mesh=None)
    return adapter.zmq_handle


def _receiver_path(rollout_config, init: Callable[..., None] = vllm_async_server.vLLMHttpServer.__init__) -> str:
    """What verl's vLLM worker connects to, after the server that starts it was built in this cluster."""
    server = vllm_async_server.vLLMHttpServer.__new__(vllm_async_server.vLLMHttpServer)
    init(server, config=rollout_config.rollout, model_config=rollout_config.model,
         rollout_mode=RolloutMode.COLOCATED, workers=[], replica_rank=0, node_rank=0, gpus_per_node=1, nnodes=1,
         cuda_visible_devices="")  # fmt: skip
    for sock in (server._master_sock, server._dp_rpc_sock, server._dp_master_sock):
        sock.close()
    worker = SimpleNamespace(local_rank=0, model_runner=None)
    return utils.vLLMColocateWorkerExtension._get_zmq_handle(worker)


def _verls_own(init: Callable[..., None]) -> Callable[..., None]:
    return getattr(init, "__wrapped__", init)  # verl's own __init__, under the fix where it is applied


def test_verl_gives_two_clusters_one_path(rollout_config, in_cluster) -> None:
    paths = []
    for cluster in (CLUSTER_A, CLUSTER_B):
        in_cluster(cluster)
        sender = _sender_path(rollout_config, _verls_own(vllm_rollout.ServerAdapter.__init__))
        receiver = _receiver_path(rollout_config, _verls_own(vllm_async_server.vLLMHttpServer.__init__))
        paths.append((sender, receiver))
    expected = f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-replica-0-rank-0.sock"
    assert paths == [(expected, expected), (expected, expected)]


def test_each_cluster_gets_its_own_path_and_its_two_ends_agree(rollout_config, in_cluster) -> None:
    paths = {}
    for cluster in (CLUSTER_A, CLUSTER_B):
        in_cluster(cluster)
        paths[cluster] = (_sender_path(rollout_config), _receiver_path(rollout_config))
        assert os.environ[JOB_ID_ENV] == weight_sync_path.cluster_job_id()
    assert paths == {
        CLUSTER_A: (f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-832d9d48-replica-0-rank-0.sock",) * 2,
        CLUSTER_B: (f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-be2901e2-replica-0-rank-0.sock",) * 2,
    }


def _weights(value: float) -> list[tuple[str, torch.Tensor]]:
    return [(f"layer{i}.weight", torch.full((4, 8), value + i)) for i in range(3)]


def _send_in_thread(path: str, value: float) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def send() -> None:
        sender = bucketed_weight_transfer.BucketedWeightSender(zmq_handle=path, bucket_size_mb=1, use_shm=True)
        try:
            asyncio.run(sender.async_send_weights(iter(_weights(value))))
        except BaseException as exc:  # kept for the test
            errors.append(exc)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread, errors


def _bound(path: str, other_than: int | None = None) -> int:
    """Wait until a sender has bound ``path`` (a socket file other than the inode ``other_than``); its inode."""
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        try:
            inode = os.stat(path.removeprefix("ipc://")).st_ino
        except FileNotFoundError:
            inode = None
        if inode is not None and inode != other_than:
            return inode
        time.sleep(0.01)
    raise AssertionError(f"no sender bound {path} in {BOUND_S} s")


def _receive(path: str) -> dict[str, float]:
    """verl's receiver, as the vLLM worker runs it: the first value of each tensor it loads."""
    received: dict[str, float] = {}
    receiver = bucketed_weight_transfer.BucketedWeightReceiver(path, device=torch.device("cpu"), use_shm=True)
    receiver.receive_weights(lambda weights, is_last: received.update((n, float(t[0, 0])) for n, t in weights))
    return received


def _two_syncs(path_a: str, path_b: str) -> tuple[dict[str, float], list[BaseException], list[BaseException]]:
    """Run A's sync to its path, then B's to its own, then A's worker; A's worker's weights and both senders' errors."""
    sender_a, errors_a = _send_in_thread(path_a, 100.0)
    inode_a = _bound(path_a)
    sender_b, errors_b = _send_in_thread(path_b, 200.0)
    _bound(path_b, other_than=inode_a if path_b == path_a else None)
    worker_a = _receive(path_a)
    if path_b != path_a:
        assert _receive(path_b) == {f"layer{i}.weight": 200.0 + i for i in range(3)}
    for thread in (sender_a, sender_b):
        thread.join(BOUND_S)
        assert not thread.is_alive()
    return worker_a, errors_a, errors_b


def test_on_one_path_the_second_runs_sync_loads_its_weights_into_the_first_runs_worker(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    path = f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-replica-0-rank-0.sock"  # verl's, the same in both clusters
    worker_a, errors_a, errors_b = _two_syncs(path, path)
    assert worker_a == {f"layer{i}.weight": 200.0 + i for i in range(3)}  # B's weights, in A's worker
    assert [type(error) for error in errors_a] == [WeightSyncTimeout] and errors_b == []


def test_on_their_own_paths_each_worker_loads_its_own_runs_weights(
    rollout_config, in_cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, str(BOUND_S))
    paths = []
    for cluster in (CLUSTER_A, CLUSTER_B):
        in_cluster(cluster)
        paths.append(_sender_path(rollout_config))
    worker_a, errors_a, errors_b = _two_syncs(*paths)
    assert worker_a == {f"layer{i}.weight": 100.0 + i for i in range(3)}
    assert errors_a == errors_b == []


def test_the_plugin_patched_verls_classes_once() -> None:
    for cls in (vllm_rollout.ServerAdapter, vllm_async_server.vLLMHttpServer):
        assert cls.__dict__["__agentrl_path_per_cluster__"] is True
        init = cls.__init__
        weight_sync_path.patch_adapter_module(vllm_rollout)
        weight_sync_path.patch_server_module(vllm_async_server)
        assert cls.__init__ is init


def test_a_changed_verl_is_named(in_cluster) -> None:
    in_cluster(CLUSTER_A)
    with pytest.raises(RuntimeError, match=r"ServerAdapter is gone in this verl"):
        weight_sync_path.patch_adapter_module(ModuleType("changed"))

    class Adapter:
        def __init__(self) -> None:
            self.zmq_handle = "ipc:///tmp/some-other-layout.sock"

    module = ModuleType("changed")
    module.ServerAdapter = Adapter  # type: ignore[attr-defined]
    weight_sync_path.patch_adapter_module(module)
    with pytest.raises(RuntimeError, match=r"ServerAdapter.zmq_handle changed in this verl"):
        Adapter()
