"""The adapter over verl's private ``_ROLLOUT_REGISTRY``: the symbol is still there, and the plugin's entry resolves."""

from __future__ import annotations

import pytest
from verl.workers.rollout import base as rollout_base
from verl.workers.rollout.base import BaseRollout, get_rollout_class

import agentrl_recipe.plugin  # noqa: F401  (registers, as verl's entry point does)
from verl_cpu import names, rollout_registry
from verl_cpu.hf_rollout import HFServerAdapter


def test_verl_still_has_the_private_registry_we_write():
    registry = getattr(rollout_base, "_ROLLOUT_REGISTRY", None)
    assert isinstance(registry, dict), f"verl changed {rollout_registry.SYMBOL}: got {type(registry).__name__}"
    assert ("vllm", rollout_registry.MODE) in registry, f"verl changed the keys of {rollout_registry.SYMBOL}"
    assert rollout_registry.registered_rollout_class("vllm") == registry[("vllm", rollout_registry.MODE)]


def test_verl_resolves_the_plugins_rollout_class():
    cls = get_rollout_class(names.ROLLOUT_REPLICA, rollout_registry.MODE)
    assert cls is HFServerAdapter and issubclass(cls, BaseRollout)


def test_a_second_different_registration_is_refused_and_the_same_one_is_idempotent():
    path = rollout_registry.registered_rollout_class(names.ROLLOUT_REPLICA)
    rollout_registry.register_rollout_class(names.ROLLOUT_REPLICA, path)
    with pytest.raises(ValueError, match="already registered"):
        rollout_registry.register_rollout_class(names.ROLLOUT_REPLICA, "somewhere.Else")
    assert rollout_registry.registered_rollout_class(names.ROLLOUT_REPLICA) == path


def test_a_changed_verl_fails_naming_the_symbol(monkeypatch):
    monkeypatch.delattr(rollout_base, "_ROLLOUT_REGISTRY")
    with pytest.raises(RuntimeError, match=r"verl\.workers\.rollout\.base\._ROLLOUT_REGISTRY"):
        rollout_registry.register_rollout_class("agentrl_x", "a.B")


def test_registered_rollouts_are_verls_keys_with_the_plugins():
    keys = rollout_registry.registered_rollouts()
    assert keys == set(rollout_base._ROLLOUT_REGISTRY)
    assert (names.ROLLOUT_REPLICA, rollout_registry.MODE) in keys
