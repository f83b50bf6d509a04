"""Shared by the preflight tests: the paper run's layout as the checks read it."""

from __future__ import annotations

import pytest

from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.cli.preflight import Layout, layout


@pytest.fixture(scope="module")
def paper() -> Layout:
    cfg, _ = compose("agentrl_rl_qwen3_4b")
    return layout(cfg, "rl")
