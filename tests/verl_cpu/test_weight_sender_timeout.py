"""The weight-sender timeout (:mod:`verl_cpu.weight_sender_timeout`) on verl's real
``verl.workers.rollout.vllm_rollout.bucketed_weight_transfer.BucketedWeightSender`` (and its
``BucketedWeightReceiver`` as the vLLM worker's side), over a real ZMQ ``ipc://`` socket and POSIX shared memory.

verl's module is loaded afresh from its file for each test: its package ``__init__`` imports vLLM, which these tests
do not need, and a fresh copy keeps verl's unpatched class to show the bug. verl's device calls go to the CPU
platform's device module, as in a CPU run.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
import threading
import time
import traceback
from multiprocessing import shared_memory
from pathlib import Path
from types import ModuleType

import pytest
import torch
import zmq
from cpu_helpers import fresh_verl_module

from verl_cpu import weight_sender_timeout
from verl_cpu.device_module import cpu_device_module
from verl_cpu.weight_sender_timeout import SENDER_MODULE, TIMEOUT_ENV, WeightSyncTimeout

TIMEOUT_S = 1.0
HEALTHY_TIMEOUT_S = 60.0  # a CI run at load 5 once kept the receiver thread from a bucket for over 1 s
BOUND_S = 60.0  # a generous bound on a busy machine: the point is that the sync ends, not how fast


@pytest.fixture
def verl_transfer(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh, unpatched copy of verl's module, its device calls on the CPU platform's device module."""
    module = fresh_verl_module(SENDER_MODULE)
    monkeypatch.setattr(module, "get_torch_device", lambda: cpu_device_module)
    monkeypatch.setattr(module, "is_support_ipc", lambda: False)
    monkeypatch.setenv(TIMEOUT_ENV, str(TIMEOUT_S))
    return module


@pytest.fixture
def zmq_handle():
    folder = tempfile.mkdtemp(prefix="ws", dir="/tmp")  # an ipc:// path must stay under ~107 characters
    yield f"ipc://{folder}/sync.sock"
    shutil.rmtree(folder, ignore_errors=True)


def _segments_made(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the shared-memory buckets ``module.create_shared_memory`` makes from now on."""
    names: list[str] = []
    create = module.create_shared_memory

    def spy(size: int, name: str):
        names.append(name)
        return create(size, name)

    monkeypatch.setattr(module, "create_shared_memory", spy)
    return names


def _exists(segment: str) -> bool:
    try:
        shared_memory.SharedMemory(name=segment).close()
    except FileNotFoundError:
        return False
    return True


def _weights() -> list[tuple[str, torch.Tensor]]:
    return [(f"layer{i}.weight", torch.full((4, 8), float(i))) for i in range(3)]


def _send(module: ModuleType, zmq_handle: str) -> None:
    sender = module.BucketedWeightSender(zmq_handle=zmq_handle, bucket_size_mb=1, use_shm=True)
    asyncio.run(sender.async_send_weights(iter(_weights())))


def _close_the_bucket_a_failed_receiver_kept(receiver, exc: BaseException) -> None:
    """On CPU verl's received tensors are views of the bucket (``.to("cpu")`` copies nothing). A failed callback's
    frames keep them, so verl's clean-up cannot close the mapping and leaves ``receiver.shm`` set; left to the garbage
    collector it raises BufferError again, unraisable, in whatever test runs then. Free the views, then close it."""
    error: BaseException | None = exc
    while error is not None:
        traceback.clear_frames(error.__traceback__)
        error = error.__context__
    assert receiver.shm is not None  # verl's _cleanup raised at shm.close(), before it let go of the mapping
    receiver.shm.close()


def _receive_in_thread(module: ModuleType, zmq_handle: str, on_bucket) -> tuple[threading.Thread, list]:
    """verl's receiver in a thread; its errors land in the list, each failed receiver's bucket mapping closed."""
    errors: list[BaseException] = []

    def receive() -> None:
        receiver = module.BucketedWeightReceiver(zmq_handle=zmq_handle, device=torch.device("cpu"), use_shm=True)
        try:
            receiver.receive_weights(on_bucket_received=on_bucket)
        except BaseException as exc:  # the worker's own failure, kept for the test to look at
            errors.append(exc)
            _close_the_bucket_a_failed_receiver_kept(receiver, exc)

    thread = threading.Thread(target=receive, daemon=True)
    thread.start()
    return thread, errors


def test_verls_sender_waits_without_a_bound(verl_transfer: ModuleType, zmq_handle: str) -> None:
    sender = verl_transfer.BucketedWeightSender(zmq_handle=zmq_handle, bucket_size_mb=1, use_shm=True)
    sender._init_socket()
    try:  # ZMQ's -1: send and receive wait forever for a worker that is gone
        assert (sender.socket.getsockopt(zmq.SNDTIMEO), sender.socket.getsockopt(zmq.RCVTIMEO)) == (-1, -1)
    finally:
        sender.socket.close(linger=0)


def test_verls_clean_up_leaves_the_bucket_when_its_first_message_times_out(
    verl_transfer: ModuleType, zmq_handle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why the fix also unlinks: verl sets ``self.shm`` only after the receiver took the bucket's name."""
    segments = _segments_made(verl_transfer, monkeypatch)
    init_socket = verl_transfer.BucketedWeightSender._init_socket

    def init_socket_with_a_send_bound(self) -> None:
        init_socket(self)
        self.socket.setsockopt(zmq.SNDTIMEO, int(TIMEOUT_S * 1000))
        self.socket.setsockopt(zmq.LINGER, 0)

    monkeypatch.setattr(verl_transfer.BucketedWeightSender, "_init_socket", init_socket_with_a_send_bound)
    with pytest.raises(zmq.Again):
        _send(verl_transfer, zmq_handle)
    try:
        assert len(segments) == 1 and _exists(segments[0])
    finally:
        shared_memory.SharedMemory(name=segments[0]).unlink()


def test_no_receiver_fails_with_one_clear_error_and_leaves_nothing(
    verl_transfer: ModuleType, zmq_handle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weight_sender_timeout.patch_module(verl_transfer)
    segments = _segments_made(verl_transfer, monkeypatch)
    start = time.monotonic()
    with pytest.raises(WeightSyncTimeout, match=f"timed out after 1 s \\({TIMEOUT_ENV}\\).*worker likely died"):
        _send(verl_transfer, zmq_handle)
    elapsed = time.monotonic() - start
    assert TIMEOUT_S <= elapsed < BOUND_S
    assert len(segments) == 1 and not _exists(segments[0])
    assert not Path(zmq_handle.removeprefix("ipc://")).exists()


def test_a_worker_that_dies_mid_sync_fails_the_sync(
    verl_transfer: ModuleType, zmq_handle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    weight_sender_timeout.patch_module(verl_transfer)
    segments = _segments_made(verl_transfer, monkeypatch)

    def load_weights_fails(weights, is_last: bool) -> None:
        raise RuntimeError("load_weights failed in the vLLM worker")

    thread, worker_errors = _receive_in_thread(verl_transfer, zmq_handle, load_weights_fails)
    with pytest.raises(WeightSyncTimeout):
        _send(verl_transfer, zmq_handle)
    thread.join(BOUND_S)
    assert not thread.is_alive()
    # the worker took the bucket and failed without its ack; verl's receiver clean-up then raises BufferError (the
    # bucket's views are still alive) over the worker's own error, which survives only as its context
    assert [type(error) for error in worker_errors] == [BufferError]
    assert repr(worker_errors[0].__context__) == "RuntimeError('load_weights failed in the vLLM worker')"
    assert len(segments) == 1 and not _exists(segments[0])


def test_a_healthy_sync_is_unchanged(
    verl_transfer: ModuleType, zmq_handle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A live receiver that the loaded CI machine schedules late must not look dead: the bound here is not under test.
    monkeypatch.setenv(TIMEOUT_ENV, str(HEALTHY_TIMEOUT_S))
    weight_sender_timeout.patch_module(verl_transfer)
    segments = _segments_made(verl_transfer, monkeypatch)
    received: dict[str, torch.Tensor] = {}
    thread, worker_errors = _receive_in_thread(
        verl_transfer, zmq_handle, lambda weights, is_last: received.update((n, t.clone()) for n, t in weights)
    )
    _send(verl_transfer, zmq_handle)
    thread.join(BOUND_S)
    assert not thread.is_alive() and worker_errors == []
    assert sorted(received) == [name for name, _ in _weights()]
    assert all(torch.equal(received[name], tensor) for name, tensor in _weights())
    assert len(segments) == 1 and not _exists(segments[0])


def test_the_socket_gets_the_configured_bounds(verl_transfer: ModuleType, zmq_handle: str) -> None:
    weight_sender_timeout.patch_module(verl_transfer)
    sender = verl_transfer.BucketedWeightSender(zmq_handle=zmq_handle, bucket_size_mb=1, use_shm=True)
    sender._init_socket()
    try:
        options = (zmq.SNDTIMEO, zmq.RCVTIMEO, zmq.LINGER)
        assert [sender.socket.getsockopt(option) for option in options] == [1000, 1000, 0]
    finally:
        sender.socket.close()


def test_apply_patches_verls_module_through_the_import_hook(
    verl_transfer: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, SENDER_MODULE, verl_transfer)  # "already imported": fixed at once
    weight_sender_timeout.apply()
    assert getattr(verl_transfer.BucketedWeightSender, "__agentrl_sync_timeout__", False)
    wrapped = verl_transfer.BucketedWeightSender.async_send_weights
    weight_sender_timeout.patch_module(verl_transfer)  # idempotent
    assert verl_transfer.BucketedWeightSender.async_send_weights is wrapped


def test_a_changed_verl_is_named() -> None:
    module = ModuleType("changed")
    with pytest.raises(RuntimeError, match=f"{SENDER_MODULE}.BucketedWeightSender changed in this verl"):
        weight_sender_timeout.patch_module(module)


@pytest.mark.parametrize(
    "raw, expected",
    [("", 600.0), ("2.5", 2.5), ("abc", "expected seconds"), ("0", "must be > 0"), ("-1", "must be > 0")],
)
def test_timeout_from_the_environment(raw: str, expected, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, raw)
    if isinstance(expected, float):
        assert weight_sender_timeout.timeout_s() == expected
    else:
        with pytest.raises(ValueError, match=f"{TIMEOUT_ENV}={raw!r}: {expected}"):
            weight_sender_timeout.timeout_s()
