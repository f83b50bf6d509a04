"""Shared fixtures: the tiny offline model (built once per test session), one local sandbox pool for the sandbox and
tool tests, and the gpu marker's skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_test_helpers import HOST_SECRET_ENV, HOST_SECRET_VALUE

# Set before any sandbox starts: the escape tests check that the sandbox never sees the host's environment.
os.environ[HOST_SECRET_ENV] = HOST_SECRET_VALUE

from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox


def pytest_configure(config: pytest.Config) -> None:
    # Ray prints a token-auth warning on every init; tests don't need auth on a local cluster.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")


# `make test` runs two pytest-xdist workers, a whole file at a time each (--dist loadfile: a file's module fixtures,
# e.g. a trainer run, happen once). Long files first, so that none of them is left to run alone at the end.
LONG_FILES_FIRST = (
    "tests/integration/test_async_trainer.py",
    "tests/demo/test_demo.py",
    "tests/integration/test_rl_trainer.py",
    "tests/upstream/test_check.py",
    "tests/integration/test_sft_trainer.py",
    "tests/agentrl_sandbox/test_fusion_protocol.py",
    "tests/agentrl_recipe/gpu_install/test_gpu_variants.py",  # 1-2 min of pip resolving against PyPI (network, not CPU)
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order
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
    """Directory with the tiny Qwen2 model, tokenizer and hermes chat template (built offline, ~5 s, once)."""
    from agentrl_recipe.cpu_task.tiny_model import get_tiny_model_dir

    return get_tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.fixture(scope="session")
def pool() -> LocalSandbox:
    """The default backend, as users get it (fails, naming the fix, where bubblewrap is missing: no silent skip)."""
    sb = LocalSandbox(SandboxConfig(backend="local", pool_size=2, timeout_s=10.0, memory_mb=512))
    yield sb
    sb.close()
