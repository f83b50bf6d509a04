"""Offline LiveCodeBench (v6) scorer: LCB's code extraction, test set, per-test timeout and pass rule, on our sandbox.

What makes a sample correct here is what makes it correct in LiveCodeBench's ``lcb_runner`` (datasets.md §8):
- **extraction** (``extract_code``): the lines strictly between the *last two* lines that contain a ``` fence (any
  fence, not only ```python); fewer than two fence lines → empty code → the sample fails;
- **tests**: public + private tests, in that order, as ``{"inputs", "outputs", "fn_name"}``; ``fn_name`` None means
  stdin/stdout, otherwise call-based (``Solution().fn_name(*json_args)``);
- **timeout**: 6 s per test (``--timeout`` default), applied to every test;
- **pass rule**: a sample passes iff *every* test passes (``np.all(results > 0)``). LCB stops at the first failure, so
  per-test fractions are not reported as a metric.
Execution and comparison (import prelude, stripped-line / Decimal comparison, call-based equality, tuple→list) are the
rewards helper's engine, :mod:`agentrl_recipe.training.rewards.code.io_tests`, run in the sandbox with the comparison
done in the trusted parent. Known deviation of that engine from LCB, kept on purpose: a stdin program runs as
``__main__`` with a real ``sys.stdin`` (LCB wraps it in a function, which breaks ``global`` statements in correct
programs).

Tests come from the eval row's ground truth, which data prep builds from LiveCodeBench's release (public + private
tests decoded, ``data_prep.eval_lcb.decode_lcb_tests``): ``{"inputs", "outputs", "fn_name"}`` as a
JSON string.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from agentrl_recipe.training.rewards.code.grade import CodeTests
from agentrl_recipe.training.rewards.code.io_tests import LCB_TIMEOUT_S
from agentrl_recipe.training.rewards.code.io_tests import agrade_program as engine_grade_program
from agentrl_recipe.training.run_sync import run_coroutine_sync

FENCE = "```"


def extract_code(model_output: str) -> str:
    """LiveCodeBench's ``extract_code`` for chat models: code between the last two fence lines, else ""."""
    lines = model_output.split("\n")
    fence_lines = [i for i, line in enumerate(lines) if FENCE in line]
    if len(fence_lines) < 2:
        return ""
    return "\n".join(lines[fence_lines[-2] + 1 : fence_lines[-1]])


def strip_thinking(text: str) -> str:
    """Drop a reasoning prefix ending in ``</think>`` (LCB graders see only the answer part)."""
    return text.rsplit("</think>", 1)[-1] if "</think>" in text else text


@dataclass
class LCBGrade:
    """One sample's LCB verdict. ``passed`` is the metric; ``infra_failure`` means: not graded, do not count."""

    passed: bool
    code: str
    num_tests: int
    num_passed: int  # tests passed before grading stopped (not a metric: LCB stops at the first failure)
    statuses: list[str] = field(default_factory=list)  # per graded test
    first_failure: int | None = None  # index of the first failing test
    failure_status: str | None = None  # its status (wrong_answer, timeout, runtime_error, no_code, ...)
    infra_failure: bool = False
    detail: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("code")  # the record keeps the code once, as final_answer
        return d


def _stages(n: int) -> list[tuple[int, int]]:
    """Test ranges [a, b) of sizes 1, 2, 4, ...: grading stops after the first failing stage."""
    out, a, size = [], 0, 1
    while a < n:
        out.append((a, min(n, a + size)))
        a, size = a + size, size * 2
    return out


async def agrade_program(
    code: str,
    tests: str | dict[str, Any] | Any,
    *,
    sandbox: Any = None,
    timeout_s: float = LCB_TIMEOUT_S,
) -> LCBGrade:
    """Grade an already-extracted program with LCB's rules (all tests must pass).

    LCB stops at the first failing test. The engine runs every test it is given (a program that times out on all of
    them would cost ``timeout × n``), so the tests go in stages of 1, 2, 4, ... and grading stops after the first
    stage with a failure: a wrong program costs about one stage, a correct one ``log2(n)`` sandbox executions.
    """
    parsed = CodeTests.parse(tests)
    n = len(parsed)
    if not code.strip():
        return LCBGrade(False, code, n, 0, [], first_failure=0, failure_status="no_code", detail="no fenced code")
    statuses: list[str] = []
    detail = None
    for a, b in _stages(n):
        stage = CodeTests(parsed.inputs[a:b], parsed.outputs[a:b], parsed.fn_name)
        grade = await engine_grade_program(code, stage, sandbox=sandbox, timeout_s_per_test=timeout_s)
        detail = detail or grade.first_error
        if grade.infra_failure:
            return LCBGrade(
                False,
                code,
                n,
                statuses.count("passed"),
                statuses + list(grade.statuses),
                infra_failure=True,
                detail=detail,
            )
        statuses.extend(grade.statuses)
        failed = next((i for i, s in enumerate(grade.statuses) if s != "passed"), None)
        if failed is not None:
            return LCBGrade(
                False,
                code,
                n,
                a + failed,
                statuses,
                first_failure=a + failed,
                failure_status=grade.statuses[failed],
                detail=detail,
            )
    return LCBGrade(True, code, n, n, statuses)


async def agrade_response(
    response: str,
    ground_truth: str | dict[str, Any],
    *,
    sandbox: Any = None,
    timeout_s: float = LCB_TIMEOUT_S,
) -> LCBGrade:
    """Grade one model response (the final assistant message) the LCB way: extract, then :func:`agrade_program`."""
    return await agrade_program(
        extract_code(strip_thinking(response)), ground_truth, sandbox=sandbox, timeout_s=timeout_s
    )


def grade_response(
    response: str, ground_truth: str | dict[str, Any], *, sandbox: Any = None, timeout_s: float = LCB_TIMEOUT_S
) -> LCBGrade:
    """Blocking :func:`agrade_response`."""
    return run_coroutine_sync(agrade_response(response, ground_truth, sandbox=sandbox, timeout_s=timeout_s))
