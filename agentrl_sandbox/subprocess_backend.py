"""``subprocess`` backend: plain child processes with rlimits and a scrubbed environment — NO isolation.

For debugging only (e.g. a machine without bubblewrap while developing). Model-written code run this way can read
and write the host's files and reach the network. It warns loudly every time one is created.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
import warnings

from agentrl_sandbox._capture import communicate_capped
from agentrl_sandbox.types import ExecResult, Sandbox, classify, status_message

logger = logging.getLogger(__name__)

WARNING = (
    "agentrl sandbox backend 'subprocess' has NO ISOLATION: model-written code can read/write host files and use "
    "the network. Use it only for debugging; the default 'local' backend (bubblewrap) is the safe choice."
)

SCRIPT_NAME = "main.py"


def write_scratch(root: str, code: str, files: dict[str, bytes]) -> str:
    """Write the program as ``main.py`` plus ``files`` into ``root``; returns the program's path."""
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
    main = os.path.join(root, SCRIPT_NAME)
    with open(main, "w", encoding="utf-8") as f:
        f.write(code)
    return main


def child_env(home: str) -> dict[str, str]:
    """The whole environment a run sees: nothing inherited from the host (no tokens, no proxy settings)."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONIOENCODING": "utf-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class SubprocessSandbox(Sandbox):
    name = "subprocess"

    def __init__(self, *, timeout_s: float, memory_mb: int, max_output_bytes: int, max_concurrency: int) -> None:
        warnings.warn(WARNING, RuntimeWarning, stacklevel=2)
        logger.warning(WARNING)
        super().__init__(timeout_s, memory_mb)
        self.max_output_bytes = int(max_output_bytes)
        self.max_concurrency = int(max_concurrency)
        self._sem = asyncio.Semaphore(self.max_concurrency)  # bound to no loop until first use (Python >= 3.10)

    def describe(self) -> dict:
        return {"backend": self.name, "isolation": "none", "max_concurrency": self.max_concurrency}

    async def _execute(
        self, code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
    ) -> ExecResult:
        async with self._sem:
            scratch = tempfile.mkdtemp(prefix="agentrl-sbx-")
            try:
                write_scratch(scratch, code, files)
                proc = await asyncio.create_subprocess_exec(
                    *launch_command(timeout_s, memory_mb),
                    cwd=scratch,
                    env=child_env(scratch),
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
                cap = await communicate_capped(
                    proc, stdin.encode() if stdin else None, timeout_s, self.max_output_bytes
                )
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        stderr = cap.stderr.decode("utf-8", "replace")
        status = classify(cap.exit_code, stderr, timed_out=cap.timed_out, truncated=cap.truncated)
        return ExecResult(
            status=status,
            stdout=cap.stdout.decode("utf-8", "replace"),
            stderr=stderr,
            exit_code=cap.exit_code,
            duration_s=cap.duration_s,
            message=status_message(status, timeout_s, memory_mb, self.max_output_bytes),
        )


# Sets the limits in the child, then execs the program. A ``preexec_fn`` would do the same from inside fork(), which
# Python documents as unsafe in a threaded parent: the child can deadlock before exec (a run that never starts).
_LAUNCHER = (
    "import os, resource, sys\n"
    "for which, value in zip((resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE),"
    " map(int, sys.argv[1:5])):\n"
    "    resource.setrlimit(which, (value, value))\n"
    f"os.execv(sys.executable, [sys.executable, '-I', {SCRIPT_NAME!r}])\n"
)


def launch_command(timeout_s: float, memory_mb: int) -> list[str]:
    """argv that applies the run's rlimits (address space, CPU seconds, file size, no core) and then runs main.py."""
    limits = (memory_mb << 20, int(timeout_s) + 1, 64 << 20, 0)
    return [sys.executable, "-I", "-S", "-c", _LAUNCHER, *map(str, limits)]
