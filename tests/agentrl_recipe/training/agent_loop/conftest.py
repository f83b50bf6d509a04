"""Fixtures for the agent-loop tests: the recipe's RL config composed for the tiny model, and row/turn helpers.

The tool is the real ``code_interpreter`` from ``verl_configs/tools/code_interpreter.yaml`` (the sandbox's local
backend); ``AGENTRL_TEST_TOOL_CONFIG`` points the tests at another tool YAML (e.g. a remote sandbox).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from omegaconf import DictConfig

from agentrl_recipe.config_paths import config_dir
from agentrl_recipe.offline.rollout import compose_config

TOOL_CONFIG = config_dir() / "tools" / "code_interpreter.yaml"
TEMPLATES = Path(__file__).parent / "templates"


@pytest.fixture(scope="session")
def tool_config_path() -> Path:
    path = Path(os.environ.get("AGENTRL_TEST_TOOL_CONFIG", TOOL_CONFIG))
    if not path.is_file():
        pytest.fail(f"tool config {path} is missing (the code_interpreter tool YAML)")
    return path


@pytest.fixture(scope="session")
def base_cfg(tiny_model_dir: Path, tool_config_path: Path) -> DictConfig:
    """verl_configs/agentrl_rl.yaml for the tiny model: prompt 512, response 1024 tokens."""
    return compose_config(
        tiny_model_dir,
        prompt_length=512,
        response_length=1024,
        overrides=[f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config_path}"],
    )
