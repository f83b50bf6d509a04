"""Golden cases of the released code reward (code_rules=open_agentrl), each derived from Open-AgentRL's
code_math.py / sandbox_fusion/utils.py, next to what LiveCodeBench's rules (code_rules=lcb) give the same program."""

from __future__ import annotations

import json

from agentrl_recipe import names
from agentrl_recipe.training.rewards import scoring
from agentrl_recipe.training.rewards.code import released as code_released

STDIN_GT = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["2\n", "4\n"], "fn_name": None})


def block(code: str) -> str:
    return f"reasoning\n```python\n{code}\n```"


async def both(sandbox, solution: str, gt) -> tuple[dict, dict]:
    kw = {"sandbox": sandbox, "code_timeout_s_per_test": 5.0}
    released = await scoring.acompute_score(names.DS_SKYWORK_CODE, solution, gt, code_rules="open_agentrl", **kw)
    lcb = await scoring.acompute_score(names.DS_SKYWORK_CODE, solution, gt, code_rules="lcb", **kw)
    return released, lcb


async def test_stdin_output_must_match_exactly_after_rstrip_newline(sandbox) -> None:
    # trailing spaces: LCB strips each line, the original compares stdout.rstrip("\n") == expected.rstrip("\n")
    released, lcb = await both(sandbox, block("print(int(input()) * 2, end=' \\n')"), STDIN_GT)
    assert (released["score"], lcb["score"]) == (0.0, 1.0)
    released, _ = await both(sandbox, block("print(int(input()) * 2)\nprint()"), STDIN_GT)
    assert released["score"] == 1.0 and released["acc"] is True  # only newlines are stripped


async def test_stdin_needs_exit_code_zero(sandbox) -> None:
    released, lcb = await both(sandbox, block("import sys\nprint(int(input()) * 2)\nsys.exit(3)"), STDIN_GT)
    assert (released["score"], lcb["score"]) == (0.0, 1.0)


async def test_call_results_compare_as_printed_text(sandbox) -> None:
    gt = json.dumps({"inputs": ["[1, 2]"], "outputs": ['"ab"'], "fn_name": "f"})
    # str("ab") prints ab, never the JSON-quoted "ab": the original fails what LCB passes
    released, lcb = await both(sandbox, block("def f(xs):\n    return 'ab'"), gt)
    assert (released["score"], lcb["score"]) == (0.0, 1.0)
    # lists print as json.dumps: "[1, 2]" matches that spacing only
    for expected, passes in (("[1, 2]", 1.0), ("[1,2]", 0.0)):
        gt = json.dumps({"inputs": ["[1, 2]"], "outputs": [expected], "fn_name": "f"})
        released, lcb = await both(sandbox, block("def f(xs):\n    return xs"), gt)
        assert (released["score"], lcb["score"]) == (passes, 1.0)
    # bools print as json (true); str(True) expected text fails
    gt = json.dumps({"inputs": ["1"], "outputs": ["True"], "fn_name": "f"})
    released, _ = await both(sandbox, block("def f(x):\n    return True"), gt)
    assert released["score"] == 0.0


async def test_a_missing_function_scores_minus_one(sandbox) -> None:
    gt = json.dumps({"inputs": ["1"], "outputs": ["2"], "fn_name": "double"})
    released, lcb = await both(sandbox, block("def twice(x):\n    return 2 * x"), gt)
    assert (released["score"], lcb["score"]) == (-1.0, 0.0)
    released, _ = await both(sandbox, block("class Solution:\n    def double(self, x):\n        return 2 * x"), gt)
    assert released["score"] == 1.0


async def test_no_block_unparseable_and_dict_ground_truths_score_minus_one(sandbox) -> None:
    assert (await both(sandbox, "no code", STDIN_GT))[0]["score"] == -1.0
    assert (await both(sandbox, block("def f(:"), STDIN_GT))[0]["score"] == -1.0
    # ```py is not ```python\n: the original finds no block
    assert (await both(sandbox, "```py\nprint(1)\n```", STDIN_GT))[0]["score"] == -1.0
    # a dict ground truth (a struct column) is str()-ed to its repr and indexed as a string: -1
    as_dict = {"inputs": ["1\n"], "outputs": ["2\n"], "fn_name": None}
    program = "print(int(input()) * 2)"
    assert (await code_released.ascore_code_released(block(program), as_dict, sandbox=sandbox))["score"] == -1.0


async def test_text_between_the_first_two_think_tags_is_graded(sandbox) -> None:
    good, bad = block("print(int(input()) * 2)"), block("print(0)")
    assert (await both(sandbox, f"x</think>{good}</think>{bad}", STDIN_GT))[0]["score"] == 1.0


async def test_asserts_run_one_per_line(sandbox) -> None:
    gt = json.dumps(
        {
            "import_prefix": "from typing import *\n",
            "test_code": "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 5\n",
            "entry_point": "Solution().double",
        }
    )
    program = "class Solution:\n    def double(self, x: int) -> int:\n        return 2 * x"
    result = await code_released.ascore_code_released(block(program), gt, sandbox=sandbox)
    assert (result["score"], result["acc"], result["tests_total"]) == (0.5, False, 2)


def test_class_method_conversion_and_released_form() -> None:
    assert code_released.to_class_method("def g():\n    pass", "f") is None
    assert (
        code_released.to_class_method("def f(a):\n    return a", "f")
        == "class Solution:\n\n    def f(self, a):\n        return a"
    )
    # kept: the released code then scores −1 (ground_truth_form: normalized drops the key before it gets here)
    assert code_released.released_form('{"inputs": ["1"], "fn_name": null}') == '{"inputs": ["1"], "fn_name": null}'
    assert code_released.released_form({"a": 1}) == "{'a': 1}"


def test_a_ground_truth_with_neither_key_is_graded_as_a_math_answer() -> None:
    """code_math.py:322-327: math-verify of the last boxed answer against the tests' text (a row data prep keeps
    flagged ``released_only``): −1 unless the response boxes that very text."""
    import asyncio

    def score(completion: str) -> tuple[float, bool, str | None]:
        r = asyncio.run(code_released.ascore_code_released(completion, '{"cases": [1]}', sandbox=None))
        return r["score"], r["acc"], r["pred"]

    assert score("```python\nprint(1)\n```") == (-1.0, False, None)  # no boxed answer: never run
    assert score("\\boxed{3}") == (-1.0, False, "3")  # math-verify: 3 is not the JSON text
    assert score('\\boxed{{"cases": [1]}}') == (1.0, True, '{"cases": [1]}')
