"""Finding the shipped verl configs: list them, locate one by name or path, and tell an RL config from an SFT one.

The kind comes from the verl root config a file's ``defaults`` chain reaches (``ppo_trainer`` → rl,
``sft_trainer_engine`` → sft), followed through our own ``recipe/`` bodies.
"""

from __future__ import annotations

import contextlib
import difflib
from pathlib import Path

import yaml

from agentrl_recipe.config_paths import config_dir

NOT_RUNNABLE = ("recipe", "tools", "_generated")  # bodies included by runnable configs, tool YAML
VERL_ROOTS = {"ppo_trainer": "rl", "ppo_megatron_trainer": "rl", "sft_trainer_engine": "sft"}


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
