"""The unknown-key checker against a small stand-in for verl's base config, and the ``agentrl.*`` namespace."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.cli.config_keys import check_keys, check_namespace, leaves
from agentrl_recipe.cli.config_report import CheckReport

BASE = {
    "trainer": {"total_epochs": 1, "logger": ["console"], "nnodes": 1},
    "ray_kwargs": {"ray_init": {"num_cpus": None}},  # FREEFORM: anything below passes
    "data": {"max_length": 10, "extra": {}},  # an empty mapping is open
    # a node verl builds a dataclass from: its fields count although the YAML does not list them
    "engine": {"_target_": "agentrl_sandbox.config.SandboxConfig", "backend": "local"},
    "reward_model": {"enable": False, "reward_manager": None},
}


def errors(cfg: dict[str, Any], kind: str = "rl", allow: tuple[str, ...] = ()) -> dict[str, str]:
    report = CheckReport("cfg", kind)
    check_keys(OmegaConf.create(cfg), OmegaConf.create(BASE), kind, report, allow)
    assert not report.warnings
    return {p.key: p.message for p in report.errors}


def test_keys_verl_has_pass() -> None:
    cfg = {
        "trainer": {"total_epochs": 3, "logger": ["console", "file"]},
        "ray_kwargs": {"ray_init": {"runtime_env": {"env_vars": {"A": "1"}}}},
        "data": {"extra": {"anything": 1}},
        "engine": {"pool_size": 4},
        "agentrl": {"whatever": 1},  # the plugin's namespace is checked by check_namespace
        "reward": {"reward_kwargs": {"x": 1}},  # the reward manager's kwargs are checked by config_rules
        "actor_rollout_ref": {"rollout": {"agent": {"agent_loop_manager_class": "x"}}},  # read with .get()
    }
    assert errors(cfg) == {}


def test_a_typo_names_the_closest_key() -> None:
    problems = errors({"trainer": {"totl_epochs": 3}, "bogus_top": 1})
    assert problems["trainer.totl_epochs"] == (
        "unknown key: verl's config has no 'totl_epochs' under trainer (did you mean trainer.total_epochs?); "
        "verl would ignore it"
    )
    assert "at the top level" in problems["bogus_top"]


def test_legacy_keys_name_their_replacement() -> None:
    problems = errors({"reward_model": {"reward_manager": "dapo"}, "sandbox_fusion": {"url": "http://x"}})
    assert problems["reward_model.reward_manager"] == (
        "legacy key that verl 0.9.1 ignores; use reward.reward_manager.name"
    )
    assert "agentrl.sandbox.url" in problems["sandbox_fusion.url"]
    assert errors({"reward_model": {"enable": True}}) == {}  # verl still has it: not legacy for verl


def test_a_value_is_not_a_section_and_allow_skips_a_prefix() -> None:
    assert errors({"data": {"max_length": {"x": 1}}}) == {
        "data.max_length.x": "data.max_length is a value in verl's config, not a section"
    }
    assert errors({"trainer": {"mine": {"a": 1}}}, allow=("trainer.mine",)) == {}


def test_leaves() -> None:
    assert list(leaves({"a": {"b": 1, "c": {}}, "d": [1]})) == [("a.b", 1), ("a.c", {}), ("d", [1])]


@pytest.mark.parametrize(
    ("block", "key", "words"),
    [
        ({"sandbox": {"backnd": "local"}}, "agentrl.sandbox", "backnd"),
        ({"nosuch": {"x": 1}}, "agentrl.nosuch", "unknown section; the plugin's sections are"),
        ({"compat": "nonsense"}, "agentrl.compat", "agentrl.compat must be one of"),
    ],
)
def test_the_plugin_namespace(block: dict, key: str, words: str) -> None:
    report = CheckReport("cfg")
    check_namespace(OmegaConf.create({"agentrl": block}), report)
    assert [p.key for p in report.errors] == [key] and words in report.errors[0].message


def test_a_valid_namespace_passes() -> None:
    report = CheckReport("cfg")
    check_namespace(OmegaConf.create({"agentrl": {"sandbox": {"backend": "local", "timeout_s": 5}}}), report)
    check_namespace(OmegaConf.create({"trainer": {}}), report)
    assert report.ok
