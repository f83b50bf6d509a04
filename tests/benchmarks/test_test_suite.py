"""benchmarks/test_suite.py's records (``--fast --record`` adds the tests slow only in `make test-fast`) and its
``--timeline`` idle attribution, with tests/suite_timeline.py's records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from suite_timeline import TIMELINE_ENV, SuiteTimeline

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


def test_idle_is_shared_by_the_tests_running_then() -> None:
    timeline = [
        {"test": "a.py::test_1", "worker": "gw0", "start": 100.0, "end": 104.0},
        {"test": "b.py::test_1", "worker": "gw1", "start": 100.0, "end": 102.0},
        {"test": "b.py::test_2", "worker": "gw1", "start": 103.0, "end": 106.0},
    ]
    samples = [(100.0, 9.0), (101.0, 0.5), (102.0, 1.0), (103.0, 0.8), (105.0, 1.2), (106.0, 0.4), (107.0, 7.0)]
    idle = test_suite.idle_by_file(timeline, samples, interval_s=1.0)
    # (99, 100] and (106, 107] are outside the tests; (102, 103] has a.py alone; (104, 106] b.py alone
    assert idle == pytest.approx({"a.py": 0.25 + 0.5 + 0.8, "b.py": 0.25 + 0.5 + 1.2 + 0.4})
    assert test_suite.idle_by_file([], samples, 1.0) == {}


def test_idle_between_tests_is_named() -> None:
    timeline = [
        {"test": "a.py::test_1", "worker": "gw0", "start": 10.0, "end": 11.0},
        {"test": "a.py::test_2", "worker": "gw0", "start": 13.0, "end": 14.0},
    ]
    assert test_suite.idle_by_file(timeline, [(12.0, 1.5), (13.0, 0.5)], 1.0) == {"(between tests)": 2.0}


def test_the_timeline_report_gives_the_work_its_wall_floor_and_the_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [
        {"test": "a.py::test_1", "worker": "gw0", "start": 100.0, "end": 110.0},
        {"test": "b.py::test_1", "worker": "gw1", "start": 100.0, "end": 108.0},
    ]
    timeline = tmp_path / "timeline.jsonl"
    timeline.write_text("".join(json.dumps(r) + "\n" for r in records))
    sampler = test_suite.CpuSampler()
    sampler.samples = [(102.0, 1.0), (109.0, 1.5), (110.0, 0.5)]
    monkeypatch.setattr(test_suite.os, "cpu_count", lambda: 2)
    test_suite.print_idle(timeline, sampler)
    lines = capsys.readouterr().out.splitlines()
    # 10 s × 2 CPUs, 3 core-s idle: 17 core-s of work, 8.5 s on 2 CPUs at best (printed rounded)
    assert lines[:4] == [
        "CPU work while tests ran: 17 core-s, 8 s of wall on 2 CPUs with none idle",
        "idle CPU while tests ran: 3 core-s of 20 (15.0 %); the files it fell in:",
        "       2.5 core-s  a.py",
        "       0.5 core-s  b.py",
    ]


def test_the_timeline_records_each_test_with_its_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    timeline = SuiteTimeline(tmp_path / "timeline.jsonl")
    for nodeid in ("a.py::test_1", "b.py::test_2"):
        run = timeline.pytest_runtest_protocol(type("Item", (), {"nodeid": nodeid})())
        next(run)
        with pytest.raises(StopIteration):
            next(run)
    records = [json.loads(line) for line in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert test_suite.TIMELINE_ENV == TIMELINE_ENV  # the variable the benchmark sets is the one the plugin reads
    assert [(r["test"], r["worker"]) for r in records] == [("a.py::test_1", "gw1"), ("b.py::test_2", "gw1")]
    assert all(r["start"] <= r["end"] for r in records) and records[0]["end"] <= records[1]["start"]
