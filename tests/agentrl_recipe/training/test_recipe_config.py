"""The one resolution point: a trainer config's ``agentrl:`` block -> one frozen RecipeConfig per process."""

from __future__ import annotations

import dataclasses

import pytest
from omegaconf import OmegaConf

from agentrl_recipe import plugin
from agentrl_recipe.training import recipe_config
from agentrl_recipe.training.algos.masking import MaskConfig
from agentrl_recipe.training.recipe_config import RecipeConfig, resolve


def test_the_same_block_resolves_to_the_same_object() -> None:
    cfg = OmegaConf.create({"agentrl": {"compat": "open_agentrl", "masks": {"void_turn": True}}, "data": {"x": 1}})
    same = {"agentrl": {"masks": {"void_turn": True}, "compat": "open_agentrl"}}
    assert resolve(cfg) is resolve(same)  # DictConfig or dict, any key order
    with pytest.raises(dataclasses.FrozenInstanceError):
        resolve(cfg).compat = "agentrl"  # type: ignore[misc]


def test_a_missing_compat_is_the_default_mode_everywhere() -> None:
    assert recipe_config.standalone().compat == "agentrl" == RecipeConfig.for_mode(None).compat
    assert RecipeConfig.for_mode("open_agentrl").behaviour("tool_bonus") == "released"
    assert resolve({"agentrl": {}}).behaviour("tool_bonus") == "paper"
    assert resolve({"agentrl": {"compat": "open_agentrl"}}).behaviour("tool_bonus", "paper") == "paper"  # set wins
    with pytest.raises(ValueError, match=r"agentrl\.compat must be one of"):
        RecipeConfig.for_mode("released")


def test_sections_build_their_dataclass_and_refuse_unknown_keys() -> None:
    recipe = resolve({"agentrl": {"masks": {"void_turn": True}}})
    assert recipe.settings("masks") == MaskConfig(void_turn=True)
    assert recipe.section("roc") == {}
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['void_turns'\] in agentrl.masks"):
        resolve({"agentrl": {"masks": {"void_turns": True}}}).settings("masks")


def test_the_sandbox_env_is_part_of_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    block = {"agentrl": {"sandbox": {"pool_size": 3}}}
    monkeypatch.delenv("AGENTRL_SANDBOX_BACKEND", raising=False)
    local = resolve(block)
    monkeypatch.setenv("AGENTRL_SANDBOX_BACKEND", "subprocess")
    assert (local.sandbox.backend, resolve(block).sandbox.backend) == ("local", "subprocess")
    assert resolve(block).section("sandbox") == {"pool_size": 3}  # as written; the env applies to .sandbox


def test_the_compat_resolver_writes_concrete_values_into_a_section() -> None:
    assert set(plugin.registered_resolvers()) == {"agentrl_compat", "agentrl_config_path"}  # the plugin's import
    cfg = OmegaConf.create(
        {"agentrl": {"compat": "open_agentrl"}, "actor": {"scope": "${agentrl_compat:token_mean_scope}"}}
    )
    assert OmegaConf.to_container(cfg, resolve=True)["actor"] == {"scope": "micro_batch"}
    assert OmegaConf.create({"s": "${agentrl_compat:token_mean_scope}"}).s == "mini_batch"  # no agentrl block


def test_a_printed_config_hides_the_token() -> None:
    cfg = OmegaConf.create({"agentrl": {"sandbox": {"token": "s3cret", "url": "http://h:1"}}})
    shown = recipe_config.redacted(cfg)
    assert shown.agentrl.sandbox == {"token": "***", "url": "http://h:1"}
    assert cfg.agentrl.sandbox.token == "s3cret"
