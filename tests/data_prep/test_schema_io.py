"""Schema validation (errors name file, row, field; rejects file) and the resumable JSONL log."""

from __future__ import annotations

import json

import pytest

from agentrl_recipe import cli, names
from agentrl_recipe.atomic_io import atomic_write_parquet
from data_prep.files import JsonlLog
from data_prep.rows import rl_row
from data_prep.schema import validate_file, validate_rl_row, validate_sft_row
from data_prep.sink import RowSink, rejects_path

TOOLS = [{"type": "function", "function": {"name": "code_interpreter", "parameters": {"type": "object"}}}]


def good_math_row() -> dict:
    return rl_row(names.DS_DAPO, "What is 1+1?", "MATH", "2", {"question": "What is 1+1?"})


def good_code_row() -> dict:
    tests = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"], "fn_name": None})
    return rl_row(names.DS_SKYWORK_CODE, "Echo n.", "code", tests, {"question": "Echo n."})


def fields(errors) -> set[str]:
    return {e.field for e in errors}


def test_valid_rows_pass() -> None:
    assert validate_rl_row(good_math_row()) == []
    assert validate_rl_row(good_code_row()) == []


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.update(data_source="AIME2024"), "data_source"),
        (lambda r: r.update(agent_name="tool_agent"), "agent_name"),
        (lambda r: r["prompt"].__setitem__(0, {"role": "user", "content": ""}), "prompt[0].content"),
        (lambda r: r["prompt"].append({"role": "assistant", "content": "x"}), "prompt[1].role"),
        (lambda r: r["reward_model"].update(ground_truth=34), "reward_model.ground_truth"),
        (lambda r: r["reward_model"].update(ground_truth='["34", "35"]'), "reward_model.ground_truth"),
        (lambda r: r["reward_model"].update(style="rule-lighteval/MATH_v2"), "reward_model.style"),
        (lambda r: r["extra_info"].update(index="uuid"), "extra_info.index"),
    ],
)
def test_rl_row_errors_name_the_field(mutate, field: str) -> None:
    row = good_math_row()
    mutate(row)
    assert field in fields(validate_rl_row(row))


def test_published_forms_are_valid_and_a_call_conversion_is_checked() -> None:
    """'["34"]' and "fn_name": null are Open-AgentRL-30K's published forms (graded per ground_truth_form)."""
    row = good_math_row()
    row["reward_model"]["ground_truth"] = '["34"]'
    assert validate_rl_row(row) == []
    row = good_code_row()
    row["reward_model"]["ground_truth"] = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"], "fn_name": None})
    assert validate_rl_row(row) == []
    row["extra_info"]["call_tests"] = json.dumps({"inputs": ["x"], "outputs": ["1"], "fn_name": "f"})
    assert fields(validate_rl_row(row)) == {"extra_info.call_tests"}


def test_code_ground_truth_contract() -> None:
    row = good_code_row()
    row["reward_model"]["ground_truth"] = json.dumps({"inputs": ["1"], "outputs": []})
    assert " ".join(e.message for e in validate_rl_row(row)) == "1 inputs but 0 outputs"
    row["reward_model"]["ground_truth"] = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})  # raw Skywork stdin
    assert validate_rl_row(row) == []
    row["reward_model"]["ground_truth"] = json.dumps({"inputs": ["[1"], "outputs": ["1"], "fn_name": "f"})
    assert "one JSON value per line" in validate_rl_row(row)[0].message  # what the scorer would refuse
    row["reward_model"]["ground_truth"] = json.dumps({"cases": [["1", "1"]]})
    assert "unknown code-test form" in validate_rl_row(row)[0].message
    leetcode = {"import_prefix": "", "entry_point": "Solution().f", "test_code": "def check(candidate):\n"}
    row["reward_model"]["ground_truth"] = json.dumps({**leetcode, "test_code": leetcode["test_code"] + "  assert 1\n"})
    assert "LeetCode assert tests: unsupported assert shape" in validate_rl_row(row)[0].message
    row["reward_model"]["ground_truth"] = json.dumps(
        {**leetcode, "test_code": leetcode["test_code"] + "  assert candidate(list_node([1])) == 1\n"}
    )
    assert validate_rl_row(row) == []
    row["reward_model"]["ground_truth"] = "{not json"
    assert "JSON" in validate_rl_row(row)[0].message
    gpqa = rl_row(names.DS_GPQA, "Q?", "Physics", "(B)", {"question": "Q?"})
    assert fields(validate_rl_row(gpqa)) == {"reward_model.ground_truth"}


def test_sft_row_errors() -> None:
    call = {"type": "function", "function": {"name": "code_interpreter", "arguments": {"code": "print(1)"}}}
    good = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "content": "1"},
            {"role": "assistant", "content": "\\boxed{1}"},
        ],
        "tools": TOOLS,
    }
    assert validate_sft_row(good) == []
    unanswered = {**good, "messages": good["messages"][:2]}
    assert any("unanswered" in e.message for e in validate_sft_row(unanswered))
    string_args = json.loads(json.dumps(good))
    string_args["messages"][1]["tool_calls"][0]["function"]["arguments"] = '{"code": "print(1)"}'
    assert "messages[1].tool_calls[0].function.arguments" in fields(validate_sft_row(string_args))
    assert "tools" in fields(validate_sft_row({**good, "tools": []}))


def test_sink_writes_rejects_next_to_output(tmp_path) -> None:
    out = tmp_path / "train.parquet"
    sink = RowSink("rl", out)
    assert sink.add(good_math_row(), file="src.jsonl", row_no=0)
    bad = good_math_row()
    bad["reward_model"]["ground_truth"] = ""
    assert not sink.add(bad, file="src.jsonl", row_no=7, source={"raw": 1})
    sink.reject(file="src.jsonl", row_no=9, field="prompt.0.content", error="missing", source={"raw": 2})
    path = sink.write_rejects()
    assert path == rejects_path(out) == tmp_path / "train.rejects.jsonl"
    rejects = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["file"], r["row"], r["field"]) for r in rejects] == [
        ("src.jsonl", 7, "reward_model.ground_truth"),
        ("src.jsonl", 9, "prompt.0.content"),
    ]
    assert rejects[0]["source_row"] == {"raw": 1} and len(sink.rows) == 1
    assert "src.jsonl: row 7: field 'reward_model.ground_truth'" in str(sink.first_error())


def test_validate_file_and_cli(tmp_path, capsys) -> None:
    bad = good_math_row()
    bad["agent_name"] = "tool_agent"
    path = tmp_path / "x.parquet"
    atomic_write_parquet(path, [good_math_row(), bad])
    errors = validate_file(path, "rl")
    assert [(e.row, e.field) for e in errors] == [(1, "agent_name")]
    assert cli.main(["data", "validate", "rl", str(path)]) == 1
    assert "row 1: field 'agent_name'" in capsys.readouterr().out


def test_jsonl_log_survives_a_torn_last_line(tmp_path) -> None:
    path = tmp_path / "progress.jsonl"
    log = JsonlLog(path)
    log.append({"key": "a", "v": 1})
    log.append({"key": "b", "v": 2})
    with path.open("a") as f:
        f.write('{"key": "c", "v"')  # killed while writing the third record
    log = JsonlLog(path)
    assert "a" in log and "b" in log and "c" not in log and len(log) == 2
    log.append({"key": "c", "v": 3})
    assert [json.loads(line)["key"] for line in path.read_text().splitlines()] == ["a", "b", "c"]
