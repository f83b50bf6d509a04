"""Grade one program against its tests in the sandbox, with LiveCodeBench's comparison rules, compared in the parent.

Used by the code reward (:mod:`agentrl_recipe.training.rewards.scoring`) and by the eval's offline LCB scorer.

How one program is graded (fast path: one sandbox execution for all its tests):

1. The trusted driver (:mod:`agentrl_recipe.training.rewards.code._io_driver`) runs in the sandbox with the program and
the test
   *inputs* only. Per test it reports the program's stdout (stdin tests) or the JSON of its return value (call tests)
   in a frame tagged with a per-request random nonce; a per-test ``SIGALRM`` timeout bounds each test.
2. This module parses the frames and compares with the expected outputs here, in the trusted parent, using LCB's rules
   (:mod:`.lcb_rules`). Exit codes and anything else the program prints are ignored.
3. If the execution ends early (``os._exit``, segfault, memory kill, a program that disabled the alarm, output cap),
   the test in progress fails with that cause and a fresh execution resumes at the next test, until all tests are
   done or the overall deadline passes (then the rest count as timeouts) (:class:`.driver_runs.GradeProgress`).
4. A sandbox ``infra_error`` is retried; if it persists the grade says ``infra_failure=True`` — the sandbox failed,
   not the program, so callers must not score it as wrong.

The tests and the grade: :mod:`.grade`; the comparison rules: :mod:`.lcb_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrl_recipe.training.rewards.code.driver_runs import GradeProgress, frame_text
from agentrl_recipe.training.rewards.code.grade import CodeGrade, CodeTests
from agentrl_recipe.training.rewards.code.lcb_rules import (
    UNCOMPARABLE,
    call_result_matches,
    stdout_matches,
    stripped_digest,
)
from agentrl_recipe.training.run_sync import run_coroutine_sync
from agentrl_sandbox import get_sandbox

LCB_TIMEOUT_S = 6.0  # lcb_runner --timeout default, per test


def _judge(frame: Mapping[str, Any], tests: CodeTests, index: int) -> str:
    status = frame.get("status")
    if status != "ok":
        return status if status in ("timeout", "runtime_error", "unserializable") else "runtime_error"
    expected = tests.outputs[index]
    if "sha256" in frame:  # output too large to ship: LCB's exact-line rule by digest (stdin tests only)
        return "passed" if tests.fn_name is None and frame["sha256"] == stripped_digest(expected) else "wrong_answer"
    out = frame.get("out")
    if not isinstance(out, str):
        return "runtime_error"
    try:
        ok = stdout_matches(out, expected) if tests.fn_name is None else call_result_matches(out, expected)
    except UNCOMPARABLE:  # an output the rules cannot compare fails its test; the grade goes on
        ok = False
    return "passed" if ok else "wrong_answer"


def _read_frames(frames: list[dict[str, Any]], tests: CodeTests, progress: GradeProgress) -> tuple[bool, bool]:
    """Take one execution's frames in order: (some test was reported, the driver finished)."""
    progressed = False
    for frame in frames:
        kind = frame.get("t")
        if kind == "setup_error":
            status = "timeout" if frame.get("status") == "timeout" else "compile_error"
            progress.note_error(frame_text(frame, "error", status))
            progress.fail_rest(status)
            return progressed, True
        if kind == "end":
            return progressed, True
        if progress.expects(frame):  # in order; anything else is not from the driver
            progress.record(_judge(frame, tests, progress.start), frame_text(frame, "error", "runtime error"))
            progressed = True
    return progressed, False


def _death_error(res: Any) -> str:
    last_stderr_line = (res.stderr.strip().splitlines() or [""])[-1]
    return last_stderr_line[-500:] or f"exited with code {res.exit_code} before reporting"


async def agrade_program(
    program: str,
    tests: CodeTests | str | Mapping[str, Any],
    *,
    sandbox: Any = None,
    timeout_s_per_test: float = LCB_TIMEOUT_S,
    total_timeout_s: float | None = None,
    memory_mb: int | None = None,
    max_frame_chars: int = 256 * 1024,
) -> CodeGrade:
    """Run ``program`` on every test in the sandbox and compare here. Never raises for anything the program does.

    ``total_timeout_s`` caps the whole grade (default LCB's ``(timeout + 1) * n_tests + 5``); tests not reached by then
    count as timeouts. ``sandbox`` is any :class:`agentrl_sandbox.Sandbox` (default:
    ``get_sandbox()``).
    """
    tests = CodeTests.parse(tests)
    sandbox = get_sandbox() if sandbox is None else sandbox
    progress = GradeProgress(len(tests), timeout_s_per_test, total_timeout_s)

    def payload(start: int) -> dict[str, Any]:
        return {
            "program": program,
            "fn_name": tests.fn_name,
            "inputs": list(tests.inputs[start:]),  # a resumed execution gets only the tests left
            "start": start,
            "timeout_s": timeout_s_per_test,
            "max_frame_chars": max_frame_chars,
        }

    def read(res: Any, frames: list[dict[str, Any]]) -> bool:
        progressed, finished = _read_frames(frames, tests, progress)
        if finished or progress.start >= len(tests):
            return True
        # The execution ended before reporting test `start`: blame that test, unless the output cap cut a run that
        # was making progress (the frames were fine; the budget for this execution ran out), then just resume.
        if not (res.status == "output_truncated" and progressed):
            progress.died(res, _death_error(res))
        return False

    return await progress.run(sandbox, "_io_driver.py", payload, read, memory_mb)


def grade_program(program: str, tests: CodeTests | str | Mapping[str, Any], **kwargs: Any) -> CodeGrade:
    """Blocking :func:`agrade_program`; callable from sync code, including from inside a running event loop's thread."""
    return run_coroutine_sync(agrade_program(program, tests, **kwargs))
