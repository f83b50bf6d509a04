"""The unknown-key checker: verl 0.9.1 merges unknown keys of an overlay silently, so every key of a composed config
must exist in verl's composed base config, be a field of the dataclass verl builds from its section, or lie in a
documented extension namespace — ``agentrl.*`` (checked against :data:`agentrl_recipe.config.SECTIONS`) and
``reward.reward_kwargs.*`` (checked against the reward manager's kwargs, :mod:`agentrl_recipe.cli.config_rules`).
A legacy key names its replacement; an unknown one the closest valid key."""

from __future__ import annotations

import dataclasses
import difflib
import importlib
from collections.abc import Iterator, Sequence
from typing import Any

from omegaconf import OmegaConf

from agentrl_recipe import compat, names
from agentrl_recipe import config as agentrl_config
from agentrl_recipe.cli.config_legacy import legacy
from agentrl_recipe.cli.config_report import CheckReport, Problem

# verl keys whose value is an open mapping (anything below them is passed through), beyond empty `{}` in the base.
FREEFORM = ("ray_kwargs.ray_init", "reward.custom_reward_function.reward_kwargs")
# verl reads these with .get() although its YAML does not declare them.
VERL_GET_ONLY = ("actor_rollout_ref.rollout.agent.agent_loop_manager_class",)


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf of a plain nested dict; an empty dict is a leaf."""
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def _lookup(tree: Any, key: str) -> tuple[bool, Any]:
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _dataclass_has_field(node: dict, name: str) -> bool:
    """True when ``node``'s ``_target_`` is a dataclass with field ``name`` (e.g. FSDPEngineConfig.mixed_precision)."""
    target = node.get("_target_")
    if not isinstance(target, str) or "." not in target:
        return False
    module, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
    return dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}


def _nearest_parent(base_tree: Any, parts: list[str]) -> tuple[str, Any]:
    """The longest proper prefix of ``parts`` that verl's config has, and its value ("" and the root when none)."""
    for depth in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:depth])
        found, parent_value = _lookup(base_tree, parent)
        if found:
            return parent, parent_value
    return "", base_tree


def check_keys(cfg: Any, base: Any, kind: str, report: CheckReport, allow: Sequence[str]) -> None:
    """Errors for every key of ``cfg`` that ``base`` (verl's config) lacks, and every legacy key verl ignores."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    base_tree = OmegaConf.to_container(base, resolve=False)
    for key, value in leaves(tree):
        top = key.split(".")[0]
        if top == names.CONFIG_NAMESPACE or key.startswith("reward.reward_kwargs"):
            continue  # checked against the plugin's dataclasses
        if any(key == a or key.startswith(a + ".") for a in (*allow, *VERL_GET_ONLY)):
            continue
        in_base, base_value = _lookup(base_tree, key)
        replacement = legacy(kind, key)
        if replacement and (not in_base or (base_value is None and value is not None)):
            report.errors.append(Problem(key, f"legacy key that verl 0.9.1 ignores; use {replacement}"))
            continue
        if in_base:
            continue
        parts = key.split(".")
        parent, parent_value = _nearest_parent(base_tree, parts)
        if parent_value in ({}, None) or any(parent == f or parent.startswith(f + ".") for f in FREEFORM):
            continue
        if not isinstance(parent_value, dict):
            report.errors.append(Problem(key, f"{parent} is a value in verl's config, not a section"))
            continue
        missing = parts[len(parent.split(".")) if parent else 0]
        if _dataclass_has_field(parent_value, missing):
            continue  # absent from verl's YAML but a field of the dataclass verl builds from this node
        hint = difflib.get_close_matches(missing, list(parent_value), n=1)
        where = f"under {parent}" if parent else "at the top level"
        report.errors.append(
            Problem(
                key,
                f"unknown key: verl's config has no {missing!r} {where}"
                + (f" (did you mean {(parent + '.' if parent else '') + hint[0]}?)" if hint else "")
                + "; verl would ignore it",
            )
        )


def check_namespace(cfg: Any, report: CheckReport) -> None:
    """Each ``agentrl.<section>`` against the plugin's dataclass for it (unknown fields, bad values)."""
    block = cfg.get(names.CONFIG_NAMESPACE)
    if block is None:
        return
    for section in OmegaConf.to_container(block, resolve=False):
        where = f"{names.CONFIG_NAMESPACE}.{section}"
        if section == "compat":  # the one scalar key: agentrl_recipe/compat.py
            try:
                compat.check_mode(OmegaConf.select(cfg, where), where=where)
            except ValueError as e:
                report.errors.append(Problem(where, str(e)))
            continue
        cls = agentrl_config.SECTIONS.get(section)
        if cls is None:
            report.errors.append(
                Problem(where, f"unknown section; the plugin's sections are {sorted(agentrl_config.SECTIONS)}")
            )
            continue
        try:
            resolved = OmegaConf.to_container(OmegaConf.select(cfg, where), resolve=True)
            agentrl_config.from_mapping(cls, resolved, where=where)
        except Exception as e:  # unknown field, bad value (__post_init__), unresolvable interpolation
            report.errors.append(Problem(where, str(e)))
