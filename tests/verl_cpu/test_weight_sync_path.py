"""The weight-sync path per Ray cluster (:mod:`verl_cpu.weight_sync_path`).

The paths come from verl's real ``ServerAdapter`` (the sender's end), ``vLLMHttpServer`` (which exports the job id to
its vLLM workers) and ``vLLMColocateWorkerExtension._get_zmq_handle`` (the receiver's end), built from a composed CPU
config in one fresh process (those modules import vLLM, which the test process keeps out). The syncs over those paths
run verl's real bucketed sender and receiver, from a fresh copy of their module (no vLLM either).

Two clusters are two Ray runtime contexts with the same job id (every cluster's first job is ``01000000``) and their
own GCS address. The tests' job id is this process's pid in hex, so their socket paths cannot meet a trainer running
beside them in the suite.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path
from types import ModuleType

import pytest
import torch
from cpu_helpers import fresh_verl_module, run_probe

from verl_cpu import weight_sender_timeout, weight_sync_path
from verl_cpu.weight_sender_timeout import SENDER_MODULE, TIMEOUT_ENV, WeightSyncTimeout

JOB_ID = f"{os.getpid():08x}"
GCS_A, GCS_B = "192.0.2.2:6379", "192.0.2.2:6380"  # digests 832d9d48 and be2901e2
VERLS_PATH = f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-replica-0-rank-0.sock"
PATH_A = f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-832d9d48-replica-0-rank-0.sock"
PATH_B = f"ipc:///tmp/rl-colocate-zmq-{JOB_ID}-be2901e2-replica-0-rank-0.sock"
BOUND_S = 60.0

# In a fresh process: each cluster's (sender path, receiver path) from verl's own __init__s (under the fix, their
# __wrapped__) and from the patched ones, and whether the plugin patched both classes on their import.
PROBE = """
import json, os, sys
from types import SimpleNamespace
import ray
from agentrl_recipe.offline.rollout import compose_config
from verl.workers.rollout.replica import RolloutMode
from verl.workers.rollout.vllm_rollout import utils, vllm_async_server, vllm_rollout

job_id, model_dir, gcs_addresses = sys.argv[1], sys.argv[2], sys.argv[3:]
cfg = compose_config(model_dir, prompt_length=32, response_length=12).actor_rollout_ref
os.environ.update(RANK="0", RAY_LOCAL_WORLD_SIZE="1")
Adapter, Server = vllm_rollout.ServerAdapter, vllm_async_server.vLLMHttpServer

def paths(verls_own):
    adapter, server = Adapter.__new__(Adapter), Server.__new__(Server)
    adapter_init, server_init = Adapter.__init__, Server.__init__
    if verls_own:  # verl's own, under the fix where it is applied
        adapter_init, server_init = (getattr(init, "__wrapped__", init) for init in (adapter_init, server_init))
    adapter_init(adapter, config=cfg.rollout, model_config=cfg.model, device_mesh=None)
    server_init(server, config=cfg.rollout, model_config=cfg.model, rollout_mode=RolloutMode.COLOCATED, workers=[],
                replica_rank=0, node_rank=0, gpus_per_node=1, nnodes=1, cuda_visible_devices="")
    receiver = utils.vLLMColocateWorkerExtension._get_zmq_handle(SimpleNamespace(local_rank=0, model_runner=None))
    return [adapter.zmq_handle, receiver]

report = {"patched": [cls.__dict__.get("__agentrl_path_per_cluster__", False) for cls in (Adapter, Server)]}
for verls_own in (True, False):
    for gcs in gcs_addresses:
        ray.get_runtime_context = lambda gcs=gcs: SimpleNamespace(get_job_id=lambda: job_id, gcs_address=gcs)
        report.setdefault("verl" if verls_own else "fixed", []).append(paths(verls_own))
print("@@" + json.dumps(report))
"""


@pytest.fixture(scope="module")
def probed(tiny_model_dir: Path) -> dict:
    code = f"import sys; sys.argv[1:] = {[JOB_ID, str(tiny_model_dir), GCS_A, GCS_B]!r}\n{PROBE}"
    return run_probe(code)


@pytest.mark.slow  # a fresh process importing vLLM
def test_verl_gives_two_clusters_one_path(probed: dict) -> None:
    assert probed["verl"] == [[VERLS_PATH, VERLS_PATH], [VERLS_PATH, VERLS_PATH]]


@pytest.mark.slow
def test_each_cluster_gets_its_own_path_and_its_two_ends_agree(probed: dict) -> None:
    assert probed["patched"] == [True, True]  # by the plugin, when verl's modules were imported
    assert probed["fixed"] == [[PATH_A, PATH_A], [PATH_B, PATH_B]]


@pytest.fixture
def transfer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """verl's bucketed sender and receiver, a fresh copy with the sender's timeout (1 s unless a test sets it)."""
    monkeypatch.setenv(TIMEOUT_ENV, "1")
    module = fresh_verl_module(SENDER_MODULE)
    weight_sender_timeout.patch_module(module)
    return module


def _weights(value: float) -> list[tuple[str, torch.Tensor]]:
    return [(f"layer{i}.weight", torch.full((4, 8), value + i)) for i in range(3)]


def _send_in_thread(transfer: ModuleType, path: str, value: float) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def send() -> None:
        sender = transfer.BucketedWeightSender(zmq_handle=path, bucket_size_mb=1, use_shm=True)
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


def _receive(transfer: ModuleType, path: str) -> dict[str, float]:
    """verl's receiver, as the vLLM worker runs it: the first value of each tensor it loads."""
    received: dict[str, float] = {}
    receiver = transfer.BucketedWeightReceiver(path, device=torch.device("cpu"), use_shm=True)
    receiver.receive_weights(lambda weights, is_last: received.update((n, float(t[0, 0])) for n, t in weights))
    return received


def _two_syncs(
    transfer: ModuleType, path_a: str, path_b: str
) -> tuple[dict[str, float], list[BaseException], list[BaseException]]:
    """Run A's sync to its path, then B's to its own, then A's worker; A's worker's weights and both senders' errors."""
    sender_a, errors_a = _send_in_thread(transfer, path_a, 100.0)
    inode_a = _bound(path_a)
    sender_b, errors_b = _send_in_thread(transfer, path_b, 200.0)
    _bound(path_b, other_than=inode_a if path_b == path_a else None)
    worker_a = _receive(transfer, path_a)
    if path_b != path_a:
        assert _receive(transfer, path_b) == {f"layer{i}.weight": 200.0 + i for i in range(3)}
    for thread in (sender_a, sender_b):
        thread.join(BOUND_S)
        assert not thread.is_alive()
    return worker_a, errors_a, errors_b


def test_on_one_path_the_second_runs_sync_loads_its_weights_into_the_first_runs_worker(transfer: ModuleType) -> None:
    worker_a, errors_a, errors_b = _two_syncs(transfer, VERLS_PATH, VERLS_PATH)
    assert worker_a == {f"layer{i}.weight": 200.0 + i for i in range(3)}  # B's weights, in A's worker
    assert [type(error) for error in errors_a] == [WeightSyncTimeout] and errors_b == []


def test_on_their_own_paths_each_worker_loads_its_own_runs_weights(
    transfer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, str(BOUND_S))  # a healthy sync: its bound is not under test
    worker_a, errors_a, errors_b = _two_syncs(transfer, PATH_A, PATH_B)
    assert worker_a == {f"layer{i}.weight": 100.0 + i for i in range(3)}
    assert errors_a == errors_b == []


class _Cluster:
    gcs_address = GCS_A

    def get_job_id(self) -> str:
        return JOB_ID


def test_the_cluster_job_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weight_sync_path.ray, "get_runtime_context", _Cluster)
    assert weight_sync_path.cluster_job_id() == f"{JOB_ID}-832d9d48"


def test_a_changed_verl_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weight_sync_path.ray, "get_runtime_context", _Cluster)
    with pytest.raises(RuntimeError, match=r"ServerAdapter is gone in this verl"):
        weight_sync_path.patch_adapter_module(ModuleType("changed"))

    class Adapter:
        def __init__(self) -> None:
            self.zmq_handle = "ipc:///tmp/some-other-layout.sock"

    module = ModuleType("changed")
    module.ServerAdapter = Adapter  # type: ignore[attr-defined]
    weight_sync_path.patch_adapter_module(module)
    init = Adapter.__init__
    weight_sync_path.patch_adapter_module(module)  # idempotent
    assert Adapter.__init__ is init
    with pytest.raises(RuntimeError, match=r"ServerAdapter.zmq_handle changed in this verl"):
        Adapter()
