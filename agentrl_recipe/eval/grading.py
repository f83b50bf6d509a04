"""Grade one eval sample with the benchmark's own rule: strict last ``\\boxed{}`` for AIME (paper), boxed option letter
for GPQA, LiveCodeBench's harness rules for code (:mod:`agentrl_recipe.eval.lcb`).

Math/GPQA go through the training scorer (``rewards.scoring.compute_score``) so eval and RL agree on what "correct"
means; only its accuracy is used (no tool bonus, no overlong shaping — those are training rewards, not metrics). Code
does not use the training reward (fraction of tests passed) but LCB's all-tests-pass rule with its 6 s per test.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl_recipe import tasks
from agentrl_recipe.eval import lcb


@dataclass
class SampleGrade:
    correct: bool | None  # None when the grade could not be computed (sandbox infra_error)
    score: float  # 1/0 for math/GPQA/LCB (the metric, not the RL reward)
    final_answer: str | None  # extracted answer (math/GPQA) or program (code); None = nothing extracted
    infra_failure: bool
    detail: dict[str, Any]


def final_assistant_text(messages: list[dict[str, Any]] | None, response_text: str) -> str:
    """The last assistant message's content (where an LCB answer lives), else the whole decoded response."""
    for message in reversed(messages or []):
        if message.get("role") == "assistant":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # multimodal-style content parts
                return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return response_text


async def agrade_sample(
    data_source: str,
    task: str,
    ground_truth: Any,
    response_text: str,
    messages: list[dict[str, Any]] | None = None,
    *,
    sandbox: Any = None,
    lcb_timeout_s: float = lcb.LCB_TIMEOUT_S,
) -> SampleGrade:
    """Grade one trajectory with its task kind's ``eval_grader`` (:mod:`agentrl_recipe.tasks`). ``response_text`` is
    the decoded response (all turns, as the training scorer sees it)."""
    grader = tasks.load(tasks.by_name(task).eval_grader)
    return await grader(
        data_source, ground_truth, response_text, messages, sandbox=sandbox, lcb_timeout_s=lcb_timeout_s
    )


async def agrade_code_sample(
    data_source: str,
    ground_truth: Any,
    response_text: str,
    messages: list[dict[str, Any]] | None,
    *,
    sandbox: Any = None,
    lcb_timeout_s: float = lcb.LCB_TIMEOUT_S,
) -> SampleGrade:
    """LiveCodeBench's rule: the final assistant message's program passes every test."""
    grade = await lcb.agrade_response(
        final_assistant_text(messages, response_text), ground_truth, sandbox=sandbox, timeout_s=lcb_timeout_s
    )
    return SampleGrade(
        correct=None if grade.infra_failure else grade.passed,
        score=1.0 if grade.passed else 0.0,
        final_answer=grade.code or None,
        infra_failure=grade.infra_failure,
        detail=grade.as_dict(),
    )


async def agrade_answer_sample(
    data_source: str,
    ground_truth: Any,
    response_text: str,
    messages: list[dict[str, Any]] | None,
    *,
    sandbox: Any = None,
    lcb_timeout_s: float = lcb.LCB_TIMEOUT_S,
) -> SampleGrade:
    """The training scorer's accuracy (strict last ``\\boxed{}``): eval and RL agree on what "correct" means."""
    # The scorer imports verl: loaded when a sample is graded, never by `eval report` / `eval compare`.
    from agentrl_recipe.training.rewards.scoring import acompute_score

    result = await acompute_score(data_source, response_text, ground_truth)
    correct = bool(result.get("acc"))
    pred = result.get("pred")
    return SampleGrade(
        correct=correct,
        score=1.0 if correct else 0.0,
        final_answer=None if pred in (None, "") else str(pred),
        infra_failure=False,
        detail={"scorer_score": result.get("score")},
    )
