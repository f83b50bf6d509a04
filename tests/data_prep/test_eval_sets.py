"""Eval sets: AIME/GPQA/LCB converters (upstream and Open-AgentRL flavours), GPQA shuffle, LCB test decoding."""

from __future__ import annotations

import base64
import json
import pickle
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from data_prep import eval_lcb, prompts
from data_prep.jobs import eval_sets as prep_eval
from data_prep.rows import ConvertError


def test_eval_sets_from_upstream_fixtures(eval_dir: Path) -> None:
    report = json.loads((eval_dir / "eval.stats.json").read_text())
    written = {k: v["written"] for k, v in report["benchmarks"].items()}
    assert written == {names.DS_AIME24: 2, names.DS_AIME25: 2, names.DS_GPQA: 3, names.DS_LCB_V6: 2}
    assert report["benchmarks"][names.DS_LCB_V6]["filtered"] == 1  # the 2023 problem is outside the window
    assert prep_eval.PAPER_ROWS == {"aime2024": 30, "aime2025": 30, "gpqa_diamond": 198, "livecodebench_v6": 175}
    aime = pq.read_table(eval_dir / "aime2024.parquet").to_pylist()[0]
    assert aime["reward_model"]["ground_truth"] == "204" and aime["ability"] == "MATH"
    assert aime["prompt"][0]["content"] == prompts.math_agent_prompt(aime["extra_info"]["question"])
    rejects = [json.loads(line) for line in (eval_dir / "aime2025.rejects.jsonl").read_text().splitlines()]
    assert [(r["row"], r["field"]) for r in rejects] == [(2, "answer")]


def test_eval_files_load_with_the_eval_loader(eval_dir: Path) -> None:
    from agentrl_recipe.eval.eval_set import load_problems

    problems = load_problems([str(eval_dir)])
    assert len(problems) == 9
    assert {p.task for p in problems} == {"math", "gpqa", "code"}


def test_gpqa_shuffle_is_seeded_and_the_letter_is_right(eval_dir: Path, data_dir: Path) -> None:
    rows = pq.read_table(eval_dir / "gpqa_diamond.parquet").to_pylist()
    src = read_local_file(data_dir / "gpqa_diamond.jsonl")
    for row, raw in zip(rows, src, strict=True):
        letter = row["reward_model"]["ground_truth"]
        assert f"({letter}) {raw['Correct Answer']}" in row["prompt"][0]["content"]
        assert row["prompt"][0]["content"].startswith(f"Analyze and solve the following {raw['High-level domain']} ")
        assert row["prompt"][0]["content"].endswith(prompts.GPQA_LETTER)
    again = prep_eval.make_gpqa_converter(0)(src[0])
    assert again["reward_model"] == rows[0]["reward_model"]
    letters = {prep_eval.make_gpqa_converter(seed)(src[0])["reward_model"]["ground_truth"] for seed in range(12)}
    assert len(letters) > 1  # the seed does move the gold letter


def test_lcb_tests_public_plus_private(eval_dir: Path) -> None:
    rows = {r["extra_info"]["question_id"]: r for r in pq.read_table(eval_dir / "livecodebench_v6.parquet").to_pylist()}
    stdin = json.loads(rows["1899A"]["reward_model"]["ground_truth"])
    assert stdin["fn_name"] is None and len(stdin["inputs"]) == 3  # 1 public + 2 private (base64/zlib/pickle)
    assert stdin["outputs"][1] == "Second\n"
    fn = json.loads(rows["3206"]["reward_model"]["ground_truth"])
    assert fn["fn_name"] == "findIntersectionValues" and fn["inputs"][-1] == "[1]\n[1]"  # plain-JSON private test
    content = rows["3206"]["prompt"][0]["content"]
    assert content.startswith(prompts.LCB_START) and "def findIntersectionValues" in content
    assert "Input:['[4, 3, 2, 3, 1]\\n[2, 2, 5, 2, 3, 6]', '[3, 4, 2, 3]\\n[1, 5]']" in content  # public only
    assert "'[1]\\n[1]'" not in content  # private tests never reach the prompt
    assert content.endswith(prompts.LCB_CODE_PROMPT + prompts.CODE_SUBMIT)


def test_lcb_unpickling_refuses_code(tmp_path: Path, eval_dir: Path) -> None:
    rejects = [json.loads(line) for line in (eval_dir / "livecodebench_v6.rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 1 and rejects[0]["field"] == "private_test_cases"
    assert "refusing to unpickle" in rejects[0]["error"]
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    blob = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(ConvertError, match="refusing"):
        eval_lcb.decode_lcb_tests(blob, "private_test_cases")
    assert not marker.exists()
    tests = [{"input": "1\n", "output": "2\n", "testtype": "stdin"}]
    assert eval_lcb.decode_lcb_tests(eval_lcb.encode_lcb_tests(tests), "x") == tests
    with pytest.raises(ConvertError, match="cannot decode"):
        eval_lcb.decode_lcb_tests("bm90IHpsaWI=", "x")


def test_open_agentrl_eval_flavours(data_dir: Path, tmp_path: Path, parse_args) -> None:
    args = parse_args(
        prep_eval,
        [
            "--gpqa",
            str(data_dir / "open_agentrl_gpqa_diamond.jsonl"),
            "--lcb",
            str(data_dir / "open_agentrl_lcb_v6.jsonl"),
            "--out-dir",
            str(tmp_path),
        ],
    )
    report = prep_eval.build_eval_sets(args)
    assert report["total_written"] == 2
    gpqa = pq.read_table(tmp_path / "gpqa_diamond.parquet").to_pylist()[0]
    assert gpqa["reward_model"]["ground_truth"] == "C" and gpqa["ability"] == "Chemistry"
    lcb = pq.read_table(tmp_path / "livecodebench_v6.parquet").to_pylist()[0]
    assert json.loads(lcb["reward_model"]["ground_truth"]) == {"inputs": ["1 2\n"], "outputs": ["3\n"], "fn_name": None}
    assert lcb["extra_info"]["source_id"] == "abc401_a"
    again = prep_eval.build_eval_sets(args)  # up to date: skipped, same report
    assert again["total_written"] == 2


def test_the_released_eval_files_by_their_release_paths(data_dir: Path, tmp_path: Path, parse_args, capsys) -> None:
    """Issue 45 item 8: `--released <Open-AgentRL-Eval>` reads the four files the released eval scripts name
    (eval_qwen3_4b_aime_gpqa.sh:6-8, eval_qwen3_4b_livecodebench.sh:6) from a local copy laid out as the release."""
    import pyarrow as pa

    release = tmp_path / "Open-AgentRL-Eval"
    sources = {
        "aime24": ("aime_2024.jsonl", "AIME2024"),
        "aime25": ("aime_2025.jsonl", "AIME2025"),
        "gpqa": ("open_agentrl_gpqa_diamond.jsonl", None),
        "lcb": ("open_agentrl_lcb_v6.jsonl", None),
    }
    for flag, (fixture, label) in sources.items():
        path = release / prep_eval.RELEASED_FILES[flag]
        path.parent.mkdir(parents=True)
        rows = read_local_file(data_dir / fixture)
        rows = [{"data_source": label, **row} for row in rows] if label else rows
        pq.write_table(pa.Table.from_pylist(rows), path)
    assert prep_eval.released_sources("Gen-Verse/Open-AgentRL-Eval")["lcb"] == (
        "hf://datasets/Gen-Verse/Open-AgentRL-Eval/livecodebench-v6/lcb_v6_2502_2505.parquet"
    )
    out = tmp_path / "eval_released"
    assert prep_eval.main(parse_args(prep_eval, ["--released", str(release), "--out-dir", str(out)])) == 0
    assert "aime2024           written=2 (paper 30) rejected=0" in capsys.readouterr().out
    written = {k: v["written"] for k, v in json.loads((out / "eval.stats.json").read_text())["benchmarks"].items()}
    assert written == {names.DS_AIME24: 2, names.DS_AIME25: 2, names.DS_GPQA: 1, names.DS_LCB_V6: 1}
    gpqa = pq.read_table(out / "gpqa_diamond.parquet").to_pylist()[0]
    assert gpqa["reward_model"]["ground_truth"] == "C"  # the file's own letter, no shuffle of ours
    assert "(C) triphenyleno[1,2-c:5,6-c':9,10-c'']trifuran" in gpqa["prompt"][0]["content"]
    lcb = pq.read_table(out / "livecodebench_v6.parquet").to_pylist()[0]
    assert json.loads(lcb["reward_model"]["ground_truth"])["inputs"] == ["1 2\n"]  # the file's (public) tests


def test_released_lcb_rows_graded_on_livecodebenchs_own_tests(data_dir: Path, tmp_path: Path, parse_args) -> None:
    """`--lcb-tests-from`: the file's prompt (public examples), LiveCodeBench's public + private tests, by question_id
    (the official evaluation the released README sends LCB rollouts to)."""
    rows = read_local_file(data_dir / "open_agentrl_lcb_v6.jsonl")
    ours = {**rows[0], "extra_info": json.dumps({"question_id": "1899A", "index": 1})}
    source = tmp_path / "lcb.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in (ours, rows[0])) + "\n")
    upstream = str(data_dir / "lcb_code_generation_lite_v6.jsonl")
    args = parse_args(prep_eval, ["--lcb", str(source), "--lcb-tests-from", upstream, "--out-dir", str(tmp_path / "o")])
    report = prep_eval.build_eval_sets(args)
    assert report["benchmarks"][names.DS_LCB_V6]["written"] == 1
    assert report["benchmarks"][names.DS_LCB_V6]["reject_reasons"] == {
        "extra_info.question_id: 'abc401_a' is not among the upstream LCB problems": 1
    }
    (row,) = pq.read_table(tmp_path / "o" / "livecodebench_v6.parquet").to_pylist()
    tests = json.loads(row["reward_model"]["ground_truth"])
    assert (len(tests["inputs"]), tests["outputs"][1], tests["fn_name"]) == (3, "Second\n", None)  # 1 public + 2
    assert row["prompt"][0]["content"] == prompts.lcb_prompt(rows[0]["problem"].strip(), ["1 2\n"], ["3\n"])
