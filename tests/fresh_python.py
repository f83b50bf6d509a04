"""`python -c CODE` / `python -m MODULE` for the tests, as a fork of a zygote that has already imported verl's heavy
third-party dependencies: each fresh-process test then skips their ~4 s of import (a plain `import verl` is ~5 s on 2
cores, most of it torch, tensordict, transformers and Ray). Never verl, vLLM or our own code: what a test asserts
about a fresh process (which modules `import verl` loads, what registers, which platform is selected) happens in the
fork exactly as in a new interpreter.

A job runs as a new interpreter would run it: its own environment, working directory and ``sys.argv``, a fresh
``__main__``, stdin from /dev/null, and a normal interpreter exit (non-daemon threads joined, atexit handlers run). What
a fork cannot honour runs as a plain subprocess instead: interpreter options other than ``-c``/``-m``, and an
environment that differs from the calling process's in a variable read at interpreter start-up or by the preloaded
libraries' imports (``STARTUP_PREFIXES``: ``PYTHONPATH``, ``HF_*``, ``RAY_*``, ...).

A pytest worker starts a zygote on first use, with its own environment, and another when the start-up variables of its
environment change (its first `import verl` sets some); a zygote runs one job at a time (a worker runs one test at a
time) and exits with the worker.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

PRELOAD = ("numpy", "torch", "tensordict", "transformers", "datasets", "omegaconf", "hydra", "pydantic", "ray")
# Variables the interpreter reads at start-up, or the preloaded libraries read while they import: a job must see the
# zygote's values of them, or it runs as a plain subprocess.
STARTUP_PREFIXES = (
    "PYTHON", "LD_", "TORCH", "PYTORCH", "CUDA", "NVIDIA", "OMP_", "MKL_", "KMP_", "OPENBLAS", "GOTO", "NUMEXPR",
    "HF_", "HUGGINGFACE", "TRANSFORMERS", "TOKENIZERS", "DATASETS", "RAY_", "GRPC_", "TQDM", "XDG_", "HOME", "TMPDIR",
    "LANG", "LC_", "TZ",
)  # fmt: skip

ZYGOTE = r"""
PRISTINE_MAIN = dict(globals())  # what `python -c` puts in __main__, for each job's own
import importlib, io, json, os, signal, sys, time, traceback, types

for name in sys.argv[1:]:
    importlib.import_module(name)
SCRIPT_DIR = sys.path.index("")  # `-c`'s entry; Ray's import put its third-party folder before it


def serve():
    print("ready", flush=True)
    for line in sys.stdin:
        job = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            return job
        print(json.dumps({"returncode": wait(pid, job["timeout"])}), flush=True)
    return None


def wait(pid, timeout):
    deadline = time.monotonic() + timeout
    while True:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(raw)
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.02)


def become(job):
    os.setsid()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_TRUNC)
        os.dup2(out, fd)
        os.close(out)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    main = types.ModuleType("__main__")
    main.__dict__.update(PRISTINE_MAIN)
    sys.modules["__main__"] = main


def run(job):
    become(job)
    option, target, *rest = job["args"]
    try:
        if option == "-c":
            sys.argv = ["-c", *rest]
            sys.path[SCRIPT_DIR] = ""
            exec(compile(target, "<string>", "exec"), sys.modules["__main__"].__dict__)
        else:
            import runpy

            sys.argv = [target, *rest]
            sys.path[SCRIPT_DIR] = os.getcwd()
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as stop:
        return stop.code
    except BaseException as error:  # as the interpreter prints it: from the job's first frame, not the zygote's
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        return 1
    return 0


job = serve()
if job is not None:
    sys.exit(run(job))
"""


class Zygote:
    """A Python process with ``PRELOAD`` imported that runs each job in a fork of itself, one at a time."""

    def __init__(self, env: Mapping[str, str]):
        self.lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *PRELOAD],
            env=dict(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self.process.stdout is None or self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the test zygote did not start (exit {self.process.wait()})")

    def run(self, args: Sequence[str], env: Mapping[str, str], cwd: str, timeout: float) -> subprocess.CompletedProcess:
        with tempfile.TemporaryDirectory(prefix="fresh-python-") as scratch, self.lock:
            stdout, stderr = Path(scratch, "stdout"), Path(scratch, "stderr")
            stdout.touch()
            stderr.touch()
            job = {"args": list(args), "env": dict(env), "cwd": cwd, "timeout": timeout}
            self._send({**job, "stdout": str(stdout), "stderr": str(stderr)})
            answer = self._answer(timeout + 60)
            out, err = stdout.read_text(errors="replace"), stderr.read_text(errors="replace")
        command = [sys.executable, *args]
        if answer == "timeout":
            raise subprocess.TimeoutExpired(command, timeout, out, err)
        return subprocess.CompletedProcess(command, int(answer), out, err)

    def close(self) -> None:
        """End of input: the zygote leaves its loop and exits."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)

    def _send(self, job: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()

    def _answer(self, timeout: float) -> int | str:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else ""
        if not line:
            self.process.kill()
            raise RuntimeError("the test zygote exited or stopped answering")
        return json.loads(line)["returncode"]


def startup_variables(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """The variables of ``env`` a fork would take from its zygote rather than from the job."""
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(STARTUP_PREFIXES)))


# Zygotes by the start-up variables they were started with: those of this process's environment when a job asked for
# one. They change when this process first imports verl or Ray (which set RAY_*, TORCH*) or a test patches one.
_zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}
KEPT_ZYGOTES = 2  # ~0.6 GB each


def run_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """``subprocess.run([sys.executable, *args], capture_output=True, text=True, ...)``, forked from the zygote where
    it can be (``env`` is the whole environment, ``os.environ`` by default)."""
    env = dict(os.environ if env is None else env)
    where = str(cwd or os.getcwd())
    startup = startup_variables(os.environ)
    if len(args) < 2 or args[0] not in ("-c", "-m") or startup_variables(env) != startup:
        command = [sys.executable, *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=where, timeout=timeout)
    return _zygote(startup).run(args, env, where, timeout)


def _zygote(startup: tuple[tuple[str, str], ...]) -> Zygote:
    zygote = _zygotes.get(startup)
    if zygote is None or zygote.process.poll() is not None:
        while len(_zygotes) >= KEPT_ZYGOTES:
            _zygotes.pop(next(iter(_zygotes))).close()
        zygote = _zygotes[startup] = Zygote(os.environ)
    return zygote
