"""Data preparation for the DemyAgent recipe: RL mix, eval sets, SFT trajectories, model-aware RL set.

Every command is exposed as ``agentrl-recipe data <cmd>`` (see :mod:`agentrl_recipe.cli.data`) and ``make data-<cmd>``.
Outputs are verl parquet files written atomically; rows that fail validation go to a ``*.rejects.jsonl`` file next
to the output, with the file, row and field named.
"""

from __future__ import annotations

import argparse
import sys


def standalone(module_name: str) -> int:
    """``python -m data_prep.<module> …``: the same arguments as ``agentrl-recipe data <cmd> …``."""
    module = sys.modules[module_name]
    parser = argparse.ArgumentParser(
        prog=f"python -m {module.__spec__.name}", description=module.__doc__.splitlines()[0]
    )
    module.add_arguments(parser)
    return int(module.main(parser.parse_args()) or 0)
