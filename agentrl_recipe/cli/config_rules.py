"""The per-kind rules of ``configs check``: registered names and referenced files of an RL config, the reward
manager's kwargs, token budgets and attention settings verl asserts only inside a worker, and what verl's own config
dataclasses and ``validate_config`` reject — all before a cluster is up."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from typing import Any

import yaml
from omegaconf import OmegaConf

from agentrl_recipe.cli.config_keys import leaves
from agentrl_recipe.cli.config_refs import (
    check_data_or_model,
    check_name,
    check_tool_config,
    need_file,
    need_object,
    registries,
)
from agentrl_recipe.cli.config_report import CheckReport, Problem, first_line, node, resolved
from agentrl_recipe.config import from_mapping

ARR = "actor_rollout_ref"
# reward.reward_kwargs of verl's own managers (they read config.reward.reward_kwargs; others ignore it).
# key -> its sub-keys (None: a plain value).
VERL_REWARD_KWARGS = {"dapo": {"overlong_buffer_cfg": {"enable", "len", "penalty_factor", "log"}, "max_resp_len": None}}


def check_rl(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    """Every rule of an RL (``main_ppo``) config."""
    reg = registries()
    _check_rl_names(cfg, report, reg)
    _check_rl_files(cfg, report)
    _check_reward(cfg, report, reg)
    _check_trainer_rules(cfg, report)
    # Token budgets verl asserts only inside a worker, after the cluster is up.
    budget = (resolved(cfg, "data.max_prompt_length") or 0) + (resolved(cfg, "data.max_response_length") or 0)
    sp = resolved(cfg, f"{ARR}.actor.ulysses_sequence_parallel_size") or 1
    if resolved(cfg, f"{ARR}.actor.use_dynamic_bsz"):
        for key in (f"{ARR}.actor.ppo_max_token_len_per_gpu", f"{ARR}.rollout.log_prob_max_token_len_per_gpu"):
            per_gpu = resolved(cfg, key) or 0
            if per_gpu * sp < budget:
                report.errors.append(Problem(key, f"{per_gpu} × SP {sp} < max prompt + response {budget} tokens"))

    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), (f"{ARR}.model.path", True)):
        check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, f"{ARR}.model", sp)
    _check_verl_dataclasses(cfg, report, ["algorithm", f"{ARR}.rollout"], validate_ppo=True)


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
        need_file(cfg, f"{ARR}.rollout.multi_turn.function_tool_path", report, "function tool file")
    need_object(cfg, "data.custom_cls", report, "dataset class")
    need_object(cfg, "reward.custom_reward_function", report, "reward function")
    need_object(cfg, "trainer.v1.sampler.custom_sampler", report, "replay buffer (sampler)")


def _check_trainer_rules(cfg: Any, report: CheckReport) -> None:
    """The plugin's cross-key rules (a mask that is on but cannot take effect, ...) and the async trainer's."""
    # Both import verl (the sampler subclasses verl's replay buffer): loaded here, not by `configs list/show/cp`.
    try:
        from agentrl_recipe.algos.sampler import check_trainer_config
    except ImportError:
        check_trainer_config = None
    if check_trainer_config is not None:
        try:
            report.errors += [Problem("", p) for p in check_trainer_config(cfg)]
        except Exception as e:
            report.errors.append(Problem("trainer.v1.sampler", first_line(e)))
    from agentrl_recipe.cli import async_checks

    async_errors, async_warnings = async_checks.check(cfg)  # trainer mode, its replay buffer, rollout correction
    report.errors += [Problem(key, message) for key, message in async_errors]
    report.warnings += [Problem(key, message) for key, message in async_warnings]


def _reward_kwargs_schema(cls: Any) -> Any:
    """The reward manager's kwargs dataclass: its ``reward_kwargs_cls``, else its module's ``RewardKwargs``."""
    return getattr(cls, "reward_kwargs_cls", None) or getattr(
        sys.modules.get(getattr(cls, "__module__", "")), "RewardKwargs", None
    )


def _check_reward(cfg: Any, report: CheckReport, reg: dict[str, Any]) -> None:
    source = resolved(cfg, "reward.reward_manager.source")
    name = resolved(cfg, "reward.reward_manager.name")
    cls = None
    if source == "register":
        check_name(report, "reward.reward_manager.name", name, reg["reward_manager"], "reward manager")
        cls = reg["reward_manager"].get(name)
    elif source == "importlib":
        need_file(cfg, "reward.reward_manager.module.path", report, "reward manager file")
    else:
        report.errors.append(Problem("reward.reward_manager.source", f"must be register or importlib, got {source!r}"))
    kwargs_node = OmegaConf.select(cfg, "reward.reward_kwargs")
    kwargs = resolved(cfg, "reward.reward_kwargs", report) if kwargs_node is not None else None
    schema = _reward_kwargs_schema(cls)
    if schema is not None:
        try:
            if hasattr(schema, "from_trainer_config"):
                schema.from_trainer_config(
                    OmegaConf.create({"reward": {"reward_kwargs": kwargs or {}}, "data": resolved(cfg, "data")})
                )
            else:
                from_mapping(schema, kwargs, where="reward.reward_kwargs")
        except Exception as e:
            report.errors.append(Problem("reward.reward_kwargs", str(e)))
    elif kwargs and name in VERL_REWARD_KWARGS and source == "register":
        known = VERL_REWARD_KWARGS[name]
        for key, _ in leaves(kwargs):
            head, _, sub = key.partition(".")
            if head not in known or (sub and sub not in (known[head] or ())):
                report.errors.append(Problem(f"reward.reward_kwargs.{key}", f"verl's {name} manager does not read it"))
    elif kwargs and source == "register":
        report.errors.append(Problem("reward.reward_kwargs", f"reward manager {name!r} reads no reward_kwargs"))
    max_resp = (kwargs or {}).get("max_resp_len")
    if max_resp is not None and max_resp != resolved(cfg, "data.max_response_length"):
        report.warnings.append(
            Problem("reward.reward_kwargs.max_resp_len", f"{max_resp} differs from data.max_response_length")
        )


def check_sft(cfg: Any, report: CheckReport, strict_paths: bool) -> None:
    """Every rule of an SFT (``sft_trainer``) config."""
    need_object(cfg, "data.custom_cls", report, "dataset class")
    if resolved(cfg, "data.use_dynamic_bsz"):
        per_gpu = resolved(cfg, "data.max_token_len_per_gpu") or 0
        sp = resolved(cfg, "engine.ulysses_sequence_parallel_size") or 1
        max_length = resolved(cfg, "data.max_length") or 0
        if per_gpu * sp < max_length:
            report.errors.append(
                Problem("data.max_token_len_per_gpu", f"{per_gpu} × SP {sp} < data.max_length {max_length}")
            )
    for key, hub_ok in (("data.train_files", False), ("data.val_files", False), ("model.path", True)):
        check_data_or_model(cfg, key, report, strict_paths, hub_ok)
    _check_attention(cfg, report, "model", resolved(cfg, "engine.ulysses_sequence_parallel_size") or 1)
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
    # verl: imported at check time (see config_refs.registries), never by `configs list/show/cp`.
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
