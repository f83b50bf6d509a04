"""The paper's outcome scorers, dispatched per row: math and GPQA by the last ``\\boxed{}``, code by unit tests.

``compute_score(data_source, solution_str, ground_truth, extra_info=None, **kw) -> dict`` has verl's custom-score
signature (usable as ``reward.custom_reward_function`` with any verl manager); :func:`acompute_score` is the same as a
coroutine (what :class:`agentrl_recipe.rewards.manager.AgentRLRewardManager` calls). Every result has ``score``,
``acc`` and ``pred``, plus ``task_kind``; code results add ``tests_passed``, ``tests_total`` and ``infra_failure``.

Routing is per row (the original dispatched on the batch's first row — a bug) by :func:`task_kind`, the one routing
function the whole recipe uses: ``data_source.lower()`` containing "code" or "livecodebench" → code, containing
"gpqa" → gpqa, anything else → math.

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
  the row's tests (:mod:`agentrl_recipe.rewards.code.io_tests`) and the score is the fraction passed in [0, 1];
  ``acc`` = all passed. A sandbox ``infra_error`` gives ``infra_failure=True``, ``score=0`` and ``acc=None``: not a
  wrong answer (mask it; see ``agentrl.masks.infra_failure``).

The ground truth of math/GPQA rows is a string (an int or float from a parquet column is converted with ``str``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Mapping
from typing import Any, Literal

from verl.utils.reward_score import math_dapo

from agentrl_recipe.rewards.code import released as code_released
from agentrl_recipe.rewards.code.assert_form import AssertTests, parse_code_tests
from agentrl_recipe.rewards.code.assert_tests import agrade_asserts, invalid_ground_truth
from agentrl_recipe.rewards.code.io_tests import LCB_TIMEOUT_S, agrade_program, run_coroutine_sync
from agentrl_recipe.rewards.isolation import GraderCrashed, get_isolated_pool
from agentrl_sandbox import get_sandbox
from agentrl_sandbox.config import SandboxConfig

TaskKind = Literal["math", "gpqa", "code"]
TASK_KINDS: tuple[str, ...] = ("math", "gpqa", "code")
MATH_VERIFIERS = ("strict", "math_verify")

# The strict rule's windows (math_dapo.compute_score keeps 300 chars, is_correct_strict_box then 100).
STRICT_OUTER_WINDOW = 300
STRICT_INNER_WINDOW = 100
CODE_FENCE = "```python\n"
_MATH_VERIFY_TARGET = "agentrl_recipe.rewards.equivalence:math_verify_equal"


def task_kind(data_source: str) -> TaskKind:
    """The scorer for a row: "code" / "livecodebench" → code, "gpqa" → gpqa, else math (case-insensitive)."""
    if not isinstance(data_source, str):
        raise TypeError(f"data_source must be a string, got {type(data_source).__name__}: {data_source!r:.80}")
    ds = data_source.lower()
    if "code" in ds or "livecodebench" in ds:
        return "code"
    if "gpqa" in ds:
        return "gpqa"
    return "math"


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
    result = math_dapo.compute_score(solution_str, _as_answer(ground_truth), strict_box_verify=True)
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


def score_math_verify(solution_str: str, ground_truth: Any, *, timeout_s: float = 10.0) -> dict[str, Any]:
    """Deviation (opt-in): strict extraction, math-verify equivalence. Raises GraderTimeout past ``timeout_s``."""
    gold, pred = _as_answer(ground_truth), last_boxed_strict(solution_str)
    if pred is None or pred == gold:
        return _math_verify_result(pred, gold, False)
    pool = get_isolated_pool(preload=("agentrl_recipe.rewards.equivalence", "math_verify"))
    try:
        equal = pool.call(_MATH_VERIFY_TARGET, pred, gold, timeout_s=timeout_s)
    except GraderCrashed:  # math-verify failed on this text: not shown equal (its own compute_score scores 0)
        equal = False
    return _math_verify_result(pred, gold, bool(equal))


async def ascore_math_verify(solution_str: str, ground_truth: Any, *, timeout_s: float = 10.0) -> dict[str, Any]:
    gold, pred = _as_answer(ground_truth), last_boxed_strict(solution_str)
    if pred is None or pred == gold:
        return _math_verify_result(pred, gold, False)
    pool = get_isolated_pool(preload=("agentrl_recipe.rewards.equivalence", "math_verify"))
    try:
        equal = await pool.acall(_MATH_VERIFY_TARGET, pred, gold, timeout_s=timeout_s)
    except GraderCrashed:
        equal = False
    return _math_verify_result(pred, gold, bool(equal))


# --- code ---


def extract_last_python_block(solution_str: str) -> str | None:
    """The last ```` ```python\\n...``` ```` block after the first ``</think>`` (None when there is none).

    Same blocks as the original's ``re.findall(r"```python\\n(.*?)```", s, re.DOTALL)[-1]`` (non-overlapping,
    left to right, each closed by the next fence), found with ``str.find`` in linear time on any input.
    """
    _, sep, after = solution_str.partition("</think>")
    text = after if sep else solution_str
    last = None
    pos = 0
    while True:
        start = text.find(CODE_FENCE, pos)
        if start < 0:
            break
        body = start + len(CODE_FENCE)
        end = text.find("```", body)
        if end < 0:
            break
        last = text[body:end]
        pos = end + 3
    return last


def parseable_python(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError):  # deep nesting raises the last two
        return False
    return True


def _no_code_result(pred: str | None, n_tests: int) -> dict[str, Any]:
    return {
        "score": -1.0,
        "acc": False,
        "pred": pred,
        "tests_passed": 0,
        "tests_total": n_tests,
        "infra_failure": False,
    }


async def ascore_code(
    solution_str: str,
    ground_truth: Any,
    *,
    sandbox: Any = None,
    timeout_s_per_test: float = LCB_TIMEOUT_S,
    total_timeout_s: float | None = None,
    memory_mb: int | None = None,
) -> dict[str, Any]:
    """Fraction of tests passed in [0, 1]; −1 without a parseable last python block; infra failures flagged."""
    try:  # LCB-style I/O tests or a LeetCode assert harness (rewards/assert_tests.py)
        tests = parse_code_tests(ground_truth)
    except ValueError as exc:  # unknown/broken form: a data bug, flagged (validation rejects it at data prep)
        return invalid_ground_truth(exc, ground_truth)
    program = extract_last_python_block(solution_str)
    if program is None or not parseable_python(program):
        return _no_code_result(None, len(tests))
    grade = await (agrade_asserts if isinstance(tests, AssertTests) else agrade_program)(
        program,
        tests,
        sandbox=_resolve_sandbox(sandbox),
        timeout_s_per_test=timeout_s_per_test,
        total_timeout_s=total_timeout_s,
        memory_mb=memory_mb,
    )
    return {
        "score": 0.0 if grade.infra_failure else grade.fraction,
        "acc": None if grade.infra_failure else grade.all_passed,
        "pred": None,  # no majority vote over programs
        "tests_passed": grade.passed,
        "tests_total": grade.total,
        "infra_failure": grade.infra_failure,
    }


def _resolve_sandbox(sandbox: Any) -> Any:
    """None → the process default; a SandboxConfig → its shared instance; a Sandbox → itself."""
    if sandbox is None or isinstance(sandbox, SandboxConfig):
        return get_sandbox(sandbox)
    return sandbox


# --- entry points ---


async def acompute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    *,
    math_verifier: str = "strict",
    math_verify_timeout_s: float = 10.0,
    sandbox: Any = None,
    code_rules: str = "lcb",
    code_timeout_s_per_test: float = LCB_TIMEOUT_S,
    code_total_timeout_s: float | None = None,
    code_memory_mb: int | None = None,
    **_: Any,
) -> dict[str, Any]:
    """Score one response (coroutine). Extra keyword arguments verl passes (reward_router_address, ...) are ignored.

    ``code_rules``: "lcb" (LiveCodeBench's rules, :mod:`code_grading`) or "open_agentrl" (the released code's,
    :mod:`code_released`; its own 30 s per test, ``code_memory_mb`` default 1024)."""
    if code_rules not in ("lcb", "open_agentrl"):
        raise ValueError(f"code_rules must be 'lcb' or 'open_agentrl', got {code_rules!r}")
    if math_verifier not in MATH_VERIFIERS:
        raise ValueError(f"math_verifier must be one of {MATH_VERIFIERS}, got {math_verifier!r}")
    if not isinstance(solution_str, str):
        raise TypeError(f"solution_str must be a string, got {type(solution_str).__name__}")
    kind = task_kind(data_source)
    if kind == "code" and code_rules == "open_agentrl":
        memory_mb = code_released.MEMORY_MB if code_memory_mb is None else code_memory_mb
        sandbox = _resolve_sandbox(sandbox)
        result = await code_released.ascore_code_released(
            solution_str, ground_truth, sandbox=sandbox, memory_mb=memory_mb
        )
    elif kind == "code":
        result = await ascore_code(
            solution_str,
            ground_truth,
            sandbox=sandbox,
            timeout_s_per_test=code_timeout_s_per_test,
            total_timeout_s=code_total_timeout_s,
            memory_mb=code_memory_mb,
        )
    elif kind == "gpqa":
        result = score_gpqa(solution_str, ground_truth)
    elif math_verifier == "math_verify":
        result = await ascore_math_verify(solution_str, ground_truth, timeout_s=math_verify_timeout_s)
    else:
        result = score_math_strict(solution_str, ground_truth)
    result["task_kind"] = kind
    return result


def compute_score(
    data_source: str,
    solution_str: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None = None,
    **kwargs: Any,
) -> dict[str, Any]:
    """verl custom-score signature (sync). Same keyword options as :func:`acompute_score`."""
    kind = task_kind(data_source)
    math_verifier = kwargs.get("math_verifier", "strict")
    if kind == "math" and math_verifier == "strict":  # the hot path: no event loop needed
        if not isinstance(solution_str, str):
            raise TypeError(f"solution_str must be a string, got {type(solution_str).__name__}")
        return {**score_math_strict(solution_str, ground_truth), "task_kind": kind}
    if kind == "gpqa":
        return {**score_gpqa(solution_str, ground_truth), "task_kind": kind}
    return run_coroutine_sync(acompute_score(data_source, solution_str, ground_truth, extra_info, **kwargs))
