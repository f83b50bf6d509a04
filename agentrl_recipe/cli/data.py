"""``agentrl-recipe data <job>``: one subcommand per data-prep job, each a module of ``data_prep``.

Every job also runs as ``python -m data_prep.<module>`` with the same arguments (``make data-<job>``: the paper's
version of it).
"""

from __future__ import annotations

import argparse
import importlib

# job -> (module, one-line help)
JOBS: dict[str, tuple[str, str]] = {
    "sft-released": (
        "data_prep.jobs.sft_released",
        "released SFT-3K (or any messages/tools file) → verl multi-turn SFT",
    ),
    "sft-generate": ("data_prep.jobs.sft_generate", "real SFT trajectories from a teacher model with our sandbox"),
    "sft-stitched": (
        "data_prep.jobs.sft_stitched",
        "the stitched synthetic SFT baseline (ReTool-SFT or CoT with code)",
    ),
    "rl-mix": ("data_prep.jobs.rl_mix", "the diverse RL mix: DAPO + Skywork-OR1 + MegaScience, dedup, decontaminated"),
    "rl-released": (
        "data_prep.jobs.rl_released",
        "the released Open-AgentRL-30K as published, templated as the original",
    ),
    "eval-sets": ("data_prep.jobs.eval_sets", "the eval sets: AIME24, AIME25, GPQA-Diamond, LiveCodeBench v6"),
    "model-aware": ("data_prep.jobs.model_aware", "difficulty-matched RL set from the policy's own pass rates"),
    "validate": ("data_prep.jobs.validate", "check RL or SFT parquet files against the schema"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_job", metavar="JOB", required=True)
    for name, (module_name, help_text) in JOBS.items():
        importlib.import_module(module_name).add_arguments(sub.add_parser(name, help=help_text, description=help_text))


def main(args: argparse.Namespace) -> int:
    return int(importlib.import_module(JOBS[args.data_job][0]).main(args) or 0)
