"""The one tool-use statistics function, as training (agentrl_tools/*) and eval (tool_stats) name it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agentrl_recipe import fields
from agentrl_recipe.eval.tool_stats import tool_stats
from agentrl_recipe.training.agent_loop.tool_use import distribution, int_histogram, tool_use_stats
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.metrics import batch_metrics

LEAF_IMPORTS = {
    "__future__",
    "dataclasses",
    "collections",
    "collections.abc",
    "agentrl_recipe.training.agent_loop.trajectory",
}
TRAJECTORIES = [
    Trajectory(num_turns=4, tool_calls=1, tool_statuses=["ok"], tool_latency_s=[0.1], response_tokens=10),
    Trajectory(
        num_turns=6,
        tool_calls=2,
        tool_failures=1,
        tool_statuses=["ok", "timeout"],
        tool_latency_s=[0.2, 30.0],
        malformed_tool_calls=1,
        malformed_kinds=["bad_json"],
        void_turn=True,
        termination="max_assistant_turns",
        response_tokens=30,
    ),
]


def test_the_statistics():
    stats = tool_use_stats(TRAJECTORIES)
    assert stats.calls == [1, 2] and stats.total_calls == 3 and stats.ok_calls == 2
    assert stats.with_calls_frac() == 1.0 and stats.frac(stats.void_turn) == 0.5
    assert stats.latency_percentile(50) == pytest.approx(0.2)
    assert stats.malformed_kinds == {"bad_json": 1} and stats.terminations == {"None": 1, "max_assistant_turns": 1}
    assert tool_use_stats([]).latency_percentile(50) is None and tool_use_stats([]).with_calls_frac() == 0.0
    assert distribution([]) == {"mean": 0.0, "p50": 0.0, "p90": 0.0, "max": 0.0}
    assert int_histogram([2, 0, 2]) == {"0": 1, "2": 2}


def test_training_and_eval_report_the_same_numbers():
    columns = {"__num_turns__": [t.num_turns for t in TRAJECTORIES]}
    for key in TRAJECTORIES[0].to_extra_fields():
        columns[key] = [t.to_extra_fields()[key] for t in TRAJECTORIES]
    train = batch_metrics(columns)
    evaluated = tool_stats([t.to_dict() for t in TRAJECTORIES])
    assert train["agentrl_tools/calls_per_traj/mean"] == evaluated["tool_calls_per_trajectory"]["mean"] == 1.5
    assert train["agentrl_tools/failure_rate"] == pytest.approx(1 - evaluated["tool_call_success_rate"])
    assert train["agentrl_tools/latency_s/p99"] == evaluated["tool_latency_s"]["p99"]
    assert train["agentrl_tools/void_turn_frac"] == evaluated["void_turn_rate"] == 0.5
    assert train["agentrl_tools/num_turns/mean"] == evaluated["turns_per_trajectory"]["mean"] == 5.0
    assert train["agentrl_tools/malformed_per_traj/mean"] * 2 == evaluated["malformed_tool_calls"] == 1
    assert columns[fields.TOOL_CALLS.column] == [1, 2]


def test_the_statistics_module_is_a_leaf():

    import agentrl_recipe.training.agent_loop.tool_use as module

    tree = ast.parse(Path(module.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {
        "__future__",
        "dataclasses",
        "collections",
        "collections.abc",
        "numpy",
        "agentrl_recipe.training.agent_loop.trajectory",
    }
