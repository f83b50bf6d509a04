"""One RL step of verl's own trainer on CPU, split the way verl's timing metrics report it, for each rollout backend.

    .venv/bin/python benchmarks/trainer_cpu.py [--steps 4] [--rollouts vllm,agentrl_hf] [--model DIR] [--out F]

Runs `make rl CONFIG=agentrl_rl_cpu` (the launcher → verl.trainer.main_ppo, v1 hybrid, FSDP2 on gloo) for ``--steps``
steps once per rollout backend (``actor_rollout_ref.rollout.name``: verl's vLLM server on vLLM's CPU build, the config's
default, and the plugin's ``agentrl_hf`` replica), on the same config, model and data, one after the other in this
invocation. From verl's file-logger metrics of each run it prints, side by side:
- per step (mean over steps 2..N; step 1 carries one-off warm-up): every ``timing_s/*`` phase verl times (generation
  with tool calls, reward, old log-prob, actor update, weight sync, ...);
- tool time inside generation: calls per step × mean sandbox latency (``agentrl_tools/*``);
- start-up, apart from the steps: the run's wall time minus the sum of its step times (Ray and TransferQueue
  start-up, worker processes importing verl, model init, the rollout engine's start — vLLM's is the difference
  between the two columns — and shutdown).
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
    command = [sys.executable, "-m", "agentrl_recipe.launcher.launch", stage, "--config", config, *args]
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


def _run_backend(backend: str, model: Path, steps: int, env: dict[str, str], tmp: str) -> dict[str, float]:
    metrics_path = Path(tmp) / f"rl_{backend}.jsonl"
    rl_args = [
        "--model", str(model), f"trainer.total_training_steps={steps}", "trainer.save_freq=-1",
        f"trainer.default_local_dir={tmp}/ckpt_{backend}", f"actor_rollout_ref.rollout.name={backend}",
    ]  # fmt: skip
    print(f"running {steps} steps with rollout {backend} ...", flush=True)
    wall = _launch("rl", "agentrl_rl_cpu", rl_args, {**env, "VERL_FILE_LOGGER_PATH": str(metrics_path)})
    return summarize(_metrics(metrics_path), wall)


def _print_table(figures: dict[str, dict[str, float]], steps: int) -> None:
    backends = list(figures)
    print(f"\nverl main_ppo on CPU, {steps} steps, {os.cpu_count()} cores; per step (steps 2..{steps}):")
    print(f"  {'':<34}" + "".join(f"{b:>14}" for b in backends))
    keys = sorted({k for f in figures.values() for k in f if k.startswith("timing_s/")})
    rows = [(k, k) for k in keys] + [
        ("tool time inside gen (estimate)", "tool_s_per_step_estimate"),
        ("start-up + shutdown (wall − steps)", "fixed_overhead_s"),
        ("run wall", "wall_s"),
    ]
    for label, key in rows:
        print(f"  {label:<34}" + "".join(f"{figures[b].get(key, float('nan')):12.2f} s" for b in backends))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--rollouts", default="vllm,agentrl_hf", help="comma-separated rollout.name values")
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
        figures = {b: _run_backend(b, model, args.steps, env, tmp) for b in args.rollouts.split(",") if b}
    _print_table(figures, args.steps)
    if args.out:
        atomic_write_json(args.out, figures)


if __name__ == "__main__":
    main()
