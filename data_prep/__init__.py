"""Data preparation for the DemyAgent recipe: one module per job (SFT sets, RL sets, eval sets, model-aware RL set).

Every job module has ``add_arguments(parser)`` and ``main(args) -> int`` and runs as ``python -m data_prep.<job>``,
``agentrl-recipe data <job>`` (see :mod:`agentrl_recipe.cli.data`) and, in the paper's version, ``make data-<job>``.
Outputs are verl parquet files written atomically; rows that fail validation go to a ``*.rejects.jsonl`` file next
to the output, with the file, row and field named.
"""

from __future__ import annotations

import argparse
import sys


def standalone(module_name: str) -> int:
    """``python -m data_prep.<job> …``: the same arguments as ``agentrl-recipe data <job> …``."""
    module = sys.modules[module_name]
    name = module.__spec__.name if module.__spec__ is not None else module_name
    parser = argparse.ArgumentParser(prog=f"python -m {name}", description=(module.__doc__ or name).splitlines()[0])
    module.add_arguments(parser)
    return int(module.main(parser.parse_args()) or 0)
