"""``agentrl-recipe`` itself: ``python -m agentrl_recipe.cli`` and the demo subcommand, whose package lives at the
repository root (``demo/``, not installed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from agentrl_recipe import cli


def test_help_lists_every_subcommand(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.cli", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert all(name in proc.stdout for name in cli.COMMANDS)


def test_demo_runs_from_outside_the_checkout(tmp_path: Path) -> None:
    """A console script's sys.path has neither the working directory nor the checkout: the demo is found anyway."""
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.cli", "demo", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: agentrl-recipe demo")


def test_demo_without_a_checkout_fails_with_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cli, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if not (Path(p or ".") / "demo" / "__init__.py").is_file()])
    for name in [n for n in sys.modules if n == "demo" or n.startswith("demo.")]:
        monkeypatch.delitem(sys.modules, name)
    with pytest.raises(SystemExit, match=r"^agentrl-recipe demo: the demo ships with the repository") as exc:
        cli.main(["demo", "--fast"])
    assert "\n" not in str(exc.value) and "make demo" in str(exc.value)
