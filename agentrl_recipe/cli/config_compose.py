"""Composing a config exactly as verl's entry points do (hydra, our YAML + overrides), and verl's own base config
with the same config-group choices, which the unknown-key checker compares against."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from hydra import compose as hydra_compose
from hydra import initialize_config_dir, initialize_config_module
from omegaconf import OmegaConf, open_dict

from agentrl_recipe.cli.config_files import locate


def _without_hydra(cfg: Any) -> tuple[Any, dict[str, str]]:
    """(the config without its hydra node, the group choices hydra recorded in it)."""
    choices = {k: v for k, v in OmegaConf.to_container(cfg.hydra.runtime.choices).items() if v is not None}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


def compose(name_or_path: str, overrides: Sequence[str] = ()) -> tuple[Any, dict[str, str]]:
    """Compose a config as verl's entry points would. Returns (config without the hydra node, group choices)."""
    directory, name, _ = locate(name_or_path)
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        cfg = hydra_compose(config_name=name, overrides=list(overrides), return_hydra_config=True)
    return _without_hydra(cfg)


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
