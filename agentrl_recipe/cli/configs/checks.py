"""``configs check``: compose a config exactly as verl's ``main_ppo`` / ``sft_trainer`` would and report everything
verl would silently get wrong (:func:`check`, a :class:`CheckReport`).

Why a checker: verl 0.9.1 merges unknown keys of an overlay YAML silently, and its ``main_ppo`` ignores the legacy
reward keys the original scripts use (``reward_model.reward_manager=dapo`` trains with the naive manager). So a config
that looks right can train the wrong thing. The rules, in the order of this module:

- **keys**: every key exists in verl's composed base config, is a field of the dataclass verl builds from its
  section, or lies in a documented extension namespace — ``agentrl.*``
  (:data:`agentrl_recipe.training.recipe_config.SECTIONS` dataclasses) and ``reward.reward_kwargs.*`` (the reward
  manager's kwargs dataclass). An unknown key names the closest valid one;
- **legacy keys** verl 0.9.1 ignores (:data:`LEGACY`), naming the key that replaced each;
- **references**: registered names (advantage estimator, policy loss, reward manager, agent loop, rollout backend,
  trainer mode) are in verl's registries after the plugin is loaded, and the files, modules and objects the config
  names exist. Data files and checkpoints that do not exist yet are warnings (earlier stages produce them), errors
  with ``strict_paths``. Relative paths are looked up from the working directory, then from the repo root;
- **per-kind rules**: what verl's own dataclasses and ``validate_config`` reject, the reward manager's kwargs, token
  budgets and attention settings verl asserts only inside a worker (with :mod:`.async_checks` for the async trainer
  modes) — all before a cluster is up.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import difflib
import importlib
import importlib.util
import io
import re
import sys
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.cli.configs.files import VERL_ROOTS, compose, find_file, locate, verl_base, verl_root
from agentrl_recipe.config_paths import config_dir
from agentrl_recipe.training import compat
from agentrl_recipe.training import recipe_config as agentrl_config

ARR = "actor_rollout_ref"
# verl keys whose value is an open mapping (anything below them is passed through), beyond empty `{}` in the base.
FREEFORM = ("ray_kwargs.ray_init", "reward.custom_reward_function.reward_kwargs")
DATA_NAMESPACE = f"data.{names.CONFIG_NAMESPACE}"  # the RL dataset's settings (check_namespace checks them)
# verl reads these with .get() although its YAML does not declare them.
VERL_GET_ONLY = ("actor_rollout_ref.rollout.agent.agent_loop_manager_class",)
# reward.reward_kwargs of verl's own managers (they read config.reward.reward_kwargs; others ignore it).
# key -> its sub-keys (None: a plain value).
VERL_REWARD_KWARGS = {"dapo": {"overlong_buffer_cfg": {"enable", "len", "penalty_factor", "log"}, "max_resp_len": None}}

# Config keys of the original scripts that verl 0.9.1 ignores, each with the key that replaced it: (legacy key prefix,
# replacement). Longest prefix wins: a prefix comes before any shorter one it extends. The rest of the key is appended
# to the replacement, unless the replacement is prose (it has a space).
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


# ---------------------------------------------------------------------------------------------------- the report
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


def resolved(cfg: Any, key: str, report: CheckReport | None = None) -> Any:
    """``key``'s value with interpolations resolved (containers as plain dicts/lists); None, and an error in
    ``report`` when given, when it cannot be resolved."""
    try:
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
    except Exception as e:
        if report is not None:
            report.errors.append(Problem(key, f"cannot resolve: {e}"))
        return None


def node(cfg: Any, key: str) -> Any:
    """``key``'s node as it is (interpolations unresolved); None when absent."""
    return OmegaConf.select(cfg, key)


def first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0][:400]


# ------------------------------------------------------------------------------------------------------ the check
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


# ----------------------------------------------------------------------------------------------- keys and legacy
def leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf of a plain nested dict; an empty dict is a leaf."""
    if isinstance(tree, dict) and tree:
        for key, value in tree.items():
            yield from leaves(value, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, tree


def legacy(kind: str, key: str) -> str | None:
    """The replacement of ``key`` when it is a legacy key of an ``kind`` (rl / sft) config, else None."""
    for prefix, replacement in LEGACY[kind]:
        if key == prefix or key.startswith(prefix + "."):
            rest = key[len(prefix) :]
            return replacement + rest if rest and " " not in replacement else replacement
    return None


def check_keys(cfg: Any, base: Any, kind: str, report: CheckReport, allow: Sequence[str]) -> None:
    """Errors for every key of ``cfg`` that ``base`` (verl's config) lacks, and every legacy key verl ignores."""
    tree = OmegaConf.to_container(cfg, resolve=False)
    base_tree = OmegaConf.to_container(base, resolve=False)
    for key, value in leaves(tree):
        if _unchecked(key, allow):
            continue
        message = _key_problem(key, value, base_tree, kind, tree)
        if message:
            report.errors.append(Problem(key, message))


def _unchecked(key: str, allow: Sequence[str]) -> bool:
    """Keys checked against the plugin's dataclasses instead (:func:`check_namespace`, the reward's kwargs), and keys
    accepted as they are."""
    if key.split(".")[0] == names.CONFIG_NAMESPACE or key.startswith(("reward.reward_kwargs", DATA_NAMESPACE + ".")):
        return True
    return any(key == a or key.startswith(a + ".") for a in (*allow, *VERL_GET_ONLY))


def _key_problem(key: str, value: Any, base_tree: Any, kind: str, tree: Any = None) -> str | None:
    """Why verl would ignore ``key`` (a legacy key, an unknown one), or None when verl reads it. A section of ``tree``
    (the config) whose own ``_target_`` is a dataclass (a subclass of verl's) may hold that dataclass's fields."""
    in_base, base_value = _lookup(base_tree, key)
    replacement = legacy(kind, key)
    if replacement and (not in_base or (base_value is None and value is not None)):
        return f"legacy key that verl 0.9.1 ignores; use {replacement}"
    if in_base:
        return None
    parts = key.split(".")
    parent, parent_value = _nearest_parent(base_tree, parts)
    if parent_value in ({}, None) or any(parent == f or parent.startswith(f + ".") for f in FREEFORM):
        return None
    if not isinstance(parent_value, dict):
        return f"{parent} is a value in verl's config, not a section"
    missing = parts[len(parent.split(".")) if parent else 0]
    if _dataclass_has_field(parent_value, missing):
        return None  # absent from verl's YAML but a field of the dataclass verl builds from this node
    own = _lookup(tree, parent)[1] if tree is not None and parent else None
    if isinstance(own, dict) and _dataclass_has_field(own, missing):
        return None  # a field of the config's own _target_ (agentrl_recipe.training.algos.losses.TCRPolicyLossConfig)
    hint = difflib.get_close_matches(missing, list(parent_value), n=1)
    where = f"under {parent}" if parent else "at the top level"
    did_you_mean = f" (did you mean {(parent + '.' if parent else '') + hint[0]}?)" if hint else ""
    return f"unknown key: verl's config has no {missing!r} {where}{did_you_mean}; verl would ignore it"


def _lookup(tree: Any, key: str) -> tuple[bool, Any]:
    value = tree
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return False, None
        value = value[part]
    return True, value


def _nearest_parent(base_tree: Any, parts: list[str]) -> tuple[str, Any]:
    """The longest proper prefix of ``parts`` that verl's config has, and its value ("" and the root when none)."""
    for depth in range(len(parts) - 1, 0, -1):
        parent = ".".join(parts[:depth])
        found, parent_value = _lookup(base_tree, parent)
        if found:
            return parent, parent_value
    return "", base_tree


def _dataclass_has_field(section: dict, name: str) -> bool:
    """True when ``section``'s ``_target_`` is a dataclass with field ``name`` (FSDPEngineConfig.mixed_precision)."""
    target = section.get("_target_")
    if not isinstance(target, str) or "." not in target:
        return False
    module, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return False
    return dataclasses.is_dataclass(cls) and name in {f.name for f in dataclasses.fields(cls)}


def check_namespace(cfg: Any, report: CheckReport) -> None:
    """Each ``agentrl.<section>`` against the plugin's dataclass for it (unknown fields, bad values); ``data.agentrl``
    (the RL dataset's settings, agentrl_recipe/training/rl_dataset.py) against its own."""
    if OmegaConf.select(cfg, DATA_NAMESPACE) is not None:
        try:
            from agentrl_recipe.training.rl_dataset import (
                DatasetSettings,  # imports verl: only for a config that has it
            )

            DatasetSettings.from_data_config(cfg.data)
        except Exception as e:  # unknown field, bad value, unresolvable interpolation
            report.errors.append(Problem(DATA_NAMESPACE, str(e)))
    block = cfg.get(names.CONFIG_NAMESPACE)
    if block is None:
        return
    for section in map(str, block.keys()):
        where = f"{names.CONFIG_NAMESPACE}.{section}"
        message = _section_problem(cfg, section, where)
        if message:
            report.errors.append(Problem(where, message))


def _section_problem(cfg: Any, section: str, where: str) -> str | None:
    """Why the plugin would reject ``agentrl.<section>``, or None."""
    try:
        if section == "compat":  # the one scalar key: agentrl_recipe/training/compat.py
            compat.check_mode(OmegaConf.select(cfg, where), where=where)
            return None
        cls = agentrl_config.SECTIONS.get(section)
        if cls is None:
            return f"unknown section; the plugin's sections are {sorted(agentrl_config.SECTIONS)}"
        values = OmegaConf.to_container(OmegaConf.select(cfg, where), resolve=True)
        if not isinstance(values, dict):
            return f"must be a mapping of {cls.__name__}'s keys, got {values!r:.80}"
        agentrl_config.from_mapping(cls, {str(k): v for k, v in values.items()}, where=where)
    except Exception as e:  # unknown field, bad value (__post_init__), unresolvable interpolation
        return str(e)
    return None


# --------------------------------------------------------------------------------- registered names and references
@cache
def registries() -> dict[str, Any]:
    """verl's registries after ``import verl`` (entry-point plugins) and an explicit plugin import."""
    # Imported here: verl takes ~10 s to import and loads the plugin, which `configs list/show/cp` must not pay.
    import verl  # noqa: F401  (loads the verl.plugins entry points, as every worker does)

    loaded_by_verl = "agentrl_recipe.plugin" in sys.modules
    importlib.import_module("agentrl_recipe.plugin")
    from verl.experimental.reward_loop.reward_manager.registry import REWARD_MANAGER
    from verl.trainer.ppo import core_algos

    from agentrl_recipe.training.verl_adapters.agent_loop_registry import agent_loops
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


def check_name(report: CheckReport, key: str, value: Any, registered: Any, kind: str) -> None:
    """An error when ``value`` is not among ``registered`` (None: the registry is unavailable, nothing checked)."""
    if registered is None or value in registered:
        return
    message = f"{kind} {value!r} is not registered with verl (registered: {', '.join(sorted(map(str, registered)))})"
    if str(value).startswith("agentrl_"):
        message += "; is the agentrl_recipe plugin installed? run `agentrl-recipe doctor`"
    report.errors.append(Problem(key, message))


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
    if str(path).startswith("pkg://"):
        _need_module_object(report, key, str(path).removeprefix("pkg://").replace("/", "."), name, what)
    else:
        _need_file_object(report, key, str(path), name, what)


def _need_module_object(report: CheckReport, key: str, module_name: str, name: Any, what: str) -> None:
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        report.errors.append(
            Problem(f"{key}.path", f"{what} module {module_name!r} cannot be imported: {first_line(e)}")
        )
        return
    if name and not hasattr(module, str(name)):
        report.errors.append(Problem(f"{key}.name", f"{module_name} has no {name!r}"))


def _need_file_object(report: CheckReport, key: str, path: str, name: Any, what: str) -> None:
    file = find_file(path.removeprefix("file://"))
    if file is None:
        report.errors.append(Problem(f"{key}.path", f"{what} file {path!r} does not exist"))
        return
    try:
        tree = ast.parse(file.read_text())
    except SyntaxError as e:
        report.errors.append(Problem(f"{key}.path", f"{file} does not parse: {e}"))
        return
    defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    if name and str(name) not in defined:
        report.errors.append(Problem(f"{key}.name", f"{file} defines no {name!r}"))


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


# ----------------------------------------------------------------------------------------------- per-kind rules
def check_rl(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    """Every rule of an RL (``main_ppo``) config."""
    reg = registries()
    _check_rl_names(cfg, report, reg)
    _check_rl_files(cfg, report)
    _check_reward(cfg, report, reg)
    _check_trainer_rules(cfg, report)
    sp = resolved(cfg, f"{ARR}.actor.ulysses_sequence_parallel_size") or 1
    _check_rl_token_budgets(cfg, report, sp)
    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), (f"{ARR}.model.path", True)):
        check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, f"{ARR}.model", sp)
    _check_verl_dataclasses(cfg, report, ["algorithm", f"{ARR}.rollout"], validate_ppo=True)


def _check_rl_token_budgets(cfg: Any, report: CheckReport, sp: int) -> None:
    """Token budgets verl asserts only inside a worker, after the cluster is up."""
    if not resolved(cfg, f"{ARR}.actor.use_dynamic_bsz"):
        return
    budget = (resolved(cfg, "data.max_prompt_length") or 0) + (resolved(cfg, "data.max_response_length") or 0)
    for key in (f"{ARR}.actor.ppo_max_token_len_per_gpu", f"{ARR}.rollout.log_prob_max_token_len_per_gpu"):
        per_gpu = resolved(cfg, key) or 0
        if per_gpu * sp < budget:
            report.errors.append(Problem(key, f"{per_gpu} × SP {sp} < max prompt + response {budget} tokens"))


def _check_rl_names(cfg: Any, report: CheckReport, reg: dict[str, Any]) -> None:
    """The advantage estimator, policy loss, rollout backend, trainer mode and agent loop are registered."""
    estimator = resolved(cfg, "algorithm.adv_estimator")
    check_name(report, "algorithm.adv_estimator", estimator, reg["adv_estimator"], "advantage estimator")
    loss_key = f"{ARR}.actor.policy_loss.loss_mode"
    check_name(report, loss_key, resolved(cfg, loss_key), reg["policy_loss"], "policy loss")
    rollout = (resolved(cfg, f"{ARR}.rollout.name", report), resolved(cfg, f"{ARR}.rollout.mode", report))
    check_name(report, f"{ARR}.rollout.name/mode", rollout, reg["rollout"], "rollout backend")
    mode = resolved(cfg, "trainer.v1.trainer_mode")
    check_name(report, "trainer.v1.trainer_mode", mode, reg["trainer_mode"], "v1 trainer mode")

    agent_loops = set(reg["agent_loop"])
    loop_cfg = need_file(cfg, f"{ARR}.rollout.agent.agent_loop_config_path", report, "agent loop config")
    if loop_cfg is not None:
        agent_loops |= {e.get("name") for e in (yaml.safe_load(loop_cfg.read_text()) or []) if isinstance(e, dict)}
    loop_key = f"{ARR}.rollout.agent.default_agent_loop"
    check_name(report, loop_key, resolved(cfg, loop_key), agent_loops, "agent loop")


def _check_rl_files(cfg: Any, report: CheckReport) -> None:
    """The tool config, function tools, dataset class, reward function and replay buffer the config names exist."""
    if resolved(cfg, f"{ARR}.rollout.multi_turn.enable"):
        tool_key = f"{ARR}.rollout.multi_turn.tool_config_path"
        tool_cfg = need_file(cfg, tool_key, report, "tool config")
        if tool_cfg is not None:
            check_tool_config(tool_cfg, tool_key, report)
            _check_tool_mode_reaches(cfg, tool_cfg, report)
        need_file(cfg, f"{ARR}.rollout.multi_turn.function_tool_path", report, "function tool file")
    need_object(cfg, "data.custom_cls", report, "dataset class")
    need_object(cfg, "reward.custom_reward_function", report, "reward function")
    need_object(cfg, "trainer.v1.sampler.custom_sampler", report, "replay buffer (sampler)")


def _check_tool_mode_reaches(cfg: Any, tool_cfg: Path, report: CheckReport) -> None:
    """Only ``agentrl_tool_agent`` hands a tool the trainer's ``agentrl`` block: under verl's stock ``tool_agent`` a
    recipe tool runs in the plugin's default mode, so a config asking for another one is refused."""
    loop = resolved(cfg, f"{ARR}.rollout.agent.default_agent_loop")
    mode = resolved(cfg, f"{names.CONFIG_NAMESPACE}.compat") or compat.DEFAULT_MODE
    if loop == names.AGENT_LOOP or mode == compat.DEFAULT_MODE:
        return
    tools = (yaml.safe_load(tool_cfg.read_text()) or {}).get("tools") or []
    recipe_tools = [t.get("class_name") for t in tools if str((t or {}).get("class_name", "")).startswith("agentrl_")]
    if recipe_tools:
        report.errors.append(
            Problem(
                f"{ARR}.rollout.agent.default_agent_loop",
                f"{loop!r} never hands {recipe_tools[0]} the trainer's agentrl.compat: {mode}; the tool would run in "
                f"{compat.DEFAULT_MODE} mode. Use {names.AGENT_LOOP!r} (or set every behaviour key in the tool YAML "
                f"and agentrl.compat: {compat.DEFAULT_MODE})",
            )
        )


def _check_trainer_rules(cfg: Any, report: CheckReport) -> None:
    """The plugin's cross-key rules (a mask that is on but cannot take effect, ...) and the async trainer's."""
    # Both import verl (the sampler subclasses verl's replay buffer): loaded here, not by `configs list/show/cp`.
    from agentrl_recipe.training.algos.sampler import check_trainer_config

    try:
        report.errors += [Problem("", p) for p in check_trainer_config(cfg)]
    except Exception as e:
        report.errors.append(Problem("trainer.v1.sampler", first_line(e)))
    from agentrl_recipe.cli.configs import async_checks, cpu_vllm_checks

    async_errors, async_warnings = async_checks.check(cfg)  # trainer mode, its replay buffer, rollout correction
    report.errors += [Problem(key, message) for key, message in async_errors]
    report.errors += [Problem(key, message) for key, message in cpu_vllm_checks.check(cfg)]
    report.warnings += [Problem(key, message) for key, message in async_warnings]


def _check_reward(cfg: Any, report: CheckReport, reg: dict[str, Any]) -> None:
    """The reward manager is registered (or its file exists) and reads the ``reward.reward_kwargs`` it is given."""
    source = resolved(cfg, "reward.reward_manager.source")
    name = resolved(cfg, "reward.reward_manager.name")
    cls = None
    if source == "register":
        check_name(report, "reward.reward_manager.name", name, reg["reward_manager"], "reward manager")
        cls = reg["reward_manager"].get(name)
    elif source == "importlib":
        cls = _reward_manager_by_path(cfg, report, name)
    else:
        report.errors.append(Problem("reward.reward_manager.source", f"must be register or importlib, got {source!r}"))
    kwargs = resolved(cfg, "reward.reward_kwargs", report) if node(cfg, "reward.reward_kwargs") is not None else None
    schema = _reward_kwargs_schema(cls)
    if schema is not None:
        _check_reward_kwargs_schema(cfg, report, schema, kwargs)
    elif kwargs and source == "register":
        _check_verl_reward_kwargs(report, name, kwargs)
    max_resp = (kwargs or {}).get("max_resp_len")
    if max_resp is not None and max_resp != resolved(cfg, "data.max_response_length"):
        report.warnings.append(
            Problem("reward.reward_kwargs.max_resp_len", f"{max_resp} differs from data.max_response_length")
        )


def _reward_manager_by_path(cfg: Any, report: CheckReport, name: Any) -> Any:
    """The class ``reward.reward_manager.module.path`` + ``name`` load (verl's loader), or None with an error."""
    from verl.utils.import_utils import load_extern_object

    path = resolved(cfg, "reward.reward_manager.module.path", report)
    if path in (None, ""):
        report.errors.append(Problem("reward.reward_manager.module.path", "source importlib needs the module's path"))
        return None
    try:
        return load_extern_object(module_path=str(path), object_name=str(name))
    except Exception as e:
        report.errors.append(
            Problem("reward.reward_manager", f"{name!r} from {path!r} cannot be loaded: {first_line(e)}")
        )
        return None


def _reward_kwargs_schema(cls: Any) -> Any:
    """The reward manager's kwargs dataclass: its ``reward_kwargs_cls``, else its module's ``RewardKwargs``."""
    return getattr(cls, "reward_kwargs_cls", None) or getattr(
        sys.modules.get(getattr(cls, "__module__", "")), "RewardKwargs", None
    )


def _check_reward_kwargs_schema(cfg: Any, report: CheckReport, schema: Any, kwargs: Any) -> None:
    """The plugin's reward manager: its kwargs dataclass accepts ``kwargs``."""
    try:
        if hasattr(schema, "from_trainer_config"):
            schema.from_trainer_config(
                OmegaConf.create({"reward": {"reward_kwargs": kwargs or {}}, "data": resolved(cfg, "data")})
            )
        else:
            agentrl_config.from_mapping(schema, kwargs, where="reward.reward_kwargs")
    except Exception as e:
        report.errors.append(Problem("reward.reward_kwargs", str(e)))


def _check_verl_reward_kwargs(report: CheckReport, name: Any, kwargs: dict[str, Any]) -> None:
    """One of verl's registered managers: only the keys it reads (:data:`VERL_REWARD_KWARGS`)."""
    if name not in VERL_REWARD_KWARGS:
        report.errors.append(Problem("reward.reward_kwargs", f"reward manager {name!r} reads no reward_kwargs"))
        return
    known = VERL_REWARD_KWARGS[name]
    for key, _ in leaves(kwargs):
        head, _, sub = key.partition(".")
        if head not in known or (sub and sub not in (known[head] or ())):
            report.errors.append(Problem(f"reward.reward_kwargs.{key}", f"verl's {name} manager does not read it"))


def check_sft(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    """Every rule of an SFT (``sft_trainer``) config."""
    need_object(cfg, "data.custom_cls", report, "dataset class")
    sp = resolved(cfg, "engine.ulysses_sequence_parallel_size") or 1
    if resolved(cfg, "data.use_dynamic_bsz"):
        per_gpu = resolved(cfg, "data.max_token_len_per_gpu") or 0
        max_length = resolved(cfg, "data.max_length") or 0
        if per_gpu * sp < max_length:
            report.errors.append(
                Problem("data.max_token_len_per_gpu", f"{per_gpu} × SP {sp} < data.max_length {max_length}")
            )
    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), ("model.path", True)):
        check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, "model", sp)
    _check_verl_dataclasses(cfg, report, ["optim", "engine", "checkpoint"], validate_ppo=False)


def _check_attention(cfg: Any, report: CheckReport, model: str, sp: int) -> None:
    """What verl's FSDP engine raises only at init, and the flash-attn dependency of verl's default attention."""
    padding_key = f"{model}.use_remove_padding"
    remove_padding = bool(resolved(cfg, padding_key))
    if sp > 1 and not remove_padding:  # verl's engine: "you must enable `use_remove_padding`" (RL: validate_config)
        report.errors.append(Problem(padding_key, f"Ulysses sequence parallel size {sp} needs use_remove_padding=true"))
    attn = node(cfg, f"{model}.override_config.attn_implementation") or "flash_attention_2"
    if remove_padding and attn != "flash_attention_2":  # packed sequences attend across rows without varlen kernels
        report.errors.append(
            Problem(padding_key, f"remove-padding needs attn_implementation flash_attention_2 (got {attn})")
        )
    on_gpu = str(node(cfg, "trainer.device") or "cuda") != "cpu"
    if attn == "flash_attention_2" and on_gpu and importlib.util.find_spec("flash_attn") is None:
        report.warnings.append(
            Problem(
                f"{model}.override_config.attn_implementation",
                "flash_attention_2 (verl's default) needs flash-attn, not installed here: `make install-gpu` "
                "builds it on GPU nodes (`make preflight` fails without it)",
            )
        )


def _check_verl_dataclasses(cfg: Any, report: CheckReport, sections: list[str], *, validate_ppo: bool) -> None:
    """Build verl's config dataclasses (their __post_init__ checks values) and run main_ppo's validate_config."""
    # verl: imported at check time (see registries), never by `configs list/show/cp`.
    from verl.utils import omega_conf_to_dataclass

    for section in sections:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                omega_conf_to_dataclass(node(cfg, section))
        except Exception as e:
            report.errors.append(Problem(section, f"verl rejects it: {first_line(e)}"))
    if validate_ppo:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import validate_config

        try:
            with contextlib.redirect_stdout(io.StringIO()):
                validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        except Exception as e:
            report.errors.append(Problem("", f"verl's validate_config rejects the config: {first_line(e)}"))
