"""The pool's run folder: named after its owner process, and removed by the next pool once that owner is gone (an
owner killed without closing cannot remove it itself)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from agentrl_sandbox.bwrap import RUNDIR_PREFIX, sweep_orphaned_rundirs
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_only_folders_of_a_gone_owner_are_removed(tmp_path: Path) -> None:
    orphan = tmp_path / f"{RUNDIR_PREFIX}{dead_pid()}-ab_c9xyz"
    mine = tmp_path / f"{RUNDIR_PREFIX}{os.getpid()}-k2l3m4n5"
    unnamed = tmp_path / f"{RUNDIR_PREFIX}q8w7e6r5"  # an owner's pid not in its name: kept
    for folder in (orphan, mine, unnamed):
        folder.mkdir()
        (folder / "pool.sock").touch()
    same_name_file = tmp_path / f"{RUNDIR_PREFIX}{dead_pid()}-fileonly"
    same_name_file.touch()
    assert sweep_orphaned_rundirs(str(tmp_path)) == [str(orphan)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, unnamed, same_name_file))


def test_a_pool_killed_without_closing_leaves_a_folder_the_next_pool_removes() -> None:
    owner = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from agentrl_sandbox.config import SandboxConfig; from agentrl_sandbox.local import LocalSandbox; "
            "sb = LocalSandbox(SandboxConfig(backend='local', pool_size=1)); print(sb._cmd.rundir, flush=True); "
            "import time; time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert owner.stdout is not None
        rundir = Path(owner.stdout.readline().strip())
        assert rundir.name.startswith(f"{RUNDIR_PREFIX}{owner.pid}-") and (rundir / "pool.sock").exists()
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    assert rundir.is_dir()  # SIGKILL: no cleanup ran
    LocalSandbox(SandboxConfig(backend="local", pool_size=1)).close()  # the next pool on the host
    assert not rundir.exists()
