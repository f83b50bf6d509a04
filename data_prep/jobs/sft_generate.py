"""``data sft-generate``: real end-to-end tool-use trajectories from a teacher model — the SFT generator the original
never released (Open-AgentRL #2, #9).

The teacher (paper: Qwen3-Coder-30B-A3B-Instruct; here any model behind a vLLM OpenAI-compatible server, or the
in-process HF client on CPU) solves each problem ``--n`` times through the recipe's own agent loop, with the
``code_interpreter`` tool running in our sandbox. A trajectory is kept when our scorer verifies its final answer
(``acc``) and it passes the filters (tool calls, turns, tool errors, malformed calls, length, truncation); per problem
the kept trajectories are deduplicated and at most ``--keep-per-problem`` are written. Progress is one JSONL line per
finished problem (``<out>.progress.jsonl``), so a rerun resumes where the last one stopped.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agentrl_recipe import fields
from agentrl_recipe.training.agent_loop.loop import Termination
from data_prep import standalone
from data_prep.files import earlier_report, fingerprint, mark_done
from data_prep.rollouts import add_rollout_arguments, compose, load_problems, progress_log, run_problems
from data_prep.rows import ConvertError
from data_prep.schema import validate_sft_row
from data_prep.sft_format import load_tool_schemas, normalize_messages, sft_row
from data_prep.sft_output import finish_sft, print_written
from data_prep.sink import RowSink
from data_prep.stats import write_report
from data_prep.text import normalize_text

GENERATE_VERSION = 1
# The teacher stopped by itself (not cut by a turn or length budget); None: a loop that does not report it.
_NATURAL_ENDINGS = (None, Termination.ANSWER.value, Termination.NO_TOOL_CALL.value)


def trajectory_rejection(rec: Any, args: argparse.Namespace) -> str | None:
    """Why a trajectory is not kept (None = keep)."""
    acc = rec.reward_extra_info.get("acc")
    if rec.tool_infra_failure or acc is None:
        return "sandbox_infra_error"  # not the teacher's fault, and not verifiable
    if not acc:
        return "wrong_answer"
    if rec.termination not in _NATURAL_ENDINGS:
        return f"truncated_{rec.termination}"
    if rec.tool_calls < args.min_tool_calls:
        return "too_few_tool_calls"
    if rec.malformed_tool_calls > args.max_malformed:
        return "malformed_tool_call"
    if args.max_tool_failures is not None and rec.tool_failures > args.max_tool_failures:
        return "too_many_tool_errors"
    if rec.extra_fields.get(fields.ASSISTANT_TURNS.column, 0) > args.max_turns:
        return "too_many_turns"
    if rec.prompt_tokens + rec.response_tokens > args.max_tokens:
        return "too_long"
    if not rec.messages:
        return "no_messages"
    return None


def summarize_problem(args: argparse.Namespace, tools: list[dict]) -> Callable[[str, dict, list[Any]], dict]:
    def summarize(key: str, row: dict, records: list[Any]) -> dict:
        reasons: Counter[str] = Counter()
        kept: list[dict] = []
        seen: set[str] = set()
        for rec in records:
            reason = trajectory_rejection(rec, args)
            if reason is None:
                try:
                    candidate = sft_row(normalize_messages(rec.messages), tools)
                except ConvertError as e:
                    reason = f"bad_messages: {e.field}"
                else:
                    errors = validate_sft_row(candidate)
                    reason = f"schema: {errors[0].field}: {errors[0].message}" if errors else None
            if reason is None:
                text = normalize_text(" ".join(m["content"] for m in candidate["messages"] if m["role"] == "assistant"))
                if text in seen:
                    reason = "duplicate"
                elif len(kept) >= args.keep_per_problem:
                    reason = "over_keep_per_problem"
                else:
                    seen.add(text)
                    kept.append(candidate)
            reasons[reason or "kept"] += 1
        accs = [r.reward_extra_info.get("acc") for r in records]
        return {
            "key": key,
            "data_source": row["data_source"],
            "n": len(records),
            "correct": sum(a is True for a in accs),
            "reasons": dict(reasons),
            "tool_calls": [r.tool_calls for r in records],
            "tool_statuses": dict(Counter(st for r in records for st in r.tool_statuses)),
            "tool_latency_s": [round(x, 4) for r in records for x in r.tool_latency_s],
            "kept": [{**k, "data_source": row["data_source"], "problem_key": key} for k in kept],
        }

    return summarize


def tool_metrics(records: list[dict]) -> dict[str, float]:
    """Teacher tool use over all trajectories, as tracker-style "section/name" metrics."""
    latencies = [x for r in records for x in r.get("tool_latency_s", [])]
    statuses: Counter[str] = Counter()
    for r in records:
        statuses.update(r.get("tool_statuses", {}))
    calls = sum(statuses.values())
    out = {"agentrl_tools/calls_per_traj": calls / max(1, sum(r["n"] for r in records))}
    if latencies:
        out["agentrl_tools/latency_p50_s"] = float(np.percentile(latencies, 50))
        out["agentrl_tools/latency_p99_s"] = float(np.percentile(latencies, 99))
    for status, count in statuses.items():
        out[f"agentrl_tools/status_{status}_frac"] = count / max(1, calls)
    return out


def build_sft_generated(args: argparse.Namespace, *, client: Any = None) -> dict[str, Any]:
    out = Path(args.out)
    problems = load_problems(args.problems, args.limit)
    settings = {
        k: getattr(args, k)
        for k in (
            "model",
            "n",
            "keep_per_problem",
            "min_tool_calls",
            "max_turns",
            "max_tool_failures",
            "max_malformed",
            "max_tokens",
            "seed",
            "override",
        )
    }
    key = fingerprint([GENERATE_VERSION, sorted(k for k, _ in problems), settings])
    if (
        earlier := earlier_report(
            out,
            key,
            force=args.force,
            message=f"{out} is up to date; --force rebuilds it (the progress log is kept either way)",
        )
    ) is not None:
        return earlier
    cfg = compose(args)
    tools = load_tool_schemas(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path)
    log = progress_log(out, ".progress.jsonl")
    run_problems(args, problems, log, summarize_problem(args, tools), desc="generate", client=client)
    sink = RowSink("sft", out)
    reasons: Counter[str] = Counter()
    wanted = {k for k, _ in problems}
    records = [r for r in log.values() if r["key"] in wanted]
    for rec in records:
        reasons.update(rec["reasons"])
        for j, row in enumerate(rec["kept"]):
            sink.add(row, file=str(log.path), row_no=j, source={"problem_key": rec["key"]})
    report = {
        "command": "sft-generate",
        "teacher": args.model,
        "problems": len(records),
        "problems_solved": sum(r["correct"] > 0 for r in records),
        "problems_with_kept_trajectory": sum(bool(r["kept"]) for r in records),
        "trajectories": sum(r["n"] for r in records),
        "trajectory_outcomes": dict(reasons.most_common()),
        "teacher_accuracy": sum(r["correct"] for r in records) / max(1, sum(r["n"] for r in records)),
        "progress_file": str(log.path),
        **tool_metrics(records),
    }
    if not sink.rows:
        write_report(out.with_suffix(".stats.json"), {**report, "rows_written": 0})
        sink.write_rejects()
        raise SystemExit(f"no trajectory passed verification and the filters; see {out.with_suffix('.stats.json')}")
    report = finish_sft(sink, tokenizer=args.tokenizer, report=report, dedup=True)
    mark_done(out, key, rows=report["rows_written"])
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rollout_arguments(parser, default_n=4)
    parser.add_argument("--keep-per-problem", type=int, default=1, help="verified trajectories kept per problem")
    parser.add_argument("--min-tool-calls", type=int, default=1, help="drop trajectories with fewer tool calls")
    parser.add_argument("--max-turns", type=int, default=16, help="drop trajectories with more assistant turns")
    parser.add_argument(
        "--max-tool-failures",
        type=int,
        default=None,
        help="drop trajectories with more failed tool calls (default: keep; error recovery is wanted)",
    )
    parser.add_argument("--max-malformed", type=int, default=0, help="drop trajectories with more malformed calls")
    parser.add_argument("--max-tokens", type=int, default=32768, help="drop longer trajectories (SFT max_length)")
    parser.add_argument("--tokenizer", help="check the output with verl's MultiTurnSFTDataset and this tokenizer")
    parser.add_argument("--force", action="store_true", help="rebuild the parquet (the progress log is reused)")


def main(args: argparse.Namespace) -> int:
    return print_written(build_sft_generated(args), args.out)


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
