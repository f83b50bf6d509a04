"""``agentrl-recipe data <cmd>``: build the RL mix, the eval sets, the SFT set and the model-aware RL set.

Commands (each module also runs as ``python -m data_prep.<module>``):
  rl           DAPO + Skywork-OR1 + MegaScience → verl RL parquet (dedup, decontamination, sampling, stats)
  eval         AIME24/25, GPQA-Diamond, LiveCodeBench v6 → eval parquet files
  sft          convert | generate | synthesize multi-turn tool-use SFT data
  model-aware  k rollouts per problem with the policy → pass rates → difficulty-matched RL set
  validate     check an existing RL or SFT parquet against the schema (errors name file, row and field)
"""

from __future__ import annotations

import argparse
import importlib

from data_prep.schema import validate_file

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "rl": ("data_prep.rl_mix", "build the diverse RL mix (paper: Open-AgentRL-30K)"),
    "eval": (
        "data_prep.eval_sets",
        "build the eval sets (AIME24, AIME25, GPQA-Diamond, LiveCodeBench v6)",
    ),
    "sft": ("data_prep.sft_released", "convert / generate / synthesize multi-turn tool-use SFT data"),
    "model-aware": (
        "data_prep.model_aware",
        "difficulty-matched RL set from the policy's own pass rates",
    ),
    "validate": ("agentrl_recipe.cli.data", "validate an RL or SFT parquet file"),
}


def add_validate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=("rl", "sft"))
    parser.add_argument("files", nargs="+")


def validate_main(args: argparse.Namespace) -> int:
    bad = 0
    for path in args.files:
        errors = validate_file(path, args.kind)
        for e in errors[:20]:
            print(e)
        if len(errors) > 20:
            print(f"... and {len(errors) - 20} more errors in {path}")
        bad += len(errors)
        print(f"{path}: {'OK' if not errors else f'{len(errors)} error(s)'}")
    return 1 if bad else 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="CMD", required=True)
    for name, (module_name, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == "validate":
            add_validate_arguments(p)
        else:
            importlib.import_module(module_name).add_arguments(p)


def main(args: argparse.Namespace) -> int:
    if args.data_command == "validate":
        return validate_main(args)
    module = importlib.import_module(SUBCOMMANDS[args.data_command][0])
    return int(module.main(args) or 0)
