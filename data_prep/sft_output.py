"""The end every SFT job shares: dedup, the check with verl's dataset, and the parquet + rejects + stats + plot.

Used by ``data sft-released`` (:mod:`data_prep.jobs.sft_released`), ``data sft-stitched``
(:mod:`data_prep.jobs.sft_stitched`) and ``data sft-generate`` (:mod:`data_prep.jobs.sft_generate`).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import atomic_write_parquet
from data_prep.sft_format import check_with_verl_dataset
from data_prep.sink import RowSink
from data_prep.stats import plot_length_histogram, summarize, write_report
from data_prep.text import exact_key


def trajectory_key(row: dict) -> str:
    return exact_key(json.dumps(row["messages"], sort_keys=True, ensure_ascii=False))


def add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out``, ``--tokenizer``, ``--force``: the output options of the file-to-SFT jobs."""
    parser.add_argument("--out", required=True, help="output parquet (stats, plots, rejects next to it)")
    parser.add_argument("--tokenizer", help="check every row with verl's MultiTurnSFTDataset and this tokenizer")
    parser.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")


def print_written(report: dict[str, Any], out: str) -> int:
    """The job's last line; returns the exit status."""
    print(f"wrote {report['rows_written']} SFT rows → {out} (rejected {report['rejected']})")
    return 0


def finish_sft(sink: RowSink, *, tokenizer: str | None, report: dict[str, Any], dedup: bool = True) -> dict[str, Any]:
    """Dedup, check with verl's dataset (rows it cannot load become rejects), write parquet + rejects + stats."""
    out = sink.output
    rows = sink.rows
    if dedup:
        seen: set[str] = set()
        unique = []
        for row in rows:
            key = trajectory_key(row)
            if key not in seen:
                seen.add(key)
                unique.append(row)
        report["duplicates_removed"] = len(rows) - len(unique)
        rows = unique
    if tokenizer and rows:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
            candidate = Path(tmp) / "candidate.parquet"
            atomic_write_parquet(candidate, rows)
            failures = check_with_verl_dataset(candidate, tokenizer)
        for i, error in sorted(failures.items()):
            sink.reject(file=str(out), row_no=i, field="messages", error=error, row=rows[i])
        rows = [r for i, r in enumerate(rows) if i not in failures]
        report["verl_check"] = {"tokenizer": str(tokenizer), "failed": len(failures), "passed": len(rows)}
    if not rows:
        sink.write_rejects()
        raise SystemExit(f"no valid SFT rows for {out}; see {sink.write_rejects()}")
    turns = [sum(m["role"] == "assistant" for m in r["messages"]) for r in rows]
    calls = [sum(len(m.get("tool_calls") or []) for m in r["messages"]) for r in rows]
    chars = [sum(len(m.get("content") or "") for m in r["messages"]) for r in rows]
    report.update(
        rows_written=len(rows),
        rejected=len(sink.rejects),
        reject_reasons=sink.reason_counts(),
        assistant_turns=summarize(turns),
        tool_calls=summarize(calls),
        with_tool_calls=sum(c > 0 for c in calls),
        characters=summarize(chars),
        rejects_file=str(sink.write_rejects()),
    )
    plot_length_histogram(
        out.with_suffix(".length.png"),
        {"trajectories": chars},
        unit="characters",
        title=f"{out.name}: trajectory length",
    )
    write_report(out.with_suffix(".stats.json"), report)
    atomic_write_parquet(out, rows)
    return report
