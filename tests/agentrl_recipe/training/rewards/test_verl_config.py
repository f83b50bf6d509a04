"""A fresh process: verl's ppo_trainer with the reward manager selected by path (reward.reward_manager.source:
importlib, as recipe/grpo_tcr.yaml does) composes, and verl's load_reward_manager loads it with the plugin loaded
through its entry point alone (nothing of ours imported first)."""

from __future__ import annotations

import json
import os
import textwrap

from fresh_python import run_python

from agentrl_recipe import names

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, os, sys
    import numpy as np, torch
    from hydra import compose, initialize_config_dir
    import verl  # loads agentrl_recipe.plugin through the verl.plugins entry point
    from verl import DataProto
    from verl.trainer.ppo.reward import load_reward_manager
    from transformers import AutoTokenizer

    assert "agentrl_recipe.plugin" in sys.modules, "the plugin did not load"
    assert "agentrl_recipe.training.rewards.manager" not in sys.modules  # loaded by path, in the reward worker only
    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose("ppo_trainer", overrides=json.loads(sys.argv[2]))
    tok = AutoTokenizer.from_pretrained(sys.argv[1])
    manager = load_reward_manager(cfg, tok)
    ids = tok("the answer is \\\\boxed{7}", add_special_tokens=False)["input_ids"]
    row = DataProto.from_dict(
        tensors={
            "prompts": torch.ones(1, 2, dtype=torch.long),
            "responses": torch.tensor([ids]),
            "attention_mask": torch.ones(1, 2 + len(ids), dtype=torch.long),
        },
        non_tensors={
            "data_source": np.array(["aime2025"], dtype=object),
            "reward_model": np.array([{"ground_truth": "8"}], dtype=object),
            "__num_turns__": np.array([6]),
        },
    )
    out = asyncio.run(manager.run_single(row))
    print(json.dumps({"cls": type(manager).__module__ + "." + type(manager).__name__,
                      "reward": float(out["reward_score"]), "kwargs": cfg.reward.reward_kwargs.tool_bonus,
                      "max_resp_len": manager.settings.max_resp_len}))
    """
)


def test_verl_config_selecting_the_manager_by_path_loads_it_in_a_fresh_process(tiny_model_dir) -> None:
    overrides = [
        "reward.reward_manager.source=importlib",
        f"reward.reward_manager.name={names.REWARD_MANAGER_CLASS}",
        f"reward.reward_manager.module.path={names.REWARD_MANAGER_MODULE}",
        "data.max_response_length=20480",
        "+reward.reward_kwargs.overlong_buffer_cfg.enable=true",
        "+reward.reward_kwargs.overlong_buffer_cfg.len=4096",
        "+reward.reward_kwargs.overlong_buffer_cfg.penalty_factor=1.0",
        "+reward.reward_kwargs.max_resp_len=20480",
        "+reward.reward_kwargs.tool_bonus=paper",
        "+reward.reward_kwargs.answer_source=response",  # a multi-turn row with neither mask nor loop field
        # the trajectory below carries verl's __num_turns__ only (no agent-loop fields): the paper's turn count
        "+reward.reward_kwargs.tool_bonus_count=turns",
    ]
    env = {k: v for k, v in os.environ.items() if k != "VERL_USE_EXTERNAL_PLUGINS"}
    proc = run_python(["-c", SCRIPT, str(tiny_model_dir), json.dumps(overrides)], env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["cls"] == "agentrl_recipe.training.rewards.manager.AgentRLRewardManager"
    assert result["kwargs"] == "paper"
    assert result["max_resp_len"] == 20480
    assert abs(result["reward"] - (-0.8)) < 1e-9  # wrong answer after 2 tool calls: min(-0.6, -1 + 0.2)
