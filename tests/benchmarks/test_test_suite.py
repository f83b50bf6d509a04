"""benchmarks/test_suite.py's records: ``--fast --record`` adds the tests slow only in `make test-fast`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import test_suite


def test_a_fast_record_adds_its_slow_tests_and_keeps_what_it_left_out(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    durations = tmp_path / "durations.json"
    before = {"files": {"a.py": 40.0}, "slow_tests": {"a.py::test_warm": 9.0}, "slow_in_fast": {"b.py::test_x": 5.0}}
    durations.write_text(json.dumps(before))
    monkeypatch.setattr(test_suite, "DURATIONS", durations)
    # a.py::test_warm was left out; a.py::test_next paid its warm-up; b.py::test_x ran and is fast now
    ran = {"a.py::test_next": 11.24, "a.py::test_quick": 0.2, "b.py::test_x": 0.4}
    test_suite.record_fast(ran)
    after = json.loads(durations.read_text())
    assert after["slow_in_fast"] == {"a.py::test_next": 11.2}
    assert (after["files"], after["slow_tests"]) == (before["files"], before["slow_tests"])
    test_suite.record_fast({"a.py::test_quick": 0.2})  # test_next left out: kept
    assert json.loads(durations.read_text())["slow_in_fast"] == {"a.py::test_next": 11.2}
