"""The offline LiveCodeBench scorer on small fixture problems of both kinds, through the real sandbox."""

from __future__ import annotations

import json

import pytest

from agentrl_recipe.eval import lcb
from agentrl_sandbox import get_sandbox

TIMEOUT_CASE_S = 1.0  # per-test limit for the programs meant to time out; the others get LCB's 6 s (a loaded CI box)


def timeout_for(name: str) -> float:
    return TIMEOUT_CASE_S if name == "timeout" else lcb.LCB_TIMEOUT_S


# stdin problem: print the sum of the integers on the second line. Test 0 stands for the public test, the rest for
# the private ones (data prep decodes both into this one list, public first).
STDIN_TESTS = {
    "inputs": ["3\n1 2 3\n", "1\n-5\n", "4\n10 20 30 40\n", "2\n7 8\n"],
    "outputs": ["6\n", "-5\n", "100\n", "15\n"],
    "fn_name": None,
}
# call-based problem (LeetCode): element-wise sum of two lists; one JSON value per line per argument.
CALL_TESTS = {
    "inputs": ["[1, 2]\n[3, 4]", "[]\n[]", "[5]\n[-5]"],
    "outputs": ["[4, 6]", "[]", "[0]"],
    "fn_name": "addLists",
}


def fenced(code: str, lang: str = "python") -> str:
    return f"Here is my solution.\n```{lang}\n{code}\n```\nDone."


STDIN_PROGRAMS = {
    "correct": "n = int(input())\nprint(sum(map(int, input().split())))",
    "correct_float_format": "import sys\ndata = sys.stdin.read().split()\nprint(f'{sum(map(int, data[1:])):.1f}')",
    "correct_main_guard": "def main():\n    input()\n    print(sum(map(int, input().split())))\n\n"
    "if __name__ == '__main__':\n    main()",
    "wrong": "n = int(input())\nprint(sum(map(int, input().split())) + 1)",
    "wrong_on_private": "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) if n == 3 else 0)",
    "crash": "raise RuntimeError('boom')",
    "timeout": "while True:\n    pass",
}
EXPECTED_STDIN = {
    "correct": (True, None),
    "correct_float_format": (True, None),  # "6.0" == "6" under LCB's Decimal rule
    "correct_main_guard": (True, None),
    "wrong": (False, "wrong_answer"),
    "wrong_on_private": (False, "wrong_answer"),
    "crash": (False, "runtime_error"),
    "timeout": (False, "timeout"),
}

CALL_PROGRAMS = {
    "correct": "class Solution:\n    def addLists(self, a, b):\n        return [x + y for x, y in zip(a, b)]",
    "correct_tuple": "class Solution:\n    def addLists(self, a, b):\n        return tuple(map(sum, zip(a, b)))",
    "correct_uses_prelude": "class Solution:\n    def addLists(self, a: List[int], b: List[int]) -> List[int]:\n"
    "        return list(map(add, a, b))",  # List and add come from LCB's import prelude
    "wrong": "class Solution:\n    def addLists(self, a, b):\n        return [x - y for x, y in zip(a, b)]",
    "crash": "class Solution:\n    def addLists(self, a, b):\n        return a[10]",
    "timeout": "class Solution:\n    def addLists(self, a, b):\n        while True:\n            pass",
    "missing_method": "class Solution:\n    def other(self, a, b):\n        return []",
}
EXPECTED_CALL = {
    "correct": (True, None),
    "correct_tuple": (True, None),
    "correct_uses_prelude": (True, None),
    "wrong": (False, "wrong_answer"),
    "crash": (False, "runtime_error"),
    "timeout": (False, "timeout"),
    "missing_method": (False, "compile_error"),
}


@pytest.fixture(scope="module")
def sandbox():
    return get_sandbox()


def test_extract_code_follows_lcb() -> None:
    assert lcb.extract_code("```python\na = 1\n```") == "a = 1"
    # the last two fence lines win, whatever their language tag
    text = "```python\nfirst\n```\ntext\n```\nsecond\nthird\n```"
    assert lcb.extract_code(text) == "second\nthird"
    assert lcb.extract_code("no code here") == ""
    assert lcb.extract_code("```python\nunterminated") == ""
    assert lcb.strip_thinking("<think>```x```</think>answer") == "answer"


@pytest.mark.parametrize("name", list(STDIN_PROGRAMS))
def test_stdin_problem(name: str, sandbox) -> None:
    grade = lcb.grade_response(
        fenced(STDIN_PROGRAMS[name]), json.dumps(STDIN_TESTS), sandbox=sandbox, timeout_s=timeout_for(name)
    )
    passed, failure = EXPECTED_STDIN[name]
    assert grade.passed is passed, grade
    assert grade.failure_status == failure, grade
    assert not grade.infra_failure
    if name == "wrong_on_private":
        assert grade.first_failure == 1  # passes the public test, fails the first private one
    if passed:
        assert grade.num_passed == grade.num_tests == 4


@pytest.mark.parametrize("name", list(CALL_PROGRAMS))
def test_call_based_problem(name: str, sandbox) -> None:
    grade = lcb.grade_response(
        fenced(CALL_PROGRAMS[name]), json.dumps(CALL_TESTS), sandbox=sandbox, timeout_s=timeout_for(name)
    )
    passed, failure = EXPECTED_CALL[name]
    assert grade.passed is passed, grade
    assert grade.failure_status == failure, grade


def test_no_code_fails_without_running(sandbox) -> None:
    grade = lcb.grade_response("I think the answer is 6.", json.dumps(STDIN_TESTS))
    assert not grade.passed and grade.failure_status == "no_code" and grade.statuses == []


class CountingSandbox:
    """Wraps the real sandbox and counts executions."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, 0

    async def arun(self, *args, **kwargs):
        self.calls += 1
        return await self.inner.arun(*args, **kwargs)


def test_grading_stops_after_the_first_failing_stage(sandbox) -> None:
    tests = {"inputs": [f"1\n{i}\n" for i in range(16)], "outputs": [f"{i}\n" for i in range(16)], "fn_name": None}
    counting = CountingSandbox(sandbox)
    grade = lcb.grade_response(fenced("while True: pass"), tests, sandbox=counting, timeout_s=0.5)
    assert grade.failure_status == "timeout" and grade.first_failure == 0
    assert counting.calls == 1 and len(grade.statuses) == 1  # LCB stops at the first failure: 0.5 s, not 8 s

    counting = CountingSandbox(sandbox)
    grade = lcb.grade_response(fenced(STDIN_PROGRAMS["correct"]), tests, sandbox=counting, timeout_s=lcb.LCB_TIMEOUT_S)
    assert grade.passed and counting.calls == 5  # stages of 1, 2, 4, 8, 1 tests


class BrokenSandbox:
    async def arun(self, *args, **kwargs):
        from agentrl_sandbox import ExecResult

        return ExecResult(status="infra_error", stdout="", stderr="", exit_code=None, duration_s=0.0, message="down")


def test_sandbox_failure_is_not_a_wrong_answer() -> None:
    grade = lcb.grade_response(fenced(STDIN_PROGRAMS["correct"]), STDIN_TESTS, sandbox=BrokenSandbox())
    assert grade.infra_failure and not grade.passed and grade.failure_status is None
