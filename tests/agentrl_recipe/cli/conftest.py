"""Shared by the preflight tests: the paper run's layout as the checks read it."""

from __future__ import annotations

import pytest

from agentrl_recipe.cli import configs
from agentrl_recipe.cli.preflight_layout import Layout, layout


@pytest.fixture(scope="module")
def paper() -> Layout:
    cfg, _ = configs.compose("agentrl_rl_qwen3_4b")
    return layout(cfg, "rl")
