"""GradeProgress with a scripted sandbox: frames under the nonce only, infra retries, and the final grade."""

from __future__ import annotations

import json

from agentrl_recipe.training.rewards.code import driver_runs
from agentrl_recipe.training.rewards.code.driver_runs import GradeProgress, parse_frames
from agentrl_sandbox import ExecResult


class ScriptedSandbox:
    """Replies with each result in turn; a result's stdout may say {nonce} where the request's nonce goes."""

    def __init__(self, *results: ExecResult) -> None:
        self.results = list(results)
        self.requests: list[dict] = []

    async def arun(self, code: str, *, stdin: str, timeout_s: float, memory_mb: int | None) -> ExecResult:
        request = json.loads(stdin)
        self.requests.append(request)
        res = self.results.pop(0)
        res.stdout = res.stdout.replace("{nonce}", request["nonce"])
        return res


def test_parse_frames_keeps_only_json_objects_under_the_nonce() -> None:
    stdout = 'n1 {"t": "result", "i": 0}\nn2 {"t": "end"}\nn1 [1]\nn1 not json\nprinted\nn1 {"t": "end"}'
    assert parse_frames(stdout, "n1") == [{"t": "result", "i": 0}, {"t": "end"}]


async def test_infra_errors_are_retried_then_the_rest_is_marked() -> None:
    sandbox = ScriptedSandbox(*(ExecResult.infra("down") for _ in range(driver_runs.INFRA_RETRIES + 1)))
    progress = GradeProgress(2, 1.0, None)
    while (budget := progress.budget()) is not None:
        assert await progress.execute(sandbox, "_io_driver.py", {"start": progress.start}, budget, None) is None
    grade = progress.grade()
    assert (grade.statuses, grade.infra_failure, grade.executions) == (["infra_error"] * 2, True, 3)
    assert grade.first_error == "sandbox infra_error: down"


async def test_a_death_fails_the_test_in_progress_and_the_next_execution_resumes() -> None:
    first = ExecResult(status="memory_exceeded", stdout='{nonce} {"t": "result", "i": 0, "status": "ok"}\n')
    second = ExecResult(status="ok", stdout='{nonce} {"t": "result", "i": 2}\n{nonce} {"t": "end"}\n')
    sandbox = ScriptedSandbox(first, second)
    progress = GradeProgress(3, 1.0, None)
    while (budget := progress.budget()) is not None:
        res, frames = await progress.execute(sandbox, "_io_driver.py", {"start": progress.start}, budget, None)
        for frame in frames:
            if frame.get("t") == "result" and frame["i"] == progress.start:
                progress.record("passed")
        if any(f.get("t") == "end" for f in frames):
            break
        progress.died(res)
    assert [r["start"] for r in sandbox.requests] == [0, 2]
    assert all("nonce" in r for r in sandbox.requests)
    grade = progress.grade()
    assert grade.statuses == ["passed", "memory_exceeded", "passed"]
    assert (grade.passed, grade.total, grade.executions, grade.first_error) == (2, 3, 2, None)


def test_tests_never_reached_count_as_timeouts() -> None:
    progress = GradeProgress(2, 1.0, 0.01)
    assert progress.budget() is None
    assert progress.grade().statuses == ["timeout", "timeout"]
