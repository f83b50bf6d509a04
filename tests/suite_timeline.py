"""When each test ran, on which xdist worker: ``AGENTRL_TEST_TIMELINE=<file>`` (``benchmarks/test_suite.py --timeline``)
appends one JSON line per test, {"test", "worker", "start", "end"} in wall-clock seconds, setup and teardown
included. Beside a CPU sampler it tells which tests the idle CPU falls in. A plugin of this suite's conftest, not a
``-p`` plugin: ``PYTEST_ADDOPTS`` would carry that into the pytest runs the tests start themselves (upstream/check.py).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

TIMELINE_ENV = "AGENTRL_TEST_TIMELINE"


class SuiteTimeline:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.worker = os.environ.get("PYTEST_XDIST_WORKER", "main")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Iterator[None]:
        start = time.time()
        yield
        record = {"test": item.nodeid, "worker": self.worker, "start": start, "end": time.time()}
        with self.path.open("a") as out:  # one short line per write: the workers' appends do not interleave
            out.write(json.dumps(record) + "\n")
