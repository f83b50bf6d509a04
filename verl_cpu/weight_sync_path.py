"""Runtime fix of verl 0.9.1: two Ray clusters on one host share the vLLM weight-sync socket path.

verl's vLLM rollout sends weights from ``ServerAdapter`` (in the trainer's worker) to its vLLM worker over
``ipc:///tmp/rl-colocate-zmq-{job_id}-replica-{replica}-rank-{local_rank}.sock``. verl put the Ray job id in the path
(#6246) so that two jobs on one host would not share it, but Ray counts job ids from 1 in every cluster: every run
that starts its own cluster, as ``main_ppo`` does, is job ``01000000``. Two such runs on one host (two experiments on
the GPUs of one node, a test suite's parallel workers) share the path. verl's sender removes the path before it binds,
so the second run's sync takes the file over: the first run's vLLM worker connects to the second run's sender and
loads its weights, and the first run's sender waits for a worker that never comes (with
:mod:`verl_cpu.weight_sender_timeout`, 600 s and "the server did not take a bucket").

The fix makes the id unique per cluster: the job id followed by a digest of the cluster's GCS address, which every
process of one cluster shares and no two clusters alive on one host do. Both ends take it: the sender's path, set in
``ServerAdapter.__init__``, and ``VERL_RAY_JOB_ID``, which ``vLLMHttpServer.__init__`` exports to the vLLM workers
it starts and verl's ``vLLMColocateWorkerExtension._get_zmq_handle`` reads there.

Applied by the plugin (:mod:`verl_cpu.plugin`) on every platform when verl's modules are first imported. Upstream:
``UPSTREAM.md``; delete this module once verl's path is unique per cluster.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import ray

from verl_cpu import import_hook

ADAPTER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_rollout"
SERVER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_async_server"
ADAPTER_SYMBOL = f"{ADAPTER_MODULE}.ServerAdapter"
SERVER_SYMBOL = f"{SERVER_MODULE}.vLLMHttpServer"
JOB_ID_ENV = "VERL_RAY_JOB_ID"  # what verl's vLLM worker extension puts in its path
PATH_PREFIX = "ipc:///tmp/rl-colocate-zmq-"
_MARK = "__agentrl_path_per_cluster__"


def cluster_job_id() -> str:
    """This process's Ray job id, qualified by its cluster: ``01000000-<8 hex digits of the GCS address>``."""
    context = ray.get_runtime_context()
    digest = hashlib.sha256(context.gcs_address.encode()).hexdigest()[:8]
    return f"{context.get_job_id()}-{digest}"


def _verl_job_id() -> str:
    return ray.get_runtime_context().get_job_id()


def _adapter_init(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def init_with_cluster_path(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        verl_prefix = f"{PATH_PREFIX}{_verl_job_id()}-"
        if not str(self.zmq_handle).startswith(verl_prefix):
            raise RuntimeError(
                f"{ADAPTER_SYMBOL}.zmq_handle changed in this verl ({self.zmq_handle!r} does not start with "
                f"{verl_prefix!r}); cannot make the weight-sync path unique per Ray cluster"
            )
        self.zmq_handle = f"{PATH_PREFIX}{cluster_job_id()}-{self.zmq_handle[len(verl_prefix) :]}"

    return init_with_cluster_path


def _server_init(init: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(init)
    def init_with_cluster_job_id(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        exported, expected = os.environ.get(JOB_ID_ENV), _verl_job_id()
        if exported != expected:
            raise RuntimeError(
                f"{SERVER_SYMBOL}.__init__ changed in this verl ({JOB_ID_ENV}={exported!r}, not the Ray job id "
                f"{expected!r}); cannot make the weight-sync path unique per Ray cluster"
            )
        os.environ[JOB_ID_ENV] = cluster_job_id()  # before launch_server starts the vLLM workers, which inherit it

    return init_with_cluster_job_id


def _wrap_init(module: ModuleType, name: str, symbol: str, wrap: Callable[[Any], Callable[..., None]]) -> None:
    cls = getattr(module, name, None)
    if not isinstance(cls, type):
        raise RuntimeError(f"{symbol} is gone in this verl; cannot make the weight-sync path unique per Ray cluster")
    if cls.__dict__.get(_MARK, False):
        return
    cls.__init__ = wrap(cls.__init__)  # type: ignore[misc]
    setattr(cls, _MARK, True)


def patch_adapter_module(module: ModuleType) -> None:
    """The sender's end: ``ServerAdapter``'s path carries the cluster (idempotent)."""
    _wrap_init(module, "ServerAdapter", ADAPTER_SYMBOL, _adapter_init)


def patch_server_module(module: ModuleType) -> None:
    """The receiver's end: the vLLM workers ``vLLMHttpServer`` starts see the cluster's job id (idempotent)."""
    _wrap_init(module, "vLLMHttpServer", SERVER_SYMBOL, _server_init)


def apply() -> None:
    import_hook.when_imported(ADAPTER_MODULE, patch_adapter_module)
    import_hook.when_imported(SERVER_MODULE, patch_server_module)
