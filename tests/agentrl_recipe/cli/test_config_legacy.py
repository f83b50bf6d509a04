"""The legacy-key map: each old key names its replacement, the longest prefix first."""

from __future__ import annotations

import pytest

from agentrl_recipe.cli.config_legacy import LEGACY, legacy


@pytest.mark.parametrize(
    ("kind", "key", "replacement"),
    [
        ("rl", "reward_model.reward_manager", "reward.reward_manager.name"),
        ("rl", "reward_model.model.path", "reward.reward_model.model_path"),  # not reward_model's generic rule
        ("rl", "reward_model.enable", "reward.reward_model.enable"),  # the rest of the key is carried over
        ("rl", "sandbox_fusion.url", "agentrl.sandbox.url (with agentrl.sandbox.backend=sandbox_fusion)"),
        ("sft", "data.multiturn.messages_key", "data.messages_key"),
        # a prose replacement ("data.messages_key / data.tools_key (...)") is not extended with the rest of the key
        ("sft", "data.multiturn.other", LEGACY["sft"][3][1]),
        ("sft", "model.fsdp_config.param_offload", "engine.param_offload"),
    ],
)
def test_a_legacy_key_names_its_replacement(kind: str, key: str, replacement: str) -> None:
    assert legacy(kind, key) == replacement


def test_keys_that_are_not_legacy() -> None:
    assert legacy("rl", "reward.reward_manager.name") is None
    assert legacy("rl", "reward_models.x") is None  # a prefix matches whole key parts only
    assert legacy("sft", "reward_model.reward_manager") is None  # the maps are per kind


@pytest.mark.parametrize("kind", sorted(LEGACY))
def test_a_longer_prefix_comes_before_the_shorter_one_it_extends(kind: str) -> None:
    prefixes = [prefix for prefix, _ in LEGACY[kind]]
    for i, prefix in enumerate(prefixes):
        shadowed = [p for p in prefixes[:i] if prefix.startswith(p + ".")]
        assert not shadowed, f"{prefix} is never reached: {shadowed} comes first"
