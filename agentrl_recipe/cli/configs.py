"""``agentrl-recipe configs``: list, show, copy and check the shipped verl configs (like torchtune's ``tune ls/cp``).

Why a checker: verl 0.9.1 merges unknown keys of an overlay YAML silently, and its ``main_ppo`` ignores the legacy
reward keys the original scripts use (``reward_model.reward_manager=dapo`` trains with the naive manager). So a config
that looks right can train the wrong thing. :func:`check` composes a config exactly as ``main_ppo`` /
``sft_trainer`` would (hydra, ``pkg://verl.trainer.config``) and reports:

- keys that exist neither in verl's composed base config nor in a documented extension namespace — ``agentrl.*``
  (:data:`agentrl_recipe.core.config.SECTIONS` dataclasses) and ``reward.reward_kwargs.*`` (the reward manager's kwargs
  dataclass) — with the closest valid key;
- legacy keys verl 0.9.1 ignores, naming the replacement;
- registered names (advantage estimator, policy loss, reward manager, agent loop, rollout backend, trainer mode)
  missing from verl's registries after the plugin is loaded, and files the config references that do not exist;
- what verl's own dataclasses and ``validate_config`` reject, plus token budgets verl only asserts deep inside a worker.

Data files and model checkpoints that do not exist yet are warnings (they are produced by earlier stages), errors
with ``strict_paths``. Relative paths are looked up from the working directory, then from the repo root.

The shipped YAML lives in ``verl_configs/`` at the repo root, so an editable install (``pip install -e .``, what
``make install`` does) is the supported path; ``AGENTRL_CONFIG_DIR`` points elsewhere.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import difflib
import importlib
import io
import os
import re
import sys
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from agentrl_recipe.core import names
from agentrl_recipe.harness.config_paths import REPO_ROOT, config_dir

NOT_RUNNABLE = ("recipe", "tools", "_generated")  # bodies included by runnable configs, tool YAML
VERL_ROOTS = {"ppo_trainer": "rl", "ppo_megatron_trainer": "rl", "sft_trainer_engine": "sft"}

# verl keys whose value is an open mapping (anything below them is passed through), beyond empty `{}` in the base.
FREEFORM = ("ray_kwargs.ray_init", "reward.custom_reward_function.reward_kwargs")
# verl reads these with .get() although its YAML does not declare them.
VERL_GET_ONLY = ("actor_rollout_ref.rollout.agent.agent_loop_manager_class",)

# (legacy key prefix, replacement). Longest prefix wins; the rest of the key is appended to the replacement.
LEGACY: dict[str, list[tuple[str, str]]] = {
    "rl": [
        ("reward_model.reward_manager", "reward.reward_manager.name"),
        ("reward_model.reward_kwargs", "reward.reward_kwargs"),
        ("reward_model.reward_loop_source", "reward.reward_manager.source"),
        ("reward_model.reward_loop_module_path", "reward.reward_manager.module.path"),
        ("reward_model.reward_loop_class_name", "reward.reward_manager.module.name"),
        ("reward_model.num_workers", "reward.num_workers"),
        ("reward_model.model.path", "reward.reward_model.model_path"),
        ("reward_model", "reward.reward_model"),
        ("custom_reward_function", "reward.custom_reward_function"),
        ("sandbox_fusion.url", "agentrl.sandbox.url (with agentrl.sandbox.backend=sandbox_fusion)"),
        ("sandbox_fusion.max_concurrent", "agentrl.sandbox.max_concurrency"),
        ("sandbox_fusion.memory_limit_mb", "agentrl.sandbox.memory_mb"),
        ("sandbox_fusion", "agentrl.sandbox"),
        ("trainer.val_generations_to_log_to_wandb", "trainer.log_val_generations"),
    ],
    "sft": [
        ("data.multiturn.messages_key", "data.messages_key"),
        ("data.multiturn.tools_key", "data.tools_key"),
        ("data.multiturn.enable_thinking_key", "data.enable_thinking_key"),
        ("data.multiturn", "data.messages_key / data.tools_key (multi-turn is verl 0.9.1's only SFT dataset)"),
        ("data.prompt_key", "data.messages_key (prompt/response SFT is gone: store rows as messages)"),
        ("data.response_key", "data.messages_key (prompt/response SFT is gone: store rows as messages)"),
        ("data.micro_batch_size", "data.micro_batch_size_per_gpu"),
        ("model.partial_pretrain", "model.path"),
        ("model.strategy", "engine.strategy"),
        ("model.fsdp_config", "engine"),
        ("ulysses_sequence_parallel_size", "engine.ulysses_sequence_parallel_size"),
        ("use_remove_padding", "model.use_remove_padding"),
        ("optim.warmup_steps_ratio", "optim.lr_warmup_steps_ratio"),
        ("optim.lr_scheduler", "optim.lr_scheduler_type"),
    ],
}

# reward.reward_kwargs of verl's own managers (they read config.reward.reward_kwargs; others ignore it).
# key -> its sub-keys (None: a plain value).
VERL_REWARD_KWARGS = {"dapo": {"overlong_buffer_cfg": {"enable", "len", "penalty_factor", "log"}, "max_resp_len": None}}


@dataclasses.dataclass
class Problem:
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.key}: {self.message}" if self.key else self.message


@dataclasses.dataclass
class CheckReport:
    name: str
    kind: str = "?"
    errors: list[Problem] = dataclasses.field(default_factory=list)
    warnings: list[Problem] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def format(self) -> str:
        lines = [f"{'OK' if self.ok else 'FAIL'} {self.name} ({self.kind})"]
        lines += [f"  error   {p}" for p in self.errors] + [f"  warning {p}" for p in self.warnings]
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------- finding configs
def list_configs() -> list[tuple[str, str, str]]:
    """(name, kind, one-line description) of every runnable shipped config."""
    root = config_dir()
    out = []
    for path in sorted(root.rglob("*.yaml"), key=lambda p: (len(p.relative_to(root).parts), str(p))):
        rel = path.relative_to(root)
        if rel.parts[0] in NOT_RUNNABLE:
            continue
        name = rel.with_suffix("").as_posix()
        kind = _kind_of_file(path) or "?"
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


def _kind_of_file(path: Path, depth: int = 0) -> str | None:
    """rl / sft from the verl root config the defaults chain reaches (ppo_trainer, sft_trainer_engine, ...)."""
    for entry in _defaults(path):
        if entry in VERL_ROOTS:
            return VERL_ROOTS[entry]
        for base in (path.parent, config_dir()):
            child = base / f"{entry}.yaml"
            if depth < 8 and child.is_file() and (kind := _kind_of_file(child, depth + 1)):
                return kind
    return None


def _verl_root(path: Path) -> str:
    kind = _kind_of_file(path)
    if kind is None:
        raise ValueError(f"{path}: its defaults reach none of verl's trainer configs {sorted(VERL_ROOTS)}")
    for entry in _defaults(path):
        if entry in VERL_ROOTS:
            return entry
    return "ppo_trainer" if kind == "rl" else "sft_trainer_engine"


# ---------------------------------------------------------------------------------------------------- composing
def compose(name_or_path: str, overrides: Sequence[str] = ()) -> tuple[Any, dict[str, str]]:
    """Compose a config as verl's entry points would. Returns (config without the hydra node, group choices)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf, open_dict

    directory, name, _ = locate(name_or_path)
    with initialize_config_dir(config_dir=str(directory), version_base=None):
        cfg = hydra_compose(config_name=name, overrides=list(overrides), return_hydra_config=True)
    choices = {k: v for k, v in OmegaConf.to_container(cfg.hydra.runtime.choices).items() if v is not None}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


@cache
def _base(root: str, choice_overrides: tuple[str, ...]) -> tuple[Any, dict[str, str]]:
    from hydra import compose as hydra_compose
    from hydra import initialize_config_module
    from omegaconf import OmegaConf, open_dict

    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        cfg = hydra_compose(config_name=root, overrides=list(choice_overrides), return_hydra_config=True)
    choices = {k: v for k, v in OmegaConf.to_container(cfg.hydra.runtime.choices).items() if v is not None}
    with open_dict(cfg):
        del cfg["hydra"]
    return cfg, choices


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


# ---------------------------------------------------------------------------------------------------- checking keys
def _leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, node


def _lookup(tree: Any, key: str) -> tuple[bool, Any]:
    node = tree
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _legacy(kind: str, key: str) -> str | None:
    for prefix, replacement in LEGACY[kind]:
        if key == prefix or key.startswith(prefix + "."):
            rest = key[len(prefix) :]
            return replacement + rest if rest and " " not in replacement else replacement
    return None


def _dataclass_has_field(node: dict, name: str) -> bool:
    """True when ``node``'s ``_target_`` is a dataclass with field ``name`` (e.g. FSDPEngineConfig.mixed_precision)."""
    import dataclasses
    import importlib

    target = node.get("_target_")
    if not isinstance(target, str) or "." not in target:
        return False
    module, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
    return dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}


def _check_keys(cfg: Any, base: Any, kind: str, report: CheckReport, allow: Sequence[str]) -> None:
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=False)
    base_tree = OmegaConf.to_container(base, resolve=False)
    for key, value in _leaves(tree):
        top = key.split(".")[0]
        if top == names.CONFIG_NAMESPACE or key.startswith("reward.reward_kwargs"):
            continue  # checked against the plugin's dataclasses
        if any(key == a or key.startswith(a + ".") for a in (*allow, *VERL_GET_ONLY)):
            continue
        in_base, base_value = _lookup(base_tree, key)
        replacement = _legacy(kind, key)
        if replacement and (not in_base or (base_value is None and value is not None)):
            report.errors.append(Problem(key, f"legacy key that verl 0.9.1 ignores; use {replacement}"))
            continue
        if in_base:
            continue
        parts = key.split(".")
        for depth in range(len(parts) - 1, 0, -1):
            parent = ".".join(parts[:depth])
            found, parent_value = _lookup(base_tree, parent)
            if found:
                break
        else:
            parent, parent_value = "", base_tree
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


def _check_namespace(cfg: Any, report: CheckReport) -> None:
    from omegaconf import OmegaConf

    from agentrl_recipe.core import compat
    from agentrl_recipe.core import config as agentrl_config

    block = cfg.get(names.CONFIG_NAMESPACE)
    if block is None:
        return
    for section in OmegaConf.to_container(block, resolve=False):
        where = f"{names.CONFIG_NAMESPACE}.{section}"
        if section == "compat":  # the one scalar key: agentrl_recipe/core/compat.py
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


def _resolved(cfg: Any, key: str, report: CheckReport | None = None) -> Any:
    from omegaconf import OmegaConf

    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except Exception as e:
        if report is not None:
            report.errors.append(Problem(key, f"cannot resolve: {e}"))
        return None


# ---------------------------------------------------------------------------------------------------- names and files
@cache
def _registries() -> dict[str, Any]:
    """verl's registries after ``import verl`` (entry-point plugins) and an explicit plugin import."""
    import verl  # noqa: F401  (loads the verl.plugins entry points, as every worker does)

    loaded_by_verl = "agentrl_recipe.core.plugin" in sys.modules
    importlib.import_module("agentrl_recipe.core.plugin")
    from verl.experimental.agent_loop import agent_loop
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo import core_algos
    from verl.workers.rollout.base import _ROLLOUT_REGISTRY

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
        "agent_loop": set(agent_loop._agent_loop_registry),
        "rollout": set(_ROLLOUT_REGISTRY),
        "trainer_mode": trainers,
    }


def find_file(value: str) -> Path | None:
    """A config-referenced path as verl will open it: absolute, or relative to the cwd, else to the repo root."""
    path = Path(os.path.expanduser(value))
    for candidate in [path] if path.is_absolute() else [Path.cwd() / path, REPO_ROOT / path]:
        if candidate.exists():
            return candidate
    return None


def _need_file(cfg: Any, key: str, report: CheckReport, what: str) -> Path | None:
    value = _resolved(cfg, key, report)
    if value in (None, ""):
        return None
    found = find_file(str(value))
    if found is None:
        places = " and ".join(dict.fromkeys(str(p) for p in (Path.cwd(), REPO_ROOT)))
        report.errors.append(
            Problem(key, f"{what} {value!r} does not exist (relative paths are looked up in {places})")
        )
    return found


def _need_object(cfg: Any, key: str, report: CheckReport, what: str) -> None:
    """``key.path`` (``pkg://module``, ``file://x.py`` or a .py path, as verl's load_extern_object takes) must define
    ``key.name``. Modules are imported; files are only parsed (executing them could register names twice)."""
    path = _resolved(cfg, f"{key}.path", report)
    name = _resolved(cfg, f"{key}.name", report)
    if path in (None, ""):
        return
    where = f"{key}.path"
    if str(path).startswith("pkg://"):
        module_name = str(path).removeprefix("pkg://").replace("/", ".")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            report.errors.append(Problem(where, f"{what} module {module_name!r} cannot be imported: {_first_line(e)}"))
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


def _check_name(report: CheckReport, key: str, value: Any, registered: Any, kind: str) -> None:
    if registered is None or value in registered:
        return
    message = f"{kind} {value!r} is not registered with verl (registered: {', '.join(sorted(map(str, registered)))})"
    if str(value).startswith("agentrl_"):
        message += "; is the agentrl_recipe plugin installed? run `agentrl-recipe doctor`"
    report.errors.append(Problem(key, message))


def _check_tool_config(path: Path, key: str, report: CheckReport) -> None:
    from verl.tools.base_tool import BaseTool

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


def _check_data_or_model(cfg: Any, key: str, report: CheckReport, strict: bool, hub_ok: bool) -> None:
    value = _resolved(cfg, key, report)
    for item in value if isinstance(value, list) else [value]:
        if item in (None, "") or "://" in str(item):
            continue
        if find_file(str(item)) is not None:
            continue
        if hub_ok and re.fullmatch(r"[\w.-]+/[\w.-]+", str(item)):
            continue  # a Hugging Face hub id
        (report.errors if strict else report.warnings).append(Problem(key, f"{item!r} does not exist yet"))


def _check_rl(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    reg = _registries()
    arr = "actor_rollout_ref"
    _check_name(
        report,
        "algorithm.adv_estimator",
        _resolved(cfg, "algorithm.adv_estimator"),
        reg["adv_estimator"],
        "advantage estimator",
    )
    loss_key = f"{arr}.actor.policy_loss.loss_mode"
    _check_name(report, loss_key, _resolved(cfg, loss_key), reg["policy_loss"], "policy loss")
    rollout = (_resolved(cfg, f"{arr}.rollout.name", report), _resolved(cfg, f"{arr}.rollout.mode", report))
    _check_name(report, f"{arr}.rollout.name/mode", rollout, reg["rollout"], "rollout backend")
    _check_name(
        report,
        "trainer.v1.trainer_mode",
        _resolved(cfg, "trainer.v1.trainer_mode"),
        reg["trainer_mode"],
        "v1 trainer mode",
    )

    agent_loops = set(reg["agent_loop"])
    loop_cfg = _need_file(cfg, f"{arr}.rollout.agent.agent_loop_config_path", report, "agent loop config")
    if loop_cfg is not None:
        agent_loops |= {e.get("name") for e in (yaml.safe_load(loop_cfg.read_text()) or []) if isinstance(e, dict)}
    loop_key = f"{arr}.rollout.agent.default_agent_loop"
    _check_name(report, loop_key, _resolved(cfg, loop_key), agent_loops, "agent loop")

    if _resolved(cfg, f"{arr}.rollout.multi_turn.enable"):
        tool_key = f"{arr}.rollout.multi_turn.tool_config_path"
        tool_cfg = _need_file(cfg, tool_key, report, "tool config")
        if tool_cfg is not None:
            _check_tool_config(tool_cfg, tool_key, report)
        _need_file(cfg, f"{arr}.rollout.multi_turn.function_tool_path", report, "function tool file")
    _need_object(cfg, "data.custom_cls", report, "dataset class")
    _need_object(cfg, "reward.custom_reward_function", report, "reward function")
    _need_object(cfg, "trainer.v1.sampler.custom_sampler", report, "replay buffer (sampler)")
    _check_reward(cfg, report, reg)
    try:  # the plugin's own cross-key rules (a mask that is on but cannot take effect, ...)
        from agentrl_recipe.core.algos.sampler import check_trainer_config
    except ImportError:
        check_trainer_config = None
    if check_trainer_config is not None:
        try:
            report.errors += [Problem("", p) for p in check_trainer_config(cfg)]
        except Exception as e:
            report.errors.append(Problem("trainer.v1.sampler", _first_line(e)))
    from agentrl_recipe.cli import async_checks  # imports verl's replay buffer, like the sampler rules above

    async_errors, async_warnings = async_checks.check(cfg)  # trainer mode, its replay buffer, rollout correction
    report.errors += [Problem(key, message) for key, message in async_errors]
    report.warnings += [Problem(key, message) for key, message in async_warnings]

    # Token budgets verl asserts only inside a worker, after the cluster is up.
    budget = (_resolved(cfg, "data.max_prompt_length") or 0) + (_resolved(cfg, "data.max_response_length") or 0)
    sp = _resolved(cfg, f"{arr}.actor.ulysses_sequence_parallel_size") or 1
    if _resolved(cfg, f"{arr}.actor.use_dynamic_bsz"):
        for key in (f"{arr}.actor.ppo_max_token_len_per_gpu", f"{arr}.rollout.log_prob_max_token_len_per_gpu"):
            per_gpu = _resolved(cfg, key) or 0
            if per_gpu * sp < budget:
                report.errors.append(Problem(key, f"{per_gpu} × SP {sp} < max prompt + response {budget} tokens"))

    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), (f"{arr}.model.path", True)):
        _check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, f"{arr}.model", sp)
    _check_verl_dataclasses(cfg, report, ["algorithm", f"{arr}.rollout"], validate_ppo=True)


def _check_reward(cfg: Any, report: CheckReport, reg: dict[str, Any]) -> None:
    from omegaconf import OmegaConf

    source = _resolved(cfg, "reward.reward_manager.source")
    name = _resolved(cfg, "reward.reward_manager.name")
    cls = None
    if source == "register":
        _check_name(report, "reward.reward_manager.name", name, reg["reward_manager"], "reward manager")
        cls = reg["reward_manager"].get(name)
    elif source == "importlib":
        _need_file(cfg, "reward.reward_manager.module.path", report, "reward manager file")
    else:
        report.errors.append(Problem("reward.reward_manager.source", f"must be register or importlib, got {source!r}"))
    kwargs_node = OmegaConf.select(cfg, "reward.reward_kwargs")
    kwargs = _resolved(cfg, "reward.reward_kwargs", report) if kwargs_node is not None else None
    schema = getattr(cls, "reward_kwargs_cls", None) or getattr(
        sys.modules.get(getattr(cls, "__module__", "")), "RewardKwargs", None
    )
    if schema is not None:
        try:
            if hasattr(schema, "from_trainer_config"):
                schema.from_trainer_config(
                    OmegaConf.create({"reward": {"reward_kwargs": kwargs or {}}, "data": _resolved(cfg, "data")})
                )
            else:
                from agentrl_recipe.core.config import from_mapping

                from_mapping(schema, kwargs, where="reward.reward_kwargs")
        except Exception as e:
            report.errors.append(Problem("reward.reward_kwargs", str(e)))
    elif kwargs and name in VERL_REWARD_KWARGS and source == "register":
        known = VERL_REWARD_KWARGS[name]
        for key, _ in _leaves(kwargs):
            head, _, sub = key.partition(".")
            if head not in known or (sub and sub not in (known[head] or ())):
                report.errors.append(Problem(f"reward.reward_kwargs.{key}", f"verl's {name} manager does not read it"))
    elif kwargs and source == "register":
        report.errors.append(Problem("reward.reward_kwargs", f"reward manager {name!r} reads no reward_kwargs"))
    max_resp = (kwargs or {}).get("max_resp_len")
    if max_resp is not None and max_resp != _resolved(cfg, "data.max_response_length"):
        report.warnings.append(
            Problem("reward.reward_kwargs.max_resp_len", f"{max_resp} differs from data.max_response_length")
        )


def _check_sft(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    _need_object(cfg, "data.custom_cls", report, "dataset class")
    if _resolved(cfg, "data.use_dynamic_bsz"):
        per_gpu = _resolved(cfg, "data.max_token_len_per_gpu") or 0
        sp = _resolved(cfg, "engine.ulysses_sequence_parallel_size") or 1
        max_length = _resolved(cfg, "data.max_length") or 0
        if per_gpu * sp < max_length:
            report.errors.append(
                Problem("data.max_token_len_per_gpu", f"{per_gpu} × SP {sp} < data.max_length {max_length}")
            )
    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), ("model.path", True)):
        _check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, "model", _resolved(cfg, "engine.ulysses_sequence_parallel_size") or 1)
    _check_verl_dataclasses(cfg, report, ["optim", "engine", "checkpoint"], validate_ppo=False)


def _check_attention(cfg: Any, report: CheckReport, model: str, sp: int) -> None:
    """What verl's FSDP engine raises only at init, and the flash-attn dependency of verl's default attention."""
    padding_key = f"{model}.use_remove_padding"
    remove_padding = bool(_resolved(cfg, padding_key))
    if sp > 1 and not remove_padding:  # verl's engine: "you must enable `use_remove_padding`" (RL: validate_config)
        report.errors.append(Problem(padding_key, f"Ulysses sequence parallel size {sp} needs use_remove_padding=true"))
    attn = _node(cfg, f"{model}.override_config.attn_implementation") or "flash_attention_2"
    if remove_padding and attn != "flash_attention_2":  # packed sequences attend across rows without varlen kernels
        report.errors.append(
            Problem(padding_key, f"remove-padding needs attn_implementation flash_attention_2 (got {attn})")
        )
    if attn == "flash_attention_2" and str(_node(cfg, "trainer.device") or "cuda") != "cpu":
        import importlib.util

        if importlib.util.find_spec("flash_attn") is None:
            report.warnings.append(
                Problem(
                    f"{model}.override_config.attn_implementation",
                    "flash_attention_2 (verl's default) needs flash-attn, not installed here: `make install-gpu` "
                    "builds it on GPU nodes (`make preflight` fails without it)",
                )
            )


def _check_verl_dataclasses(cfg: Any, report: CheckReport, sections: list[str], *, validate_ppo: bool) -> None:
    """Build verl's config dataclasses (their __post_init__ checks values) and run main_ppo's validate_config."""
    from verl.utils import omega_conf_to_dataclass

    for section in sections:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                omega_conf_to_dataclass(_node(cfg, section))
        except Exception as e:
            report.errors.append(Problem(section, f"verl rejects it: {_first_line(e)}"))
    if validate_ppo:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config

        try:
            with contextlib.redirect_stdout(io.StringIO()):
                validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        except Exception as e:
            report.errors.append(Problem("", f"verl's validate_config rejects the config: {_first_line(e)}"))


def _node(cfg: Any, key: str) -> Any:
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key)


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:400]


def check(
    name_or_path: str, overrides: Sequence[str] = (), *, strict_paths: bool = False, allow: Sequence[str] = ()
) -> CheckReport:
    """Compose ``name_or_path`` (+ hydra ``overrides``) and report everything verl would silently get wrong."""
    report = CheckReport(name=name_or_path)
    try:
        _, _, file = locate(name_or_path)
        root = _verl_root(file)
        report.kind = VERL_ROOTS[root]
        cfg, choices = compose(name_or_path, overrides)
    except Exception as e:
        report.errors.append(Problem("", f"cannot compose: {_first_line(e)}"))
        return report
    _check_keys(cfg, verl_base(root, choices), report.kind, report, allow)
    _check_namespace(cfg, report)
    if report.kind == "rl":
        _check_rl(cfg, report, strict_paths)
    else:
        _check_sft(cfg, report, strict_paths)
    return report


# ---------------------------------------------------------------------------------------------------- copying
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


# ---------------------------------------------------------------------------------------------------- CLI
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
        from omegaconf import OmegaConf

        cfg, _ = compose(args.name, args.overrides)
        print(OmegaConf.to_yaml(cfg, resolve=args.resolve), end="")
        return 0
    if args.action == "cp":
        target = copy_config(args.name, args.dest, force=args.force)
        kind = _kind_of_file(target)
        print(f"wrote {target}")
        print(f"run:   make {kind or 'rl'} CONFIG={target}\ncheck: agentrl-recipe configs check {target}")
        return 0
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
