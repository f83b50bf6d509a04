"""Where the shipped verl configs live: the installed ``verl_configs`` package (YAML as package data).

Used by :func:`agentrl_recipe.offline.rollout.compose_config` and by ``agentrl-recipe configs``
(:mod:`agentrl_recipe.cli.configs`).
"""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

CONFIG_DIR_ENV = "AGENTRL_CONFIG_DIR"
CONFIG_PACKAGE = "verl_configs"


def config_dir() -> Path:
    """The shipped ``verl_configs/``: $AGENTRL_CONFIG_DIR when set, else the installed package's folder."""
    override = os.environ.get(CONFIG_DIR_ENV)
    candidate = Path(override) if override else Path(str(importlib.resources.files(CONFIG_PACKAGE)))
    if not (candidate / "agentrl_rl.yaml").is_file():
        raise FileNotFoundError(
            f"no agentrl_rl.yaml in {candidate} (${CONFIG_DIR_ENV} or the installed {CONFIG_PACKAGE})"
        )
    return candidate.resolve()


def tool_config_dir() -> Path:
    """The shipped tool configs (``verl_configs/tools/*.yaml``)."""
    return config_dir() / "tools"
