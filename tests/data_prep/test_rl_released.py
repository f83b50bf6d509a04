"""The released RL set as published: the original's first-row templating vs per-row, ground truths kept, rejects."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from agentrl_recipe.training.rewards.code.assert_form import AssertTests, parse_code_tests
from data_prep import prompts
from data_prep.jobs import rl_released as released
from data_prep.schema import validate_file

# rows 0-8 valid (each ground-truth form), 9 unknown test form, 10 unknown label (both kept, flagged released_only, as
# the released loader kept them); 11-14 valid, the published quirks: stdin tests with "fn_name": null, a
# multiple-choice (GPQA-style) letter, LeetCode asserts on a str / a float result
FIXTURE = "open_agentrl_30k.jsonl"
ALL = list(range(15))
UNKNOWN_FORM = "reward_model.ground_truth: unknown code-test form: keys ['cases'] lack ['inputs', 'outputs']"
UNKNOWN_LABEL = "unknown label 'train-science-physics' (not math_dapo, mega-science, train-math-*, *code*): math"
NO_UNITS = (
    "\nDo not put units of the final answer inside \\boxed{}. The content of \\boxed{} should be the numerical value "
    "of the final answer only, without any units."
)
SUBMIT = (
    "\n\n**Note: You should first analyze the problem and form a high-level solution strategy, then utilize the tools "
    "to help you solve the problem.**\nBefore sumbit your code, you can utilize tools to check the correctness of your "
    "code, once you make sure the current code is correct, do not call the tools again and submit your code within "
    "```python\n# YOUR CODE HERE\n```."
)


def as_parquet(rows: list[dict], path: Path) -> Path:
    """The published file is one parquet: nested prompt/reward_model/extra_info structs, as Arrow writes them."""
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def load(parse_args, source: Path, out: Path, *extra: str) -> tuple[dict, list[dict]]:
    args = parse_args(released, [str(source), "--out", str(out), *extra])
    assert released.main(args) == 0
    return json.loads(out.with_suffix(".stats.json").read_text()), pq.read_table(out).to_pylist()


def by_label(rows: list[dict]) -> dict[str, dict]:
    return {r["extra_info"]["source_label"] + ":" + r["extra_info"]["source_id"]: r for r in rows}


@pytest.fixture
def source(data_dir: Path, tmp_path: Path) -> Path:
    return as_parquet(read_local_file(data_dir / FIXTURE), tmp_path / "Open-AgentRL-30K.parquet")


def test_first_row_dispatch_reproduces_the_original(source: Path, tmp_path: Path, parse_args) -> None:
    src = read_local_file(source)
    stats, rows = load(parse_args, source, tmp_path / "first.parquet")
    assert (stats["first_row_data_source"], stats["file_map_fn"], stats["templating"]) == (
        "math_dapo",
        "map_fn2",
        "first_row",
    )
    assert [r["prompt"][0]["content"] for r in rows] == [src[i]["prompt"][0]["content"] + NO_UNITS for i in ALL]
    assert rows[4]["prompt"][0]["content"].endswith("Print their sum." + NO_UNITS)  # a code row told "no units"
    assert [r["extra_info"]["index"] for r in rows] == ALL
    assert {r["extra_info"]["map_fn"] for r in rows} == {"map_fn2"}


def test_per_row_dispatch_is_the_fix(source: Path, tmp_path: Path, parse_args) -> None:
    src = read_local_file(source)
    _, rows = load(parse_args, source, tmp_path / "per_row.parquet", "--templating", "per_row")
    content = [r["prompt"][0]["content"] for r in rows]
    assert content[0] == src[0]["prompt"][0]["content"] + NO_UNITS  # math_dapo: map_fn2
    assert content[3] == src[3]["prompt"][0]["content"] + NO_UNITS  # mega-science: map_fn2
    assert content[1] == prompts.skywork_math_prompt("Compute $5^{6}$.")
    assert content[1].startswith("Analyze and solve the following math problem step by step. \n\nCompute $5^{6}$.")
    assert content[1].endswith("should be the final numerical value of the final answer only, without any units.")
    assert content[4] == src[4]["prompt"][0]["content"] + SUBMIT
    assert [r["extra_info"]["map_fn"] for r in rows] == ["map_fn2", *["map_fn_skywork"] * 2, "map_fn2"] + [
        "map_fn_skywork"
    ] * 8 + ["map_fn2", *["map_fn_skywork"] * 2]
    assert content[10] == prompts.skywork_math_prompt(src[10]["prompt"][0]["content"])  # the unknown label: math


def test_a_file_that_starts_with_a_code_row_gets_the_skywork_templates(data_dir: Path, tmp_path: Path, parse_args):
    src = read_local_file(data_dir / FIXTURE)
    code_first = as_parquet([src[4], *src[:4], *src[5:]], tmp_path / "code_first.parquet")
    stats, rows = load(parse_args, code_first, tmp_path / "out.parquet")
    assert stats["file_map_fn"] == "map_fn_skywork"
    dapo = by_label(rows)["math_dapo:0"]["prompt"][0]["content"]
    assert dapo == prompts.skywork_math_prompt(src[0]["prompt"][0]["content"])  # the DAPO row, math agent template


def test_ground_truths_are_kept_as_published_and_every_form_is_gradable(source: Path, tmp_path, parse_args) -> None:
    src = read_local_file(source)
    stats, rows = load(parse_args, source, tmp_path / "out.parquet")
    gts = [r["reward_model"]["ground_truth"] for r in rows]
    assert gts == [src[i]["reward_model"]["ground_truth"] for i in ALL]  # every one byte for byte as published
    assert gts[:4] == ["34", "15625", '["7"]', "0.25"] and gts[12] == "C"  # the list answer stays a list
    assert (stats["list_answers"], stats["code_fn_name_null"]) == (1, 1)  # the quirks, counted
    assert json.loads(gts[11]) == {"inputs": ["3\n", "12\n"], "outputs": ["9\n", "144\n"], "fn_name": None}
    forms = [type(parse_code_tests(gt)).__name__ for gt in gts[4:9] + gts[11:12] + gts[13:]]
    assert (
        forms
        == ["CodeTests", "CodeTests", "AssertTests", "AssertTests", "AssertTests", "CodeTests"] + ["AssertTests"] * 2
    )
    assert len(AssertTests.parse(gts[7])) == 3  # the ListNode row is kept, all its asserts
    assert [r["data_source"] for r in rows] == [
        names.DS_DAPO,
        names.DS_SKYWORK_MATH,
        names.DS_SKYWORK_MATH,
        names.DS_MEGASCIENCE,
        *[names.DS_SKYWORK_CODE] * 6,
        names.DS_SKYWORK_MATH,  # the unknown label, graded as math as compute_score did
        names.DS_SKYWORK_CODE,
        names.DS_MEGASCIENCE,
        *[names.DS_SKYWORK_CODE] * 2,
    ]
    assert (
        json.loads(rows[1]["extra_info"]["source_extra_info"])["model_difficulty"]["DeepSeek-R1-Distill-Qwen-7B"] == 7
    )
    assert validate_file(tmp_path / "out.parquet", "rl") == []


def test_unknown_forms_and_labels_are_kept_flagged_and_counted(source: Path, tmp_path, parse_args, capsys) -> None:
    """Issue 45 item 7: the released loader kept every row; the two our schema refuses are flagged, with the reason,
    and the job prints what the fixed mode (keep_released_rows false) drops."""
    stats, rows = load(parse_args, source, tmp_path / "out.parquet")
    assert (tmp_path / "out.rejects.jsonl").read_text() == ""
    assert (stats["loaded"], stats["kept"], stats.get("rejected", 0), stats["total_written"]) == (15, 15, 0, 15)
    flagged = {
        i: r["extra_info"].get("released_only") for i, r in enumerate(rows) if r["extra_info"].get("released_only")
    }
    assert flagged == {9: UNKNOWN_FORM, 10: UNKNOWN_LABEL}
    assert stats["released_only"] == {UNKNOWN_FORM: 1, UNKNOWN_LABEL: 1}
    out = capsys.readouterr().out
    assert (
        "flagged released_only: 2 row(s); the fixed mode (compat agentrl: data.agentrl.keep_released_rows false)" in out
    )
    assert f"\n       1  {UNKNOWN_FORM}" in out and f"\n       1  {UNKNOWN_LABEL}" in out


def test_rerun_is_skipped_and_a_changed_flag_rebuilds(source: Path, tmp_path: Path, parse_args, capsys) -> None:
    out = tmp_path / "out.parquet"
    load(parse_args, source, out)
    load(parse_args, source, out)
    assert "up to date" in capsys.readouterr().out
    stats, _ = load(parse_args, source, out, "--templating", "per_row")
    assert stats["templating"] == "per_row"


def test_an_eval_file_is_refused(tmp_path: Path, parse_args) -> None:
    aime = as_parquet([{"data_source": "AIME2024", "Problem": "x", "Answer": 1}], tmp_path / "aime.parquet")
    with pytest.raises(SystemExit, match=r"row 0: .*eval templates; use `data eval-sets`"):
        load(parse_args, aime, tmp_path / "out.parquet")
    assert released.map_fn_name("train-code-leetcode-Easy") == "map_fn_skywork"


def test_the_output_loads_in_verl_rlhf_dataset(source: Path, tmp_path: Path, parse_args, tiny_tokenizer) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = tmp_path / "out.parquet"
    load(parse_args, source, out)
    cfg = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False, "return_raw_chat": True})
    ds = RLHFDataset([str(out)], tiny_tokenizer, cfg)
    assert len(ds) == 15 and ds[7]["agent_name"] == names.AGENT_LOOP
    assert "is_same_list" in ds[7]["reward_model"]["ground_truth"]


def test_the_report_counts_fn_names_a_prelude_name_shadows(source: Path, tmp_path: Path, parse_args) -> None:
    """Issue 34 item 9: the released set's `add` row is one the released grader scores 1.0 for any `def add`."""
    stats, _ = load(parse_args, source, tmp_path / "out.parquet")
    assert stats["code_fn_name_shadows_prelude"] == {"rows": 1, "fn_names": {"add": 1}}
