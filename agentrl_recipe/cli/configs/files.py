"""The shipped verl configs as files: list them, locate one by name or path, tell an RL config from an SFT one,
compose one exactly as verl's entry points do, and find the files a config refers to.

The kind comes from the verl root config a file's ``defaults`` chain reaches (``ppo_trainer`` → rl,
``sft_trainer_engine`` → sft), followed through our own ``recipe/`` bodies. Composing uses hydra with
``pkg://verl.trainer.config`` on the search path, as ``main_ppo`` / ``sft_trainer`` do; :func:`verl_base` is verl's
own root config with the same config-group choices, which the unknown-key check compares against.

The shipped YAML lives in ``verl_configs/`` at the repo root, so an editable install (``pip install -e .``, what
``make install`` does) is the supported path; ``AGENTRL_CONFIG_DIR`` points elsewhere
(:func:`agentrl_recipe.config_paths.config_dir`).
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import os
from collections.abc import Sequence
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

import yaml
from hydra import compose as hydra_compose
from hydra import initialize_config_dir, initialize_config_module
from omegaconf import OmegaConf, open_dict

from agentrl_recipe.config_paths import config_dir

NOT_RUNNABLE = ("recipe", "tools", "_generated")  # bodies included by runnable configs, tool YAML
VERL_ROOTS = {"ppo_trainer": "rl", "ppo_megatron_trainer": "rl", "sft_trainer_engine": "sft"}


# ------------------------------------------------------------------------------------------- listing and locating
def list_configs() -> list[tuple[str, str, str]]:
    """(name, kind, one-line description) of every runnable shipped config."""
    root = config_dir()
    out = []
    for path in sorted(root.rglob("*.yaml"), key=lambda p: (len(p.relative_to(root).parts), str(p))):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_RUNNABLE:
            continue
        name = rel.with_suffix("").as_posix()
        kind = kind_of_file(path) or "?"
        out.append((name, kind, _title(path, name)))
    return out


def _title(path: Path, name: str) -> str:
    for line in path.read_text().splitlines():
        if line.startswith(f"# {name} — "):
            return line.split(" — ", 1)[1]
    return ""


def locate(name_or_path: str) -> tuple[Path, str, Path]:
    """(hydra config dir, config name, file) for a shipped config name or a path to a YAML file."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        path = path.resolve()
        with contextlib.suppress(FileNotFoundError, ValueError):
            root = config_dir()
            return root, path.relative_to(root).with_suffix("").as_posix(), path
        return path.parent, path.stem, path
    root = config_dir()
    file = root / f"{name_or_path.removesuffix('.yaml')}.yaml"
    if not file.is_file():
        known = [n for n, _, _ in list_configs()]
        hint = difflib.get_close_matches(name_or_path, known, n=3)
        raise FileNotFoundError(
            f"no config {name_or_path!r} (not a file, not in {root}); "
            + (f"did you mean {', '.join(hint)}? " if hint else "")
            + "`agentrl-recipe configs list` shows them"
        )
    return root, file.relative_to(root).with_suffix("").as_posix(), file


def find_file(value: str) -> Path | None:
    """A config-referenced path as verl will open it: absolute, or relative to the cwd, else to the folder holding
    the installed ``verl_configs`` (``verl_configs/tools/...`` names a shipped file wherever the package is)."""
    path = Path(os.path.expanduser(value))
    for candidate in [path] if path.is_absolute() else [Path.cwd() / path, config_dir().parent / path]:
        if candidate.exists():
            return candidate
    return None


# ------------------------------------------------------------------------------------------------------ the kind
def _defaults(path: Path) -> list[str]:
    data = yaml.safe_load(path.read_text()) or {}
    entries = []
    for entry in data.get("defaults", []) if isinstance(data, dict) else []:
        if isinstance(entry, str) and entry != "_self_":
            entries.append(entry.removeprefix("optional ").split("@")[0].lstrip("/"))
    return entries


def kind_of_file(path: Path, depth: int = 0) -> str | None:
    """rl / sft from the verl root config the defaults chain reaches (ppo_trainer, sft_trainer_engine, ...)."""
    for entry in _defaults(path):
        if entry in VERL_ROOTS:
            return VERL_ROOTS[entry]
        for base in (path.parent, config_dir()):
            child = base / f"{entry}.yaml"
            if depth < 8 and child.is_file() and (kind := kind_of_file(child, depth + 1)):
                return kind
    return None


def verl_root(path: Path) -> str:
    """The verl root config (a key of :data:`VERL_ROOTS`) the config at ``path`` extends."""
    kind = kind_of_file(path)
    if kind is None:
        raise ValueError(f"{path}: its defaults reach none of verl's trainer configs {sorted(VERL_ROOTS)}")
    for entry in _defaults(path):
        if entry in VERL_ROOTS:
            return entry
    return "ppo_trainer" if kind == "rl" else "sft_trainer_engine"


# ----------------------------------------------------------------------------------------------------- composing
def _without_hydra(cfg: Any) -> tuple[Any, dict[str, str]]:
    """(the config without its hydra node, the group choices hydra recorded in it)."""
    recorded = OmegaConf.to_container(cfg.hydra.runtime.choices)
    assert isinstance(recorded, dict)  # hydra records its group choices as a mapping
    choices = {str(k): str(v) for k, v in recorded.items() if v is not None}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


def value_or(cfg: Any, key: str, default: Any = None) -> Any:
    """``key``'s value in a composed config; ``default`` where it is absent, missing (``???``) or null."""
    value = OmegaConf.select(cfg, key, default=default, throw_on_missing=False)
    return default if value is None else value


def compose(name_or_path: str, overrides: Sequence[str] = ()) -> tuple[Any, dict[str, str]]:
    """Compose a config as verl's entry points would. Returns (config without the hydra node, group choices): the
    caller's own copy, which it may change. A launch composes the same config several times (its check, its
    preflight, its commands), ~0.5 s each: a shipped config's composition is reused while no shipped YAML file has
    changed. Any other config (a copy in a user's folder) is composed each time: its folder may hold anything."""
    directory, name, _ = locate(name_or_path)
    shipped = config_dir().resolve()
    if not directory.resolve().is_relative_to(shipped):
        return _compose(directory, name, tuple(overrides))
    cfg, choices = _shipped_composition(directory, name, tuple(overrides), _yaml_stamp(shipped))
    return copy.deepcopy(cfg), dict(choices)


def _compose(directory: Path, name: str, overrides: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        cfg = hydra_compose(config_name=name, overrides=list(overrides), return_hydra_config=True)
    return _without_hydra(cfg)


@lru_cache(maxsize=32)
def _shipped_composition(
    directory: Path, name: str, overrides: tuple[str, ...], stamp: tuple[tuple[str, int, int], ...]
) -> tuple[Any, dict[str, str]]:
    """``stamp``: :func:`_yaml_stamp` of the shipped configs, so that an edited file composes anew."""
    return _compose(directory, name, overrides)


def _yaml_stamp(folder: Path) -> tuple[tuple[str, int, int], ...]:
    """Path, size and modification time of every YAML file under ``folder`` (the shipped configs: ~50 files)."""
    return tuple((str(path), (s := path.stat()).st_size, s.st_mtime_ns) for path in sorted(folder.rglob("*.yaml")))


@cache
def _base(root: str, choice_overrides: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        cfg = hydra_compose(config_name=root, overrides=list(choice_overrides), return_hydra_config=True)
    return _without_hydra(cfg)


def verl_base(root: str, choices: dict[str, str]) -> Any:
    """verl's own config ``root`` with the same config-group choices (e.g. a megatron actor) as the checked one."""
    _, base_choices = _base(root, ())
    changed = tuple(
        sorted(
            f"{k}={v}"
            for k, v in choices.items()
            if k in base_choices and base_choices[k] != v and "/.." not in k and not k.startswith("hydra/")
        )
    )
    return _base(root, changed)[0]
