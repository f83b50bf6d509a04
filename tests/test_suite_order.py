"""How `make test` is scheduled and what it shares: the file order for the xdist workers (suite_order.py) and the
builds cached under a content key (shared_session.py: the SFT model the trainer tests start from)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from shared_session import CACHE_ENV, built_once, content_key
from suite_order import SHORT_S, SLOW_TEST_S, UNRECORDED_S, file_order, mark_slow_tests


def _items(*specs: tuple[str, int, tuple[str, ...]]) -> list[SimpleNamespace]:
    """(file, number of tests, fixtures of each) -> pytest-like items."""
    return [
        SimpleNamespace(nodeid=f"{path}::test_{i}", fixturenames=["request", *fixtures])
        for path, n, fixtures in specs
        for i in range(n)
    ]


def test_the_longest_files_go_first_and_short_ones_keep_their_order() -> None:
    items = _items(("c.py", 3, ()), ("a.py", 1, ()), ("d.py", 1, ()), ("b.py", 2, ()), ("e.py", 1, ()))
    recorded = {"files": {"a.py": 100.0, "b.py": 80.0, "c.py": 2.0, "d.py": 5.0, "e.py": SHORT_S}}
    assert file_order(items, 2, recorded) == ["a.py", "b.py", "e.py", "c.py", "d.py"]


def test_a_worker_does_not_wait_for_a_build_another_is_making() -> None:
    sft, inputs = ("cpu_inputs_dir", "cpu_sft_run", "cpu_sft_model"), ("cpu_inputs_dir",)
    items = _items(("rl.py", 1, sft), ("async.py", 1, sft), ("fault.py", 1, inputs), ("demo.py", 1, ()))
    seconds = {"rl.py": 300.0, "async.py": 250.0, "fault.py": 170.0, "demo.py": 120.0}
    recorded = {"builds_s": {"cpu_inputs": 60.0, "sft_run": 150.0}, "files": seconds}
    # worker 1 makes the inputs (0-60 s) and the SFT run (60-210 s), then trains rl.py; worker 2 runs demo.py
    # (0-120 s), then fault.py (the inputs are ready), then async.py (the SFT run is ready at 210 s)
    assert file_order(items, 2, recorded) == ["rl.py", "demo.py", "fault.py", "async.py"]
    # one worker: nothing to overlap with, longest first
    assert file_order(items, 1, recorded) == ["rl.py", "async.py", "fault.py", "demo.py"]
    # nothing recorded for the builds: no file waits, longest first
    assert file_order(items, 2, {"files": seconds}) == ["rl.py", "async.py", "fault.py", "demo.py"]


def test_a_new_file_is_guessed_from_its_fixtures() -> None:
    items = _items(("old.py", 1, ()), ("new_trainer.py", 2, ("cpu_sft_run",)), ("new_unit.py", 4, ()))
    recorded = {"files": {"old.py": 50.0}}
    assert file_order(items, 2, recorded) == ["new_trainer.py", "old.py", "new_unit.py"]
    assert 2 * UNRECORDED_S[0] + UNRECORDED_S[1] > 50.0 > 4 * UNRECORDED_S[0]


def test_engine_fixtures_and_measured_seconds_mark_a_test_slow() -> None:
    """tests/conftest.py marks them, so `make test-fast` (-m "not slow") leaves them out."""
    items = _items(("a.py", 1, ("cpu_sft_model",)), ("b.py", 1, ("transfer_queue",)), ("c.py", 3, ("tmp_path",)))
    for item in items:
        item.marks = []
        item.add_marker = item.marks.append
    recorded = {"slow_tests": {"c.py::test_1": SLOW_TEST_S + 5, "c.py::test_2": SLOW_TEST_S - 5}}
    mark_slow_tests(items, recorded)
    assert [[m.name for m in item.marks] for item in items] == [["slow"], ["slow"], [], ["slow"], []]
    for item in items:
        item.marks.clear()
    mark_slow_tests(items, {**recorded, "slow_in_fast": {"c.py::test_2": SLOW_TEST_S + 1}})  # slow in test-fast only
    assert [[m.name for m in item.marks] for item in items] == [["slow"], ["slow"], [], ["slow"], ["slow"]]


def test_a_build_is_reused_while_its_key_holds(tmp_path: Path, monkeypatch, tmp_path_factory) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    calls: list[Path] = []

    def build(where: Path) -> None:
        calls.append(where)
        (where / "model.txt").write_text(f"build {len(calls)}")

    first = built_once(tmp_path_factory, "thing", "key1", build)
    again = built_once(tmp_path_factory, "thing", "key1", build)
    other = built_once(tmp_path_factory, "thing", "key2", build)
    assert (first, again, other) == (tmp_path / "cache/thing/key1", first, tmp_path / "cache/thing/key2")
    assert calls == [first, other] and (first / "model.txt").read_text() == "build 1"


def test_a_failed_build_is_started_over(tmp_path: Path, monkeypatch, tmp_path_factory) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))

    def broken(where: Path) -> None:
        (where / "half.txt").write_text("half")
        raise RuntimeError("the trainer died")

    with pytest.raises(RuntimeError, match="the trainer died"):
        built_once(tmp_path_factory, "thing", "key", broken)
    where = built_once(tmp_path_factory, "thing", "key", lambda w: (w / "whole.txt").write_text("whole"))
    assert sorted(p.name for p in where.iterdir()) == [".done", "whole.txt"]


def test_with_the_cache_off_the_build_is_the_sessions(tmp_path_factory, monkeypatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    where = built_once(tmp_path_factory, "suite_order_test_build", "ignored", lambda w: (w / "x").write_text("x"))
    assert where.parent in (tmp_path_factory.getbasetemp(), tmp_path_factory.getbasetemp().parent)


def test_the_content_key_follows_the_bytes(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    key = content_key([tmp_path / "src"], ["pytest"], ["--steps=60"])
    assert content_key([tmp_path / "src"], ["pytest"], ["--steps=60"]) == key
    assert content_key([tmp_path / "src"], ["pytest"], ["--steps=61"]) != key
    (tmp_path / "src" / "a.py").write_text("x = 2\n")
    assert content_key([tmp_path / "src"], ["pytest"], ["--steps=60"]) != key


def test_the_content_key_ignores_build_outputs(tmp_path: Path) -> None:
    """A pip build of the folder rewrites its ``*.egg-info`` (the GPU-variant resolve test does, mid-session)."""
    (tmp_path / "src" / "pkg.egg-info").mkdir(parents=True)
    (tmp_path / "src" / "a.py").write_text("x = 1\n")
    key = content_key([tmp_path / "src"])
    (tmp_path / "src" / "pkg.egg-info" / "SOURCES.txt").write_text("a.py\n")
    (tmp_path / "src" / "__pycache__").mkdir()
    (tmp_path / "src" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    assert content_key([tmp_path / "src"]) == key
    (tmp_path / "src" / "b.py").write_text("")
    assert content_key([tmp_path / "src"]) != key
    inside = tmp_path / "checkout.egg-info" / "src"  # only what is below the hashed folder is judged
    inside.mkdir(parents=True)
    (inside / "a.py").write_text("x = 1\n")
    key = content_key([inside])
    (inside / "a.py").write_text("x = 2\n")
    assert content_key([inside]) != key
