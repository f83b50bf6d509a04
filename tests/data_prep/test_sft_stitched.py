"""`data sft-stitched`: ReTool-SFT's tagged solutions and markdown code blocks become tool-call turns."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq

from agentrl_recipe import cli
from data_prep.sft_format import DEFAULT_TOOL_CONFIG, load_tool_schemas


def test_stitched_baseline(data_dir: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "synthetic.parquet"
    code = cli.main(
        [
            "data",
            "sft-stitched",
            str(data_dir / "retool_sft.jsonl"),
            "--out",
            str(out),
            "--tokenizer",
            str(tiny_model_dir),
        ]
    )
    assert code == 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 3
    first = [{k: v for k, v in m.items() if v is not None} for m in rows[0]["messages"]]
    assert first[0] == {"role": "user", "content": first[0]["content"]}
    assert (
        first[0]["content"].startswith("What is the smallest positive integer")
        and "*user question:*" not in first[0]["content"]
    )
    assert first[1]["tool_calls"][0]["function"]["arguments"]["code"].startswith("print(next(n for n")  # fence stripped
    assert first[2] == {"role": "tool", "content": "12"} and first[3]["content"].endswith("\\boxed{12}")
    assert sum(len(m["tool_calls"] or []) for m in rows[1]["messages"]) == 2
    md = [{k: v for k, v in m.items() if v is not None} for m in rows[2]["messages"]]
    assert md[2] == {"role": "tool", "content": "391"}  # no output in the source: run in our sandbox
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert stats["sandbox_runs"] == {"ok": 1} and stats["rejected"] == 1
    assert rows[0]["tools"] == load_tool_schemas(DEFAULT_TOOL_CONFIG)
