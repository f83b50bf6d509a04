"""Grade a program against a LeetCode assert harness (Skywork-OR1's raw code ground truth) without trusting it.

The released code ran ``import_prefix + program + check(<entry_point>)`` once per assert line and counted a return
code of 0 as a pass, so ``os._exit(0)`` or a returned object whose ``__eq__`` is always true passed every test. Here
each assert is split in the parent (:mod:`.assert_form`) into the expression that calls ``candidate`` and the expected
value; only the call runs in the sandbox (:mod:`agentrl_recipe.training.rewards.code._assert_driver`), its value comes
back in canonical JSON under a per-request nonce, and the comparison happens here. Score = fraction of asserts passed,
as in the original. A ground truth of an unsupported shape is rejected at data prep, a flagged failure at train time
(:func:`invalid_ground_truth`). Rows whose tests build ``ListNode`` / ``TreeNode`` objects are graded with LeetCode's
helper classes available.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentrl_recipe.training.rewards.code.assert_form import (
    AssertCase,
    AssertTests,
    case_passes,
)
from agentrl_recipe.training.rewards.code.driver_runs import GradeProgress, frame_text
from agentrl_recipe.training.rewards.code.grade import CodeGrade

_MAX_FRAME_CHARS = 256 * 1024
logger = logging.getLogger(__name__)


def invalid_ground_truth(error: Exception, ground_truth: Any) -> dict[str, Any]:
    """The code scorer's result for a ground truth no grader can run: not a wrong answer, flagged like a sandbox
    failure (``infra_failure``: masked by ``agentrl.masks.infra_failure``, counted by the infra guard, which stops a
    run where many rows are broken), and logged with the reason. ``data validate`` rejects such rows beforehand."""
    logger.error("code ground truth cannot be graded (%s): %.200r", error, ground_truth)
    return {"score": 0.0, "acc": None, "pred": None, "tests_passed": 0, "tests_total": 0, "infra_failure": True}


def _judge(frame: Mapping[str, Any], case: AssertCase) -> str:
    status = frame.get("status")
    if status != "ok":
        return "timeout" if status == "timeout" else "runtime_error"
    out = frame.get("out")
    return "passed" if isinstance(out, str) and case_passes(case, out) else "wrong_answer"


def _read_frames(frames: list[dict[str, Any]], tests: AssertTests, progress: GradeProgress) -> bool:
    """Take one execution's frames in order; True when the driver finished."""
    for frame in frames:
        kind = frame.get("t")
        if kind == "setup_error":
            progress.note_error(frame_text(frame, "error", "compile_error"))
            progress.fail_rest("compile_error")
            return True
        if kind == "end":
            return True
        if progress.expects(frame):  # in order, else not from the driver
            status = _judge(frame, tests.cases[progress.start])
            progress.record(status, frame_text(frame, "error", "runtime error"))
    return False


async def agrade_asserts(
    program: str,
    tests: AssertTests,
    *,
    sandbox: Any,
    timeout_s_per_test: float,
    total_timeout_s: float | None = None,
    memory_mb: int | None = None,
) -> CodeGrade:
    """Run every assert's call in the sandbox (one execution, resumed after a death) and judge here."""
    progress = GradeProgress(len(tests), timeout_s_per_test, total_timeout_s)

    def payload(start: int) -> dict[str, Any]:
        return {
            "program": program,
            "import_prefix": tests.import_prefix,
            "entry_point": tests.entry_point,
            "calls": [c.call for c in tests.cases[start:]],  # never the expected values
            "start": start,
            "timeout_s": timeout_s_per_test,
            "max_frame_chars": _MAX_FRAME_CHARS,
        }

    def read(res: Any, frames: list[dict[str, Any]]) -> bool:
        if _read_frames(frames, tests, progress) or progress.start >= len(tests):
            return True
        progress.died(res)  # died before reporting this test
        return False

    return await progress.run(sandbox, "_assert_driver.py", payload, read, memory_mb)
