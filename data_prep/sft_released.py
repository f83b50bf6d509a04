"""Multi-turn tool-use SFT data for verl's ``MultiTurnSFTDataset`` (``messages`` with ``tool_calls``, ``tools``).

  convert     the released Open-AgentRL-SFT-3K (or any messages/tools file) → normalised, validated verl SFT parquet
  generate    real end-to-end trajectories: a teacher model solves problems with code_interpreter through our sandbox;
              trajectories whose final answer our scorer verifies are kept (the generator the original never released)
  synthesize  the paper's "stitched synthetic" baseline: long-CoT text with code spliced in as tool calls afterwards
              (ReTool-SFT's <code>/<interpreter>/<answer> format, or markdown code blocks executed in our sandbox)

Every command validates its rows (rejects go to ``<out>.rejects.jsonl``), optionally checks them by loading the file
with verl's dataset and a tokenizer (``--tokenizer``: loss mask on assistant turns only), dedups, and writes stats.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentrl_sandbox import get_sandbox
from data_prep import standalone
from data_prep.files import earlier_report, fingerprint, load_source, mark_done, source_fingerprint
from data_prep.rows import ConvertError, get_field
from data_prep.schema import drop_arrow_nulls
from data_prep.sft_format import DEFAULT_TOOL_CONFIG, load_tool_schemas, normalize_messages, sft_row
from data_prep.sft_generate import add_generate_arguments, cmd_generate
from data_prep.sft_output import finish_sft
from data_prep.sink import RowSink
from data_prep.stitch import stitch, synth_problem_and_solution

SFT_VERSION = 1


# ----------------------------------------------------------------------------------------------- convert
def convert_sft_row(row: dict, default_tools: list[dict] | None) -> dict:
    row = drop_arrow_nulls(row)
    messages = normalize_messages(get_field(row, "messages"))
    tools = row.get("tools") or default_tools
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as e:
            raise ConvertError("tools", f"not JSON ({e.msg})") from e
    if not tools:
        raise ConvertError("tools", "missing, and no --tool-config default was loaded")
    return sft_row(messages, tools)


def cmd_convert(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    key = fingerprint(["convert", SFT_VERSION, source_fingerprint(args.source), args.tokenizer, args.tool_config])
    if (
        earlier := earlier_report(out, key, force=args.force, message=f"{out} is up to date; --force rebuilds it")
    ) is not None:
        return earlier
    # rows without a tools column get the RL rollout's tool schemas (the same system prompt in SFT and RL)
    default_tools = load_tool_schemas(args.tool_config) if args.tool_config or DEFAULT_TOOL_CONFIG.exists() else None
    sink = RowSink("sft", out)
    rows = load_source(args.source)
    for file, row_no, src in tqdm(rows, desc="convert sft", unit="row", mininterval=2):
        try:
            sink.add(convert_sft_row(src, default_tools), file=file, row_no=row_no, source=src)
        except ConvertError as e:
            sink.reject(file=file, row_no=row_no, field=e.field, error=str(e), source=src)
    report = finish_sft(
        sink, tokenizer=args.tokenizer, report={"command": "convert", "source": args.source, "rows_loaded": len(rows)}
    )
    mark_done(out, key, rows=report["rows_written"])
    return report


# ----------------------------------------------------------------------------------------------- synthesize
def cmd_synthesize(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    key = fingerprint(
        [
            "synth",
            SFT_VERSION,
            source_fingerprint(args.source),
            args.execute,
            args.tokenizer,
            args.tool_config,
            args.limit,
        ]
    )
    if (
        earlier := earlier_report(out, key, force=args.force, message=f"{out} is up to date; --force rebuilds it")
    ) is not None:
        return earlier
    tools = load_tool_schemas(args.tool_config)
    sandbox = None
    statuses: Counter[str] = Counter()

    def run_code(code: str) -> str:
        nonlocal sandbox
        if sandbox is None:
            sandbox = get_sandbox()
        res = sandbox.run(code, timeout_s=args.timeout_s)
        statuses[res.status] += 1
        if res.status == "infra_error":
            raise ConvertError("sandbox", f"sandbox infra_error: {res.stderr[:200]}")
        return (res.stdout + res.stderr).strip() or "(no output)"

    sink = RowSink("sft", out)
    rows = load_source(args.source)[: args.limit or None]
    for file, row_no, src in tqdm(rows, desc="synthesize", unit="row", mininterval=2):
        try:
            problem, solution = synth_problem_and_solution(src)
            messages = stitch(problem, solution, run_code=run_code, execute=args.execute)
            sink.add(sft_row(messages, tools), file=file, row_no=row_no, source=src)
        except ConvertError as e:
            sink.reject(file=file, row_no=row_no, field=e.field, error=str(e), source=src)
    report = {"command": "synthesize", "source": args.source, "rows_loaded": len(rows), "sandbox_runs": dict(statuses)}
    report = finish_sft(sink, tokenizer=args.tokenizer, report=report)
    mark_done(out, key, rows=report["rows_written"])
    return report


# ----------------------------------------------------------------------------------------------- CLI
def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", required=True, help="output parquet (stats, plots, rejects next to it)")
    p.add_argument("--tokenizer", help="check every row with verl's MultiTurnSFTDataset and this tokenizer")
    p.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sft_command", metavar="SFT_CMD", required=True)
    p = sub.add_parser("convert", help="released SFT-3K (messages, tools) → verl multi-turn SFT parquet")
    p.add_argument("source", help="file/folder or hub id (paper: Gen-Verse/Open-AgentRL-SFT-3K)")
    p.add_argument(
        "--tool-config", help="verl tool YAML for rows without a tools column (default: verl_configs/tools/...)"
    )
    _common(p)
    p = sub.add_parser("synthesize", help="stitched-trajectory baseline (ReTool-SFT or CoT with code blocks)")
    p.add_argument("source", help="file/folder or hub id (paper's synthetic arm: JoeYing/ReTool-SFT)")
    p.add_argument("--tool-config", default=None, help="verl tool YAML (default: verl_configs/tools/...)")
    p.add_argument(
        "--execute",
        choices=("missing", "all", "never"),
        default="missing",
        help="run code blocks in the sandbox when no <interpreter> output is given (default), always, never",
    )
    p.add_argument("--timeout-s", type=float, default=30.0, help="sandbox timeout per code block")
    p.add_argument("--limit", type=int, default=0, help="first N source rows only (0 = all)")
    _common(p)
    add_generate_arguments(sub.add_parser("generate", help="real trajectories from a teacher model + our sandbox"))


def main(args: argparse.Namespace) -> int:
    if args.sft_command == "generate":
        report = cmd_generate(args)
    else:
        report = {"convert": cmd_convert, "synthesize": cmd_synthesize}[args.sft_command](args)
    print(f"wrote {report['rows_written']} SFT rows → {args.out} (rejected {report['rejected']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
