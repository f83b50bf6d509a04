"""The paper's outcome scorers, dispatched per row: math and GPQA by the last ``\\boxed{}``, code by unit tests.

``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw) -> dict`` has verl's custom-score
signature (usable as ``reward.custom_reward_function`` with any verl manager); :func:`acompute_score` is the same as a
coroutine (what :class:`agentrl_recipe.training.rewards.manager.AgentRLRewardManager` calls). Every result has
``score``,
``acc`` and ``pred``, plus ``task_kind``; code results add ``tests_passed``, ``tests_total`` and ``infra_failure``.

Routing is per row by :func:`agentrl_recipe.tasks.task_for` (the one table of task kinds): ``data_source.lower()``
containing "code" or "livecodebench" → code, containing "gpqa" → gpqa, anything else → math; the kind's ``scorer``
is one of :func:`score_math_row`, :func:`score_gpqa_row`, :func:`score_code_row` below.

Rules (Open-AgentRL ``recipe/demystify/reward.py`` → verl ``math_dapo.compute_score(strict_box_verify=True)`` and
``livecodebench/code_math.py``):

- **math** (``math_verifier="strict"``, the paper): keep the last 300 characters, then the last 100; take the last
  brace-matched ``\\boxed{...}`` there; +1 if its content equals the ground truth exactly (no normalisation), else −1.
  verl ships this rule unchanged (``verl.utils.reward_score.math_dapo``) and we call it rather than copy it.
  ``math_verifier="math_verify"`` (a deviation, off by default) extracts the same way and accepts math-verify
  equivalence (``\\frac{1}{2}`` = ``0.5``), in a killable helper process (math-verify's own timeouts use SIGALRM, which
  only works in a main thread).
- **gpqa**: the same strict extraction; the ground truth must be one uppercase option letter; ``\\boxed{B}`` matches
  ``B``, ``\\boxed{(B)}`` does not.
- **code**: after the first ``</think>``, the last `````python\\n...````` block (the original's non-greedy regex
  semantics, in linear time); none, or one that ``ast.parse`` rejects → −1. Otherwise it is run in the sandbox against
  the row's tests (:mod:`agentrl_recipe.training.rewards.code.io_tests`) and the score is the fraction passed in [0, 1];
  ``acc`` = all passed. A sandbox ``infra_error`` gives ``infra_failure=True``, ``score=0`` and ``acc=None``: not a
  wrong answer (mask it; see ``agentrl.masks.infra_failure``).

The ground truth of math/GPQA rows is a string (an int or float from a parquet column is converted with ``str``).
Before a scorer sees it, it is put in the form ``ground_truth_form`` and ``leetcode_tests`` say (as published, or
normalized; a LeetCode row's asserts or its call-based conversion): :mod:`agentrl_recipe.training.rewards.ground_truth`.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass
from typing import Any

from verl.utils.reward_score import math_dapo

from agentrl_recipe import tasks
from agentrl_recipe.training.rewards.ground_truth import GROUND_TRUTH_FORMS, LEETCODE_TESTS, graded_ground_truth
from agentrl_recipe.training.rewards.isolation import GraderCrashed, get_isolated_pool
from agentrl_recipe.training.run_sync import run_coroutine_sync

MATH_VERIFIERS = ("strict", "math_verify")

# The strict rule's windows (math_dapo.compute_score keeps 300 chars, is_correct_strict_box then 100).
STRICT_OUTER_WINDOW = 300
STRICT_INNER_WINDOW = 100
_MATH_VERIFY_TARGET = "agentrl_recipe.training.rewards.equivalence:math_verify_equal"


# --- math and GPQA ---


def last_boxed_strict(solution_str: str) -> str | None:
    """Content of the last brace-matched ``\\boxed{}`` in the last 100 of the last 300 characters, or None."""
    window = solution_str[-STRICT_OUTER_WINDOW:][-STRICT_INNER_WINDOW:]
    boxed = math_dapo.last_boxed_only_string(window)
    return math_dapo.remove_boxed(boxed) if boxed is not None else None


def _as_answer(ground_truth: Any) -> str:
    if isinstance(ground_truth, str):
        return ground_truth
    if isinstance(ground_truth, bool) or ground_truth is None:
        raise ValueError(f"math/GPQA ground truth must be a string, got {ground_truth!r}")
    if isinstance(ground_truth, int) or (isinstance(ground_truth, float) and math.isfinite(ground_truth)):
        return str(ground_truth)
    if hasattr(ground_truth, "item"):  # numpy scalar from a parquet column
        return _as_answer(ground_truth.item())
    kind = type(ground_truth).__name__
    raise ValueError(f"math/GPQA ground truth must be a string, got {kind}: {ground_truth!r:.80}")


def score_math_strict(solution_str: str, ground_truth: Any) -> dict[str, Any]:
    """The paper's rule: ±1 on exact equality of the strict last-boxed answer (verl's math_dapo, strict mode)."""
    result: dict[str, Any] = math_dapo.compute_score(  # type: ignore[assignment]  # verl annotates it float
        solution_str, _as_answer(ground_truth), strict_box_verify=True
    )
    return {"score": float(result["score"]), "acc": bool(result["acc"]), "pred": result["pred"]}


def score_gpqa(solution_str: str, ground_truth: Any) -> dict[str, Any]:
    """Strict last-boxed option letter; the ground truth must be a single uppercase letter."""
    gold = _as_answer(ground_truth)
    if len(gold) != 1 or not ("A" <= gold <= "Z"):
        raise ValueError(f"GPQA ground truth must be one uppercase option letter, got {gold!r}")
    return score_math_strict(solution_str, gold)


def _math_verify_result(pred: str | None, gold: str, equal: bool) -> dict[str, Any]:
    correct = pred is not None and (pred == gold or equal)
    return {"score": 1.0 if correct else -1.0, "acc": correct, "pred": pred}


async def ascore_math_verify(solution_str: str, ground_truth: Any, *, timeout_s: float = 10.0) -> dict[str, Any]:
    gold, pred = _as_answer(ground_truth), last_boxed_strict(solution_str)
    if pred is None or pred == gold:
        return _math_verify_result(pred, gold, False)
    pool = get_isolated_pool(preload=("agentrl_recipe.training.rewards.equivalence", "math_verify"))
    try:
        equal = await pool.acall(_MATH_VERIFY_TARGET, pred, gold, timeout_s=timeout_s)
    except GraderCrashed:
        equal = False
    return _math_verify_result(pred, gold, bool(equal))


# --- one row, by its task kind (agentrl_recipe.tasks names these) ---


@dataclass(frozen=True)
class ScoreOptions:
    """The scoring options of ``reward.reward_kwargs`` that reach the scorers (see :func:`acompute_score`)."""

    math_verifier: str = "strict"
    math_verify_timeout_s: float = 10.0
    sandbox: Any = None
    code_rules: str = "lcb"
    code_timeout_s_per_test: float | None = None  # None: LiveCodeBench's 6 s (rewards.code.io_tests.LCB_TIMEOUT_S)
    code_total_timeout_s: float | None = None
    code_memory_mb: int | None = None
    # The ground truth's form and LeetCode tests (rewards/ground_truth.py); the defaults are compat agentrl's.
    ground_truth_form: str = "normalized"
    leetcode_tests: str = "call"

    def __post_init__(self) -> None:
        if self.code_rules not in ("lcb", "open_agentrl"):
            raise ValueError(f"code_rules must be 'lcb' or 'open_agentrl', got {self.code_rules!r}")
        if self.math_verifier not in MATH_VERIFIERS:
            raise ValueError(f"math_verifier must be one of {MATH_VERIFIERS}, got {self.math_verifier!r}")
        if self.ground_truth_form not in GROUND_TRUTH_FORMS:
            raise ValueError(f"ground_truth_form must be one of {GROUND_TRUTH_FORMS}")
        if self.leetcode_tests not in LEETCODE_TESTS:
            raise ValueError(f"leetcode_tests must be one of {LEETCODE_TESTS}")


def score_math_row(solution_str: str, ground_truth: Any, opts: ScoreOptions) -> dict[str, Any] | Awaitable[dict]:
    """The strict rule (in-line), or math-verify equivalence in a killable helper (a coroutine)."""
    if opts.math_verifier == "math_verify":
        return ascore_math_verify(solution_str, ground_truth, timeout_s=opts.math_verify_timeout_s)
    return score_math_strict(solution_str, ground_truth)


def score_gpqa_row(solution_str: str, ground_truth: Any, opts: ScoreOptions) -> dict[str, Any]:
    return score_gpqa(solution_str, ground_truth)


def _options(values: dict[str, Any]) -> ScoreOptions:
    """The scoring options among ``values`` (verl passes extra keywords, reward_router_address, ...: ignored)."""
    known = ScoreOptions.__dataclass_fields__
    return ScoreOptions(**{k: v for k, v in values.items() if k in known})


def _score(
    data_source: str, solution_str: str, gt: Any, extra_info: Mapping[str, Any] | None, opts: ScoreOptions
) -> Any:
    """The row's result with its ``task_kind`` (a dict, or an awaitable of one)."""
    if not isinstance(solution_str, str):
        raise TypeError(f"solution_str must be a string, got {type(solution_str).__name__}")
    task = tasks.task_for(data_source)
    gt = graded_ground_truth(task.name, gt, extra_info, form=opts.ground_truth_form, leetcode_tests=opts.leetcode_tests)
    result = tasks.load(task.scorer)(solution_str, gt, opts)
    if inspect.isawaitable(result):
        return _with_kind(result, task.name)
    return {**result, "task_kind": task.name}


async def _with_kind(result: Awaitable[dict[str, Any]], kind: str) -> dict[str, Any]:
    return {**(await result), "task_kind": kind}


# --- entry points ---


async def acompute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Score one response (coroutine). ``options`` are :class:`ScoreOptions` fields; other keywords verl passes
    (reward_router_address, ...) are ignored."""
    result = _score(data_source, solution_str, ground_truth, extra_info, _options(options))
    return await result if inspect.isawaitable(result) else result


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """verl custom-score signature (sync). Same keyword options as :func:`acompute_score`; math and GPQA with the
    strict rule need no event loop."""
    result = _score(data_source, solution_str, ground_truth, extra_info, _options(options))
    return run_coroutine_sync(result) if inspect.isawaitable(result) else result
