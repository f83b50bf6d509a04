"""The task-kind table: routing by data_source, and every function an entry names resolves with the signature its
callers use."""

from __future__ import annotations

import inspect

import pytest

from agentrl_recipe import names, tasks


@pytest.mark.parametrize(
    ("data_source", "kind"),
    [
        (names.DS_LCB_V6, "code"),
        (names.DS_SKYWORK_CODE, "code"),
        ("LiveCodeBench", "code"),
        (names.DS_GPQA, "gpqa"),
        ("GPQA-main", "gpqa"),
        (names.DS_AIME24, "math"),
        (names.DS_DAPO, "math"),
        (names.DS_MEGASCIENCE, "math"),
        ("", "math"),
        ("gpqa_code_mix", "code"),  # first entry that matches wins: the table's order is the routing order
    ],
)
def test_routing(data_source: str, kind: str) -> None:
    assert tasks.task_kind(data_source) == kind


def test_the_default_kind_is_last_and_the_only_one_without_markers() -> None:
    assert [t.name for t in tasks.TASKS if not t.markers] == [tasks.TASKS[-1].name] == ["math"]
    assert tasks.TASK_KINDS == ("code", "gpqa", "math")


def test_bad_input_names_itself() -> None:
    with pytest.raises(TypeError, match="data_source must be a string"):
        tasks.task_for(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown task kind 'chess'"):
        tasks.by_name("chess")


@pytest.mark.parametrize("task", tasks.TASKS, ids=lambda t: t.name)
def test_every_named_function_resolves_with_its_callers_signature(task: tasks.TaskKind) -> None:
    scorer, check, grader = (tasks.load(t) for t in (task.scorer, task.answer_check, task.eval_grader))
    assert list(inspect.signature(scorer).parameters)[:3] == ["solution_str", "ground_truth", "opts"]
    assert len(inspect.signature(check).parameters) == 1
    assert inspect.iscoroutinefunction(grader)
    assert {"sandbox", "lcb_timeout_s"} <= set(inspect.signature(grader).parameters)
    assert task.headline in ("pass@1", "avg@n")


def test_timeout_scores_are_each_kinds_wrong_answer() -> None:
    assert {t.name: t.timeout_score for t in tasks.TASKS} == {"code": 0.0, "gpqa": -1.0, "math": -1.0}
