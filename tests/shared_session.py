"""What the xdist workers of one ``make test`` session share: a folder, and the locks kept in it; and what sessions
share across runs: builds cached under a content key (the SFT model the trainer tests start from)."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from filelock import FileLock

REPO = Path(__file__).resolve().parents[1]
# Where cached builds live across sessions; "off" builds once per session instead (in the session's temp folder).
CACHE_ENV = "AGENTRL_TEST_CACHE"
DEFAULT_CACHE = Path.home() / ".cache" / "agentrl_recipe" / "tests"
CACHE_KEEP = 4  # entries kept per build name: a few branches' worth, each a few MB
CACHE_EVICT_AFTER_S = 24 * 3600  # an older entry beyond CACHE_KEEP may still serve a session running right now
DONE = ".done"


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """``<session temp>/name``, the same path for every xdist worker of this session (each has its own basetemp)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # .../pytest-N/popen-gwK -> .../pytest-N
    return root / name


def cache_root() -> Path | None:
    """The cross-session cache folder, or None when ``AGENTRL_TEST_CACHE=off``."""
    value = os.environ.get(CACHE_ENV)
    if value is None:
        return DEFAULT_CACHE
    return None if value.strip().lower() in ("", "0", "off", "no", "false") else Path(value)


def _is_build_output(relative: Path) -> bool:
    """Bytecode, or setuptools' metadata (``*.egg-info``), which any pip build of the folder rewrites: the suite's own
    resolve test does, mid-session, so hashing it gave the same code two keys. ``relative`` is below the hashed folder:
    a checkout that itself sits in a folder with such a name still hashes its files."""
    return relative.suffix == ".pyc" or any(p == "__pycache__" or p.endswith(".egg-info") for p in relative.parts)


def _files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not _is_build_output(p.relative_to(path)))


def content_key(paths: Iterable[Path], distributions: Iterable[str] = (), extra: Iterable[str] = ()) -> str:
    """A hash of the files under ``paths`` (names and bytes), the installed versions of ``distributions``, Python's
    version and ``extra`` (e.g. the run's arguments): equal keys mean the build would be the same."""
    digest = hashlib.sha256(sys.version.encode())
    for name in distributions:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "absent"
        digest.update(f"\0{name}=={version}".encode())
    for part in extra:
        digest.update(b"\0" + part.encode())
    for root in paths:
        for path in _files(root):
            name = path.relative_to(REPO) if path.is_relative_to(REPO) else path
            digest.update(b"\0" + str(name).encode() + b"\0")
            digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str, key: str, build: Callable[[Path], None]) -> Path:
    """The folder ``build`` filled, built once: ``<cache>/<name>/<key>`` reused by every session while ``key`` holds
    (under a lock, so xdist workers and concurrent sessions build it once), or ``<session temp>/<name>`` with the
    cache off. A build that failed or was killed leaves no ``.done``: the next session starts it over."""
    root = cache_root()
    where = shared_dir(tmp_path_factory, name) if root is None else root / name / key
    where.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(f"{where}.lock"):
        done = where / DONE
        if not done.is_file():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir()
            started = time.monotonic()
            build(where)
            seconds = round(time.monotonic() - started, 1)
            done.write_text(json.dumps({"seconds": seconds, "test": os.environ.get("PYTEST_CURRENT_TEST", "")}))
        else:
            os.utime(done)  # recently used: kept by the eviction below
    if root is not None:
        _evict(where.parent, keep=where)
    return where


def build_record(where: Path) -> dict:
    """How long a ``built_once`` build took and which test paid for it (the suite benchmark's scheduling record)."""
    return json.loads((where / DONE).read_text())


def _evict(folder: Path, keep: Path) -> None:
    """Entries beyond the CACHE_KEEP most recently used, unused for a day; ones being built (no ``.done``) stay."""
    entries = sorted(
        (p for p in folder.iterdir() if (p / DONE).is_file() and p != keep),
        key=lambda p: (p / DONE).stat().st_mtime,
        reverse=True,
    )
    now = time.time()
    for stale in entries[CACHE_KEEP - 1 :]:
        if now - (stale / DONE).stat().st_mtime > CACHE_EVICT_AFTER_S:
            with FileLock(f"{stale}.lock"):
                shutil.rmtree(stale, ignore_errors=True)
            Path(f"{stale}.lock").unlink(missing_ok=True)
