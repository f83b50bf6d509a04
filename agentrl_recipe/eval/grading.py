"""Grade one eval sample under the run's protocol (``EvalConfig.compat``).

``open_agentrl`` (default): the released eval. AIME and GPQA were scored by verl's validation with the training
reward (recipe/demystify/eval/eval_qwen3_4b_aime_gpqa.sh:96-97 ``custom_reward_function`` = reward.py
``compute_score``; README "You can observe the average@32 ... from your wandb project"): a sample is correct when that
reward's ``acc`` is, the strict last ``\\boxed{}`` of the whole decoded response against the ground truth as stored.
LiveCodeBench rollouts were dumped and graded by "the official evaluation process ... in LiveCodeBench" (README,
eval_qwen3_4b_livecodebench.sh), not by ``code_math.py``: LiveCodeBench's rules (:mod:`agentrl_recipe.eval.lcb`),
here on the final assistant message's program, ``lcb_timeout_s`` per test (LCB: 6 s).

``agentrl``: ours. Math/GPQA through the same strict scorer with the ground truth normalized (a one-element list
answer graded as its element), code by LiveCodeBench's rules as above. Only accuracy is used either way (no tool
bonus, no overlong shaping — training rewards, not metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentrl_recipe import tasks
from agentrl_recipe.eval import lcb
from agentrl_recipe.training.compat import check_mode


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
    compat: str,
    sandbox: Any = None,
    lcb_timeout_s: float = lcb.LCB_TIMEOUT_S,
) -> SampleGrade:
    """Grade one trajectory: AIME/GPQA by the released reward under ``compat`` open_agentrl, else its task kind's
    ``eval_grader`` (:mod:`agentrl_recipe.tasks`). ``response_text`` is the decoded response (all turns, as the
    training scorer sees it)."""
    if check_mode(compat, where="EvalConfig.compat") == "open_agentrl" and task != "code":
        return await agrade_released_sample(data_source, ground_truth, response_text)
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

    return _scorer_grade(await acompute_score(data_source, response_text, ground_truth))


async def agrade_released_sample(data_source: str, ground_truth: Any, response_text: str) -> SampleGrade:
    """The released validation's grade of an AIME/GPQA sample: the training reward's ``acc`` under ``compat:
    open_agentrl`` (strict last ``\\boxed{}`` of the whole response, the ground truth as published)."""
    from agentrl_recipe.training.rewards.scoring import acompute_score  # imports verl: loaded when a sample is graded

    result = await acompute_score(data_source, response_text, ground_truth, ground_truth_form="published")
    return _scorer_grade(result, grader="open_agentrl")


def _scorer_grade(result: dict[str, Any], **detail: str) -> SampleGrade:
    """A :class:`SampleGrade` from the training scorer's result (its ``acc``, ``pred`` and ``score``)."""
    correct = bool(result.get("acc"))
    pred = result.get("pred")
    return SampleGrade(
        correct=correct,
        score=1.0 if correct else 0.0,
        final_answer=None if pred in (None, "") else str(pred),
        infra_failure=False,
        detail={"scorer_score": result.get("score"), **detail},
    )
