"""The shipped configs as files: listing them, locating one, telling RL from SFT by the verl root their defaults
reach, composing one as verl's entry points do (and verl's own base config with the same group choices), and finding
the files a config refers to."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from agentrl_recipe.cli.configs.files import (
    compose,
    find_file,
    kind_of_file,
    list_configs,
    locate,
    verl_base,
    verl_root,
)
from agentrl_recipe.config_paths import CONFIG_DIR_ENV, config_dir


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


def test_find_file_looks_in_the_cwd_then_beside_the_installed_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here.txt").touch()
    assert find_file("here.txt") == tmp_path / "here.txt"
    shipped = "verl_configs/tools/code_interpreter.yaml"  # what grpo_tcr.yaml names, found wherever installed
    assert find_file(shipped) == config_dir().parent / shipped
    assert find_file(str(tmp_path / "here.txt")) == tmp_path / "here.txt"
    assert find_file("nowhere.txt") is None


def test_a_shipped_composition_is_reused_and_each_caller_gets_its_own_copy() -> None:
    first, choices = compose("agentrl_rl_cpu", ["data.train_batch_size=3"])
    first.data.train_batch_size = 99
    choices.clear()
    second, choices_again = compose("agentrl_rl_cpu", ["data.train_batch_size=3"])
    assert second.data.train_batch_size == 3 and choices_again  # not the first caller's changes
    assert second is not first


def test_an_edited_shipped_file_composes_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = tmp_path / "verl_configs"
    shutil.copytree(config_dir(), shipped)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(shipped))
    assert compose("agentrl_rl_cpu")[0].data.train_batch_size == 4
    path = shipped / "agentrl_rl_cpu.yaml"
    path.write_text(path.read_text().replace("train_batch_size: 4", "train_batch_size: 6", 1))
    assert compose("agentrl_rl_cpu")[0].data.train_batch_size == 6


def test_a_config_outside_the_shipped_folder_is_composed_each_time(tmp_path: Path) -> None:
    own = tmp_path / "mine.yaml"
    own.write_text("hydra:\n  searchpath: [pkg://verl.trainer.config]\ndefaults:\n  - ppo_trainer\n  - _self_\n"
                   "data:\n  train_batch_size: 5\n")  # fmt: skip
    assert compose(str(own))[0].data.train_batch_size == 5
    os.utime(own, ns=(0, 0))  # even an edit that keeps the size and the modification time
    own.write_text(own.read_text().replace("5", "7"))
    os.utime(own, ns=(0, 0))
    assert compose(str(own))[0].data.train_batch_size == 7
