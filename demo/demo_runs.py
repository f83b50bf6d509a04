"""The demo's training stages: verl's own trainers through the launcher, followed live through verl's file logger.

Each stage is one ``python -m agentrl_recipe.launcher.launch sft|rl --config agentrl_*_demo …`` subprocess (the same
path as
``make sft`` / ``make rl``: torchrun + ``verl.trainer.sft_trainer``, ``verl.trainer.main_ppo``). Its console output
goes to ``<run>/log.txt``; its metrics go to ``<run>/metrics.jsonl`` through verl's file logger
(``VERL_FILE_LOGGER_PATH``, ``trainer.logger=[console,file]``), which this module tails to drive a progress bar and
to hand every finished step to a callback (the per-step table). A failed run raises with the log's tail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agentrl_recipe import names

StepCallback = Callable[[int, dict[str, Any], Any], None]  # (step, metrics, progress bar)


class TrainerFailed(RuntimeError):
    """A verl trainer run exited non-zero (the message holds the tail of its log)."""


def read_metrics(path: Path) -> dict[int, dict[str, Any]]:
    """verl's file-logger records of a run, merged by step."""
    by_step: dict[int, dict[str, Any]] = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        if line.strip():
            record = json.loads(line)
            by_step.setdefault(int(record["step"]), {}).update(record["data"])
    return by_step


def _environment(run_dir: Path, extra: dict[str, str] | None) -> dict[str, str]:
    # A demo run starts its own Ray cluster and platform: an inherited RAY_ADDRESS / VERL_PLATFORM would redirect it.
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "VERL_PLATFORM")}
    env.update({"VERL_FILE_LOGGER_PATH": str(run_dir / "metrics.jsonl"), "RAY_DEDUP_LOGS": "0"})
    env.setdefault("RAY_AUTH_MODE", "disabled")  # a private, loopback-only cluster that lives for one run
    if os.environ.get(names.ENV_TRACE_DIR):
        env[names.ENV_TRACE_DIR] = os.environ[names.ENV_TRACE_DIR]
    env.update(extra or {})
    return env


def _failure(log: Path, returncode: int) -> TrainerFailed:
    lines = log.read_text(errors="replace").splitlines()
    return TrainerFailed(f"{log.parent.name} exited with {returncode}; the end of {log}:\n" + "\n".join(lines[-40:]))


def launch_command(stage: str, config: str, args: Sequence[str], run_dir: Path) -> list[str]:
    """The launcher's command for one stage (``make sft`` / ``make rl`` without make), with Hydra's run dir (``.hydra/``
    and the trainer's log) in ``run_dir/hydra``: verl's trainers are Hydra apps, and without it each launch leaves
    ``outputs/<date>/<time>/`` in the directory it runs in."""
    launcher = [sys.executable, "-m", "agentrl_recipe.launcher.launch", stage, "--config", config]
    return [*launcher, *args, f"hydra.run.dir={run_dir / 'hydra'}"]


def run_trainer(
    stage: str,
    config: str,
    args: Sequence[str],
    run_dir: Path,
    *,
    total_steps: int,
    desc: str,
    on_step: StepCallback | None = None,
    extra_env: dict[str, str] | None = None,
    poll_s: float = 0.5,
) -> dict[int, dict[str, Any]]:
    """Run one launcher stage to completion; returns its file-logger metrics by step."""
    run_dir.mkdir(parents=True, exist_ok=True)
    metrics_path, log_path = run_dir / "metrics.jsonl", run_dir / "log.txt"
    metrics_path.unlink(missing_ok=True)  # verl's file logger appends; a rerun must not read the last run's steps
    command = launch_command(stage, config, args, run_dir)
    seen: set[int] = set()
    with open(log_path, "w") as log, tqdm(total=total_steps, desc=desc, unit="step") as bar:
        log.write("$ " + " ".join(command) + "\n")
        log.flush()
        proc = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=_environment(run_dir, extra_env), start_new_session=True
        )
        try:
            while True:
                done = proc.poll() is not None
                for step, data in sorted(read_metrics(metrics_path).items()):
                    if step not in seen:
                        seen.add(step)
                        bar.update(1)
                        if on_step is not None:
                            on_step(step, data, bar)
                if done:
                    break
                time.sleep(poll_s)
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)  # the launcher and what it started (torchrun, the driver, Ray)
            proc.wait()
            raise
    if proc.returncode != 0:
        raise _failure(log_path, proc.returncode)
    metrics = read_metrics(metrics_path)
    if len(metrics) < total_steps:
        raise TrainerFailed(f"{stage} logged {len(metrics)} of {total_steps} steps; see {log_path}")
    return metrics


def hf_export(checkpoint_dir: Path, step: int) -> Path:
    """The Hugging Face export verl saved with a checkpoint (``save_contents`` with ``hf_model``)."""
    step_dir = checkpoint_dir / f"global_step_{step}"
    for candidate in (step_dir / "huggingface", step_dir / "actor" / "huggingface"):
        if (candidate / "config.json").is_file():
            return candidate
    found = sorted(str(p.relative_to(checkpoint_dir)) for p in checkpoint_dir.rglob("*") if p.is_dir())
    raise FileNotFoundError(f"no Hugging Face export under {step_dir} (save_contents needs hf_model); has {found}")


def log_errors(log_path: Path) -> list[str]:
    """The ERROR lines of a run's log (the demo reports them; handled conditions are filtered at the source)."""
    return [line for line in log_path.read_text(errors="replace").splitlines() if " ERROR " in f" {line} "]
