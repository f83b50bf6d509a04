"""``agentrl-recipe`` — one console script, one subcommand per job.

Each subcommand lives in its own module exposing ``add_arguments(parser)`` and ``main(args) -> int``; only the
module of the subcommand being run is imported, so ``agentrl-recipe --help`` never imports torch or verl.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# subcommand -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "doctor": (
        "agentrl_recipe.cli.doctor",
        "check that verl sees the plugin, the sandbox works, what hardware is there",
    ),
    "sandbox": (
        "agentrl_sandbox.cli",
        "run code in the sandbox, or serve the SandboxFusion /run_code API (= agentrl-sandbox)",
    ),
    "data": ("agentrl_recipe.cli.data", "build the SFT, RL, model-aware and eval datasets"),
    "eval": ("agentrl_recipe.cli.eval", "evaluate a model with the paper's protocol; compare runs"),
    "configs": ("agentrl_recipe.cli.configs", "list, show, copy and check the shipped verl configs"),
    "preflight": (
        "agentrl_recipe.cli.preflight",
        "will CONFIG run on this node? driver, GPUs, flash-attn, sandbox, disk",
    ),
    "view": ("agentrl_recipe.cli.view", "see the rollouts: a trajectory viewer page for a training run or an eval"),
}

# The subcommands that import verl anyway (seconds): they get verl_cpu.quiet.prefer_cpu_platform.
VERL_COMMANDS = frozenset({"configs", "preflight", "eval"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentrl-recipe", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        parser = build_parser()
        if argv and not argv[0].startswith("-"):
            parser.error(f"unknown command {argv[0]!r}; choose from {', '.join(COMMANDS)}")
        parser.print_help()
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    name, rest = argv[0], argv[1:]
    if name in VERL_COMMANDS:  # before verl's first device query: no "falling back to nvidia" on a CPU host
        from verl_cpu import quiet

        quiet.prefer_cpu_platform()
    module_name, help_text = COMMANDS[name]
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"agentrl-recipe {name}", description=help_text)
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    return int(module.main(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
