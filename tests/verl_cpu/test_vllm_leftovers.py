"""What a vLLM run leaves behind, removed after it (:mod:`verl_cpu.vllm_leftovers`): only vLLM's files made since the
run started that no live process maps or holds open; a rendezvous file only after its grace period.

``SHM_DIR`` and the temp dir are this test's own folders; a child process maps or opens files in them as another
run's vLLM would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from verl_cpu import vllm_leftovers

HOLDER = textwrap.dedent(
    """
    import mmap, sys
    with open(sys.argv[1], "r+b") as f:
        mapped = mmap.mmap(f.fileno(), 0)  # the mapping outlives the file object, as vLLM's rings do
    held = open(sys.argv[2], "rb")
    print("ready", flush=True)
    sys.stdin.read()
    """
)


@pytest.fixture
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    shm, tmp = tmp_path / "shm", tmp_path / "tmp"
    shm.mkdir()
    tmp.mkdir()
    monkeypatch.setattr(vllm_leftovers, "SHM_DIR", shm)
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp))
    monkeypatch.setattr(vllm_leftovers, "RECHECK_S", 0.0)
    return shm, tmp


def _file(path: Path, age_s: float = 0.0) -> Path:
    path.write_bytes(b"\0" * 4096)
    if age_s:
        stamp = time.time() - age_s
        os.utime(path, (stamp, stamp))
    return path


@pytest.fixture
def holder(dirs: tuple[Path, Path]) -> Iterator[tuple[Path, Path]]:
    """A live process mapping one vLLM ring and holding one rendezvous file open (both old enough to be candidates)."""
    shm, tmp = dirs
    mapped, opened = _file(shm / "psm_mapped"), _file(tmp / "vllm_dist_open", age_s=300)
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(mapped), str(opened)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        yield mapped, opened
    finally:
        child.kill()
        child.wait()


def test_removes_only_unused_files_made_since_the_run_started(dirs: tuple[Path, Path], holder) -> None:
    shm, tmp = dirs
    mapped, opened = holder
    since = time.time() - 1000
    orphan = _file(shm / "psm_orphan")
    before_run = _file(shm / "psm_before_run", age_s=2000)  # another run's, older than ours
    not_vllm = _file(shm / "other_segment")
    stale_rendezvous = _file(tmp / "vllm_dist_stale", age_s=vllm_leftovers.RENDEZVOUS_GRACE_S + 60)
    young_rendezvous = _file(tmp / "vllm_dist_young")  # an engine may be starting: within the grace

    removed = vllm_leftovers.remove_orphans(since)

    assert sorted(removed) == sorted([orphan, stale_rendezvous])
    assert sorted(p.name for p in shm.iterdir()) == sorted(p.name for p in (mapped, before_run, not_vllm))
    assert sorted(p.name for p in tmp.iterdir()) == sorted(p.name for p in (opened, young_rendezvous))


def test_a_file_in_use_at_the_second_look_is_kept(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    shm, _ = dirs
    segment = _file(shm / "psm_just_made")
    looks = iter([set(), {str(segment)}])  # unused when first seen, mapped by its engine a moment later
    monkeypatch.setattr(vllm_leftovers, "_in_use", lambda: next(looks))
    assert vllm_leftovers.remove_orphans(time.time() - 10) == []
    assert segment.exists()


def test_nothing_to_look_at_when_no_candidate(dirs: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    shm, tmp = dirs
    _file(shm / "psm_old", age_s=100)
    _file(tmp / "vllm_dist_young")
    monkeypatch.setattr(vllm_leftovers, "_in_use", lambda: pytest.fail("/proc scanned without a candidate"))
    assert vllm_leftovers.candidates(time.time() - 10) == []
    assert vllm_leftovers.remove_orphans(time.time() - 10) == []
