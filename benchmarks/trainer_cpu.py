"""One RL step of verl's own trainer on CPU, split the way verl's timing metrics report it.

    .venv/bin/python benchmarks/trainer_cpu.py [--steps 4] [--model DIR] [--out F]

Runs `make rl CONFIG=agentrl_rl_cpu` (the launcher → verl.trainer.main_ppo, v1 hybrid, agentrl_hf replica, FSDP2 on
gloo) for ``--steps`` steps and prints, from verl's file-logger metrics of that same run:
- per step (mean over steps 2..N; step 1 carries one-off warm-up): every ``timing_s/*`` phase verl times (generation
  with tool calls, reward, old log-prob, actor update, weight sync, ...) and its share of ``timing_s/step``;
- tool time inside generation: calls per step × mean sandbox latency (``agentrl_tools/*``);
- the fixed overhead of the run: wall time minus the sum of the step times (Ray and TransferQueue start-up, worker
  processes importing verl, model init, checkpoint-free shutdown), absolute and as a fraction of the wall time.
Without ``--model`` it first runs `make sft CONFIG=agentrl_sft_cpu` (its inputs under outputs/cpu/) and uses its HF
export. Writes the figures as JSON to ``--out`` (atomically) when given.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean

from agentrl_recipe.eval.dump import atomic_write_json

REPO = Path(__file__).resolve().parents[1]
SFT_EXPORT = REPO / "outputs/cpu/sft_checkpoints/global_step_150/huggingface"


def _launch(stage: str, config: str, args: list[str], env: dict[str, str]) -> float:
    command = [sys.executable, "-m", "agentrl_recipe.cli.launch", stage, "--config", config, *args]
    started = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{stage} failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    return time.monotonic() - started


def _metrics(path: Path) -> dict[int, dict[str, float]]:
    by_step: dict[int, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        by_step.setdefault(int(record["step"]), {}).update(record["data"])
    return by_step


def summarize(by_step: dict[int, dict[str, float]], wall_s: float) -> dict[str, float]:
    steady = [m for step, m in sorted(by_step.items()) if step > 1] or list(by_step.values())
    keys = sorted({k for m in steady for k in m if k.startswith("timing_s/")})
    out = {k: mean(m[k] for m in steady if k in m) for k in keys}
    # Sandbox time per step, from the tool metrics: calls (their status counts) × the median call latency.
    calls = mean(sum(v for k, v in m.items() if k.startswith("agentrl_tools/status/")) for m in steady)
    out["tool_calls_per_step"] = calls
    out["tool_s_per_step_estimate"] = calls * mean(m.get("agentrl_tools/latency_s/p50", 0.0) for m in steady)
    steps_s = sum(m.get("timing_s/step", 0.0) for m in by_step.values())
    out["wall_s"] = wall_s
    out["fixed_overhead_s"] = wall_s - steps_s
    out["fixed_overhead_fraction"] = out["fixed_overhead_s"] / wall_s
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--model", type=Path, help="HF dir to start RL from (default: the CPU SFT config's export)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    with tempfile.TemporaryDirectory() as tmp:
        model = args.model
        if model is None:
            if not SFT_EXPORT.is_dir():
                print("building the SFT model first (make sft CONFIG=agentrl_sft_cpu) ...", flush=True)
                _launch("sft", "agentrl_sft_cpu", [], {**env, "VERL_FILE_LOGGER_PATH": f"{tmp}/sft.jsonl"})
            model = SFT_EXPORT
        metrics_path = Path(tmp) / "rl.jsonl"
        rl_args = [
            "--model", str(model), f"trainer.total_training_steps={args.steps}", "trainer.save_freq=-1",
            f"trainer.default_local_dir={tmp}/ckpt",
        ]  # fmt: skip
        wall = _launch("rl", "agentrl_rl_cpu", rl_args, {**env, "VERL_FILE_LOGGER_PATH": str(metrics_path)})
        figures = summarize(_metrics(metrics_path), wall)
    step = figures.get("timing_s/step", float("nan"))
    print(f"\nverl main_ppo on CPU, {args.steps} steps, {os.cpu_count()} cores; per step (steps 2..{args.steps}):")
    for key, value in figures.items():
        if key.startswith("timing_s/") and key != "timing_s/step":
            print(f"  {key:<34} {value:7.2f} s  {value / step:6.1%}")
    print(f"  {'timing_s/step':<34} {step:7.2f} s")
    print(f"  {'tool time inside gen (estimate)':<34} {figures['tool_s_per_step_estimate']:7.2f} s")
    print(
        f"run wall {figures['wall_s']:.1f} s, fixed overhead {figures['fixed_overhead_s']:.1f} s "
        f"({figures['fixed_overhead_fraction']:.0%}: Ray, TransferQueue, worker start-up, model init)"
    )
    if args.out:
        atomic_write_json(args.out, figures)


if __name__ == "__main__":
    main()
