"""The per-kind rules on real composed configs: what verl would assert only inside a worker, or never."""

from __future__ import annotations

import importlib.util

import pytest

from agentrl_recipe.cli.config_compose import compose
from agentrl_recipe.cli.config_report import CheckReport
from agentrl_recipe.cli.config_rules import check_rl, check_sft


def sft(*overrides: str) -> CheckReport:
    report = CheckReport("agentrl_sft_cpu", "sft")
    check_sft(compose("agentrl_sft_cpu", overrides)[0], report, strict_paths=False)
    return report


def rl(*overrides: str, name: str = "agentrl_rl_cpu") -> CheckReport:
    report = CheckReport(name, "rl")
    check_rl(compose(name, overrides)[0], report, strict_paths=False)
    return report


def keys(report: CheckReport) -> list[str]:
    return [p.key for p in report.errors]


def test_the_cpu_configs_pass() -> None:
    assert sft().ok and rl().ok


def test_sft_budgets_and_sequence_parallel_need_their_settings() -> None:
    budget = sft("data.use_dynamic_bsz=true", "data.max_token_len_per_gpu=10")
    assert keys(budget) == ["data.max_token_len_per_gpu"] and "10 × SP 1 < data.max_length 512" in str(budget.errors[0])
    padding = sft("engine.ulysses_sequence_parallel_size=2", "model.use_remove_padding=false")
    assert "model.use_remove_padding" in keys(padding)


def test_rl_token_budget_and_reward_kwargs() -> None:
    budget = rl("actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=10")
    assert "actor_rollout_ref.actor.ppo_max_token_len_per_gpu" in keys(budget)
    assert "reward.reward_kwargs" in keys(rl("+reward.reward_kwargs.bogus=1"))


def test_an_unregistered_estimator_and_a_missing_file_are_errors() -> None:
    report = rl("algorithm.adv_estimator=agentrl_nope", "+data.custom_cls.path=/nonexistent/x.py")
    assert "algorithm.adv_estimator" in keys(report) and "data.custom_cls.path" in keys(report)


def test_flash_attention_without_flash_attn_warns_on_gpu_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    attn = "actor_rollout_ref.model.override_config.attn_implementation"
    assert attn in [p.key for p in rl(name="agentrl_rl").warnings]
    assert attn not in [p.key for p in rl().warnings]  # trainer.device cpu
