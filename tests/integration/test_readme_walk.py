"""The README's CPU quick start, line by line (issue 46).

Every command of the README's "Quick start on CPU" block must be a key of :data:`WALK` (a line that changes without
this test fails it); each is then checked in the README's order, from a clean directory, through the command ``make``
itself would run (``make -n``), asserting what its comment promises. A line's run is not repeated here when the suite
already runs the same entry point (each verl start-up costs minutes on 2 cores): :data:`CARRIED_BY` names, per line,
the tests that run it and assert its promise — the session's SFT run (read below), the RL trainer run and its shown
log, the async trainer runs, the eval through a vLLM server it starts, the demo at test size — and a test checks that
each of them still exists. The RL lines run the launcher here up to where it decides what to train.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from trainer_helpers import REPO

from agentrl_recipe.launcher import launch

README = REPO / "README.md"
TITLE = "## Quick start on CPU"
INSTALL = "make install"
DEMO = "make demo"
SFT = "make sft CONFIG=agentrl_sft_cpu"
RL = "make rl CONFIG=agentrl_rl_cpu"
RL_ASYNC = 'make rl CONFIG=agentrl_rl_cpu ARGS="+recipe/async=separate_async_cpu"'
DATA = "make data-fixtures"
EVAL = (
    "make eval MODEL=outputs/cpu/rl_checkpoints/global_step_4/actor/huggingface DATA=outputs/cpu/rl_val.parquet "
    'ARGS="-k 2 --max-prompt-length 384 --max-response-length 160 --max-assistant-turns 3"'
)
WALK = [INSTALL, DEMO, SFT, RL, RL_ASYNC, DATA, EVAL]  # the README's order
# The tests elsewhere in the suite that run a line's entry point and assert what its comment promises.
CARRIED_BY = {
    DEMO: ["tests/demo/test_demo.py::test_every_stage_ran_and_wrote_its_outputs"],  # demo.run_demo at test size
    SFT: ["tests/integration/test_sft_trainer.py::test_sft_trains_checkpoints_and_exports"],
    RL: [
        "tests/integration/test_rl_trainer.py::test_rollouts_come_from_verls_vllm_server_with_tool_calls_and_rewards",
        "tests/integration/test_rl_trainer.py::test_a_launch_shows_a_short_log_with_each_warning_once",
    ],
    RL_ASYNC: [
        "tests/integration/test_async_separate.py::test_separate_async_trains_every_step_from_a_standalone_replica"
    ],
    DATA: ["tests/data_prep/test_jobs.py::test_each_job_module_runs_standalone"],
    EVAL: [
        "tests/integration/test_rl_trainer.py::test_the_rl_export_holds_the_weights_eval_loads",
        "tests/integration/test_vllm_serve_on_cpu.py::test_make_eval_default_backend_runs_through_the_server_it_starts",
    ],
}


def quick_start_commands(text: str) -> list[str]:
    """The commands of the first ```bash block after the title, continuation lines joined, comments dropped."""
    block = text[text.index(TITLE) :].split("```bash\n", 1)[1].split("```", 1)[0]
    joined = re.sub(r"\\\n\s*", "", block)
    lines = (re.sub(r"\s+#\s.*$", "", line) for line in joined.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def make_command(line: str) -> list[str]:
    """The launch command ``make`` runs for a README line (``make -n``; the venv stamp is taken as up to date)."""
    args = shlex.split(line)[1:]
    out = subprocess.run(
        ["make", "-s", "-n", "--no-print-directory", "-o", ".venv/.install-stamp", *args],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    commands = [x for x in out.replace("\\\n", " ").splitlines() if x.startswith(".venv/bin/")]
    return shlex.split(commands[-1])  # the target's own recipe comes after its prerequisites


def test_every_quick_start_command_is_walked() -> None:
    assert quick_start_commands(README.read_text()) == WALK


def test_each_carried_line_names_tests_that_exist() -> None:
    assert set(CARRIED_BY) <= set(WALK)
    for line, tests in CARRIED_BY.items():
        for test in tests:
            path, name = test.split("::")
            assert re.search(rf"^def {name}\(", (REPO / path).read_text(), re.MULTILINE), (line, test)


def test_install_says_what_it_does_and_how_long() -> None:
    out = subprocess.run(
        ["make", "-n", "--no-print-directory", "-W", "pyproject.toml", ".venv/.install-stamp"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    assert re.search(r"installing \.venv .*usually 2-4 min the first time", out), out


def test_sft_line_trains_its_steps_and_says_so(cpu_sft_run: Path) -> None:
    assert make_command(SFT)[1:] == ["-m", "agentrl_recipe.launcher.launch", "sft", "--config", "agentrl_sft_cpu"]
    out = (cpu_sft_run / "log.txt").read_text().split("\n--- stderr ---\n")[0]  # the same launcher, 60 steps
    last = out.strip().splitlines()[-1]
    assert re.fullmatch(r"trained steps 1-60 \(60 steps\) in \d+m\d\ds \(wall, start-up included\): .*/global_step_60",
                        last), last  # fmt: skip
    assert (cpu_sft_run / "ckpt" / "global_step_60" / "huggingface" / "config.json").is_file()


def _launch(line: str, *extra: str) -> int:
    command = make_command(line)
    return launch.main(_parse([*command[command.index("--config") - 1 :], *extra]))


def _parse(argv: list[str]):
    import argparse

    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    return parser.parse_intermixed_args(argv)


def test_rl_lines_in_order_the_async_one_does_not_resume_the_sync_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # a clean directory: the README's relative outputs/cpu/ paths land here
    sync = tmp_path / "outputs/cpu/rl_checkpoints"
    (sync / "global_step_4").mkdir(parents=True)  # the sync line's run, finished (its 4 steps)
    (sync / "latest_checkpointed_iteration.txt").write_text("4")
    data = ["--data", str(tmp_path / "rl.parquet"), "--val-data", str(tmp_path / "rl.parquet"), "--skip-preflight"]
    (tmp_path / "rl.parquet").write_bytes(b"")
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data += ["--model", str(model)]
    # the sync line run again: nothing left to train, said in one line, exit 3, no trainer started
    monkeypatch.setattr(launch.log_stream, "run", lambda *a, **k: pytest.fail("a trainer was started"))
    assert _launch(RL, *data) == launch.NOTHING_TRAINED
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith(f"nothing to train: {sync}/global_step_4")
    # the async line: its own checkpoint dir, a fresh start of its 4 steps
    assert _launch(RL_ASYNC, *data, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "separate_async_cpu: checkpoints in outputs/cpu/rl_checkpoints_separate_async_cpu" in out
    command = shlex.split(next(x for x in out.splitlines() if x.startswith("command: ")).removeprefix("command: "))
    assert f"trainer.default_local_dir={sync}_separate_async_cpu" in command
    assert "resuming from" not in out and re.search(r"^  total_training_steps: 4$", out, re.MULTILINE)


def test_eval_line_evaluates_the_rl_export_the_cpu_config_saves() -> None:
    from agentrl_recipe.cli.configs.files import compose

    command = make_command(EVAL)
    assert command[:3] == [".venv/bin/agentrl-recipe", "eval", "run"]
    model = command[command.index("--model") + 1]
    cfg, _ = compose("agentrl_rl_cpu")
    step = int(cfg.trainer.total_training_steps)
    assert model == f"{cfg.trainer.default_local_dir}/global_step_{step}/actor/huggingface"
    assert "hf_model" in cfg.actor_rollout_ref.actor.checkpoint.save_contents  # the export holds weights
    assert command[command.index("--data") + 1] == cfg.data.val_files
    assert command[command.index("--max-assistant-turns") + 1] == str(
        cfg.actor_rollout_ref.rollout.multi_turn.max_assistant_turns
    )


def test_demo_and_data_lines_run_what_they_say() -> None:
    assert make_command(DEMO)[1:3] == ["-m", "demo.demo"]
    assert make_command(DATA)[:3] == [".venv/bin/agentrl-recipe", "data", "sft-stitched"]  # make -n: the last job


CONSOLE_SCRIPTS = re.compile(r"(?<![\w/.-])(agentrl-recipe|agentrl-sandbox|ray|pytest)(?= |$)")
ACTIVATE = "source .venv/bin/activate"
SHELLS = ("bash", "sh", "console", "shell", "")


def bare_commands(text: str) -> list[str]:
    """Shell lines of a page's code blocks that call a venv's console script by its bare name (``command not found``
    from a fresh clone without an activated venv), unless the page says ``source .venv/bin/activate``."""
    if ACTIVATE in text:
        return []
    shell, language = [], None  # the lines of shell blocks; the open block's language (None: outside a block)
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            language = line.strip().removeprefix("```") if language is None else None
        elif language in SHELLS and not line.lstrip().startswith("#"):
            shell.append(line.split(" # ")[0].strip())
    return [line for line in shell if CONSOLE_SCRIPTS.search(line)]


def test_doc_commands_run_from_a_fresh_clone() -> None:
    """Issue 46 item 4: the docs wrote bare `agentrl-sandbox …` (command not found), the README `.venv/bin/…`."""
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    assert {page.name: bare for page in pages if (bare := bare_commands(page.read_text()))} == {}
    assert bare_commands("```bash\necho 1 | agentrl-sandbox run\n.venv/bin/ray status\n```") == [
        "echo 1 | agentrl-sandbox run"
    ]
    assert bare_commands(f"```bash\n{ACTIVATE}\nagentrl-sandbox run\n```") == []
