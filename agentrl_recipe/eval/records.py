"""The eval dump's records: one per (problem, sample), a trajectory's fields next to its grade; grading and re-grading.

Record keys (the dump's format, read by the report and by resumed runs): ``prompt_id, sample, data_source, task,
messages, response``, the grade (:func:`grade_fields`), then the trajectory's
:data:`~agentrl_recipe.training.agent_loop.trajectory.EVAL_KEYS`; its token ids
(:data:`~agentrl_recipe.eval.dump.TOKEN_KEYS`) go to the dump's token sidecar.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from agentrl_recipe.eval.dump import TOKEN_KEYS, RolloutDump
from agentrl_recipe.eval.eval_set import EvalProblem
from agentrl_recipe.eval.grading import SampleGrade, agrade_sample
from agentrl_recipe.training.agent_loop.trajectory import Trajectory

GRADE_CONCURRENCY = 16  # samples graded at once (code grading waits on the sandbox pool)


def grade_fields(grade: SampleGrade) -> dict[str, Any]:
    return {
        "final_answer": grade.final_answer,
        "correct": grade.correct,
        "score": grade.score,
        "grade": grade.detail,
        "infra_failure": grade.infra_failure,
    }


def make_record(problem: EvalProblem, traj: Trajectory, grade: SampleGrade) -> dict[str, Any]:
    """The dump record of ``traj`` (sample ``traj.sample_index`` of ``problem``) graded ``grade``."""
    return {
        "prompt_id": problem.prompt_id,
        "sample": traj.sample_index,
        "data_source": problem.data_source,
        "task": problem.task,
        "messages": traj.messages,
        "response": traj.response,
        **grade_fields(grade),
        **traj.eval_fields(),
        **token_fields(traj),
    }


def token_fields(traj: Trajectory) -> dict[str, Any]:
    """The trajectory's token ids and mask, which :meth:`RolloutDump.append` moves to the token sidecar; none for a
    trajectory without token ids (a scripted generator's)."""
    return {key: list(getattr(traj, key)) for key in TOKEN_KEYS} if traj.prompt_ids else {}


async def grade_items(
    items: Sequence[tuple[EvalProblem, str, list[dict[str, Any]] | None]],
    *,
    compat: str,
    sandbox: Any,
    lcb_timeout_s: float,
) -> list[SampleGrade]:
    """Grade (problem, response text, messages) items concurrently (bounded by GRADE_CONCURRENCY)."""
    sem = asyncio.Semaphore(GRADE_CONCURRENCY)

    async def one(problem: EvalProblem, text: str, messages: list[dict[str, Any]] | None) -> SampleGrade:
        async with sem:
            return await agrade_sample(
                problem.data_source,
                problem.task,
                problem.ground_truth,
                text,
                messages,
                compat=compat,
                sandbox=sandbox,
                lcb_timeout_s=lcb_timeout_s,
            )

    return list(await asyncio.gather(*(one(*item) for item in items)))


async def regrade_infra_failures(
    dump: RolloutDump, problems: Sequence[EvalProblem], *, compat: str, sandbox: Any, lcb_timeout_s: float
) -> int:
    """Re-grade dumped samples whose grading hit a sandbox infra_error; appends the new records. Returns how many."""
    by_id = {p.prompt_id: p for p in problems}
    stale = [r for r in dump.load().values() if r.get("infra_failure") and r["prompt_id"] in by_id]
    if not stale:
        return 0
    grades = await grade_items(
        [(by_id[r["prompt_id"]], r["response"], r.get("messages")) for r in stale],
        compat=compat,
        sandbox=sandbox,
        lcb_timeout_s=lcb_timeout_s,
    )
    # Still failing: nothing to write (the record already says so); the next run tries again.
    updated = [r | grade_fields(g) for r, g in zip(stale, grades, strict=True) if not g.infra_failure]
    dump.append(updated)
    return len(updated)
