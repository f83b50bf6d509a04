"""docs/slurm/*.sbatch: each is valid bash (``bash -n``), and every make target, make variable, console-script
subcommand and default config it names exists in this repository."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

from agentrl_recipe.cli import COMMANDS
from agentrl_sandbox.cli import add_arguments as sandbox_arguments

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "docs" / "slurm").glob("*.sbatch"))
MAKEFILE = (REPO / "Makefile").read_text(encoding="utf-8")
MAKE_CALL = re.compile(r"^\s*make ([\w-]+)((?:.*\\\n)*.*)$", re.M)  # with its continuation lines


def _sandbox_subcommands() -> set[str]:
    parser = argparse.ArgumentParser()
    sandbox_arguments(parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return set(sub.choices)


def test_there_are_a_one_node_and_a_multi_node_example() -> None:
    assert [p.name for p in SCRIPTS] == ["multi_node.sbatch", "one_node.sbatch"]


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_the_script_is_valid_bash(script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_make_target_and_variable_exists(script: Path) -> None:
    calls = MAKE_CALL.findall(script.read_text(encoding="utf-8"))
    assert calls, f"{script.name} runs no make target"
    for target, rest in calls:
        assert re.search(rf"^{re.escape(target)}:", MAKEFILE, re.M), f"{script.name}: no make target {target!r}"
        for var in re.findall(r"\b([A-Z][A-Z_]+)=", rest):
            assert f"$({var})" in MAKEFILE, f"{script.name}: make {target} is given {var}=, which the Makefile ignores"


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_every_console_script_subcommand_and_default_config_exists(script: Path) -> None:
    text = script.read_text(encoding="utf-8")
    for sub in re.findall(r"\bagentrl-sandbox (\w+)", text):
        assert sub in _sandbox_subcommands(), f"{script.name}: agentrl-sandbox has no {sub!r}"
    for sub in re.findall(r"\bagentrl-recipe (\w+)", text):
        assert sub in COMMANDS, f"{script.name}: agentrl-recipe has no {sub!r}"
    for config in re.findall(r"CONFIG=\$\{CONFIG:-([\w/]+)\}", text):
        assert (REPO / "verl_configs" / f"{config}.yaml").is_file(), f"{script.name}: no config {config!r}"


def test_the_checks_catch_a_wrong_target_and_variable() -> None:
    calls = MAKE_CALL.findall("make rl CONFIG=x NO_SUCH_VAR=1\n  make no-such-target\n")
    assert calls == [("rl", " CONFIG=x NO_SUCH_VAR=1"), ("no-such-target", "")]
    assert "$(NO_SUCH_VAR)" not in MAKEFILE and not re.search(r"^no-such-target:", MAKEFILE, re.M)
    assert "serve" in _sandbox_subcommands() and "no-such" not in _sandbox_subcommands()
