"""``configs check``: the report and the helpers that read a composed config, the legacy-key map, the unknown-key
checker (against a small stand-in for verl's base config) and the ``agentrl.*`` namespace, the referenced names,
files, modules and objects, and the per-kind rules on real composed configs (what verl would assert only inside a
worker, or never)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.cli.configs.checks import (
    LEGACY,
    CheckReport,
    Problem,
    check_data_or_model,
    check_keys,
    check_name,
    check_namespace,
    check_rl,
    check_sft,
    check_tool_config,
    first_line,
    leaves,
    legacy,
    need_file,
    need_object,
    node,
    registries,
    resolved,
)
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.config_paths import tool_config_dir


# ---- the report
def test_the_report_lists_errors_then_warnings() -> None:
    report = CheckReport("cfg", "rl", warnings=[Problem("data.train_files", "'x' does not exist yet")])
    assert report.ok and report.format() == "OK cfg (rl)\n  warning data.train_files: 'x' does not exist yet"
    report.errors.append(Problem("", "cannot compose: boom"))
    assert not report.ok
    assert report.format().splitlines()[:2] == ["FAIL cfg (rl)", "  error   cannot compose: boom"]


def test_resolved_and_node() -> None:
    cfg = OmegaConf.create({"a": {"b": 2, "c": "${a.b}", "d": {"e": "${a.b}"}}, "m": "???", "bad": "${nope}"})
    assert resolved(cfg, "a.c") == 2 and resolved(cfg, "a.d") == {"e": 2}
    assert node(cfg, "a.c") == 2 and node(cfg, "x.y") is None
    report = CheckReport("cfg")
    assert resolved(cfg, "m") is None and report.ok  # without a report nothing is recorded
    assert resolved(cfg, "bad", report) is None
    assert [p.key for p in report.errors] == ["bad"] and "cannot resolve" in report.errors[0].message


def test_first_line() -> None:
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(KeyError()) == "KeyError"
    assert len(first_line(ValueError("x" * 1000))) == 400


# ---- legacy keys
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


# ---- unknown keys and the agentrl namespace
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
        "reward": {"reward_kwargs": {"x": 1}},  # the reward manager's kwargs: _check_reward
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


def test_a_section_with_its_own_target_may_hold_that_dataclass_fields() -> None:
    """The config's own _target_ (here the tool config's dataclass) admits its fields; verl's does otherwise."""
    own = {
        "_target_": "agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterConfig",
        "error_text": "released",
    }
    assert errors({"engine": own}) == {}
    assert "no 'error_text' under engine" in errors({"engine": {"error_text": "released"}})["engine.error_text"]


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


# ---- registered names and references
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
            "mod_ok": {"path": "pkg://agentrl_recipe.names", "name": "TOOL_NAME"},
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
        "tools:\n  - class_name: agentrl_recipe.names.TOOL_NAME\n  - class_name: agentrl_recipe.nosuch.Tool\n"
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
    assert names.REGISTERED["agent_loop"] in reg["agent_loop"]


# ---- per-kind rules on composed configs
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
    report = rl("algorithm.adv_estimator=agentrl_nope", "data.custom_cls.path=/nonexistent/x.py")
    assert "algorithm.adv_estimator" in keys(report) and "data.custom_cls.path" in keys(report)


def test_flash_attention_without_flash_attn_warns_on_gpu_configs(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))
    attn = "actor_rollout_ref.model.override_config.attn_implementation"
    assert attn in [p.key for p in rl(name="agentrl_rl").warnings]
    assert attn not in [p.key for p in rl().warnings]  # trainer.device cpu


def test_the_stock_loop_with_a_compat_the_tool_cannot_see_is_refused() -> None:
    """Only agentrl_tool_agent hands code_interpreter the trainer's agentrl block: under verl's tool_agent the tool
    would run in the plugin's default mode while the paper config asks for open_agentrl."""
    import verl  # noqa: F401  (the plugin: its resolvers compose the config)

    loop = "actor_rollout_ref.rollout.agent.default_agent_loop"
    for config, refused in (("agentrl_rl_qwen3_4b", True), ("agentrl_rl_qwen3_4b_fixed", False)):
        report = CheckReport(config, "rl")
        check_rl(compose(config, [f"{loop}=tool_agent"])[0], report, strict_paths=False)
        found = [p for p in report.errors if p.key == loop and "never hands" in p.message]
        assert bool(found) is refused, report.format()
    report = CheckReport("agentrl_rl_qwen3_4b", "rl")
    check_rl(compose("agentrl_rl_qwen3_4b")[0], report, strict_paths=False)  # our loop: the mode reaches the tool
    assert not [p for p in report.errors if p.key == loop], report.format()


def test_the_reward_manager_loads_by_path() -> None:
    import verl  # noqa: F401

    report = CheckReport("agentrl_rl_cpu", "rl")
    module = "reward.reward_manager.module.path"
    check_rl(compose("agentrl_rl_cpu", [f"{module}=pkg://agentrl_recipe.training.rewards.nosuch"])[0], report, False)
    assert any(p.key == "reward.reward_manager" and "cannot be loaded" in p.message for p in report.errors)
