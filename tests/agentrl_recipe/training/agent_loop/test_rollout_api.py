"""rollout.py's config composition and batch building (the parts data prep, eval and the demo call first)."""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_helpers import row

from agentrl_recipe import names
from agentrl_recipe.config_paths import config_dir
from agentrl_recipe.offline.rollout import ROW_INDEX, SAMPLE_INDEX, compose_config, make_batch, rollout


def test_compose_config_is_the_rl_config_for_an_in_process_rollout(tiny_model_dir, base_cfg):
    rollout_cfg = base_cfg.actor_rollout_ref.rollout
    assert base_cfg.actor_rollout_ref.model.path == str(Path(tiny_model_dir).resolve())
    assert (rollout_cfg.prompt_length, rollout_cfg.response_length) == (512, 1024)
    assert rollout_cfg.name == "vllm" and rollout_cfg.calculate_log_probs is True
    assert rollout_cfg.agent.default_agent_loop == names.AGENT_LOOP
    manager = base_cfg.reward.reward_manager
    assert (manager.source, manager.name, manager.module.path) == (
        "importlib",
        names.REWARD_MANAGER_CLASS,
        names.REWARD_MANAGER_MODULE,
    )
    assert base_cfg.agentrl.agent_loop.record_messages is True
    # the paper's multi-turn limits, as verl keys (verl_configs/recipe/grpo_tcr.yaml)
    multi_turn = rollout_cfg.multi_turn
    assert (multi_turn.max_assistant_turns, multi_turn.max_user_turns, multi_turn.max_parallel_calls) == (16, 16, 1)
    assert (multi_turn.max_tool_response_length, multi_turn.tool_response_truncate_side) == (256, "middle")
    assert multi_turn.format == "hermes" and multi_turn.enable is True


def test_relative_tool_config_resolves_against_the_repo(tiny_model_dir, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository: verl's own resolution would miss the file
    cfg = compose_config(tiny_model_dir, record_messages=False)
    path = cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path
    assert Path(path).is_absolute() and Path(path).parent == config_dir() / "tools"
    assert cfg.agentrl.agent_loop.record_messages is False
    with pytest.raises(FileNotFoundError, match=r"no config nope\.yaml"):
        compose_config(tiny_model_dir, config_name="nope")


def test_make_batch_repeats_rows_and_rejects_bad_ones():
    batch = make_batch([row("a"), row("b", agent="single_turn_agent")], 3, default_agent=names.AGENT_LOOP, first_row=10)
    nt = batch.non_tensor_batch
    assert len(batch) == 6
    assert nt[ROW_INDEX].tolist() == [10, 10, 10, 11, 11, 11] and nt[SAMPLE_INDEX].tolist() == [0, 1, 2] * 2
    assert nt["agent_name"].tolist() == [names.AGENT_LOOP] * 3 + ["single_turn_agent"] * 3
    assert len(set(nt["priority"].tolist())) == 6  # one request id per trajectory under full_determinism
    assert nt["raw_prompt"][0] == [{"role": "user", "content": "a"}]
    no_agent = {k: v for k, v in row("c").items() if k != "agent_name"}
    assert make_batch([no_agent], 1, default_agent="tool_agent").non_tensor_batch["agent_name"].tolist() == [
        "tool_agent"
    ]
    with pytest.raises(ValueError, match="row 0: 'prompt' must be a list of chat messages"):
        make_batch([{"prompt": "What is 6*7?"}], 1, default_agent=names.AGENT_LOOP)
    with pytest.raises(ValueError, match="n must be >= 1"):
        make_batch([row("a")], 0, default_agent=names.AGENT_LOOP)


async def test_sync_rollout_refuses_a_running_loop(base_cfg):
    with pytest.raises(RuntimeError, match="use `await arollout"):
        rollout([row("a")], client=None, cfg=base_cfg)
