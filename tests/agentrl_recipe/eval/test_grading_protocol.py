"""The eval's two protocols (issue 45 item 8): ``compat`` open_agentrl grades AIME/GPQA with the released reward (the
ground truth as published), agentrl with ours (normalized); LCB by LiveCodeBench's rules under both."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentrl_recipe.eval.grading import agrade_sample


def grade(compat: str, data_source: str, task: str, ground_truth: str, response: str, messages=None):
    return asyncio.run(agrade_sample(data_source, task, ground_truth, response, messages, compat=compat))


@pytest.mark.parametrize(("compat", "correct"), [("open_agentrl", False), ("agentrl", True)])
def test_a_list_answer_is_text_under_the_released_protocol(compat: str, correct: bool) -> None:
    g = grade(compat, "aime2024", "math", '["15625"]', "so \\boxed{15625}")
    assert (g.correct, g.final_answer) == (correct, "15625")
    assert (g.detail.get("grader") == "open_agentrl") is (compat == "open_agentrl")


@pytest.mark.parametrize("compat", ["open_agentrl", "agentrl"])
def test_the_whole_response_and_the_strict_window_under_both(compat: str) -> None:
    response = "<tool_response>\\boxed{C}</tool_response> ... final: \\boxed{C}"
    assert grade(compat, "gpqa_diamond", "gpqa", "C", response).correct is True
    assert grade(compat, "gpqa_diamond", "gpqa", "C", "\\boxed{(C)}").correct is False  # no normalisation


def test_lcb_is_graded_by_livecodebench_rules_under_both(tmp_path) -> None:
    tests = json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"], "fn_name": None})  # fn_name null: stdin, as LCB
    program = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": program}]
    grades = [grade(c, "livecodebench_v6", "code", tests, program, messages) for c in ("open_agentrl", "agentrl")]
    assert [(g.correct, g.detail.get("grader")) for g in grades] == [(True, None), (True, None)]


def test_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ValueError, match=r"EvalConfig\.compat must be one of"):
        grade("paper", "aime2024", "math", "1", "\\boxed{1}")


def test_the_released_protocol_runs_on_the_released_files(tmp_path) -> None:
    """Issue 45 item 8: `data eval-sets --released` on a copy laid out as Open-AgentRL-Eval, then an eval run under
    the default protocol (open_agentrl) on its output; table.md names the protocol."""
    import argparse
    from pathlib import Path

    import pyarrow as pa
    import pyarrow.parquet as pq
    from eval_helpers import ScriptedGenerator

    from agentrl_recipe.eval.protocol import EvalConfig
    from agentrl_recipe.eval.runner import run_eval
    from agentrl_recipe.problems import read_local_file
    from data_prep.jobs import eval_sets

    data = Path(__file__).resolve().parents[2] / "data"
    fixtures = {"aime24": "aime_2024.jsonl", "aime25": "aime_2025.jsonl", "gpqa": "open_agentrl_gpqa_diamond.jsonl"}
    fixtures["lcb"] = "open_agentrl_lcb_v6.jsonl"
    for flag, name in fixtures.items():
        path = tmp_path / "release" / eval_sets.RELEASED_FILES[flag]
        path.parent.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(read_local_file(data / name)), path)
    parser = argparse.ArgumentParser()
    eval_sets.add_arguments(parser)
    out = tmp_path / "eval_released"
    eval_sets.build_eval_sets(parser.parse_args(["--released", str(tmp_path / "release"), "--out-dir", str(out)]))
    cfg = EvalConfig(model="scripted", data=[str(out)], out_dir=str(tmp_path / "run"), n_samples=2, plots=False)
    report = run_eval(cfg, generator=ScriptedGenerator(), show_progress=False)
    assert report["protocol"]["compat"] == "open_agentrl"
    assert report["data"]["problems_per_source"] == {
        "aime2024": 2,
        "aime2025": 2,
        "gpqa_diamond": 1,
        "livecodebench_v6": 1,
    }
    assert report["results"]["gpqa_diamond"]["metrics"]["avg@n"]["value"] == 0.5  # the file's letter, C, once of 2
    table = (tmp_path / "run" / "table.md").read_text()
    assert "protocol open_agentrl (the released eval: its tool behaviour; AIME/GPQA by its reward's acc" in table
