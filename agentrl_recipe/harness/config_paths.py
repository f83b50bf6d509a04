"""Where the shipped verl configs live: ``verl_configs/`` at the root of the checkout (an editable install's).

Used by :func:`agentrl_recipe.harness.rollout.compose_config` and by ``agentrl-recipe configs``
(:mod:`agentrl_recipe.cli.configs`).
"""

from __future__ import annotations

import os
from pathlib import Path

CONFIG_DIR_ENV = "AGENTRL_CONFIG_DIR"
REPO_ROOT = Path(__file__).resolve().parents[2]


def config_dir() -> Path:
    """The shipped ``verl_configs/``: $AGENTRL_CONFIG_DIR, else an editable install's checkout, else ./verl_configs."""
    for candidate in (os.environ.get(CONFIG_DIR_ENV), REPO_ROOT / "verl_configs", Path.cwd() / "verl_configs"):
        if candidate and (Path(candidate) / "agentrl_rl.yaml").is_file():
            return Path(candidate).resolve()
    raise FileNotFoundError(
        "cannot find the shipped verl_configs/: install agentrl_recipe editable from its checkout "
        f"(`pip install -e .`, as `make install` does) or set {CONFIG_DIR_ENV}"
    )
