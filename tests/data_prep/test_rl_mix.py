"""The RL mix: per-source converters, dedup, decontamination, sampling, stats, rerun skip and resume after a kill."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from data_prep import prompts, rl_sources
from data_prep.jobs import rl_mix as prep_rl
from data_prep.rows import ConvertError
from data_prep.text import Decontaminator, dedup, normalize_text, word_ngrams


def rows_of(path: Path) -> list[dict]:
    return read_local_file(path)


# ----------------------------------------------------------------------------------------------- converters
def test_dapo_prompt_is_the_originals_map_fn2(data_dir: Path) -> None:
    src = rows_of(data_dir / "dapo_math_17k.jsonl")[0]
    row = rl_sources.convert_dapo(src)
    content = src["prompt"][0]["content"]
    assert row["prompt"] == [{"role": "user", "content": content + prompts.NO_UNITS_DAPO}]
    assert row["prompt"][0]["content"].endswith(
        "\nDo not put units of the final answer inside \\boxed{}. The content of \\boxed{} should be the numerical "
        "value of the final answer only, without any units."
    )
    assert row["reward_model"] == {"ground_truth": "34", "style": "rule"}
    assert row["agent_name"] == names.AGENT_LOOP == "agentrl_tool_agent"
    assert (
        row["extra_info"]["question"].startswith("In triangle $ABC$") and "Answer:" not in row["extra_info"]["question"]
    )
    assert row["extra_info"]["source_id"] == "9a9b6eb4-a1cb-49d1-8c1e-62eaf2f74079"


def test_skywork_math_decodes_the_answer_list_and_wraps_the_template(data_dir: Path) -> None:
    src = rows_of(data_dir / "skywork_or1_math.jsonl")[1]
    row = rl_sources.convert_skywork_math(src)
    assert row["data_source"] == names.DS_SKYWORK_MATH and row["reward_model"]["ground_truth"] == "4"
    expected = (
        "Analyze and solve the following math problem step by step. \n\n"
        + src["prompt"][0]["content"]
        + "\n\nThe tool could be used for more precise and efficient calculation and could help you to verify your "
        "result before you reach the final answer.\n\n**Note: You should first analyze the problem and form a "
        "high-level solution strategy, then utilize the tools to help you solve the problem.**\nRemember once you "
        "make sure the current answer is your final answer, do not call the tools again and directly output the "
        "final answer in the following text format, the answer format must be: \\boxed{'The final answer goes "
        "here.'}.\nDo not put units of the final answer inside \\boxed{}. The content of \\boxed{} should be the "
        "final numerical value of the final answer only, without any units."
    )
    assert row["prompt"][0]["content"] == expected
    assert row["extra_info"]["source_label"] == "train-math-deepscaler"
    assert row["extra_info"]["model_difficulty"]["DeepSeek-R1-Distill-Qwen-7B"] == 0
    with pytest.raises(ConvertError) as err:
        rl_sources.convert_skywork_math(rows_of(data_dir / "skywork_or1_math.jsonl")[3])
    assert err.value.field == "reward_model.ground_truth"


def test_skywork_code_test_shapes(data_dir: Path) -> None:
    src = rows_of(data_dir / "skywork_or1_code.jsonl")
    stdin, fn, leetcode, lines, helper = src
    gt = [json.loads(rl_sources.convert_skywork_code(r)["reward_model"]["ground_truth"]) for r in (stdin, fn, leetcode)]
    assert gt[0] == {"inputs": ["3\n1 2 3\n", "1\n-5\n"], "outputs": ["6\n", "-5\n"]}  # stdin: no fn_name key
    assert gt[1]["fn_name"] == "add" and gt[1]["inputs"] == ["1\n2", "[1]\n[2]"]
    # a LeetCode row keeps its asserts (graded as released); the call-based conversion is extra_info.call_tests:
    # keywords reordered to the signature twoSum(self, nums, target), one JSON value per line, positional
    converted = rl_sources.convert_skywork_code(leetcode)
    assert converted["reward_model"]["ground_truth"] == leetcode["reward_model"]["ground_truth"]
    assert json.loads(converted["extra_info"]["call_tests"]) == {
        "inputs": ["[2, 7, 11, 15]\n9", "[3, 3]\n6"],
        "outputs": ["[0, 1]", "[0, 1]"],
        "fn_name": "twoSum",
    }
    assert converted["extra_info"]["num_tests"] == 2
    assert json.loads(rl_sources.convert_skywork_code(lines)["reward_model"]["ground_truth"])["inputs"] == [
        "hello\nworld\n"
    ]
    # helper objects (ListNode) have no LCB encoding: the raw asserts only, graded by running them
    kept = rl_sources.convert_skywork_code(helper)
    assert kept["reward_model"]["ground_truth"] == helper["reward_model"]["ground_truth"]
    assert kept["extra_info"]["num_tests"] == 1 and "call_tests" not in kept["extra_info"]
    bad = json.loads(helper["reward_model"]["ground_truth"])
    bad["test_code"] = "def check(candidate):\n    assert candidate(head = list_node([1])) != 2\n"
    helper = {**helper, "reward_model": {"ground_truth": json.dumps(bad), "style": "rule"}}
    with pytest.raises(ConvertError, match=r"unconvertible assert .* as raw asserts: unsupported assert shape"):
        rl_sources.convert_skywork_code(helper)
    content = rl_sources.convert_skywork_code(stdin)["prompt"][0]["content"]
    assert content == stdin["prompt"][0]["content"] + prompts.AGENT_PROMPT + prompts.CODE_SUBMIT
    assert "Before sumbit your code" in content  # the original's typo, kept: it is the trained prompt


def test_megascience_selection(data_dir: Path) -> None:
    src = rows_of(data_dir / "megascience.jsonl")
    kept = [rl_sources.convert_megascience(r) for r in src]
    assert [r is not None for r in kept] == [True, True, False, False]  # non-numeric and empty answers left out
    assert kept[0]["ability"] == "physics" and kept[1]["ability"] == "science"  # empty subject
    assert kept[0]["reward_model"]["ground_truth"] == "0.25"
    assert kept[0]["prompt"][0]["content"] == src[0]["question"] + prompts.NO_UNITS_DAPO
    assert rl_sources.convert_megascience(src[2], answers="any")["reward_model"]["ground_truth"] == "The mitochondrion"


# ----------------------------------------------------------------------------------------------- text keys
def test_dedup_exact_then_normalized() -> None:
    items = ["What is  2+2?", "What is  2+2?", "what is 2 + 2 ?", "What is 3+3?"]
    kept, dups = dedup(items, lambda s: s)
    assert kept == ["What is  2+2?", "What is 3+3?"]
    assert [(d.item_index, d.first_index, d.how) for d in dups] == [(1, 0, "exact"), (2, 0, "normalized")]
    assert normalize_text("Ｆｉｎｄ  $x^2$!") == "find x 2"


def test_decontamination_threshold() -> None:
    eval_text = " ".join(f"w{i}" for i in range(40))
    decon = Decontaminator([("aime:1", eval_text)], n=5, threshold=0.5)
    assert decon.check(eval_text).score == 1.0
    embedded = "Some preamble words here. " + eval_text + " and a long unrelated tail " * 20
    assert decon.check(embedded).eval_id == "aime:1"  # caught from the eval side of the overlap
    half = " ".join(f"w{i}" for i in range(20)) + " " + " ".join(f"x{i}" for i in range(20))
    assert decon.check(half) is None  # 16 of 36 five-grams shared: 0.44 < 0.5
    hit = Decontaminator([("aime:1", eval_text)], n=5, threshold=0.4).check(half)
    assert hit is not None and hit.shared == 16 and hit.score == pytest.approx(16 / 36)
    assert decon.check("totally different problem text about other numbers entirely") is None
    assert word_ngrams("a b", 13) == {"a b"}


# ----------------------------------------------------------------------------------------------- the mix
def mix_argv(data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "--dapo",
        str(data_dir / "dapo_math_17k.jsonl"),
        "--skywork-math",
        str(data_dir / "skywork_or1_math.jsonl"),
        "--skywork-code",
        str(data_dir / "skywork_or1_code.jsonl"),
        "--megascience",
        str(data_dir / "megascience.jsonl"),
        "--out",
        str(out),
        *extra,
    ]


def test_mix_end_to_end(data_dir: Path, eval_dir: Path, tmp_path: Path, parse_args) -> None:
    out = tmp_path / "train.parquet"
    evals = [str(p) for p in sorted(eval_dir.glob("*.parquet"))]
    report = prep_rl.build_rl_mix(parse_args(prep_rl, mix_argv(data_dir, out, "--eval", *evals)))
    src = report["sources"]
    assert (src[names.DS_DAPO]["loaded"], src[names.DS_DAPO]["rejected"]) == (7, 1)
    assert (src[names.DS_DAPO]["duplicate_exact"], src[names.DS_DAPO]["duplicate_normalized"]) == (1, 1)
    assert src[names.DS_DAPO]["contaminated"] == 1 and src[names.DS_DAPO]["written"] == 3
    assert (src[names.DS_SKYWORK_MATH]["written"], src[names.DS_SKYWORK_CODE]["written"]) == (3, 5)  # + ListNode row
    assert (src[names.DS_MEGASCIENCE]["filtered"], src[names.DS_MEGASCIENCE]["written"]) == (2, 2)
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == report["total_written"] == 13
    assert sorted(r["extra_info"]["index"] for r in rows) == list(range(13))
    assert {type(r["reward_model"]["ground_truth"]) for r in rows} == {str}  # one Arrow type for math and code
    removed = [json.loads(line) for line in out.with_suffix(".removed.jsonl").read_text().splitlines()]
    contaminated = [r for r in removed if r["reason"] == "contaminated"]
    assert (
        len(contaminated) == 1 and contaminated[0]["match"] == "aime2024:2024-I-1" and contaminated[0]["score"] == 1.0
    )
    rejects = [json.loads(line) for line in out.with_name("train.rejects.jsonl").read_text().splitlines()]
    assert {(Path(r["file"]).name, r["row"], r["field"]) for r in rejects} == {
        ("dapo_math_17k.jsonl", 6, "reward_model.ground_truth"),
        ("skywork_or1_math.jsonl", 3, "reward_model.ground_truth"),
    }
    assert out.with_suffix(".prompt_length.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads(out.with_suffix(".stats.json").read_text())["total_written"] == 13


def test_mix_loads_in_verl_rlhf_dataset(data_dir: Path, tmp_path: Path, parse_args, tiny_tokenizer) -> None:
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    out = tmp_path / "train.parquet"
    prep_rl.build_rl_mix(parse_args(prep_rl, mix_argv(data_dir, out)))
    cfg = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False, "return_raw_chat": True})
    ds = RLHFDataset([str(out)], tiny_tokenizer, cfg)
    item = ds[0]
    assert item["agent_name"] == names.AGENT_LOOP and item["raw_prompt"][0]["role"] == "user"
    assert {ds[i]["data_source"] for i in range(len(ds))} == set(names.RL_DATA_SOURCES)


def test_sampling_counts_weights_and_parquet_sources(data_dir: Path, tmp_path: Path, parse_args) -> None:
    import pyarrow as pa

    dapo_parquet = tmp_path / "dapo.parquet"  # the hub file is parquet: exercise that reader too
    pq.write_table(pa.Table.from_pylist(rows_of(data_dir / "dapo_math_17k.jsonl")), dapo_parquet)
    out = tmp_path / "mix.parquet"
    argv = [
        "--dapo",
        str(dapo_parquet),
        "--skywork-code",
        str(data_dir / "skywork_or1_code.jsonl"),
        "--count",
        "skywork_code=2",
        "--weight",
        "math_dapo=2.0",
        "--out",
        str(out),
    ]
    report = prep_rl.build_rl_mix(parse_args(prep_rl, argv))
    assert report["sources"][names.DS_SKYWORK_CODE]["written"] == 2
    assert report["sources"][names.DS_DAPO]["written"] == 8  # 4 after dedup, upsampled ×2
    with pytest.raises(SystemExit, match="SOURCE=VALUE"):
        prep_rl.build_rl_mix(parse_args(prep_rl, [*argv[:4], "--count", "aime=3", "--out", str(out)]))


def test_rerun_skips_and_resumes_after_a_kill(data_dir: Path, tmp_path: Path, parse_args, monkeypatch) -> None:
    out = tmp_path / "train.parquet"
    args = parse_args(prep_rl, mix_argv(data_dir, out))
    real = rl_sources.SOURCES[names.DS_SKYWORK_CODE]

    def killed(row: dict) -> dict:
        raise KeyboardInterrupt  # the run dies while converting the third source

    monkeypatch.setitem(
        rl_sources.SOURCES, names.DS_SKYWORK_CODE, rl_sources.SourceSpec(**{**real.__dict__, "convert": killed})
    )
    with pytest.raises(KeyboardInterrupt):
        prep_rl.build_rl_mix(args)
    assert not out.exists()  # nothing half-written
    monkeypatch.setitem(rl_sources.SOURCES, names.DS_SKYWORK_CODE, real)
    report = prep_rl.build_rl_mix(args)
    cached = {name: entry["cached"] for name, entry in report["sources"].items()}
    assert cached == {
        names.DS_DAPO: True,
        names.DS_SKYWORK_MATH: True,
        names.DS_SKYWORK_CODE: False,
        names.DS_MEGASCIENCE: False,
    }
    mtime = out.stat().st_mtime_ns
    again = prep_rl.build_rl_mix(args)  # same inputs and settings: nothing to do
    assert out.stat().st_mtime_ns == mtime and again["total_written"] == report["total_written"]


def test_the_report_counts_fn_names_a_prelude_name_shadows(data_dir: Path, tmp_path: Path, parse_args) -> None:
    """Issue 34 item 9: the fixture's `add` row (operator.add after the graders' star-imports) is reported."""
    report = prep_rl.build_rl_mix(parse_args(prep_rl, mix_argv(data_dir, tmp_path / "train.parquet")))
    assert report["code_fn_name_shadows_prelude"] == {"rows": 1, "fn_names": {"add": 1}}
