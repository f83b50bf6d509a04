"""The paper's "stitched synthetic" SFT baseline (Table 1): long-CoT text with code spliced in as tool calls afterwards.

``agentrl-recipe data sft-stitched <file | folder | hub id> --out sft/retool_synthetic.parquet`` reads ReTool-SFT's
``<code>``/``<interpreter>``/``<answer>`` format, or problem/solution rows whose markdown code blocks run in our
sandbox (:mod:`data_prep.stitch` splits the text). Rows are validated (rejects to ``<out>.rejects.jsonl``), optionally
checked with verl's dataset (``--tokenizer``), deduplicated, and summarised in ``<out>.stats.json``.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentrl_sandbox import get_sandbox
from data_prep import standalone
from data_prep.files import earlier_report, fingerprint, load_source, mark_done, source_fingerprint
from data_prep.rows import ConvertError
from data_prep.sft_format import load_tool_schemas, sft_row
from data_prep.sft_output import add_output_arguments, finish_sft, print_written
from data_prep.sink import RowSink
from data_prep.stitch import stitch, synth_problem_and_solution

SFT_VERSION = 1


def sandbox_runner(timeout_s: float, statuses: Counter[str]) -> Callable[[str], str]:
    """``run_code(code) -> output`` in our sandbox (started on the first call); counts each run's status."""
    sandbox = None

    def run_code(code: str) -> str:
        nonlocal sandbox
        if sandbox is None:
            sandbox = get_sandbox()
        res = sandbox.run(code, timeout_s=timeout_s)
        statuses[res.status] += 1
        if res.status == "infra_error":
            raise ConvertError("sandbox", f"sandbox infra_error: {res.stderr[:200]}")
        return (res.stdout + res.stderr).strip() or "(no output)"

    return run_code


def build_sft_stitched(args: argparse.Namespace) -> dict[str, Any]:
    """Stitch, validate and write; returns the stats report (also written next to the output)."""
    out = Path(args.out)
    settings = [args.execute, args.tokenizer, args.tool_config, args.limit]
    key = fingerprint(["synth", SFT_VERSION, source_fingerprint(args.source), *settings])
    if (
        earlier := earlier_report(out, key, force=args.force, message=f"{out} is up to date; --force rebuilds it")
    ) is not None:
        return earlier
    tools = load_tool_schemas(args.tool_config)
    statuses: Counter[str] = Counter()
    run_code = sandbox_runner(args.timeout_s, statuses)
    sink = RowSink("sft", out)
    rows = load_source(args.source)[: args.limit or None]
    for file, row_no, src in tqdm(rows, desc="sft-stitched", unit="row", mininterval=2):
        try:
            problem, solution = synth_problem_and_solution(src)
            messages = stitch(problem, solution, run_code=run_code, execute=args.execute)
            sink.add(sft_row(messages, tools), file=file, row_no=row_no, source=src)
        except ConvertError as e:
            sink.reject(file=file, row_no=row_no, field=e.field, error=str(e), source=src)
    report = {"command": "sft-stitched", "source": args.source, "rows_loaded": len(rows)}
    report = finish_sft(sink, tokenizer=args.tokenizer, report={**report, "sandbox_runs": dict(statuses)})
    mark_done(out, key, rows=report["rows_written"])
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="file/folder or hub id (paper's synthetic arm: JoeYing/ReTool-SFT)")
    parser.add_argument("--tool-config", default=None, help="verl tool YAML (default: verl_configs/tools/...)")
    parser.add_argument(
        "--execute",
        choices=("missing", "all", "never"),
        default="missing",
        help="run code blocks in the sandbox when no <interpreter> output is given (default), always, never",
    )
    parser.add_argument("--timeout-s", type=float, default=30.0, help="sandbox timeout per code block")
    parser.add_argument("--limit", type=int, default=0, help="first N source rows only (0 = all)")
    add_output_arguments(parser)


def main(args: argparse.Namespace) -> int:
    return print_written(build_sft_stitched(args), args.out)


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
