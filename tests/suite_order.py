"""The order in which ``make test``'s xdist workers take the test files (tests/conftest.py applies it).

``--dist loadfile --no-loadscope-reorder``: each worker takes the next whole file in collection order when it is almost
done with its own. The order comes from the durations recorded in tests/durations.json (`python
benchmarks/test_suite.py --record` rewrites it): longest first, the files under ``SHORT_S`` after them in collection
order; a worker whose file would only wait for a shared build another worker is making (the CPU inputs, the SFT run)
takes the longest file that does not need it instead. So no long file is left to run alone at the end, and the
suite's wall time approaches its longest chain.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

DURATIONS = Path(__file__).with_name("durations.json")
# The session's shared builds (tests/integration/conftest.py), in the order they depend on each other: the fixture that
# needs each (a test's fixture closure names it) and the build's name in durations.json.
BUILDS = (("cpu_inputs_dir", "cpu_inputs"), ("cpu_sft_run", "sft_run"))
SFT_FIXTURES = frozenset({"cpu_sft_run", "cpu_sft_model"})
# Tests with these fixtures start a trainer, a Ray cluster or a vLLM engine: marked slow (not in `make test-fast`).
ENGINE_FIXTURES = SFT_FIXTURES | {"cpu_inputs_dir", "qwen25_inputs_and_sft_model", "two_node_cluster", "transfer_queue"}
UNRECORDED_S = (0.5, 60.0)  # a file with no record: per test, and once if a test starts an engine
# Files shorter than this keep their collection order (after the long ones): the tail balances itself, and the suite's
# many small files run in the order they always have.
SHORT_S = 10.0
SLOW_TEST_S = 3.0  # a test measured longer is slow (pyproject's marker): `make test-fast` stays under 3 minutes


def _by_file(items: list[Any]) -> dict[str, list[Any]]:
    files: dict[str, list[Any]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    return files


def _estimates(files: dict[str, list[Any]], recorded: dict) -> dict[str, float]:
    """Seconds per file: recorded, or guessed from its tests' fixtures."""
    seconds = recorded.get("files", {})
    guess = {
        path: UNRECORDED_S[0] * len(tests) + UNRECORDED_S[1] * any(ENGINE_FIXTURES & set(t.fixturenames) for t in tests)
        for path, tests in files.items()
    }
    return {path: float(seconds.get(path, guess[path])) for path in files}


def _needs(tests: list[Any]) -> int:
    """How many of BUILDS (a prefix: each needs the ones before it) the file's tests need."""
    return max(
        (i + 1 for item in tests for i, (fixture, _) in enumerate(BUILDS) if fixture in item.fixturenames), default=0
    )


def file_order(items: list[Any], workers: int, recorded: dict | None = None) -> list[str]:
    """The files of ``items`` (pytest items) in the order ``workers`` workers should take them: a simulation of the
    workers, each taking the longest file that can start at once (list scheduling). A shared build is made by the
    first worker whose file needs it; another worker whose file would only wait for it takes a file that does not."""
    if recorded is None:
        recorded = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    files = _by_file(items)
    estimate = _estimates(files, recorded)
    build_s = [float(recorded.get("builds_s", {}).get(name, 0.0)) for _, name in BUILDS]
    needs = {path: _needs(tests) for path, tests in files.items()}
    left = sorted(files, key=lambda path: -estimate[path] if estimate[path] >= SHORT_S else 0.0)  # stable sort
    free, order = [0.0] * max(1, workers), []
    ready: list[float | None] = [None] * len(BUILDS)  # when each build is done, once a worker has started it

    def start(path: str, now: float, commit: bool) -> tuple[float, float]:
        """When ``path`` could start on a worker free at ``now``, and how long that worker spends making the builds it
        needs that nobody has made (the rest of the gap it waits for another worker's)."""
        t, own, done = now, 0.0, list(ready)
        for i in range(needs[path]):
            made = done[i]
            if made is None:
                made = done[i] = t + build_s[i]
                own += build_s[i]
            t = max(t, made)
        if commit:
            ready[:] = done
        return t, own

    def waits(path: str, now: float) -> bool:
        begins, own = start(path, now, commit=False)
        return begins - own > now

    while left:
        worker = free.index(min(free))
        now = free[worker]
        idle = [waits(path, now) for path in left]
        path = left[idle.index(False)] if False in idle else left[0]
        left.remove(path)
        free[worker] = start(path, now, commit=True)[0] + estimate[path]
        order.append(path)
    return order


def mark_slow_tests(items: list[Any], recorded: dict | None = None) -> None:
    """Mark slow every test whose fixtures start a trainer, a Ray cluster or a vLLM engine, and every test the recorded
    runs measured over ``SLOW_TEST_S``, in `make test` or in `make test-fast` (``slow_in_fast``: a test that pays a
    warm-up there because the test that pays it in the full run is left out): `make test-fast` leaves them out."""
    if recorded is None:
        recorded = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    full, fast = recorded.get("slow_tests", {}), recorded.get("slow_in_fast", {})
    measured = {test: max(full.get(test, 0.0), fast.get(test, 0.0)) for test in full.keys() | fast.keys()}
    for item in items:
        if ENGINE_FIXTURES & set(item.fixturenames) or measured.get(item.nodeid, 0.0) >= SLOW_TEST_S:
            item.add_marker(pytest.mark.slow)
