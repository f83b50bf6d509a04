"""The host side both sandbox drivers share (:mod:`._io_driver` for I/O tests, :mod:`._assert_driver` for asserts):
their source, the frames they write, and one program's grade as it progresses across sandbox executions.

A driver runs the tests one after the other in one execution and reports each in a frame tagged with a per-request
random nonce. If the execution ends early (``os._exit``, segfault, memory kill, output cap), the test in progress fails
with that cause and a fresh execution resumes at the next test, until every test has a status or the overall deadline
passes (the rest count as timeouts). A sandbox ``infra_error`` is retried; if it persists the rest are
``infra_error`` and the grade says ``infra_failure=True``.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from functools import cache
from importlib import resources
from typing import Any

from agentrl_recipe.training.rewards.code.grade import CodeGrade

STARTUP_SLACK_S = 5.0  # interpreter start + driver set-up per execution, on top of the per-test budget
INFRA_RETRIES = 2
# How an execution that ended before reporting a test fails that test (anything else: runtime_error).
DEATH_STATUS = {"timeout": "timeout", "memory_exceeded": "memory_exceeded", "output_truncated": "output_truncated"}


@cache
def driver_source(filename: str) -> str:
    """A driver file's text plus its entry call: what the sandbox runs (standard library only, no package there)."""
    text = resources.files("agentrl_recipe.training.rewards.code").joinpath(filename).read_text(encoding="utf-8")
    return text + "\n_main()\n"


def parse_frames(stdout: str, nonce: str) -> list[dict[str, Any]]:
    """Frames the driver wrote, in order. Lines without the nonce, or not JSON objects (a forged line too deep to
    parse included), are ignored."""
    prefix = nonce + " "
    frames = []
    for line in stdout.split("\n"):
        if line.startswith(prefix):
            try:
                frame = json.loads(line[len(prefix) :])
            except (ValueError, RecursionError, MemoryError):
                continue
            if isinstance(frame, dict):
                frames.append(frame)
    return frames


def frame_text(frame: dict[str, Any], key: str, default: str) -> str:
    """A frame's text field (an error message): the driver writes a string; anything else a forger wrote is
    ``default``."""
    value = frame.get(key)
    return value[-500:] if isinstance(value, str) and value else default


class GradeProgress:
    """One program's grade across executions: each test's status, the next test to run, the first error seen."""

    def __init__(self, n: int, timeout_s_per_test: float, total_timeout_s: float | None) -> None:
        self.n = n
        self.timeout_s_per_test = timeout_s_per_test
        self.started = time.monotonic()
        total = (timeout_s_per_test + 1.0) * n + 5.0 if total_timeout_s is None else total_timeout_s
        self.deadline = self.started + total
        self.statuses: list[str | None] = [None] * n
        self.start = 0  # the first test without a status
        self.first_error: str | None = None
        self.infra_failure = False
        self.executions = 0
        self.infra_attempts = 0

    def expects(self, frame: dict[str, Any]) -> bool:
        """``frame`` is the result of the next test without a status (in order, an int index; anything else, such as
        a forged index past the last test, is not from the driver)."""
        index = frame.get("i")
        return frame.get("t") == "result" and type(index) is int and index == self.start < self.n

    def budget(self) -> float | None:
        """Seconds for the next execution; None when every test has a status or the deadline has (nearly) passed."""
        remaining = self.deadline - time.monotonic()
        if self.start >= self.n or remaining <= 0.05:
            return None
        return min(remaining, self.timeout_s_per_test * (self.n - self.start) + STARTUP_SLACK_S)

    async def execute(
        self, sandbox: Any, driver: str, payload: dict[str, Any], budget: float, memory_mb: int | None
    ) -> tuple[Any, list[dict[str, Any]]] | None:
        """Run ``driver`` on ``payload`` once: (the result, its frames), or None after an ``infra_error``."""
        nonce = secrets.token_hex(16)
        stdin = json.dumps({"nonce": nonce, **payload})
        res = await sandbox.arun(driver_source(driver), stdin=stdin, timeout_s=budget, memory_mb=memory_mb)
        self.executions += 1
        self.deadline += res.queue_s  # the program's time cap counts its runs, not their wait for a sandbox slot
        if res.status != "infra_error":
            return res, parse_frames(res.stdout, nonce)
        self.infra_attempts += 1
        if self.infra_attempts > INFRA_RETRIES:
            self.infra_failure = True
            self.note_error(f"sandbox infra_error: {res.message}")
            self.fail_rest("infra_error")
        return None

    async def run(
        self,
        sandbox: Any,
        driver: str,
        payload_for: Callable[[int], dict[str, Any]],
        read: Callable[[Any, list[dict[str, Any]]], bool],
        memory_mb: int | None,
    ) -> CodeGrade:
        """Execute ``driver`` until every test has a status, the deadline passes, or ``read`` says it is done.

        ``payload_for(start)`` is the stdin payload of an execution that begins at test ``start``. ``read(res, frames)``
        takes one execution's frames into this progress (blaming test ``start`` with :meth:`died` when the execution
        ended before reporting it) and returns True when the driver finished.
        """
        while (budget := self.budget()) is not None:
            ran = await self.execute(sandbox, driver, payload_for(self.start), budget, memory_mb)
            if ran is not None and read(*ran):  # None: an infra_error, retried or every test left is marked
                break
        return self.grade()

    def note_error(self, message: str) -> None:
        self.first_error = self.first_error or message

    def record(self, status: str, error: str | None = None) -> None:
        """The status of test ``start``; a runtime error's message is kept if it is the first."""
        self.statuses[self.start] = status
        if status == "runtime_error" and error is not None:
            self.note_error(error)
        self.start += 1

    def died(self, res: Any, error: str | None = None) -> None:
        """The execution ended before reporting test ``start``: that test fails with the execution's cause."""
        self.record(DEATH_STATUS.get(res.status, "runtime_error"), error)

    def fail_rest(self, status: str) -> None:
        self.statuses[self.start :] = [status] * (self.n - self.start)
        self.start = self.n

    def grade(self) -> CodeGrade:
        final = [s if s is not None else "timeout" for s in self.statuses]
        return CodeGrade(
            passed=final.count("passed"),
            total=self.n,
            statuses=final,
            infra_failure=self.infra_failure,
            executions=self.executions,
            duration_s=time.monotonic() - self.started,
            first_error=self.first_error,
        )
