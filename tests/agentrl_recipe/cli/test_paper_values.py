"""The paper's hyperparameters, asserted in the composed paper-run configs (demyagent-paper-and-code.md §1, §7).

A change to a shipped value must change this table too — that is the point: the numbers are the recipe.
"""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.cli.configs.files import compose

A = "actor_rollout_ref.actor"
R = "actor_rollout_ref.rollout"
RL_COMMON = {
    "algorithm.adv_estimator": "agentrl_grpo",
    "algorithm.norm_adv_by_std_in_grpo": True,
    "algorithm.use_kl_in_reward": False,
    "algorithm.filter_groups.enable": False,
    f"{A}.policy_loss.loss_mode": "agentrl_tcr",
    f"{A}.loss_agg_mode": "token-mean",
    f"{A}.clip_ratio_low": 0.2,
    f"{A}.clip_ratio_c": 10.0,
    f"{A}.use_kl_loss": False,
    f"{A}.entropy_coeff": 0,
    f"{A}.optim.lr": 1e-6,
    f"{A}.optim.lr_scheduler_type": "constant",
    f"{A}.grad_clip": 1.0,
    f"{A}.ppo_mini_batch_size": 16,
    f"{A}.ppo_epochs": 1,
    "data.train_batch_size": 64,
    "data.max_prompt_length": 2560,
    "data.max_response_length": 20480,
    f"{R}.n": 16,
    f"{R}.temperature": 1.0,
    f"{R}.top_p": 1.0,
    f"{R}.val_kwargs.n": 32,
    f"{R}.val_kwargs.temperature": 1.0,
    f"{R}.val_kwargs.top_p": 0.6,
    f"{R}.multi_turn.enable": True,
    f"{R}.multi_turn.max_assistant_turns": 16,
    f"{R}.multi_turn.max_user_turns": 16,
    f"{R}.multi_turn.format": "hermes",
    f"{R}.multi_turn.max_parallel_calls": 1,
    f"{R}.multi_turn.max_tool_response_length": 256,
    f"{R}.agent.default_agent_loop": "agentrl_tool_agent",
    "reward.reward_manager.name": names.REWARD_MANAGER_CLASS,  # loaded by path (names.REWARD_MANAGER_MODULE)
    "reward.reward_manager.module.path": names.REWARD_MANAGER_MODULE,
    "reward.reward_kwargs.overlong_buffer_cfg.enable": True,
    "reward.reward_kwargs.overlong_buffer_cfg.len": 4096,
    "reward.reward_kwargs.overlong_buffer_cfg.penalty_factor": 1.0,
    "reward.reward_kwargs.max_resp_len": 20480,
    "reward.reward_kwargs.tool_bonus": None,  # agentrl.compat decides (tests/agentrl_recipe/offline/test_fidelity.py)
    "trainer.total_epochs": 3,
    "trainer.n_gpus_per_node": 8,
    "agentrl.sandbox.timeout_s": 30.0,
    "agentrl.sandbox.memory_mb": 2048,
}
SFT_COMMON = {
    "data.train_batch_size": 32,
    "data.max_length": 32768,
    "data.truncation": "right",
    "data.messages_key": "messages",
    "data.tools_key": "tools",
    "optim.lr": 1e-5,
    "optim.betas": [0.9, 0.95],
    "optim.weight_decay": 0.01,
    "optim.lr_warmup_steps_ratio": 0.1,
    "optim.lr_scheduler_type": "cosine",
    "optim.clip_grad": 1.0,
    "engine.ulysses_sequence_parallel_size": 4,
    "trainer.total_epochs": 5,
    "trainer.n_gpus_per_node": 8,
}
TABLE = {
    "agentrl_rl_qwen3_4b": {
        **RL_COMMON,
        f"{A}.clip_ratio_high": 0.315,
        "actor_rollout_ref.model.path": "checkpoints/agentrl_sft/qwen3_4b/global_step_465/huggingface",
        "data.train_files": "data/rl/open_agentrl_30k.parquet",  # [code] the published 30K (make data-rl-released)
    },
    "agentrl_rl_qwen3_4b_eps028": {**RL_COMMON, f"{A}.clip_ratio_high": 0.28},
    "agentrl_rl_qwen2_7b": {
        **RL_COMMON,
        f"{A}.clip_ratio_high": 0.28,
        "actor_rollout_ref.model.path": "checkpoints/agentrl_sft/qwen2_7b/global_step_465/huggingface",
        "data.train_files": "data/rl/open_agentrl_30k.parquet",  # [code] grpo_tcr_qwen2_7b.sh trains on the 30K
    },
    "agentrl_rl_qwen2_7b_fixed": {"data.train_files": "data/rl/open_agentrl_30k.parquet"},
    "agentrl_rl_qwen2_7b_async": {"data.train_files": "data/rl/open_agentrl_30k.parquet"},
    "agentrl_rl_qwen2_7b_colocate_async": {"data.train_files": "data/rl/open_agentrl_30k.parquet"},
    "ablations/rl_data_diverse": {"data.train_files": "data/rl/train.parquet"},  # the rebuilt mix (make data-rl-mix)
    "ablations/rl_data_model_aware": {"data.train_files": "data/rl/model_aware.parquet"},
    "agentrl_sft_qwen3_4b": {**SFT_COMMON, "model.path": "Qwen/Qwen3-4B-Instruct-2507"},
    "agentrl_sft_qwen2_7b": {**SFT_COMMON, "model.path": "Qwen/Qwen2.5-7B-Instruct"},
    "ablations/grpo_t": {
        f"{A}.clip_ratio_high": 0.2,
        f"{A}.use_kl_loss": True,
        f"{A}.kl_loss_coef": 0.001,
        "data.max_response_length": 16384,
        "reward.reward_kwargs.max_resp_len": 16384,
        "reward.reward_kwargs.overlong_buffer_cfg.enable": False,
    },
    "ablations/grpo_scr": {
        f"{A}.policy_loss.loss_mode": "gspo",
        f"{A}.loss_agg_mode": "seq-mean-token-mean",
        f"{A}.clip_ratio_low": 3e-4,
        f"{A}.clip_ratio_high": 4e-4,
    },
    "ablations/clip_high_0p35": {f"{A}.clip_ratio_high": 0.35},
    "ablations/sft_lr_paper": {"optim.lr": 5e-5},
    "ablations/sft_data_synthetic": {"data.train_files": "data/sft/retool_synthetic.parquet"},
    "ablations/rl_data_math_only": {"data.train_files": "data/rl/math_only.parquet"},
    "ablations/entropy_bonus_on": {f"{A}.entropy_coeff": 0.001},
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_paper_values(name: str) -> None:
    cfg, _ = compose(name)
    wrong = {}
    for key, expected in TABLE[name].items():
        value = OmegaConf.select(cfg, key, throw_on_missing=True)
        value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
        if value != expected:
            wrong[key] = (value, expected)
    assert not wrong, f"{name}: (got, paper) {wrong}"
