"""Referenced names, files, modules and objects must exist."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.cli.config_refs import (
    check_data_or_model,
    check_name,
    check_tool_config,
    find_file,
    need_file,
    need_object,
    registries,
)
from agentrl_recipe.cli.config_report import CheckReport
from agentrl_recipe.config_paths import config_dir, tool_config_dir


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


def test_need_file(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"a": str(tmp_path / "x.yaml"), "b": "", "c": str(tmp_path / "missing.yaml")})
    (tmp_path / "x.yaml").touch()
    report = CheckReport("cfg")
    assert need_file(cfg, "a", report, "thing") == tmp_path / "x.yaml"
    assert need_file(cfg, "b", report, "thing") is None and report.ok
    assert need_file(cfg, "c", report, "thing") is None
    assert [p.key for p in report.errors] == ["c"] and "thing " in report.errors[0].message


def test_need_object_imports_modules_and_parses_files(tmp_path: Path) -> None:
    code = tmp_path / "reward.py"
    code.write_text("def score(x):\n    return 1\n\nALIAS = score\n")
    cfg = OmegaConf.create(
        {
            "mod_ok": {"path": "pkg://agentrl_recipe.names", "name": "PLATFORM"},
            "mod_no_attr": {"path": "pkg://agentrl_recipe.names", "name": "nope"},
            "mod_missing": {"path": "pkg://agentrl_recipe.nosuch", "name": "x"},
            "file_ok": {"path": f"file://{code}", "name": "ALIAS"},
            "file_no_name": {"path": str(code), "name": "other"},
            "file_missing": {"path": str(tmp_path / "gone.py"), "name": "x"},
            "unset": {"path": None, "name": None},
        }
    )
    report = CheckReport("cfg")
    for key in cfg:
        need_object(cfg, key, report, "reward function")
    assert [p.key for p in report.errors] == [
        "mod_no_attr.name",
        "mod_missing.path",
        "file_no_name.name",
        "file_missing.path",
    ]


def test_check_name_hints_at_the_plugin_for_our_names() -> None:
    report = CheckReport("cfg")
    check_name(report, "k", "grpo", {"grpo", "gae"}, "advantage estimator")
    check_name(report, "k", "x", None, "v1 trainer mode")  # registry unavailable: not checked
    assert report.ok
    check_name(report, "k", "agentrl_nope", {"grpo"}, "advantage estimator")
    assert report.errors[0].message == (
        "advantage estimator 'agentrl_nope' is not registered with verl (registered: grpo); "
        "is the agentrl_recipe plugin installed? run `agentrl-recipe doctor`"
    )


def test_data_is_a_warning_until_strict_and_a_hub_id_passes_for_models(tmp_path: Path) -> None:
    cfg = OmegaConf.create({"data": [str(tmp_path / "a.parquet"), "hdfs://x"], "model": "Qwen/Qwen3-4B"})
    loose, strict = CheckReport("cfg"), CheckReport("cfg")
    check_data_or_model(cfg, "data", loose, False, hub_ok=False)
    check_data_or_model(cfg, "data", strict, True, hub_ok=False)
    check_data_or_model(cfg, "model", strict, True, hub_ok=True)
    assert loose.ok and [p.key for p in loose.warnings] == ["data"]
    assert [p.key for p in strict.errors] == ["data"] and not strict.warnings
    check_data_or_model(cfg, "model", strict, True, hub_ok=False)
    assert [p.key for p in strict.errors] == ["data", "model"]


def test_tool_configs(tmp_path: Path) -> None:
    empty, bad = tmp_path / "empty.yaml", tmp_path / "bad.yaml"
    empty.write_text("tools: []\n")
    bad.write_text(
        "tools:\n  - class_name: agentrl_recipe.names.PLATFORM\n  - class_name: agentrl_recipe.nosuch.Tool\n"
    )
    report = CheckReport("cfg")
    check_tool_config(empty, "k", report)
    check_tool_config(bad, "k", report)
    messages = [p.message for p in report.errors]
    assert "has no `tools:` list" in messages[0]
    assert "is not a verl BaseTool" in messages[1] and "has no tool_schema.function.name" in messages[2]
    assert "cannot be imported" in messages[3] and len(messages) == 4
    report = CheckReport("cfg")
    check_tool_config(tool_config_dir() / "code_interpreter.yaml", "k", report)
    assert report.ok, report.format()


def test_the_registries_hold_every_name_the_plugin_registers() -> None:
    reg = registries()
    assert names.REGISTERED["adv_estimator"] in reg["adv_estimator"]
    assert names.REGISTERED["policy_loss"] in reg["policy_loss"]
    assert names.REGISTERED["reward_manager"] in reg["reward_manager"]
    assert names.REGISTERED["agent_loop"] in reg["agent_loop"]
