"""benchmarks/long_tail_tool.py's flood: which calls run the flood program in place of the model's code."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool
from benchmarks import long_tail_tool
from benchmarks.long_tail_tool import FLOOD_CODE, LongTailCodeInterpreter


@pytest.fixture
def executed(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The parameters each call hands the real tool (its sandbox is not reached)."""
    seen: list[Any] = []

    async def execute(self, instance_id: str, parameters: Any, **kwargs: Any):
        seen.append(parameters)
        return None, 0.0, {}

    monkeypatch.setattr(CodeInterpreterTool, "execute", execute)
    monkeypatch.setattr(long_tail_tool, "_CALLS", itertools.count())
    monkeypatch.delenv("AGENTRL_BENCH_EXEC_DIR", raising=False)
    return seen


def _call(tool: LongTailCodeInterpreter, parameters: Any) -> None:
    asyncio.run(tool.execute("call", parameters))


def test_every_nth_call_from_the_first_runs_the_flood(executed: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTRL_BENCH_FLOOD_EVERY", "3")
    tool = LongTailCodeInterpreter({})
    for i in range(7):
        _call(tool, {"code": f"print({i})"})
    flooded = [i for i, parameters in enumerate(executed) if parameters["code"] == FLOOD_CODE]
    assert flooded == [0, 3, 6]
    assert [p["code"] for i, p in enumerate(executed) if i not in flooded] == [f"print({i})" for i in (1, 2, 4, 5)]


def test_no_flood_by_default_and_a_malformed_call_passes(executed: list[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTRL_BENCH_FLOOD_EVERY", raising=False)
    tool = LongTailCodeInterpreter({})
    _call(tool, {"code": "print(1)"})
    monkeypatch.setenv("AGENTRL_BENCH_FLOOD_EVERY", "1")
    _call(tool, "not a dict")  # the real tool answers it with its argument error
    assert executed == [{"code": "print(1)"}, "not a dict"]


def test_the_flood_overflows_the_cpu_configs_response_budget(capsys: pytest.CaptureFixture[str]) -> None:
    """verl cuts a tool response to max_tool_response_length characters; cut there, the flood alone (one token per
    digit for the tiny model) is over the whole response budget, so its trajectory is truncated."""
    exec(FLOOD_CODE)
    printed = capsys.readouterr().out
    cfg, _ = compose("agentrl_rl_cpu")
    kept = printed[: cfg.actor_rollout_ref.rollout.multi_turn.max_tool_response_length]
    assert len(kept) == 256 and cfg.data.max_response_length == 160
    assert len(kept) > cfg.data.max_response_length  # the claim itself, should either value change
