"""``agentrl-recipe`` and ``agentrl-sandbox`` themselves, run as a user runs them: from outside the checkout."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from agentrl_recipe import cli


def test_help_lists_every_subcommand(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.cli", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert all(name in proc.stdout for name in cli.COMMANDS)


def test_no_subcommand_imports_from_the_checkout(tmp_path: Path) -> None:
    """The installed CLI never edits sys.path nor reaches into a clone: the demo is `make demo` /
    `python -m demo.demo`."""
    assert "demo" not in cli.COMMANDS
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, agentrl_recipe.cli as c; p = list(sys.path); c.main(['--help']); assert sys.path == p",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr


def test_agentrl_sandbox_is_its_own_console_script(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_sandbox.cli", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: agentrl-sandbox") and "serve" in proc.stdout
