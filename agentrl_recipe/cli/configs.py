"""``agentrl-recipe configs``: list, show, copy and check the shipped verl configs (like torchtune's ``tune ls/cp``).

Why a checker: verl 0.9.1 merges unknown keys of an overlay YAML silently, and its ``main_ppo`` ignores the legacy
reward keys the original scripts use (``reward_model.reward_manager=dapo`` trains with the naive manager). So a config
that looks right can train the wrong thing. :func:`check` composes a config exactly as ``main_ppo`` /
``sft_trainer`` would (hydra, ``pkg://verl.trainer.config``; :mod:`.config_compose`) and reports:

- keys that exist neither in verl's composed base config nor in a documented extension namespace — ``agentrl.*``
  (:data:`agentrl_recipe.config.SECTIONS` dataclasses) and ``reward.reward_kwargs.*`` (the reward manager's kwargs
  dataclass) — with the closest valid key (:mod:`.config_keys`);
- legacy keys verl 0.9.1 ignores, naming the replacement (:mod:`.config_legacy`);
- registered names (advantage estimator, policy loss, reward manager, agent loop, rollout backend, trainer mode)
  missing from verl's registries after the plugin is loaded, and files the config references that do not exist
  (:mod:`.config_refs`);
- what verl's own dataclasses and ``validate_config`` reject, plus token budgets verl only asserts deep inside a worker
  (:mod:`.config_rules`, with :mod:`.async_checks` for the async trainer modes).

Data files and model checkpoints that do not exist yet are warnings (they are produced by earlier stages), errors
with ``strict_paths``. Relative paths are looked up from the working directory, then from the repo root.

The shipped YAML lives in ``verl_configs/`` at the repo root, so an editable install (``pip install -e .``, what
``make install`` does) is the supported path; ``AGENTRL_CONFIG_DIR`` points elsewhere (:mod:`.config_files`).
This module keeps the names other code imports from it (``compose``, ``check``, ``locate``, ...).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from agentrl_recipe.cli.config_compose import compose, verl_base
from agentrl_recipe.cli.config_files import NOT_RUNNABLE, VERL_ROOTS, kind_of_file, list_configs, locate, verl_root
from agentrl_recipe.cli.config_keys import FREEFORM, VERL_GET_ONLY, check_keys, check_namespace
from agentrl_recipe.cli.config_legacy import LEGACY
from agentrl_recipe.cli.config_refs import find_file, registries
from agentrl_recipe.cli.config_report import CheckReport, Problem, first_line, resolved
from agentrl_recipe.cli.config_rules import VERL_REWARD_KWARGS, check_rl, check_sft
from agentrl_recipe.config_paths import config_dir

# The names this module had before its split (tests/integration read the registries through `_registries`).
_registries = registries
_resolved = resolved

__all__ = [
    "FREEFORM",
    "LEGACY",
    "NOT_RUNNABLE",
    "VERL_GET_ONLY",
    "VERL_REWARD_KWARGS",
    "VERL_ROOTS",
    "CheckReport",
    "Problem",
    "add_arguments",
    "check",
    "compose",
    "config_dir",
    "copy_config",
    "find_file",
    "list_configs",
    "locate",
    "main",
    "resolved",
    "verl_base",
]


def check(
    name_or_path: str, overrides: Sequence[str] = (), *, strict_paths: bool = False, allow: Sequence[str] = ()
) -> CheckReport:
    """Compose ``name_or_path`` (+ hydra ``overrides``) and report everything verl would silently get wrong."""
    report = CheckReport(name=name_or_path)
    try:
        _, _, file = locate(name_or_path)
        root = verl_root(file)
        report.kind = VERL_ROOTS[root]
        cfg, choices = compose(name_or_path, overrides)
    except Exception as e:
        report.errors.append(Problem("", f"cannot compose: {first_line(e)}"))
        return report
    check_keys(cfg, verl_base(root, choices), report.kind, report, allow)
    check_namespace(cfg, report)
    if report.kind == "rl":
        check_rl(cfg, report, strict_paths)
    else:
        check_sft(cfg, report, strict_paths)
    return report


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


def main(args: argparse.Namespace) -> int:
    if args.action == "list":
        rows = list_configs()
        width = max(len(n) for n, _, _ in rows)
        for name, kind, title in rows:
            print(f"{name:<{width}}  {kind:<3}  {title}")
        return 0
    if args.action == "show":
        if not args.composed:
            print(locate(args.name)[2].read_text(), end="")
            return 0
        cfg, _ = compose(args.name, args.overrides)
        print(OmegaConf.to_yaml(cfg, resolve=args.resolve), end="")
        return 0
    if args.action == "cp":
        target = copy_config(args.name, args.dest, force=args.force)
        kind = kind_of_file(target)
        print(f"wrote {target}")
        print(f"run:   make {kind or 'rl'} CONFIG={target}\ncheck: agentrl-recipe configs check {target}")
        return 0
    return _check_main(args)


def _check_main(args: argparse.Namespace) -> int:
    targets = args.configs or [name for name, _, _ in list_configs()]
    failed = 0
    for target in targets:
        report = check(target, args.override, strict_paths=args.strict_paths, allow=args.allow)
        print(report.format())
        failed += not report.ok
    if len(targets) > 1:
        print(f"{len(targets) - failed}/{len(targets)} configs pass")
    return 1 if failed else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m agentrl_recipe.cli.configs")
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
