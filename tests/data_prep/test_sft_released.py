"""`data sft-released`: normalising tool-call shapes, checked with verl's MultiTurnSFTDataset."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentrl_recipe import cli, names
from agentrl_recipe.problems import read_local_file
from data_prep.jobs import sft_released
from data_prep.rows import ConvertError
from data_prep.sft_format import check_with_verl_dataset, normalize_messages, split_inline_tool_calls


def calls(messages: list[dict]) -> list[dict]:
    return [c for m in messages for c in m.get("tool_calls") or []]


def test_normalize_all_tool_call_shapes(data_dir: Path) -> None:
    rows = read_local_file(data_dir / "open_agentrl_sft_3k.jsonl")
    expected_code = [
        "print(pow(2, 2024, 7))",
        "print(sum(range(1, 101)))",
        None,
        "import math\nprint(math.factorial(12))",
    ]
    for row, code in zip(rows[:4], expected_code, strict=True):
        msgs = normalize_messages(row["messages"])
        (call,) = calls(msgs)
        assert call["type"] == "function" and call["function"]["name"] == names.TOOL_NAME
        assert isinstance(call["function"]["arguments"], dict)
        if code:
            assert call["function"]["arguments"]["code"] == code
        assert [m["role"] for m in msgs][-2:] == ["tool", "assistant"]  # qwen-agent's "function" role → "tool"
    inline = normalize_messages(rows[2]["messages"])
    assert inline[1]["content"] == "Count them with a sieve." and "<tool_call>" not in inline[1]["content"]
    with pytest.raises(ConvertError) as err:
        split_inline_tool_calls("<tool_call>{not json}</tool_call>", "messages[1]")
    assert err.value.field == "messages[1].content"


def test_convert_checks_with_verl_dataset(data_dir: Path, tmp_path: Path, tiny_model_dir: Path) -> None:
    out = tmp_path / "sft.parquet"
    code = cli.main(
        [
            "data",
            "sft-released",
            str(data_dir / "open_agentrl_sft_3k.jsonl"),
            "--out",
            str(out),
            "--tokenizer",
            str(tiny_model_dir),
        ]
    )
    assert code == 0
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    assert (stats["rows_loaded"], stats["duplicates_removed"], stats["rejected"]) == (7, 1, 2)
    assert stats["verl_check"] == {"tokenizer": str(tiny_model_dir), "failed": 0, "passed": 4}
    rejects = [json.loads(line) for line in (tmp_path / "sft.rejects.jsonl").read_text().splitlines()]
    assert {(r["row"], r["field"]) for r in rejects} == {
        (5, "messages[1]"),
        (6, "messages[1].tool_calls[0].function.name"),
    }
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 4 and all(r["tools"][0]["function"]["name"] == names.TOOL_NAME for r in rows)

    from transformers import AutoTokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ds = MultiTurnSFTDataset([str(out)], tok, {"max_length": 4096, "pad_mode": "no_padding"})
    item = ds[0]
    trained = tok.decode(item["input_ids"][item["loss_mask"].bool()].tolist())
    assert "Let me compute this directly." in trained and "The remainder is \\boxed{4}." in trained
    assert "Find the remainder" not in trained and "<tool_response>" not in trained


def test_verl_check_rejects_rows_verl_cannot_train(tmp_path: Path, tiny_model_dir: Path) -> None:
    """Two parallel calls render as one grouped tool block whole, but two blocks turn by turn: verl's sanity check."""
    tools = [{"type": "function", "function": {"name": "code_interpreter", "parameters": {"type": "object"}}}]
    call = {"type": "function", "function": {"name": "code_interpreter", "arguments": {"code": "print(1)"}}}
    user, answer = {"role": "user", "content": "q"}, {"role": "assistant", "content": "\\boxed{1}"}
    parallel = [
        user,
        {"role": "assistant", "content": "two", "tool_calls": [call, call]},
        {"role": "tool", "content": "1"},
        {"role": "tool", "content": "1"},
        answer,
    ]
    rows = [{"messages": parallel, "tools": tools}, {"messages": [user, answer], "tools": tools}]
    src = tmp_path / "src.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.parquet"
    report = sft_released.build_sft_released(
        argparse_ns(source=str(src), out=str(out), tokenizer=str(tiny_model_dir), tool_config=None, force=False)
    )
    assert report["verl_check"]["failed"] == 1 and report["rows_written"] == 1
    (reject,) = [json.loads(line) for line in (tmp_path / "out.rejects.jsonl").read_text().splitlines()]
    assert reject["row"] == 0 and "MultiTurnSFTDataset" in reject["error"]
    assert check_with_verl_dataset(out, tiny_model_dir) == {}


def argparse_ns(**kw):
    import argparse

    return argparse.Namespace(**kw)
