"""The form a row's ground truth is graded in: as published, or with our fixes of its quirks.

Two keys of ``reward.reward_kwargs`` (null = what ``agentrl.compat`` says, :mod:`agentrl_recipe.training.compat`):

``ground_truth_form``
    ``published`` (compat ``open_agentrl``): graded exactly as stored, as the released code graded Open-AgentRL-30K.
    A code ground truth whose JSON has ``"fn_name": null`` scores −1 for every response there (``code_math.py``
    lines 281-284: ``"fn_name" in input_output`` holds, ``convert_function_to_class_method(solution, None)`` finds no
    function; with ``class Solution`` in the program, ``ast.literal_eval`` of the text rejects ``null``, lines
    313-315); a math answer stored as a one-element JSON list (``'["15625"]'``) is compared as that text
    (``math_dapo.py`` line 217), so only ``\\boxed{["15625"]}`` matches.
    ``normalized`` (compat ``agentrl``): the null-valued keys of a code ground truth are dropped (stdin tests, as
    Skywork-OR1's own loader reads them) and a one-element list answer is graded as its element.

``leetcode_tests``
    ``asserts`` (compat ``open_agentrl``): a LeetCode row is graded by its assert harness (the released grader runs
    each assert; our LCB rules judge each assert's value, :mod:`.code.assert_tests`).
    ``call`` (compat ``agentrl``): a row that carries a call-based conversion of its asserts
    (``extra_info.call_tests``, written by ``agentrl-recipe data rl-mix``) is graded by it, with the code rules in
    force; rows without one (the released 30K) run their asserts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from agentrl_recipe.training.rewards.code.assert_form import parse_code_tests

GROUND_TRUTH_FORMS = ("published", "normalized")
LEETCODE_TESTS = ("asserts", "call")
CALL_TESTS_KEY = "call_tests"  # extra_info key of a LeetCode row's call-based conversion (JSON text)
# extra_info key of a published row the released loader kept and our schema would not (why, as text): graded as the
# released code did; data.agentrl.keep_released_rows (compat) keeps or drops it at load (training/rl_dataset.py)
RELEASED_ONLY_KEY = "released_only"


def decoded_list_answer(answer: Any) -> str | None:
    """The element of a one-element JSON list of one string (``'["15625"]'`` → ``"15625"``), else None."""
    if not isinstance(answer, str) or not answer.startswith("["):
        return None
    try:
        decoded = json.loads(answer)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return None
    if isinstance(decoded, list) and len(decoded) == 1 and isinstance(decoded[0], str) and decoded[0].strip():
        return decoded[0].strip()
    return None


def without_null_keys(tests: Any) -> Any:
    """A code ground truth (JSON text or mapping) without its null-valued keys; anything else unchanged."""
    if isinstance(tests, Mapping):
        return {k: v for k, v in tests.items() if v is not None}
    if not isinstance(tests, str):
        return tests
    try:
        decoded = json.loads(tests)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply
        return tests
    if isinstance(decoded, dict) and any(v is None for v in decoded.values()):
        return json.dumps({k: v for k, v in decoded.items() if v is not None})
    return tests


def graded_ground_truth(
    kind: str,
    ground_truth: Any,
    extra_info: Mapping[str, Any] | None,
    *,
    form: str,
    leetcode_tests: str,
) -> Any:
    """The ground truth the scorer of task ``kind`` grades (see the module docstring)."""
    if form not in GROUND_TRUTH_FORMS:
        raise ValueError(f"ground_truth_form must be one of {GROUND_TRUTH_FORMS}, got {form!r}")
    if leetcode_tests not in LEETCODE_TESTS:
        raise ValueError(f"leetcode_tests must be one of {LEETCODE_TESTS}, got {leetcode_tests!r}")
    if kind == "code":
        call_tests = (extra_info or {}).get(CALL_TESTS_KEY)
        if leetcode_tests == "call" and isinstance(call_tests, str) and call_tests:
            ground_truth = call_tests
        return without_null_keys(ground_truth) if form == "normalized" else ground_truth
    if kind == "math" and form == "normalized":
        decoded = decoded_list_answer(ground_truth)
        return ground_truth if decoded is None else decoded
    return ground_truth


def ground_truth_error(kind: str, ground_truth: Any, extra_info: Mapping[str, Any] | None) -> str | None:
    """Why a row of task ``kind`` cannot be graded (its ground truth, or its call-based tests, do not parse), or None.

    The graders' own parsers decide (a code ground truth nested too deeply is a ValueError there too), so a row this
    accepts is one they grade; :class:`agentrl_recipe.training.rl_dataset.AgentRLDataset` refuses the others at load.
    """
    if kind == "code":
        call_tests = (extra_info or {}).get(CALL_TESTS_KEY)
        for name, tests in (("ground truth", ground_truth), (f"extra_info.{CALL_TESTS_KEY}", call_tests)):
            if tests is None and name != "ground truth":
                continue
            try:
                parse_code_tests(tests)
            except ValueError as exc:
                return f"code {name}: {exc}"
        return None
    if hasattr(ground_truth, "item"):  # a numpy scalar from a parquet column
        ground_truth = ground_truth.item()
    if isinstance(ground_truth, bool) or not isinstance(ground_truth, str | int | float):
        return f"{kind} ground truth must be a string, got {type(ground_truth).__name__}"
    if isinstance(ground_truth, float) and not math.isfinite(ground_truth):
        return f"{kind} ground truth must be a string, got {ground_truth!r}"
    if kind == "gpqa" and not (isinstance(ground_truth, str) and len(ground_truth) == 1 and "A" <= ground_truth <= "Z"):
        return f"GPQA ground truth must be one uppercase option letter, got {ground_truth!r:.40}"
    return None
