"""Does GRPO-TCR raise held-out accuracy in the demo on every seed? Runs the whole demo once per seed.

    .venv/bin/python -m benchmarks.demo_seeds [--seeds 0 1 2] [--out demo_seeds] [--fast] [--family qwen3|qwen2.5]
    (from the repository root)

Per seed: `python -m demo.demo --seed S` (verl's SFT trainer, the eval harness, verl's main_ppo, the eval harness
again) and, from that run's eval reports, held-out avg@k after SFT and after GRPO-TCR with the harness's 95%
bootstrap intervals (over problems). The goal: after > before with non-overlapping intervals on every seed. Prints
one table (the README's Demo section quotes it) and writes every seed's figures to ``<out>/seeds.json`` atomically.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from agentrl_recipe.atomic_io import atomic_write_text
from demo.demo import DemoSettings, run_demo


def row(seed: int, result: dict) -> dict:
    before, after = result["eval_before"], result["eval_after"]
    k = before["k"]
    lo_b, hi_b = before[f"avg@{k}_ci95"]
    lo_a, hi_a = after[f"avg@{k}_ci95"]
    return {
        "seed": seed,
        "model": result["model"]["family"],
        "k": k,
        "before": before[f"avg@{k}"],
        "before_ci95": [lo_b, hi_b],
        "after": after[f"avg@{k}"],
        "after_ci95": [lo_a, hi_a],
        "separated": lo_a > hi_b,
        "train_acc_first": _acc(result, first=True),
        "train_acc_last": _acc(result, first=False),
        "total_seconds": result["total_seconds"],
    }


def _acc(result: dict, *, first: bool) -> float | None:
    steps = sorted(result["rl_steps"], key=int)
    key = next((k for k in result["rl_steps"][steps[0]] if k.startswith("reward/") and k.endswith("/acc")), None)
    return None if key is None else result["rl_steps"][steps[0] if first else steps[-1]][key]


def table(rows: list[dict]) -> str:
    k = rows[0]["k"]
    lines = [
        f"| seed | model | avg@{k} after SFT [95% CI] | avg@{k} after GRPO-TCR [95% CI] | separated "
        "| train acc step 1 → last | demo wall |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        acc = "–" if r["train_acc_first"] is None else f"{r['train_acc_first']:.2f} → {r['train_acc_last']:.2f}"
        lines.append(
            f"| {r['seed']} | {r['model']} | {r['before']:.3f} [{r['before_ci95'][0]:.3f}, {r['before_ci95'][1]:.3f}] "
            f"| {r['after']:.3f} [{r['after_ci95'][0]:.3f}, {r['after_ci95'][1]:.3f}] "
            f"| {'yes' if r['separated'] else 'no'} | {acc} | {r['total_seconds']:.0f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--out", default="demo_seeds")
    parser.add_argument("--fast", action="store_true", help="the demo's test sizes (checks the script, learns nothing)")
    parser.add_argument("--family", choices=["qwen3", "qwen2.5"], default="qwen3", help="the tiny model's family")
    args = parser.parse_args(argv)
    out = Path(args.out)
    rows = []
    for seed in args.seeds:
        settings_cls = DemoSettings.fast if args.fast else DemoSettings
        result = run_demo(settings_cls(out=str(out / f"seed{seed}"), seed=seed, family=args.family))
        rows.append(row(seed, result))
        atomic_write_text(out / "seeds.json", json.dumps(rows, indent=2))
    print("\n" + table(rows))
    return 0 if all(r["separated"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
