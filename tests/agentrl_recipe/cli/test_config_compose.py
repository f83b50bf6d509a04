"""Composing a config as verl's entry points do, and verl's own base config with the same group choices."""

from __future__ import annotations

from pathlib import Path

from agentrl_recipe.cli.config_compose import compose, verl_base


def test_compose_applies_overrides_and_drops_the_hydra_node(tmp_path: Path) -> None:
    (tmp_path / "group").mkdir()
    (tmp_path / "group" / "a.yaml").write_text("value: 1\n")
    (tmp_path / "group" / "b.yaml").write_text("value: 2\n")
    (tmp_path / "top.yaml").write_text("defaults:\n  - group: a\n  - _self_\nx: ${group.value}\n")
    cfg, choices = compose(str(tmp_path / "top.yaml"), ["group=b", "+y=3"])
    assert "hydra" not in cfg
    assert (cfg.x, cfg.y) == (2, 3)
    assert choices["group"] == "b"


def test_a_shipped_config_and_verl_base_share_group_choices() -> None:
    cfg, choices = compose("agentrl_rl")
    assert cfg.algorithm.adv_estimator and "hydra" not in cfg
    base = verl_base("ppo_trainer", choices)
    assert "agentrl" not in base and "actor_rollout_ref" in base
    assert verl_base("ppo_trainer", choices) is base  # cached: verl's base is composed once per choice set
