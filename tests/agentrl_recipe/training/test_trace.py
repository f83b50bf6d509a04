"""trace.mark: one marker per (component, process) when AGENTRL_TRACE_DIR is set, nothing otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentrl_recipe import names
from agentrl_recipe.training import trace


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(trace, "_marked", set())


def test_marks_once_per_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(names.ENV_TRACE_DIR, str(tmp_path))
    trace.mark(names.POLICY_LOSS, note="first")
    trace.mark(names.POLICY_LOSS, note="second")
    trace.mark(names.REWARD_MANAGER)
    seen = trace.read(tmp_path)
    assert sorted(m["component"] for m in seen) == sorted([names.POLICY_LOSS, names.REWARD_MANAGER])
    loss = next(m for m in seen if m["component"] == names.POLICY_LOSS)
    assert loss["pid"] == os.getpid() and loss["note"] == "first"


def test_unset_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.ENV_TRACE_DIR, raising=False)
    monkeypatch.chdir(tmp_path)
    trace.mark(names.POLICY_LOSS)
    assert list(tmp_path.iterdir()) == []
