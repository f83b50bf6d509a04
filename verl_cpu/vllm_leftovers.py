"""What a vLLM rollout server leaves behind when Ray kills it, removed when the run ends.

Ray ends verl's rollout servers with SIGKILL at shutdown, so vLLM never runs its own clean-up: each run leaves the
shared-memory rings of its engine (``/dev/shm/psm_*``, Python's ``multiprocessing.shared_memory`` names, 100s of MB
each, sparse) and the file of its ``torch.distributed`` rendezvous (``<tmp>/vllm_dist_<uuid>``,
``vllm/utils/network_utils.py``). On a CI machine they pile up run after run.

:func:`remove_orphans` removes those created since the run started that no live process still maps or holds open,
and seen unused twice, ``RECHECK_S`` apart. Another run on the same machine keeps its own (its processes map them), and
a segment is never caught between its creation and its first mapping. A rendezvous file is read only while its
engine starts, and nothing holds it open: only those older than ``RENDEZVOUS_GRACE_S`` go.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path

SHM_DIR = Path("/dev/shm")
SHM_PATTERN = "psm_*"
RENDEZVOUS_PATTERN = "vllm_dist_*"
RECHECK_S = 0.5
RENDEZVOUS_GRACE_S = 120.0  # an engine start takes well under this; its rendezvous file is not read afterwards


def _in_use() -> set[str]:
    """Every path a live process maps or holds open (what /proc lets this user read)."""
    paths: set[str] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            for line in (proc / "maps").read_text().splitlines():
                parts = line.split(maxsplit=5)
                if len(parts) == 6:
                    paths.add(parts[5].removesuffix(" (deleted)"))
        with contextlib.suppress(OSError):
            for fd in (proc / "fd").iterdir():
                with contextlib.suppress(OSError):
                    paths.add(os.readlink(fd))
    return paths


def candidates(since: float, now: float | None = None) -> list[Path]:
    """vLLM's shared-memory rings modified since ``since`` and its rendezvous files older than the grace period."""
    now = time.time() if now is None else now
    picked = []
    for path, newest in [
        *((p, now) for p in SHM_DIR.glob(SHM_PATTERN)),
        *((p, now - RENDEZVOUS_GRACE_S) for p in Path(tempfile.gettempdir()).glob(RENDEZVOUS_PATTERN)),
    ]:
        with contextlib.suppress(OSError):
            if since <= path.stat().st_mtime <= newest:
                picked.append(path)
    return picked


def remove_orphans(since: float) -> list[Path]:
    """Remove the :func:`candidates` that no live process uses, checked twice; returns what was removed."""
    picked = candidates(since)
    if not picked:
        return []
    unused = [path for path in picked if str(path) not in _in_use()]
    time.sleep(RECHECK_S)
    in_use = _in_use()
    removed = []
    for path in unused:
        if str(path) in in_use:
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    return removed
