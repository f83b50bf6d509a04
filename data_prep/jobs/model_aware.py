"""``data model-aware``: an RL set whose difficulty matches the policy (paper §3.3; the set itself was never released).

1. Roll each problem out ``--n`` times (paper: 8) with the policy (the SFT model) through the recipe's agent loop,
   tool and reward; a problem's pass rate is the fraction of its verified-correct trajectories.
2. Drop problems at 0% and 100% (no GRPO signal); bin the rest: easy ≥ 0.75, hard ≤ 0.25, medium in between.
3. Resample to a target difficulty histogram — given as ``--target easy=..,medium=..,hard=..`` or taken from another
   model's pass-rate file (``--target-pass-rates``; the paper matched Qwen2.5-7B's pool to Qwen3-4B's histogram).
4. Write the set, the pass rates (``<out>.pass_rates.jsonl``, also the resume log), a before/after/target histogram
   PNG and a stats JSON.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from agentrl_recipe.atomic_io import atomic_write_parquet
from agentrl_recipe.problems import read_local_file
from data_prep import standalone
from data_prep.files import earlier_report, fingerprint, mark_done
from data_prep.rollouts import add_rollout_arguments, load_problems, progress_log, run_problems
from data_prep.stats import plot_bar_comparison, write_report

BINS = ("easy", "medium", "hard")
EASY_MIN, HARD_MAX = 0.75, 0.25  # paper §3.3
MODEL_AWARE_VERSION = 1


def difficulty_bin(pass_rate: float) -> str | None:
    """None for 0% and 100% (dropped), else easy (≥ 0.75) / hard (≤ 0.25) / medium."""
    if pass_rate <= 0.0 or pass_rate >= 1.0:
        return None
    if pass_rate >= EASY_MIN:
        return "easy"
    if pass_rate <= HARD_MAX:
        return "hard"
    return "medium"


def summarize_problem(key: str, row: dict, records: list[Any]) -> dict:
    accs = [r.reward_extra_info.get("acc") for r in records]
    known = [bool(a) for a in accs if a is not None]  # acc None = the sandbox failed while grading: unknown
    return {
        "key": key,
        "data_source": row["data_source"],
        "n": len(records),
        "graded": len(known),
        "correct": sum(known),
        "pass_rate": (sum(known) / len(known)) if known else None,
        "mean_score": float(np.mean([r.score for r in records if r.score is not None])) if records else None,
        "tool_calls": float(np.mean([r.tool_calls for r in records])) if records else 0.0,
    }


def histogram(pass_rates: list[float]) -> dict[str, int]:
    counts = Counter(b for b in map(difficulty_bin, pass_rates) if b is not None)
    return {b: counts.get(b, 0) for b in BINS}


def fractions(counts: Mapping[str, float]) -> dict[str, float]:
    total = sum(counts.values())
    if total <= 0:
        raise SystemExit(f"target histogram {counts} is empty")
    return {b: counts.get(b, 0) / total for b in BINS}


def parse_target(spec: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for part in spec.split(","):
        name, sep, value = part.partition("=")
        if not sep or name.strip() not in BINS:
            raise SystemExit(f"--target {spec!r}: expected easy=F,medium=F,hard=F")
        out[name.strip()] = float(value)
    return fractions(out)


def target_from_pass_rates(path: str) -> dict[str, float]:
    """The difficulty histogram of another model's pass-rate file (JSONL with ``pass_rate`` per problem)."""
    rates = [r["pass_rate"] for r in read_local_file(Path(path)) if r.get("pass_rate") is not None]
    return fractions(histogram(rates))


def resample(
    by_bin: dict[str, list[dict]], target: dict[str, float], size: int | None, rng: np.random.Generator
) -> tuple[list[dict], dict[str, int]]:
    """Draw per-bin counts proportional to ``target``. Without ``size``, the largest set that needs no repeats."""
    available = {b: len(by_bin.get(b, [])) for b in BINS}
    live = [b for b in BINS if target[b] > 0]
    for b in live:
        if not available[b]:
            raise SystemExit(f"target wants {target[b]:.0%} {b} problems but the pool has none")
    if size is None:
        size = int(min(available[b] / target[b] for b in live))
    raw = {b: size * target[b] for b in BINS}
    counts = {b: int(np.floor(raw[b])) for b in BINS}
    for b in sorted(live, key=lambda b: raw[b] - counts[b], reverse=True)[: size - sum(counts.values())]:
        counts[b] += 1  # largest remainders, so the counts sum to size
    picked: list[dict] = []
    for b in BINS:
        pool = by_bin.get(b, [])
        want = counts[b]
        if want > len(pool):
            print(f"warning: {b}: {want} problems wanted, {len(pool)} in the pool — repeating problems")
            copies, rest = divmod(want, len(pool))
            chosen = pool * copies + [pool[i] for i in sorted(rng.choice(len(pool), rest, replace=False))]
        else:
            chosen = [pool[i] for i in sorted(rng.choice(len(pool), want, replace=False))]
        picked += chosen
    return [picked[i] for i in rng.permutation(len(picked))], counts


def cmd_model_aware(args: argparse.Namespace, *, client: Any = None) -> dict[str, Any]:
    out = Path(args.out)
    if bool(args.target) == bool(args.target_pass_rates):
        raise SystemExit("give exactly one of --target and --target-pass-rates")
    target = parse_target(args.target) if args.target else target_from_pass_rates(args.target_pass_rates)
    problems = load_problems(args.problems, args.limit)
    settings = {k: getattr(args, k) for k in ("model", "n", "seed", "size", "override", "validate_sampling")}
    key = fingerprint([MODEL_AWARE_VERSION, sorted(k for k, _ in problems), settings, target])
    if (
        earlier := earlier_report(
            out,
            key,
            force=args.force,
            message=f"{out} is up to date; --force rebuilds it (the pass-rate log is kept either way)",
        )
    ) is not None:
        return earlier
    log = progress_log(out, ".pass_rates.jsonl")
    run_problems(args, problems, log, summarize_problem, desc="model-aware rollouts", client=client)

    rows = dict(problems)
    rates = {k: log.records[k] for k in rows if k in log}
    unknown = [k for k, r in rates.items() if r["pass_rate"] is None]
    by_bin, dropped = _bin_by_difficulty(rows, rates, args.model)
    before = {b: len(v) for b, v in by_bin.items()}
    picked, after = resample(by_bin, target, args.size, np.random.default_rng(args.seed))
    if not picked:
        raise SystemExit("the resampled set is empty (pool too small for the target histogram)")
    for i, row in enumerate(picked):
        row["extra_info"] = {**row["extra_info"], "index": i}
    report = {
        "command": "model-aware",
        "policy": args.model,
        "n": args.n,
        "problems": len(rows),
        "graded": len(rates) - len(unknown),
        "ungraded_infra": len(unknown),
        "dropped": dict(dropped),
        "pool_before": before,
        "target_fractions": target,
        "written": after,
        "rows_written": len(picked),
        "per_source_pass_rate": _per_source(rates),
        "pass_rates_file": str(log.path),
    }
    _plot_difficulty(out.with_suffix(".difficulty.png"), report)
    write_report(out.with_suffix(".stats.json"), report)
    atomic_write_parquet(out, picked)
    mark_done(out, key, rows=len(picked))
    return report


def _bin_by_difficulty(
    rows: dict[str, dict], rates: dict[str, dict], policy: str
) -> tuple[dict[str, list[dict]], Counter]:
    """The graded rows by difficulty bin (tagged with their pass rate), and how many fell outside every bin and why."""
    by_bin: dict[str, list[dict]] = {b: [] for b in BINS}
    dropped: Counter = Counter()
    for k, rec in rates.items():
        if rec["pass_rate"] is None:
            continue
        b = difficulty_bin(rec["pass_rate"])
        if b is None:
            dropped["always_solved" if rec["pass_rate"] >= 1.0 else "never_solved"] += 1
            continue
        extra = {**rows[k]["extra_info"], "pass_rate": rec["pass_rate"], "difficulty": b, "policy": policy}
        by_bin[b].append({**rows[k], "extra_info": extra})
    return by_bin, dropped


def _plot_difficulty(path: Path, report: dict[str, Any]) -> None:
    before, after, target = report["pool_before"], report["written"], report["target_fractions"]
    policy = Path(report["policy"]).name
    total_before = max(1, sum(before.values()))
    plot_bar_comparison(
        path,
        BINS,
        {
            "pool (after dropping 0%/100%)": [before[b] / total_before for b in BINS],
            "target": [target[b] for b in BINS],
            "written": [after[b] / max(1, report["rows_written"]) for b in BINS],
        },
        ylabel="fraction of problems",
        title=f"difficulty for {policy} (pass@{report['n']} bins: hard ≤ 0.25 < medium < 0.75 ≤ easy)",
    )


def _per_source(rates: dict[str, dict]) -> dict[str, float]:
    by: dict[str, list[float]] = {}
    for rec in rates.values():
        if rec["pass_rate"] is not None:
            by.setdefault(rec["data_source"], []).append(rec["pass_rate"])
    return {k: float(np.mean(v)) for k, v in sorted(by.items())}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rollout_arguments(parser, default_n=8)
    parser.add_argument("--target", help="target difficulty histogram, e.g. easy=0.3,medium=0.4,hard=0.3")
    parser.add_argument("--target-pass-rates", help="another model's <set>.pass_rates.jsonl to match (paper)")
    parser.add_argument("--size", type=int, help="rows to write (default: the largest set without repeats)")
    parser.add_argument("--force", action="store_true", help="rebuild the parquet (the pass-rate log is reused)")


def main(args: argparse.Namespace) -> int:
    report = cmd_model_aware(args)
    print(f"pool {report['pool_before']} → wrote {report['written']} ({report['rows_written']} rows) → {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
