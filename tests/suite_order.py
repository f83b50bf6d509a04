"""The order in which ``make test``'s xdist workers take the test files (tests/conftest.py applies it).

``--dist loadfile --no-loadscope-reorder``: each worker takes the next whole file in collection order when it is almost
done with its own. The order comes from the durations recorded in tests/durations.json (`python
benchmarks/test_suite.py --record` rewrites it): longest first, except that a worker which would only wait for the
session's SFT run (another worker is building it) takes the longest file that does not need it. So no long file is
left to run alone at the end, and the suite's wall time approaches its longest chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
SFT_FIXTURES = frozenset({"cpu_sft_run", "cpu_sft_model"})  # tests/integration/conftest.py
# Tests with these fixtures start a trainer, a Ray cluster or a vLLM engine: marked slow (not in `make test-fast`).
ENGINE_FIXTURES = SFT_FIXTURES | {"cpu_inputs_dir", "two_node_cluster", "transfer_queue"}
UNRECORDED_S = (0.5, 60.0)  # a file with no record: per test, without and with an engine fixture


def _by_file(items: list[Any]) -> dict[str, list[Any]]:
    files: dict[str, list[Any]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    return files


def _estimates(files: dict[str, list[Any]], recorded: dict) -> tuple[dict[str, float], float]:
    """Seconds per file (recorded, or guessed from its tests' fixtures) and the shared SFT run's build."""
    seconds = recorded.get("files", {})
    guess = {
        path: sum(UNRECORDED_S[bool(ENGINE_FIXTURES & set(item.fixturenames))] for item in tests)
        for path, tests in files.items()
    }
    return {path: float(seconds.get(path, guess[path])) for path in files}, float(recorded.get("sft_build_s", 0.0))


def file_order(items: list[Any], workers: int, recorded: dict | None = None) -> list[str]:
    """The files of ``items`` (pytest items) in the order ``workers`` workers should take them: a simulation of the
    workers, each taking the longest file that can start now (list scheduling); the first file that needs the SFT run
    builds it."""
    if recorded is None:
        recorded = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    files = _by_file(items)
    estimate, sft_s = _estimates(files, recorded)
    needs_sft = {path: any(SFT_FIXTURES & set(item.fixturenames) for item in tests) for path, tests in files.items()}
    left = sorted(files, key=lambda path: -estimate[path])  # stable: equal estimates keep collection order
    free, sft_ready, order = [0.0] * max(1, workers), None, []
    while left:
        worker = free.index(min(free))
        now = free[worker]
        waits = [needs_sft[path] and sft_ready is not None and sft_ready > now for path in left]
        path = left[waits.index(False)] if False in waits else left[0]
        left.remove(path)
        start = now
        if needs_sft[path]:
            if sft_ready is None:
                sft_ready = now + sft_s  # this worker builds it
            start = max(now, sft_ready)
        free[worker] = start + estimate[path]
        order.append(path)
    return order


def mark_engine_tests(items: list[Any]) -> None:
    """Mark slow every test whose fixtures start a trainer, a Ray cluster or a vLLM engine."""
    for item in items:
        if ENGINE_FIXTURES & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
