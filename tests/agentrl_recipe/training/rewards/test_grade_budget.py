"""The grader's budget counts execution, not the sandbox queue: overlapping waits count once, a run in flight counts
as its backend stamped it; a grade past its execution budget is cancelled mid-run; one whose wall time is over the
budget only because its runs were queued is not. (Through the reward manager on a saturated pool: test_manager.py.)"""

from __future__ import annotations

import asyncio

import pytest

from agentrl_recipe.training.rewards.code.driver_runs import GradeProgress
from agentrl_recipe.training.rewards.grade_budget import QueueClock, within_budget
from agentrl_sandbox.types import ExecResult, SlotMarker, mark_slot


class QueuedRuns:
    """Each run waits ``queue_s`` for a slot, then runs ``run_s``, stamping and reporting both as the pool does."""

    def __init__(self, queue_s: float, run_s: float) -> None:
        self.queue_s, self.run_s, self.completed = queue_s, run_s, 0

    async def arun(self, code: str, **_: object) -> ExecResult:
        mark_slot(taken=False)
        await asyncio.sleep(self.queue_s)
        mark_slot(taken=True)
        await asyncio.sleep(self.run_s)
        self.completed += 1
        return ExecResult("ok", stdout=code, queue_s=self.queue_s)


def test_overlapping_queue_waits_count_once_and_runs_in_flight_count_as_their_backend_stamped():
    clock = QueueClock(None)
    clock._queued = [(0.0, 2.0), (1.0, 3.0), (5.0, 6.0), (5.5, 5.75)]
    assert clock.queued_s == pytest.approx(4.0)
    clock._queued = [(0.0, 2.0), (1.0, 3.0)]
    waiting, started, unstamped = SlotMarker(), SlotMarker(), SlotMarker()
    waiting.queued = 4.0  # still waiting at 5.0
    started.queued, started.started = 2.5, 3.5  # overlaps the finished waits
    clock._in_flight = {7: waiting, 8: started, 9: unstamped}  # unstamped: counted as running
    assert clock.waiting_s(now=5.0) == pytest.approx(3.5 + 1.0) and clock.queued_s == pytest.approx(3.0)


async def grade(sandbox, runs: int) -> list[str]:
    return [(await sandbox.arun(f"run {i}")).stdout for i in range(runs)]


def test_a_grade_over_its_budget_only_by_queue_wait_finishes():
    async def scenario() -> None:
        queued = QueueClock(QueuedRuns(queue_s=1.0, run_s=0.1))  # 2.2 s on the wall clock, 0.2 s of execution
        assert await within_budget(grade(queued, 2), 1.0, queued) == ["run 0", "run 1"]
        assert queued.queued_s == pytest.approx(2.0, abs=0.2) and queued.in_flight == 0

    asyncio.run(scenario())


def test_a_grade_over_its_execution_budget_is_stopped_mid_run():
    async def scenario() -> None:
        runs = QueuedRuns(queue_s=0.0, run_s=1.0)
        running = QueueClock(runs)
        with pytest.raises(asyncio.TimeoutError):
            await within_budget(grade(running, 10), 1.5, running)
        assert runs.completed == 1 and running.in_flight == 0  # the second run was cut at 1.5 s

    asyncio.run(scenario())


def test_a_programs_time_cap_is_moved_by_its_runs_queue_wait():
    progress = GradeProgress(n=3, timeout_s_per_test=1.0, total_timeout_s=4.0)
    before = progress.deadline

    async def one_execution():
        return await progress.execute(QueuedRuns(queue_s=0.3, run_s=0.0), "_io_driver.py", {}, 1.0, None)

    res, frames = asyncio.run(one_execution())
    assert res.queue_s == 0.3 and frames == [] and progress.deadline == pytest.approx(before + 0.3)
