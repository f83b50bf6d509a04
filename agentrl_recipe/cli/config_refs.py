"""What a config refers to must exist: registered names (advantage estimator, policy loss, reward manager, agent loop,
rollout backend, trainer mode) in verl's registries after the plugin is loaded, and the files, modules and objects it
names. Data files and checkpoints that do not exist yet are warnings (earlier stages produce them), errors with
``strict``. Relative paths are looked up from the working directory, then from the repo root."""

from __future__ import annotations

import ast
import importlib
import os
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from agentrl_recipe.cli.config_report import CheckReport, Problem, first_line, resolved
from agentrl_recipe.config_paths import config_dir


@cache
def registries() -> dict[str, Any]:
    """verl's registries after ``import verl`` (entry-point plugins) and an explicit plugin import."""
    # Imported here: verl takes ~10 s to import and loads the plugin, which `configs list/show/cp` must not pay.
    import verl  # noqa: F401  (loads the verl.plugins entry points, as every worker does)

    loaded_by_verl = "agentrl_recipe.plugin" in sys.modules
    importlib.import_module("agentrl_recipe.plugin")
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo import core_algos

    from agentrl_recipe.verl_adapters.agent_loop_registry import agent_loops
    from verl_cpu.rollout_registry import registered_rollouts

    try:
        from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY

        trainers = set(TRAINER_REGISTRY)
    except ImportError:  # the v1 trainer needs transferqueue; then only the name check is skipped
        trainers = None
    return {
        "plugin_loaded_by_verl": loaded_by_verl,
        "adv_estimator": set(core_algos.ADV_ESTIMATOR_REGISTRY),
        "policy_loss": set(core_algos.POLICY_LOSS_REGISTRY),
        "reward_manager": dict(REWARD_MANAGER),
        "agent_loop": set(agent_loops()),
        "rollout": registered_rollouts(),
        "trainer_mode": trainers,
    }


def find_file(value: str) -> Path | None:
    """A config-referenced path as verl will open it: absolute, or relative to the cwd, else to the folder holding
    the installed ``verl_configs`` (``verl_configs/tools/...`` names a shipped file wherever the package is)."""
    path = Path(os.path.expanduser(value))
    for candidate in [path] if path.is_absolute() else [Path.cwd() / path, config_dir().parent / path]:
        if candidate.exists():
            return candidate
    return None


def need_file(cfg: Any, key: str, report: CheckReport, what: str) -> Path | None:
    """The file ``key`` names (None when unset), or an error when it does not exist."""
    value = resolved(cfg, key, report)
    if value in (None, ""):
        return None
    found = find_file(str(value))
    if found is None:
        places = " and ".join(dict.fromkeys(str(p) for p in (Path.cwd(), config_dir().parent)))
        report.errors.append(
            Problem(key, f"{what} {value!r} does not exist (relative paths are looked up in {places})")
        )
    return found


def need_object(cfg: Any, key: str, report: CheckReport, what: str) -> None:
    """``key.path`` (``pkg://module``, ``file://x.py`` or a .py path, as verl's load_extern_object takes) must define
    ``key.name``. Modules are imported; files are only parsed (executing them could register names twice)."""
    path = resolved(cfg, f"{key}.path", report)
    name = resolved(cfg, f"{key}.name", report)
    if path in (None, ""):
        return
    where = f"{key}.path"
    if str(path).startswith("pkg://"):
        module_name = str(path).removeprefix("pkg://").replace("/", ".")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            report.errors.append(Problem(where, f"{what} module {module_name!r} cannot be imported: {first_line(e)}"))
            return
        if name and not hasattr(module, str(name)):
            report.errors.append(Problem(f"{key}.name", f"{module_name} has no {name!r}"))
        return
    file = find_file(str(path).removeprefix("file://"))
    if file is None:
        report.errors.append(Problem(where, f"{what} file {path!r} does not exist"))
        return
    try:
        tree = ast.parse(file.read_text())
    except SyntaxError as e:
        report.errors.append(Problem(where, f"{file} does not parse: {e}"))
        return
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if name and str(name) not in defined:
        report.errors.append(Problem(f"{key}.name", f"{file} defines no {name!r}"))


def check_name(report: CheckReport, key: str, value: Any, registered: Any, kind: str) -> None:
    """An error when ``value`` is not among ``registered`` (None: the registry is unavailable, nothing checked)."""
    if registered is None or value in registered:
        return
    message = f"{kind} {value!r} is not registered with verl (registered: {', '.join(sorted(map(str, registered)))})"
    if str(value).startswith("agentrl_"):
        message += "; is the agentrl_recipe plugin installed? run `agentrl-recipe doctor`"
    report.errors.append(Problem(key, message))


def check_tool_config(path: Path, key: str, report: CheckReport) -> None:
    """A tool YAML: a ``tools:`` list of importable verl BaseTool classes, each with a function name."""
    from verl.tools.base_tool import BaseTool  # verl: only when a config enables multi-turn tools (see registries)

    data = yaml.safe_load(path.read_text()) or {}
    tools = data.get("tools") if isinstance(data, dict) else None
    if not isinstance(tools, list) or not tools:
        report.errors.append(Problem(key, f"{path} has no `tools:` list"))
        return
    for i, tool in enumerate(tools):
        class_name = (tool or {}).get("class_name", "")
        module_name, _, attr = class_name.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), attr)
        except Exception as e:
            report.errors.append(Problem(key, f"{path} tools[{i}].class_name {class_name!r} cannot be imported: {e}"))
            continue
        if not (isinstance(cls, type) and issubclass(cls, BaseTool)):
            report.errors.append(Problem(key, f"{path} tools[{i}]: {class_name} is not a verl BaseTool"))
        schema_name = ((tool.get("tool_schema") or {}).get("function") or {}).get("name")
        if not schema_name:
            report.errors.append(Problem(key, f"{path} tools[{i}] has no tool_schema.function.name"))


def check_data_or_model(cfg: Any, key: str, report: CheckReport, strict: bool, hub_ok: bool) -> None:
    """Each path ``key`` names exists (a Hugging Face hub id passes when ``hub_ok``): a warning, an error if strict."""
    value = resolved(cfg, key, report)
    for item in value if isinstance(value, list) else [value]:
        if item in (None, "") or "://" in str(item):
            continue
        if find_file(str(item)) is not None:
            continue
        if hub_ok and re.fullmatch(r"[\w.-]+/[\w.-]+", str(item)):
            continue  # a Hugging Face hub id
        (report.errors if strict else report.warnings).append(Problem(key, f"{item!r} does not exist yet"))
