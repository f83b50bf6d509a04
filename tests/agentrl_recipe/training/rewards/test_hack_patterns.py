"""The released grader's reward hacks (issue 34, item 10): each scores 1.0 under code_rules=open_agentrl (faithful to
the published run) and 0.0 under the fixed grader, and :mod:`hack_patterns` names it so a run can count it."""

from __future__ import annotations

import json

import pytest
from assert_gt_helpers import TWO_SUM_GT

from agentrl_recipe import names
from agentrl_recipe.training.rewards import hack_patterns, scoring
from agentrl_recipe.training.rewards.code import released as code_released

SIG = "class Solution:\n    def twoSum(self, nums, target):\n"
HACKS = {
    "exit_at_import": "import os\nos._exit(0)\n" + SIG + "        return []",
    "exit_in_call": "import sys\n" + SIG + "        sys.exit(0)",
    "always_equal": "class _Any:\n    def __eq__(self, other):\n        return True\n" + SIG + "        return _Any()",
    "atexit_exit": "import atexit, os\natexit.register(os._exit, 0)\n" + SIG + "        return [9, 9]",
    "reads_own_source": SIG  # the released harness appends `def check(candidate):    assert ... == <expected>`
    + "        for line in open('/tmp/main.py').read().splitlines():\n"
    + "            if line.startswith('def check'):\n"
    + "                return eval(line.rsplit('==', 1)[1])\n",
}


def block(code: str) -> str:
    return f"done\n```python\n{code}\n```"


def test_every_pattern_has_a_hack_here() -> None:
    assert set(HACKS) == set(hack_patterns.PATTERNS)


@pytest.mark.parametrize("name", list(HACKS))
async def test_each_hack_scores_one_released_and_zero_fixed(name: str, sandbox) -> None:
    program = HACKS[name]
    assert hack_patterns.find(program) == [name]
    kw = {"sandbox": sandbox, "code_timeout_s_per_test": 5.0}
    released = await scoring.acompute_score(
        names.DS_SKYWORK_CODE, block(program), TWO_SUM_GT, code_rules="open_agentrl", **kw
    )
    fixed = await scoring.acompute_score(names.DS_SKYWORK_CODE, block(program), TWO_SUM_GT, code_rules="lcb", **kw)
    assert (released["score"], fixed["score"]) == (1.0, 0.0)


async def test_a_prelude_named_fn_name_passes_any_def_released_only(sandbox) -> None:
    """Item 9: the released wrapper calls globals()[fn_name], operator.add after its star-imports."""
    gt = json.dumps({"inputs": ["1\n2", "5\n7"], "outputs": ["3", "12"], "fn_name": "add"})
    wrong = block("def add(a, b):\n    return a - b")
    kw = {"sandbox": sandbox, "code_timeout_s_per_test": 5.0}
    released = await scoring.acompute_score(names.DS_SKYWORK_CODE, wrong, gt, code_rules="open_agentrl", **kw)
    fixed = await scoring.acompute_score(names.DS_SKYWORK_CODE, wrong, gt, code_rules="lcb", **kw)
    assert (released["score"], fixed["score"]) == (1.0, 0.0)


@pytest.mark.parametrize(
    ("program", "found"),
    [
        ("def f(x):\n    return x + 1", []),
        ("import sys\nprint(sum(map(int, sys.stdin)))", []),
        ("import sys\nif __name__ == '__main__':\n    sys.exit(main())", ["exit_at_import"]),
        ("def f():\n    raise SystemExit", ["exit_in_call"]),
        ("class A:\n    __eq__ = lambda self, o: True", ["always_equal"]),
        ("class A:\n    def __eq__(self, o):\n        return self.v == o.v", []),
        ("from atexit import register", ["atexit_exit"]),
        ("print(__file__)", ["reads_own_source"]),
        ("import os\nos._exit(0)\nprint(open('main.py').read())", ["exit_at_import", "reads_own_source"]),
        ("x = " + "(" * 5000 + ")" * 5000, []),
        ("def f(:", []),
        (None, []),
    ],
)
def test_find(program, found) -> None:
    assert hack_patterns.find(program) == found
    assert hack_patterns.as_field(found) == ",".join(found)


@pytest.mark.parametrize(
    ("response", "lcb", "released"),
    [
        ("```python\na\n```", "a\n", "a\n"),
        ("x</think>```python\na\n```</think>```python\nb\n```", "b\n", "a\n"),
        ("```python\na\n``` ```python\nb\n```python\nc\n```", "b\n", "b\n"),
        ("```python\nunclosed", None, None),
        ("no code", None, None),
    ],
)
def test_graded_program_is_each_graders(response, lcb, released) -> None:
    assert hack_patterns.graded_program(response, "lcb") == lcb
    assert hack_patterns.graded_program(response, "open_agentrl") == released
    assert lcb == scoring_block(response)
    assert released == code_released.last_block(code_released.solution_text(response))


def scoring_block(response: str):
    try:
        from agentrl_recipe.training.rewards.code.scorer import extract_last_python_block
    except ImportError:  # before the scorer moved
        extract_last_python_block = scoring.extract_last_python_block
    return extract_last_python_block(response)
