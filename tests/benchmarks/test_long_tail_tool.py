"""benchmarks/long_tail_tool.py: which calls run the flood program in place of the model's code, and how long a tail
call waits for the next weights (on a fake clock: each poll advances it, nothing sleeps)."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from types import SimpleNamespace
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


def _logged(path: Path, *steps: int) -> None:
    """Steps as verl's file logger writes them (orjson: no spaces), appended."""
    with path.open("a") as records:
        for step in steps:
            records.write(f'{{"step":{step},"data":{{"timing_s/step":{step}.5,"training/global_step":{step}}}}}\n')


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake monotonic clock that each of the tool's polls advances by its sleep; returns the sleeps taken."""
    now = [0.0]
    sleeps: list[float] = []

    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    monkeypatch.setattr(long_tail_tool.asyncio, "sleep", sleep)
    monkeypatch.setattr(long_tail_tool.time, "monotonic", lambda: now[0])
    return sleeps


def test_last_logged_step_reads_verls_file_logger(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    assert long_tail_tool.last_logged_step(str(path)) == 0  # not written yet
    _logged(path, 1, 2, 3)
    assert long_tail_tool.last_logged_step(str(path)) == 3  # not the step-like values inside "data"


def test_a_call_on_the_initial_weights_does_not_wait(clock: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VERL_FILE_LOGGER_PATH", raising=False)  # not even read
    for extra in ({}, {"max_global_steps": 0}, {"max_global_steps": None}):
        version = long_tail_tool.weights_version(SimpleNamespace(extra_fields=extra))
        asyncio.run(long_tail_tool.wait_for_next_weights(version, 20.0))
    assert clock == []


def test_a_call_waits_until_the_next_step_is_logged(
    clock: list[float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    _logged(path, 1)

    async def sleep(seconds: float) -> None:  # step 2 is logged during the third poll
        clock.append(seconds)
        if len(clock) == 3:
            _logged(path, 2)

    monkeypatch.setattr(long_tail_tool.asyncio, "sleep", sleep)
    version = long_tail_tool.weights_version(SimpleNamespace(extra_fields={"max_global_steps": 1}))
    asyncio.run(long_tail_tool.wait_for_next_weights(version, 20.0))
    assert clock == [long_tail_tool.POLL_S] * 3


def test_a_call_whose_next_step_never_comes_waits_at_most_the_tail_time(
    clock: list[float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    _logged(path, 1, 2)
    asyncio.run(long_tail_tool.wait_for_next_weights(2, 1.0))  # step 3 needs this very trajectory
    assert sum(clock) == pytest.approx(1.0) and len(clock) == round(1.0 / long_tail_tool.POLL_S)


def test_the_tool_waits_for_the_next_weights_only_when_asked(
    executed: list[Any], clock: list[float], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS=1: the trajectory's version decides; without it: a fixed sleep."""
    path = tmp_path / "metrics.jsonl"
    _logged(path, 1)
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(path))
    monkeypatch.setenv("AGENTRL_BENCH_TAIL_EVERY", "1")
    monkeypatch.setenv("AGENTRL_BENCH_TAIL_S", "2")
    tool = LongTailCodeInterpreter({})

    def call(version: int) -> float:
        clock.clear()
        asyncio.run(tool.execute("call", {"code": "1"}, agent_data=SimpleNamespace(request_id="r", extra_fields={
            "max_global_steps": version})))  # fmt: skip
        return sum(clock)

    assert call(0) == 2.0 and call(1) == 2.0  # the fixed sleep, whatever the version
    monkeypatch.setenv("AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS", "1")
    assert call(0) == 0.0  # the initial weights: at once
    assert call(1) == pytest.approx(2.0)  # step 2 never logged here: the whole tail time
    _logged(path, 2)
    assert call(1) == 0.0  # step 2 logged: its weights are synced
