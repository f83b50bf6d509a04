"""The code task's RL reward: the last python block of a response, graded against the row's tests in the sandbox.

After the first ``</think>``, the last `````python\\n...````` block (the original's non-greedy regex semantics, in
linear time); none, or one that ``ast.parse`` rejects → −1. Otherwise the score is the fraction of tests passed in
[0, 1] (LiveCodeBench's rules, :mod:`.io_tests`, or a LeetCode assert harness, :mod:`.assert_tests`) and ``acc`` = all
passed; under ``code_rules="open_agentrl"`` the released grader scores it (:mod:`.released`). A sandbox
``infra_error`` gives ``infra_failure=True``, ``score=0`` and ``acc=None``: not a wrong answer.

:data:`agentrl_recipe.tasks.TASKS` names :func:`score_code_row`; this module loads on the first code row.
"""

from __future__ import annotations

import ast
from typing import Any

from agentrl_recipe.training.rewards.code import released as code_released
from agentrl_recipe.training.rewards.code.assert_form import AssertTests, parse_code_tests
from agentrl_recipe.training.rewards.code.assert_tests import agrade_asserts, invalid_ground_truth
from agentrl_recipe.training.rewards.code.io_tests import LCB_TIMEOUT_S, agrade_program
from agentrl_recipe.training.rewards.scoring import ScoreOptions
from agentrl_sandbox import get_sandbox
from agentrl_sandbox.config import SandboxConfig

CODE_FENCE = "```python\n"


async def score_code_row(solution_str: str, ground_truth: Any, opts: ScoreOptions) -> dict[str, Any]:
    """LiveCodeBench's rules (``code_rules="lcb"``) or the released code's (``"open_agentrl"``: its own 30 s per test,
    ``code_memory_mb`` default 1024)."""
    if opts.code_rules == "open_agentrl":
        memory_mb = code_released.MEMORY_MB if opts.code_memory_mb is None else opts.code_memory_mb
        sandbox = _resolve_sandbox(opts.sandbox)
        return await code_released.ascore_code_released(
            solution_str, ground_truth, sandbox=sandbox, memory_mb=memory_mb
        )
    return await ascore_code(
        solution_str,
        ground_truth,
        sandbox=opts.sandbox,
        timeout_s_per_test=LCB_TIMEOUT_S if opts.code_timeout_s_per_test is None else opts.code_timeout_s_per_test,
        total_timeout_s=opts.code_total_timeout_s,
        memory_mb=opts.code_memory_mb,
    )


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
    grader = agrade_asserts if isinstance(tests, AssertTests) else agrade_program
    grade = await grader(
        program,
        tests,  # type: ignore[arg-type]  # each grader gets its own form (the isinstance above)
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
