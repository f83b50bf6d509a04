"""``agentrl-recipe configs``: list, show, copy and check the shipped verl configs (like torchtune's ``tune ls/cp``).

- ``list``: the runnable shipped configs, their kind (rl / sft) and one-line description;
- ``show NAME [--composed [--resolve]] [k=v ...]``: the file, or the whole config as verl will see it;
- ``cp NAME DEST``: a standalone copy to edit, which still finds the shared ``recipe/`` bodies;
- ``check [NAME ...]``: everything verl 0.9.1 would silently get wrong (:mod:`.checks`).

Finding and composing the configs is :mod:`.files`.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
from pathlib import Path

from omegaconf import OmegaConf
from tqdm import tqdm

from agentrl_recipe.cli.configs.checks import CheckReport, Problem, check
from agentrl_recipe.cli.configs.files import compose, kind_of_file, list_configs, locate
from agentrl_recipe.config_paths import config_dir
from agentrl_recipe.training import recipe_config as agentrl_config


def copy_config(name: str, dest: str | os.PathLike, *, force: bool = False) -> Path:
    """Copy a shipped config to ``dest`` as a standalone primary config that still finds recipe/ bodies."""
    _, config_name, src = locate(name)
    target = Path(dest)
    if target.is_dir():
        target = target / f"{Path(config_name).name}.yaml"
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; pass --force to overwrite")
    text = src.read_text()
    search_line = "    - pkg://verl.trainer.config\n"
    if search_line not in text:
        raise ValueError(f"{src} has no `- pkg://verl.trainer.config` searchpath line")
    # The copy lives outside verl_configs/, so it adds the shipped directory to its search path for recipe/*.yaml.
    text = text.replace(search_line, search_line + f"    - file://{config_dir()}\n", 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    sub.add_parser("list", help="the shipped runnable configs")
    show = sub.add_parser("show", help="print a config file, or the whole composed config with --composed")
    show.add_argument("name", help="shipped config name (e.g. agentrl_rl_qwen3_4b) or a YAML path")
    show.add_argument("--composed", action="store_true", help="print the full config as verl will see it")
    show.add_argument("--resolve", action="store_true", help="with --composed: resolve ${...} interpolations")
    show.add_argument("overrides", nargs="*", help="hydra overrides (key=value) applied with --composed")
    cp = sub.add_parser("cp", help="copy a shipped config to edit it (it keeps finding the shared recipe/ files)")
    cp.add_argument("name")
    cp.add_argument("dest", help="file or directory")
    cp.add_argument("--force", action="store_true", help="overwrite an existing file")
    chk = sub.add_parser("check", help="validate configs against verl's schema and the plugin's namespace")
    chk.add_argument("configs", nargs="*", help="names or YAML paths (default: every shipped config)")
    chk.add_argument("-o", "--override", action="append", default=[], help="hydra override key=value (repeatable)")
    chk.add_argument("--strict-paths", action="store_true", help="missing data files / checkpoints are errors")
    chk.add_argument("--allow", action="append", default=[], help="a key prefix to accept unchecked (repeatable)")
    chk.add_argument("-v", "--verbose", action="store_true", help="list every path that does not exist yet")


def main(args: argparse.Namespace) -> int:
    actions = {"list": _list_main, "show": _show_main, "cp": _cp_main, "check": _check_main}
    return actions[args.action](args)


def _list_main(args: argparse.Namespace) -> int:
    rows = list_configs()
    width = max(len(n) for n, _, _ in rows)
    for name, kind, title in rows:
        print(f"{name:<{width}}  {kind:<3}  {title}")
    return 0


def _show_main(args: argparse.Namespace) -> int:
    if not args.composed:
        print(locate(args.name)[2].read_text(), end="")
        return 0
    cfg, _ = compose(args.name, args.overrides)
    if args.resolve:  # the plugin registers the resolvers the shipped configs use (${agentrl_compat:...}, ...)
        importlib.import_module("agentrl_recipe.plugin")
    print(OmegaConf.to_yaml(agentrl_config.redacted(cfg, resolve=args.resolve)), end="")
    return 0


def _cp_main(args: argparse.Namespace) -> int:
    target = copy_config(args.name, args.dest, force=args.force)
    kind = kind_of_file(target)
    print(f"wrote {target}")
    print(f"run:   make {kind or 'rl'} CONFIG={target}\ncheck: agentrl-recipe configs check {target}")
    return 0


def _check_main(args: argparse.Namespace) -> int:
    targets = args.configs or [name for name, _, _ in list_configs()]
    reports = [
        check(target, args.override, strict_paths=args.strict_paths, allow=args.allow)
        for target in tqdm(targets, desc="configs check", unit="config", disable=len(targets) < 3, leave=False)
    ]
    not_yet = sum(_not_yet(p) for r in reports for p in r.warnings)
    passed = sum(r.ok for r in reports)
    if len(targets) > 1:  # the summary first: what the reader came for
        print(
            f"{passed}/{len(targets)} configs pass" + (f"; {_not_yet_line(not_yet, args.verbose)}" if not_yet else "")
        )
    for report in reports:
        print(_format(report, verbose=args.verbose))
    if len(targets) == 1 and not_yet:
        print(f"  {_not_yet_line(not_yet, args.verbose)}")
    return 0 if passed == len(reports) else 1


NOT_YET = "does not exist yet"  # checks.py: a data file or checkpoint a run (or make data-*) makes; --strict-paths


def _not_yet(problem: Problem) -> bool:
    return problem.message.endswith(NOT_YET)


def _not_yet_line(count: int, verbose: bool) -> str:
    listed = "listed" if verbose else "-v lists them"
    return f"{count} warning(s): a data file or checkpoint that {NOT_YET} (a run or make data-* makes it; {listed})"


def _format(report: CheckReport, *, verbose: bool) -> str:
    """The report, with its "does not exist yet" warnings only when ``verbose`` (counted in one line otherwise)."""
    if verbose:
        return report.format()
    return dataclasses.replace(report, warnings=[p for p in report.warnings if not _not_yet(p)]).format()
