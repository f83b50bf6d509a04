"""Finding the shipped configs and telling RL from SFT by the verl root their defaults reach."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl_recipe.cli.config_files import kind_of_file, list_configs, locate, verl_root
from agentrl_recipe.config_paths import config_dir


def test_list_names_the_runnable_configs_with_their_kind() -> None:
    rows = {name: (kind, title) for name, kind, title in list_configs()}
    assert rows["agentrl_rl"][0] == "rl" and rows["agentrl_sft"][0] == "sft"
    assert all(kind in ("rl", "sft") for kind, _ in rows.values())
    assert not any(name.startswith(("recipe/", "tools/")) for name in rows)
    assert "ablations/grpo_t" in rows


def test_locate_a_name_a_shipped_path_and_a_foreign_path(tmp_path: Path) -> None:
    root = config_dir()
    assert locate("agentrl_rl") == (root, "agentrl_rl", root / "agentrl_rl.yaml")
    assert locate("ablations/grpo_t.yaml")[1] == "ablations/grpo_t"
    assert locate(str(root / "ablations" / "grpo_t.yaml"))[:2] == (root, "ablations/grpo_t")
    own = tmp_path / "mine.yaml"
    own.write_text("defaults:\n  - ppo_trainer\n")
    assert locate(str(own)) == (tmp_path, "mine", own)


def test_an_unknown_name_suggests_the_close_ones() -> None:
    with pytest.raises(FileNotFoundError, match=r"did you mean agentrl_rl\b.*configs list"):
        locate("agentrl_rll")


def test_the_kind_follows_the_defaults_chain(tmp_path: Path) -> None:
    direct = tmp_path / "direct.yaml"
    direct.write_text("defaults:\n  - optional /sft_trainer_engine@_here_\n  - _self_\n")
    via_recipe = tmp_path / "via.yaml"
    via_recipe.write_text("defaults:\n  - agentrl_rl\n  - _self_\n")  # found in verl_configs/
    orphan = tmp_path / "orphan.yaml"
    orphan.write_text("defaults:\n  - _self_\nx: 1\n")
    assert kind_of_file(direct) == "sft" and verl_root(direct) == "sft_trainer_engine"
    assert kind_of_file(via_recipe) == "rl" and verl_root(via_recipe) == "ppo_trainer"
    assert kind_of_file(orphan) is None
    with pytest.raises(ValueError, match="reach none of verl's trainer configs"):
        verl_root(orphan)
