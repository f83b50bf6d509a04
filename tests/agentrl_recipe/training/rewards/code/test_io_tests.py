"""The program-vs-tests engine through the sandbox: per-test timeouts, and programs that cheat or die."""

from __future__ import annotations

import json

import pytest

from agentrl_recipe.training.rewards.code import driver_runs
from agentrl_recipe.training.rewards.code import io_tests as code_grading
from agentrl_recipe.training.rewards.code.grade import CodeTests
from agentrl_recipe.training.rewards.code.io_tests import agrade_program

FAST = 0.5  # per-test timeout in these tests (LCB's default is 6 s)

DOUBLE = CodeTests(inputs=("1\n", "2\n", "3\n"), outputs=("2\n", "4\n", "6\n"))
ADD_LISTS = CodeTests(
    inputs=("[1, 2]\n[3, 4]", "[]\n[]", "[5]\n[-5]"), outputs=("[4, 6]", "[]", "[0]"), fn_name="addLists"
)


async def grade(program: str, tests: CodeTests, sandbox, **kw):
    kw.setdefault("timeout_s_per_test", FAST)
    return await agrade_program(program, tests, sandbox=sandbox, **kw)


@pytest.mark.parametrize(
    ("program", "passed"),
    [
        ("print(int(input()) * 2)", 3),
        ("import sys\nsys.stdout.buffer.write(str(int(sys.stdin.buffer.read()) * 2).encode())", 3),  # fast IO
        ("print(int(open(0).read()) * 2)", 3),  # AtCoder style
        ("def main():\n    print(int(input()) * 2)\n\nif __name__ == '__main__':\n    main()", 3),
        ("total = 0\ndef add(x):\n    global total\n    total += x\nadd(int(input()))\nprint(total * 2)", 3),
        ("import sys\nprint(int(input()) * 2)\nsys.exit(0)", 3),  # SystemExit is a normal end
        ("n = int(input())\nprint(n * 2 if n != 2 else 5)", 2),  # partial pass
        ("print(2)", 1),
        ("n = int(input())\nif n == 3:\n    big = [0] * 10**11\nprint(n * 2)", 2),  # MemoryError fails its test only
    ],
)
async def test_stdin_programs(program: str, passed: int, sandbox) -> None:
    result = await grade(program, DOUBLE, sandbox)
    assert (result.passed, result.total) == (passed, 3), result.statuses
    assert result.executions == 1
    assert result.fraction == pytest.approx(passed / 3)


@pytest.mark.parametrize(
    ("program", "passed", "status"),
    [
        ("class Solution:\n    def addLists(self, a, b):\n        return [x + y for x, y in zip(a, b)]", 3, "passed"),
        ("def addLists(a, b):\n    return tuple(x + y for x, y in zip(a, b))", 3, "passed"),  # bare fn, tuple → list
        ("class Solution:\n    def addLists(self, a, b):\n        return [0] * len(a)", 2, "wrong_answer"),
        ("class Solution:\n    def addLists(self, a, b):\n        return {1}", 0, "unserializable"),
        ("class Solution:\n    def addLists(self, a, b):\n        return a[0] + b[0]", 0, "runtime_error"),
        ("class Solution:\n    def other(self, a, b):\n        return a", 0, "compile_error"),
        ("class Solution:\n    def addLists(self, a, b):\n        print([4, 6])", 0, "wrong_answer"),  # printing
    ],
)
async def test_call_based_programs(program: str, passed: int, status: str, sandbox) -> None:
    result = await grade(program, ADD_LISTS, sandbox)
    assert result.passed == passed, result.statuses
    assert status in result.statuses


async def test_os_exit_zero_before_any_output_passes_nothing(sandbox) -> None:
    """Return-code-based graders pass this (sandbox.md finding 3); here a test passes only with a reported output."""
    result = await grade("import os\nos._exit(0)", DOUBLE, sandbox)
    assert result.passed == 0
    assert result.statuses == ["runtime_error"] * 3


async def test_exit_after_printing_the_first_answer_passes_only_that_test(sandbox) -> None:
    program = "import os, sys\nprint(int(input()) * 2)\nsys.stdout.flush()\nos._exit(0)"
    result = await grade(program, DOUBLE, sandbox)
    assert result.passed == 0  # the driver never got to report the captured output


async def test_printed_claims_of_success_are_ignored(sandbox) -> None:
    frame = json.dumps({"t": "result", "i": 0, "status": "ok", "out": "2"})
    program = f"print('passed')\nprint({frame!r})\nprint('ALL TESTS PASSED')"
    result = await grade(program, DOUBLE, sandbox)
    assert result.passed == 0


async def test_a_crash_fails_its_test_and_grading_resumes_after_it(sandbox) -> None:
    program = "import os\nn = int(input())\nif n == 2:\n    os.abort()\nprint(n * 2)"
    result = await grade(program, DOUBLE, sandbox)
    assert result.statuses == ["passed", "runtime_error", "passed"]
    assert result.executions == 2


async def test_a_hanging_test_times_out_alone(sandbox) -> None:
    program = "n = int(input())\nwhile n == 1:\n    pass\nprint(n * 2)"
    result = await grade(program, DOUBLE, sandbox)
    assert result.statuses == ["timeout", "passed", "passed"]


async def test_a_program_that_blocks_the_alarm_is_stopped_by_the_caps(sandbox) -> None:
    program = "import signal\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\nwhile True:\n    pass"
    result = await grade(program, DOUBLE, sandbox, total_timeout_s=3.0)
    assert result.passed == 0
    assert set(result.statuses) == {"timeout"}
    assert result.duration_s < 6.0


async def test_call_based_module_body_that_hangs_times_out(sandbox) -> None:
    result = await grade("while True:\n    pass\nclass Solution:\n    pass", ADD_LISTS, sandbox)
    assert result.statuses == ["timeout"] * 3
    assert result.executions == 1


async def test_syntax_error_is_a_compile_error(sandbox) -> None:
    result = await grade("def f(:\n", DOUBLE, sandbox)
    assert result.statuses == ["compile_error"] * 3
    assert "SyntaxError" in (result.first_error or "")


async def test_outputs_too_large_for_a_frame_are_compared_by_digest(sandbox) -> None:
    lines = [str(i) for i in range(30_000)]
    tests = CodeTests(inputs=("30000\n", "30000\n"), outputs=("\n".join(lines) + "\n", "\n".join(lines[:-1])))
    program = "n = int(input())\nprint('\\n'.join(str(i) for i in range(n)))"
    result = await grade(program, tests, sandbox, max_frame_chars=10_000)
    assert result.statuses == ["passed", "wrong_answer"]


async def test_infra_errors_are_retried_then_flagged_not_failed(infra_failing_sandbox) -> None:
    result = await grade("print(int(input()) * 2)", DOUBLE, infra_failing_sandbox)
    assert result.infra_failure is True
    assert result.statuses == ["infra_error"] * 3
    assert infra_failing_sandbox.calls == 1 + driver_runs.INFRA_RETRIES


def test_grade_program_is_callable_from_sync_code(sandbox) -> None:
    result = code_grading.grade_program("print(int(input()) * 2)", DOUBLE, sandbox=sandbox, timeout_s_per_test=FAST)
    assert result.all_passed
