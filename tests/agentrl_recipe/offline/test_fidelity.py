"""The fidelity table (agentrl_recipe/offline/fidelity.py) against the composed paper-run config and
docs/reproducing.md."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from verl.utils.config import omega_conf_to_dataclass

from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.offline import fidelity
from agentrl_recipe.training.algos.losses import token_mean_scope
from agentrl_recipe.training.recipe_config import resolve
from agentrl_recipe.training.rewards import hack_patterns
from agentrl_recipe.training.rewards.manager import RewardKwargs
from agentrl_recipe.training.rl_dataset import DatasetSettings
from agentrl_sandbox import runtime_env
from agentrl_sandbox.config import SandboxConfig
from data_prep.jobs import rl_released

REPO = Path(__file__).resolve().parents[3]
README = REPO / "docs" / "reproducing.md"  # where the fidelity table is


@pytest.fixture(scope="module")
def paper_cfg():
    cfg, _ = compose(fidelity.CONFIG)
    return cfg


def templating(cfg) -> str | None:
    """The templating of the file data.train_files names, as `make data-rl-released` writes it: TEMPLATING (default
    = the CLI's) picks the name, ``open_agentrl_30k.parquet`` or ``open_agentrl_30k_per_row.parquet``."""
    make = (REPO / "Makefile").read_text()
    default = re.search(r"^TEMPLATING \?= (\w+)$", make, re.M).group(1)
    parser = argparse.ArgumentParser()
    rl_released.add_arguments(parser)
    assert default == parser.get_default("templating") == "first_row", "Makefile and CLI default templatings differ"
    assert "--out $(DATA_DIR)/rl/open_agentrl_30k$(if $(filter per_row,$(TEMPLATING)),_per_row).parquet" in make
    files = {"data/rl/open_agentrl_30k.parquet": "first_row", "data/rl/open_agentrl_30k_per_row.parquet": "per_row"}
    return files.get(OmegaConf.select(cfg, "data.train_files"))


def resolved(cfg, name: str):
    if name == "templating":
        return templating(cfg)
    if name.startswith("ground_truth:"):  # a quirk of the published ground truth: graded per ground_truth_form
        return RewardKwargs.from_trainer_config(cfg).ground_truth_form
    if name in ("malformed_call_feedback", "tool_turn_newline", "error_text"):
        return getattr(resolve(cfg).settings("agent_loop"), name)
    if name == "large_output":  # the tool YAML leaves it null: the trainer's compat decides
        return resolve(cfg).behaviour(name)
    if name == "batch_partition":  # the buffer sees only its sampler_kwargs
        return OmegaConf.select(cfg, "trainer.v1.sampler.sampler_kwargs.batch_partition")
    if name == "micro_batches":  # the actor's policy_loss (building it would install the split in this process)
        return OmegaConf.select(cfg, "actor_rollout_ref.actor.policy_loss.micro_batches")
    if name in ("prompt_filter_counts_tools", "keep_released_rows"):  # the dataset sees data.agentrl alone
        return getattr(DatasetSettings.from_data_config(cfg.data), name)
    if name == "token_mean_scope":  # the actor config verl builds (the loss's _target_ dataclass)
        return token_mean_scope(omega_conf_to_dataclass(cfg.actor_rollout_ref.actor))
    if name.startswith("released_grader:"):  # a hack of the released code grader: live iff it grades
        return RewardKwargs.from_trainer_config(cfg).code_rules
    if name in ("auto_print", "failure_reply", "call_arguments"):  # null in the tool YAML: the trainer's compat
        return resolve(cfg).behaviour(name)
    return getattr(RewardKwargs.from_trainer_config(cfg), name)


@pytest.mark.parametrize("row", fidelity.ROWS, ids=[r.key for r in fidelity.ROWS])
def test_every_row_matches_the_composed_paper_config(paper_cfg, row) -> None:
    if row.key.startswith("resolved:"):
        actual = resolved(paper_cfg, row.key.removeprefix("resolved:"))
    elif row.key.startswith(("released_grader:", "ground_truth:")):
        actual = resolved(paper_cfg, row.key)
    elif row.key.startswith("data:"):
        actual = resolved(paper_cfg, row.key.removeprefix("data:"))
    elif row.key.startswith("eval:"):  # the eval harness's default (it composes agentrl_rl with it)
        actual = getattr(EvalConfig(model="-", data=["-"], out_dir="-"), row.key.removeprefix("eval:"))
    else:
        actual = OmegaConf.select(paper_cfg, row.key, throw_on_missing=True)
    assert actual == row.ours, f"{row.key}: config has {actual!r}, the fidelity table says {row.ours!r}"
    assert row.why or str(row.ours) in row.released or row.released.startswith(("set,", "unset")) or row.paper


def test_fixed_sibling_differs_only_in_compat() -> None:
    fixed, _ = compose(fidelity.CONFIG + "_fixed")
    assert RewardKwargs.from_trainer_config(fixed).tool_bonus == "paper"
    assert resolve(fixed).settings("agent_loop").malformed_call_feedback is True
    assert RewardKwargs.from_trainer_config(fixed).code_rules == "lcb"  # none of the released grader's hacks
    expected = {"tool_turn_newline": True, "error_text": "explain", "large_output": "keep"}
    expected |= {"prompt_filter_counts_tools": True, "token_mean_scope": "mini_batch", "call_arguments": "bounded"}
    expected |= {"keep_released_rows": False, "batch_partition": "verl", "micro_batches": "verl"}
    assert {name: resolved(fixed, name) for name in expected} == expected


def test_behaviour_rows_name_the_released_file_and_line_and_our_key() -> None:
    """Issue 28 items 4-5: the last released behaviours and eval, each with file:line and the config key we read."""
    keys = [row.key.split(":", 1)[1] for row in fidelity.BEHAVIOUR_ROWS]
    assert keys == ["tool_turn_newline", "error_text", "large_output", "prompt_filter_counts_tools"] + [
        "token_mean_scope",
        "compat",
    ]
    for row in fidelity.BEHAVIOUR_ROWS:
        assert re.fullmatch(r"(recipe|verl)/[\w/.-]+\.(py|sh):[1-9]\d*", row.source), row.source
        assert row in fidelity.ROWS
    named = {row.key: row.why for row in fidelity.BEHAVIOUR_ROWS}
    assert named["resolved:tool_turn_newline"].startswith("agentrl.agent_loop.tool_turn_newline;")
    assert named["resolved:error_text"].startswith("agentrl.agent_loop.error_text + the tool's error_text;")
    assert named["resolved:large_output"].startswith("the tool's large_output;")
    assert named["resolved:prompt_filter_counts_tools"].startswith("data.agentrl.prompt_filter_counts_tools;")
    assert named["resolved:token_mean_scope"].startswith("actor_rollout_ref.actor.policy_loss.token_mean_scope")
    assert "--compat" in named["eval:compat"]


def test_data_rows_name_the_released_file_and_line() -> None:
    """Issue 28: training file, templating, LeetCode asserts, fn_name null and list answers, each with file:line."""
    keys = [row.key for row in fidelity.DATA_ROWS]
    assert keys == [
        "data.train_files",
        "data:templating",
        "resolved:leetcode_tests",
        "ground_truth:fn_name_null",
        "ground_truth:list_answers",
    ]
    for row in fidelity.DATA_ROWS:
        assert re.fullmatch(r"(recipe|verl)/[\w/.-]+\.(py|sh):[1-9]\d*", row.source), row.source
        assert set(fidelity.DATA_ROWS) <= set(fidelity.ROWS)
    fixed, _ = compose(fidelity.CONFIG + "_fixed")
    kw = RewardKwargs.from_trainer_config(fixed)
    assert (kw.ground_truth_form, kw.leetcode_tests, templating(fixed)) == ("normalized", "call", "first_row")
    for seven_b in ("agentrl_rl_qwen2_7b", "agentrl_rl_qwen2_7b_fixed"):  # the released 7B script's data too
        assert templating(compose(seven_b)[0]) == "first_row"


def test_every_released_grader_hack_has_a_row() -> None:
    """Issue 34 item 10: each hack the metrics count is in the table, as a property of the released grader."""
    keys = {row.key for row in fidelity.ROWS}
    assert {f"released_grader:{name}" for name in hack_patterns.PATTERNS} | {"released_grader:prelude_fn_name"} <= keys


def test_readme_table_is_the_rendering() -> None:
    text = README.read_text(encoding="utf-8")
    assert fidelity.README_START in text and fidelity.README_END in text, "README lacks the fidelity table markers"
    body = text.split(fidelity.README_START, 1)[1].split(fidelity.README_END, 1)[0].strip()
    assert body == fidelity.render(), "README's fidelity table is stale: paste agentrl_recipe.offline.fidelity.render()"


def test_the_runtime_row_is_the_default_sandbox_and_sandboxfusions_pins() -> None:
    """Issue 28: the row's versions are the default runtime's pins for SandboxFusion's interpreter."""
    (row,) = fidelity.RUNTIME_ROWS
    assert row.ours == SandboxConfig().runtime == "sandboxfusion"
    pins = dict(pin.split("==") for pin in runtime_env.pins_for("sandboxfusion", runtime_env.SANDBOXFUSION_PYTHON))
    for dist in ("numpy", "pandas", "scipy", "sympy"):
        assert f"{dist} {pins[dist]}" in row.released
    assert f"Python {runtime_env.SANDBOXFUSION_PYTHON}" in row.released
    assert set(runtime_env.EXTRA_IMPORTS["sandboxfusion"]) <= set(re.findall(r"[a-z]+", row.released))
    assert re.fullmatch(r"bytedance/SandboxFusion runtime/python/requirements\.txt:[1-9]\d*", row.source)
