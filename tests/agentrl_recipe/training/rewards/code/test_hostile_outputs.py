"""The grader against a hostile program (issue 34, items 8-9): whatever a program prints, returns or forges, the grade
is a score in [0, 1] and never an exception.

Two layers: a seeded property test drives the trusted parent with a fake sandbox that writes any stdout it likes,
frames with the right nonce included (a program that found the nonce can do exactly that); the real pool runs the
end-to-end attacks (``sNaN``, 5000-deep values, a forged deep frame, a prelude name as ``fn_name``).
"""

from __future__ import annotations

import json
import random

import pytest
from assert_gt_helpers import TWO_SUM_GT

from agentrl_recipe.training.rewards.code import lcb_rules
from agentrl_recipe.training.rewards.code.assert_form import AssertTests, case_passes, parse_assert
from agentrl_recipe.training.rewards.code.assert_tests import agrade_asserts
from agentrl_recipe.training.rewards.code.driver_runs import parse_frames
from agentrl_recipe.training.rewards.code.grade import TEST_STATUSES, CodeTests
from agentrl_recipe.training.rewards.code.io_tests import agrade_program
from agentrl_recipe.training.rewards.code.released import ascore_code_released
from agentrl_sandbox import ExecResult

DEEP = "[" * 5000 + "]" * 5000
STDIN_TESTS = CodeTests(("1\n", "2\n"), ("2\n", "4\n"))
CALL_TESTS = CodeTests(("[1, 2]", "[3]"), ("3", "3"), "f")
CALL_GT = json.dumps({"inputs": list(CALL_TESTS.inputs), "outputs": list(CALL_TESTS.outputs), "fn_name": "f"})
HOSTILE_OUTS = (
    "sNaN",
    "-sNaN",
    "sNaN99 2",
    "NaN",
    "2 sNaN",
    "nan",
    "Infinity",
    "1e999999999999999999999",
    "1e-999999999999999999999",
    "9" * 5000,
    DEEP,
    '{"a": ' * 3000 + "1" + "}" * 3000,
    "\ud800\udfff\ufffd",
    "\x00\x1b[2J",
    "[NaN, Infinity, -Infinity]",
    "1" * 100_000,
)
JUNK_VALUES = (None, True, 1e308, -(10**30), [1, [2]], {"x": DEEP}, DEEP, "\ud800", "", "ok", 0, 1, 2)


# --- pure rules ---


@pytest.mark.parametrize("out", HOSTILE_OUTS[:12])
def test_stdout_rule_never_raises(out: str) -> None:
    for expected in ("2\n", "sNaN\n", "NaN\n", out + " x"):
        assert lcb_rules.stdout_matches(out, expected) in (True, False)


def test_snan_matches_only_as_the_same_text() -> None:
    assert lcb_rules.stdout_matches("sNaN", "2") is False
    assert lcb_rules.stdout_matches("sNaN", "sNaN") is True  # equal lines: LCB's first rule
    assert lcb_rules.stdout_matches("1.0 sNaN", "1 sNaN") is False  # not comparable as decimals: fails


@pytest.mark.parametrize("out", [DEEP, "[" * 900 + "]" * 900, "9" * 5000, "NaN", "\ud800"])
def test_call_rule_never_raises(out: str) -> None:
    assert lcb_rules.call_result_matches(out, "[]") is False
    assert lcb_rules.call_result_matches(out, DEEP) is False


def test_assert_rule_never_raises() -> None:
    case = parse_assert("assert candidate(1) == [0, 1]")
    assert [case_passes(case, out) for out in (DEEP, "[" * 900 + "]" * 900, "NaN", "\ud800")] == [False] * 4


def test_a_forged_deep_frame_is_ignored() -> None:
    nonce = "ab" * 16
    stdout = f"{nonce} {DEEP}\n{nonce} " + '{"t": "end"}\n'
    assert parse_frames(stdout, nonce) == [{"t": "end"}]


# --- the parent against a sandbox that writes anything (seeded property test) ---


class ForgingSandbox:
    """Answers every run with frames built by ``forge(nonce, rng)``: a program that owns the whole stdout."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def arun(self, code, *, stdin=None, timeout_s=None, memory_mb=None, files=None) -> ExecResult:
        payload = json.loads(stdin)
        nonce, start = payload["nonce"], payload["start"]
        lines = [self._line(nonce, start + k) for k in range(self.rng.randint(1, 4))]
        status = self.rng.choice(("ok", "ok", "ok", "timeout", "output_truncated", "memory_exceeded"))
        return ExecResult(status=status, stdout="\n".join(lines) + "\n", stderr=self._text(), exit_code=0)

    def _text(self) -> str:
        return self.rng.choice(HOSTILE_OUTS)

    def _line(self, nonce: str, index: int) -> str:
        rng = self.rng
        kind = rng.randrange(6)
        if kind == 0:
            return f"{nonce} {rng.choice((DEEP, '{' * 3000, '[1, 2', 'null', '7'))}"
        if kind == 1:
            return f"{nonce} " + json.dumps({"t": rng.choice(("setup_error", "end", "ready")), "error": self._junk()})
        frame = {"t": "result", "i": rng.choice((index, index, True, float(index), [index])), "status": "ok"}
        if kind == 2:
            frame["status"] = self._junk()
        if kind == 3:
            frame["sha256"] = rng.choice((lcb_rules.stripped_digest("2\n"), self._junk()))
        frame["out"] = rng.choice((self._text(), self._junk()))
        frame["error"] = self._junk()
        return f"{nonce} {json.dumps(frame)}"

    def _junk(self):
        return self.rng.choice(JUNK_VALUES)


async def _grade_any(tests, sandbox):
    if isinstance(tests, AssertTests):
        return await agrade_asserts("x", tests, sandbox=sandbox, timeout_s_per_test=1.0, total_timeout_s=5.0)
    return await agrade_program("x", tests, sandbox=sandbox, timeout_s_per_test=1.0, total_timeout_s=5.0)


@pytest.mark.parametrize("seed", range(36))
async def test_any_frames_give_a_grade_in_range(seed: int) -> None:
    tests = (STDIN_TESTS, CALL_TESTS, AssertTests.parse(TWO_SUM_GT))[seed % 3]
    grade = await _grade_any(tests, ForgingSandbox(seed))
    assert 0.0 <= grade.fraction <= 1.0 and grade.total == len(tests)
    assert set(grade.statuses) <= set(TEST_STATUSES)
    assert grade.first_error is None or isinstance(grade.first_error, str)


# --- end to end in the real pool ---

# built at run time (a literal that deep does not compile); the program raises the recursion limit to return it
DEEP_FN = """import sys
sys.setrecursionlimit(100000)
def deep():
    x = []
    for _ in range(5000):
        x = [x]
    return x
"""
FIND_FRAME_FD = """
import os, sys
_f = sys._getframe()
while 'frame_fd' not in _f.f_locals:
    _f = _f.f_back
_line = "\\n" + _f.f_locals['payload']['nonce'] + " " + "[" * 5000 + "]" * 5000 + "\\n"
os.write(_f.f_locals['frame_fd'], _line.encode())
"""


async def test_a_program_printing_snan_scores_zero(sandbox) -> None:
    grade = await agrade_program("print('sNaN')", STDIN_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert (grade.passed, grade.statuses) == (0, ["wrong_answer", "wrong_answer"])


async def test_a_5000_deep_return_value_is_a_wrong_answer(sandbox) -> None:
    program = DEEP_FN + "def f(*args):\n    return deep()"
    grade = await agrade_program(program, CALL_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert (grade.passed, grade.statuses) == (0, ["wrong_answer", "wrong_answer"])
    program = "print('[' * 5000 + ']' * 5000)"
    printed = await agrade_program(program, STDIN_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert printed.statuses == ["wrong_answer", "wrong_answer"]


async def test_a_5000_deep_value_in_the_assert_harness_is_a_wrong_answer(sandbox) -> None:
    program = DEEP_FN + "class Solution:\n    def twoSum(self, nums, target):\n        return deep()"
    grade = await agrade_asserts(program, AssertTests.parse(TWO_SUM_GT), sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.statuses == ["wrong_answer"] * 3


async def test_a_forged_deep_frame_from_the_program_is_ignored(sandbox) -> None:
    program = FIND_FRAME_FD + "print(int(input()) * 2)\n"
    grade = await agrade_program(program, STDIN_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.statuses == ["passed", "passed"]  # the forged line is dropped, the driver's own frame counts
    assert_program = FIND_FRAME_FD + "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    tests = AssertTests.parse(TWO_SUM_GT)
    grade = await agrade_asserts(assert_program, tests, sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.statuses == ["passed", "wrong_answer", "passed"]


# --- item 9: fn_name is looked up in the program's own namespace only ---

ADD_TESTS = CodeTests(("1\n2", "5\n7"), ("3", "12"), "add")  # `add` is operator.add after the prelude
GCD_TESTS = CodeTests(("4\n6",), ("2",), "gcd")  # math.gcd


@pytest.mark.parametrize("tests", [ADD_TESTS, GCD_TESTS], ids=["add", "gcd"])
async def test_a_program_without_the_function_scores_zero_when_fn_name_is_a_prelude_name(tests, sandbox) -> None:
    grade = await agrade_program("x = 1", tests, sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.passed == 0 and set(grade.statuses) == {"compile_error"}


async def test_the_programs_own_prelude_named_function_is_graded(sandbox) -> None:
    good = await agrade_program("def add(a, b):\n    return a + b", ADD_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    wrong = await agrade_program("def add(a, b):\n    return a - b", ADD_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    method = "class Solution:\n    def add(self, a, b):\n        return a + b"
    in_class = await agrade_program(method, ADD_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert (good.passed, wrong.passed, in_class.passed) == (2, 0, 2)


async def test_invalid_utf8_output_and_frames_are_wrong_answers(sandbox) -> None:
    program = "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe' + input().encode() + b'\\n')"
    grade = await agrade_program(program, STDIN_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.statuses == ["wrong_answer", "wrong_answer"]
    frame = '{"t": "result", "i": 0, "status": "ok", "out": "\xff2"}'  # 0xff on the wire: not UTF-8
    forged = FIND_FRAME_FD.replace('"[" * 5000 + "]" * 5000', repr(frame)).replace(
        "_line.encode()", "_line.encode('latin-1')"
    )
    grade = await agrade_program(forged + "print(2)", STDIN_TESTS, sandbox=sandbox, timeout_s_per_test=2.0)
    assert grade.statuses == ["wrong_answer", "wrong_answer"]  # the forged "\ufffd2" answers test 0; `2` is not 4


class HostileStdoutSandbox:
    """Any stdout and exit code, for the released grader (which compares printed text)."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    async def arun(self, code, *, stdin=None, timeout_s=None, memory_mb=None, files=None) -> ExecResult:
        rng = self.rng
        return ExecResult(status="ok", stdout=rng.choice(HOSTILE_OUTS), exit_code=rng.choice((0, 0, 1, None)))


@pytest.mark.parametrize("seed", range(6))
async def test_the_released_grader_takes_any_output(seed: int) -> None:
    gt = (TWO_SUM_GT, json.dumps({"inputs": ["1", "2"], "outputs": ["2", "4"]}), CALL_GT)[seed % 3]
    program = "class Solution:\n    def twoSum(self, nums, target):\n        return 0\ndef f(x):\n    return x"
    result = await ascore_code_released(f"```python\n{program}\n```", gt, sandbox=HostileStdoutSandbox(seed))
    assert 0.0 <= result["score"] <= 1.0
