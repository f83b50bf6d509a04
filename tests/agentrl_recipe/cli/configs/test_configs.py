"""``agentrl-recipe configs``: list, show, cp and check, their output and exit codes."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from agentrl_recipe.cli import configs
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.config_paths import config_dir


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    configs.add_arguments(parser)
    return configs.main(parser.parse_args(argv))


def test_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["agentrl_rl", "rl"] for line in lines)
    assert run(["show", "agentrl_rl"]) == 0
    assert capsys.readouterr().out == (config_dir() / "agentrl_rl.yaml").read_text()
    assert run(["show", "--composed", "agentrl_rl_cpu", "trainer.total_epochs=7"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["trainer"]["total_epochs"] == 7


def test_cp_makes_a_config_that_still_finds_recipe_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["cp", "agentrl_sft_cpu", str(tmp_path)]) == 0
    copy = tmp_path / "agentrl_sft_cpu.yaml"
    assert f"    - file://{config_dir()}\n" in copy.read_text()
    assert f"run:   make sft CONFIG={copy}" in capsys.readouterr().out
    with pytest.raises(FileExistsError, match="--force"):
        configs.copy_config("agentrl_sft_cpu", copy)
    assert compose(str(copy))[0].model.path == compose("agentrl_sft_cpu")[0].model.path


def test_check_exits_non_zero_on_a_broken_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["check", "agentrl_sft_cpu"]) == 0
    assert capsys.readouterr().out.startswith("OK agentrl_sft_cpu (sft)")
    assert run(["check", "-o", "+model.partial_pretrain=x", "agentrl_sft_cpu", "nosuch_config"]) == 1
    out = capsys.readouterr().out
    assert "  error   model.partial_pretrain: legacy key that verl 0.9.1 ignores; use model.path" in out
    assert "FAIL nosuch_config (?)\n  error   cannot compose: no config 'nosuch_config'" in out
    assert out.splitlines()[0].split(";")[0] == "0/2 configs pass"  # the summary first; a clean clone adds warnings
    assert run(["check", "agentrl_sft_cpu", "-o", "+trainer.mine=1", "--allow", "trainer.mine"]) == 0


def test_the_command_module_holds_the_command_only() -> None:
    """The CLI table needs add_arguments/main; everything else is imported from the module that defines it."""
    for name in ("add_arguments", "main", "copy_config"):
        assert getattr(configs, name).__module__ == configs.__name__, name
    assert not hasattr(configs, "__all__") and not hasattr(configs, "_registries")


def test_check_counts_the_paths_not_made_yet_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 46: the summary first, then each config; "does not exist yet" warnings counted, listed with -v."""
    missing = "-o", "data.train_files=/nonexistent/a.parquet", "-o", "data.val_files=/nonexistent/b.parquet"
    assert run(["check", *missing, "agentrl_sft_cpu", "agentrl_sft_cpu"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith("2/2 configs pass; ")
        and "warning(s): a data file or checkpoint that does not exist" in out[0]
    )
    assert out[0].endswith("-v lists them)")
    assert out[1:] == ["OK agentrl_sft_cpu (sft)", "OK agentrl_sft_cpu (sft)"]
    count = int(out[0].split("; ")[1].split()[0])
    assert run(["check", "-v", *missing, "agentrl_sft_cpu", "agentrl_sft_cpu"]) == 0
    listed = [x for x in capsys.readouterr().out.splitlines() if x.endswith("does not exist yet")]
    assert len(listed) == count >= 4 and any("/nonexistent/a.parquet" in x for x in listed)
