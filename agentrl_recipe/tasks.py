"""Task kinds: one table from a row's ``data_source`` to everything that depends on what the row asks for.

A row is routed by its ``data_source`` (the original dispatched on the batch's first row — a bug): the first kind of
:data:`TASKS` whose marker occurs in ``data_source.lower()`` wins, and the last kind (no markers) takes the rest. So
``"code"`` / ``"livecodebench"`` → code, ``"gpqa"`` → gpqa, anything else → math.

Each kind names its functions by ``"module:function"`` and they are imported on first use, so the table costs nothing
in the processes that only import verl (as verl stores its agent loops by class path). A new task kind is one
:class:`TaskKind` entry here plus the functions it names (README, "Extending").
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TaskKind:
    name: str
    markers: tuple[str, ...]  # lower-case substrings of data_source that select this kind (none: the default kind)
    # (solution_str, ground_truth, ScoreOptions) -> result dict with score, acc, pred (or an awaitable of one):
    # the RL reward's outcome score (rewards.scoring.acompute_score runs it)
    scorer: str
    # (assistant turn text) -> bool: whether the turn holds a final answer (the agent loop's void-turn check)
    answer_check: str
    # async (data_source, ground_truth, response_text, messages, *, sandbox, lcb_timeout_s) -> SampleGrade: the
    # benchmark's own rule in the eval harness
    eval_grader: str
    timeout_score: float  # the reward of a row whose grading timed out: this kind's "wrong answer"
    headline: str  # the eval report's headline metric: "pass@1" or "avg@n"


TASKS: tuple[TaskKind, ...] = (
    TaskKind(
        name="code",
        markers=("code", "livecodebench"),
        scorer="agentrl_recipe.training.rewards.code.scorer:score_code_row",
        answer_check="agentrl_recipe.training.agent_loop.turn_checks:has_code_block",
        eval_grader="agentrl_recipe.eval.grading:agrade_code_sample",
        timeout_score=0.0,  # "all tests failed" on the code reward's [0, 1] scale (−1 is "no code")
        headline="pass@1",
    ),
    TaskKind(
        name="gpqa",
        markers=("gpqa",),
        scorer="agentrl_recipe.training.rewards.scoring:score_gpqa_row",
        answer_check="agentrl_recipe.training.agent_loop.turn_checks:has_boxed_answer",
        eval_grader="agentrl_recipe.eval.grading:agrade_answer_sample",
        timeout_score=-1.0,
        headline="avg@n",
    ),
    TaskKind(
        name="math",
        markers=(),
        scorer="agentrl_recipe.training.rewards.scoring:score_math_row",
        answer_check="agentrl_recipe.training.agent_loop.turn_checks:has_boxed_answer",
        eval_grader="agentrl_recipe.eval.grading:agrade_answer_sample",
        timeout_score=-1.0,
        headline="avg@n",
    ),
)
TASK_KINDS: tuple[str, ...] = tuple(t.name for t in TASKS)
_BY_NAME = {t.name: t for t in TASKS}


def task_for(data_source: str) -> TaskKind:
    """The kind of a row, from its ``data_source`` (case-insensitive)."""
    if not isinstance(data_source, str):
        raise TypeError(f"data_source must be a string, got {type(data_source).__name__}: {data_source!r:.80}")
    ds = data_source.lower()
    return next(t for t in TASKS if not t.markers or any(m in ds for m in t.markers))


def task_kind(data_source: str) -> str:
    """The name of a row's kind (``"math"``, ``"gpqa"`` or ``"code"``)."""
    return task_for(data_source).name


def by_name(name: str) -> TaskKind:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown task kind {name!r}; known: {TASK_KINDS}") from None


@functools.cache
def load(target: str) -> Callable[..., Any]:
    """The function a ``"module:function"`` entry names (imported once per process)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
