"""The released Open-AgentRL-SFT-3K (or any messages/tools file) → normalised, validated verl multi-turn SFT parquet.

``agentrl-recipe data sft-released <file | folder | hub id> --out sft/train.parquet`` writes rows for verl's
``MultiTurnSFTDataset`` (``messages`` with ``tool_calls``, ``tools``). Every row is validated (rejects go to
``<out>.rejects.jsonl``), optionally checked by loading the file with verl's dataset and a tokenizer (``--tokenizer``:
loss mask on assistant turns only), deduplicated, and summarised in ``<out>.stats.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tqdm import tqdm

from data_prep import standalone
from data_prep.files import earlier_report, fingerprint, load_source, mark_done, source_fingerprint
from data_prep.rows import ConvertError, get_field
from data_prep.schema import drop_arrow_nulls
from data_prep.sft_format import DEFAULT_TOOL_CONFIG, load_tool_schemas, normalize_messages, sft_row
from data_prep.sft_output import add_output_arguments, finish_sft, print_written
from data_prep.sink import RowSink

SFT_VERSION = 1


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


def build_sft_released(args: argparse.Namespace) -> dict[str, Any]:
    """Convert, validate and write; returns the stats report (also written next to the output)."""
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
    for file, row_no, src in tqdm(rows, desc="sft-released", unit="row", mininterval=2):
        try:
            sink.add(convert_sft_row(src, default_tools), file=file, row_no=row_no, source=src)
        except ConvertError as e:
            sink.reject(file=file, row_no=row_no, field=e.field, error=str(e), source=src)
    report = {"command": "sft-released", "source": args.source, "rows_loaded": len(rows)}
    report = finish_sft(sink, tokenizer=args.tokenizer, report=report)
    mark_done(out, key, rows=report["rows_written"])
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="file/folder or hub id (paper: Gen-Verse/Open-AgentRL-SFT-3K)")
    parser.add_argument(
        "--tool-config", help="verl tool YAML for rows without a tools column (default: verl_configs/tools/...)"
    )
    add_output_arguments(parser)


def main(args: argparse.Namespace) -> int:
    return print_written(build_sft_released(args), args.out)


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
