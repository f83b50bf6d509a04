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
