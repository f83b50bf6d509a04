"""Shared fixtures: the tiny offline model (built once per test session) and the gpu marker's skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    # Ray prints a token-auth warning on every init; tests don't need auth on a local cluster.
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")


# `make test` runs two pytest-xdist workers. These tests start Ray clusters (in this process or through verl's
# trainers); two clusters at once on one machine fight over fixed ports (a raylet's agent exits and takes the raylet
# with it), so they form one unit of work that one worker runs in turn while the other takes the remaining files one
# by one (pytest_xdist_make_scheduler below). A new test that starts Ray belongs here.
RAY_TESTS = (
    "tests/cpu/test_async_trainer.py",
    "tests/demo/test_demo.py",
    "tests/cpu/test_rl_trainer.py",
    "tests/generation/test_checkpoint_engine.py",
    "tests/generation/test_hf_replica.py",
    "tests/agent_loop/test_partial_rollout.py",
    "tests/algos/test_infra_guard.py",
    "tests/algos/test_sampler.py",
    "tests/plugin/test_plugin.py::test_names_are_registered_inside_a_ray_worker",
    "tests/tools/test_code_interpreter.py::test_global_limit_spans_workers_through_one_ray_actor",
)
# Long files first, so that none of them is left to run alone at the end (the Ray unit is the longest).
LONG_FILES_FIRST = (
    *RAY_TESTS[:3],
    "tests/upstream/test_check.py",
    "tests/cpu/test_sft_trainer.py",
    "tests/tools/test_fusion_protocol.py",
)


def pytest_xdist_make_scheduler(config: pytest.Config, log):
    from xdist.scheduler import LoadScopeScheduling

    class RayTestsTogether(LoadScopeScheduling):
        """One unit of work per file, except that every test in RAY_TESTS is in one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return "ray" if nodeid.startswith(RAY_TESTS) else nodeid.split("::", 1)[0]

    return RayTestsTogether(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))  # stable: the rest keep order
    import torch

    if torch.cuda.is_available():
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
    from agentrl_recipe.tiny_model import get_tiny_model_dir

    return get_tiny_model_dir()


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model_dir: Path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_model_dir)
