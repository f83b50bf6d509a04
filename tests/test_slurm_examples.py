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


def _fake_commands(bin_dir: Path, log: Path) -> None:
    """srun records its arguments and the step's CPU binding variable; the rest answer as a 2-node job would."""
    scripts = {
        "srun": f'echo "srun $* | SRUN_CPUS_PER_TASK=${{SRUN_CPUS_PER_TASK:-unset}}" >> {log}\n'
        'case "$*" in *" ip -o -4 addr"*) echo "2: eth0    inet 10.0.0.1/24 brd 10.0.0.255";; esac\n',
        "scontrol": "echo node1; echo node2\n",
        "ip": 'echo "default via 10.0.0.254 dev eth0"\n',
        "python": "echo 2\n",  # the Ray nodes that joined
        "sleep": "exit 0\n",
        "make": f'echo "make $*" >> {log}\n',
    }
    bin_dir.mkdir()
    for name, body in scripts.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)


def test_multi_node_steps_get_the_jobs_cpus_and_gpus(tmp_path: Path) -> None:
    """Slurm >= 22.05's srun does not inherit --cpus-per-task: every step must see SRUN_CPUS_PER_TASK, and each Ray
    node its GPUs (--gpus-per-node)."""
    log = tmp_path / "calls.log"
    _fake_commands(tmp_path / "bin", log)
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "SLURM_SUBMIT_DIR": str(tmp_path),
        "SLURM_JOB_NODELIST": "node[1-2]",
        "SLURM_NNODES": "2",
        "SLURM_CPUS_PER_TASK": "64",
        "HOME": str(tmp_path),
    }
    done = subprocess.run(
        ["bash", str(REPO / "docs/slurm/multi_node.sbatch")], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    calls = log.read_text().splitlines()
    sruns = [c for c in calls if c.startswith("srun ")]
    assert len(sruns) == 4 and all(c.endswith("SRUN_CPUS_PER_TASK=64") for c in sruns), sruns
    rays = [c for c in sruns if " ray start " in c]
    assert len(rays) == 2 and all("--gpus-per-node=8" in c and "--num-cpus=64" in c for c in rays), rays
    makes = [c for c in calls if c.startswith("make ")]
    assert makes[0].startswith("make preflight CONFIG=agentrl_rl_qwen3_4b MODEL=checkpoints/agentrl_sft/qwen3_4b ")


def test_the_requeue_note_says_slurm_does_not_requeue_at_the_time_limit() -> None:
    text = (REPO / "docs" / "slurm" / "one_node.sbatch").read_text(encoding="utf-8")
    assert "never at --time" in text
    cluster = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    assert "not at the time limit" in cluster
