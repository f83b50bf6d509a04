"""Every data-prep job is a module that runs on its own (``python -m data_prep.<job>``) and is one
``agentrl-recipe data <job>`` subcommand; the CLI lists exactly these jobs."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from fresh_python import run_python

from agentrl_recipe.cli import data as data_cli

JOB_MODULES = [module for module, _ in data_cli.JOBS.values()]


# Each module as `python -m` runs it (runpy, __main__), all in one interpreter: one start-up instead of eight.
RUN_EACH = """
import runpy, sys
for module in sys.argv[1:]:
    sys.argv = [module, "--help"]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = None
    except SystemExit as exit_:
        code = exit_.code
    print(f"@@ {module} exit {code}", flush=True)
"""


def test_each_job_module_runs_standalone(tmp_path: Path) -> None:
    proc = run_python(["-c", RUN_EACH, *JOB_MODULES], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # stdout: usage of the first, "@@ <module> exit 0", usage of the next, ...
    chunks = proc.stdout.split("@@ ")
    usages = [chunks[0]] + [chunk.partition("\n")[2] for chunk in chunks[1:-1]]
    exits = [chunk.partition("\n")[0] for chunk in chunks[1:]]
    assert exits == [f"{module} exit 0" for module in JOB_MODULES], proc.stdout[-2000:]
    for module, usage in zip(JOB_MODULES, usages, strict=True):
        assert usage.startswith(f"usage: python -m {module} "), usage[:200]


def test_each_job_is_its_own_module_named_like_its_subcommand() -> None:
    jobs = [m.removeprefix("data_prep.jobs.") for m in JOB_MODULES]
    assert [name.replace("-", "_") for name in data_cli.JOBS] == jobs


def test_data_help_lists_exactly_the_jobs(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    data_cli.add_arguments(parser)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == list(data_cli.JOBS)
    assert set(data_cli.JOBS) == {
        "sft-released", "sft-generate", "sft-stitched", "rl-mix", "rl-released", "eval-sets", "model-aware", "validate",
    }  # fmt: skip
    proc = run_python(["-m", "agentrl_recipe.cli", "data", "--help"], cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    jobs_section = proc.stdout.split("positional arguments:")[1].split("options:")[0]
    assert re.findall(r"^ {4}(\S+)", jobs_section, re.M) == list(data_cli.JOBS)  # job lines; their help wraps deeper
