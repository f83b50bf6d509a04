"""``reward.reward_kwargs``: the paper's defaults, and what each ``agentrl.compat`` mode sets."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.training.recipe_config import RecipeConfig
from agentrl_recipe.training.rewards.reward_kwargs import RewardKwargs


def test_compat_sets_the_behaviour_keys_and_explicit_keys_win() -> None:
    released = RewardKwargs.from_dict({"max_resp_len": 20480}, recipe=RecipeConfig(compat="open_agentrl"))
    assert (released.tool_bonus, released.tool_bonus_count, released.code_rules) == (
        "released",
        "turns",
        "open_agentrl",
    )
    assert (released.code_timeout_s_per_test, released.code_total_timeout_s) == (30.0, None)
    ours = RewardKwargs.from_dict({"max_resp_len": 20480}, recipe=RecipeConfig(compat="agentrl"))
    assert (ours.tool_bonus, ours.tool_bonus_count, ours.code_rules) == ("paper", "tool_calls", "lcb")
    assert (ours.code_timeout_s_per_test, ours.code_total_timeout_s) == (6.0, 60.0)
    assert (released.answer_source, ours.answer_source) == ("response", "final_turn")
    one_flip = RewardKwargs.from_dict({"tool_bonus": "paper"}, recipe=RecipeConfig(compat="open_agentrl"))
    assert (one_flip.tool_bonus, one_flip.code_rules) == ("paper", "open_agentrl")


def test_the_trainer_configs_compat_is_read() -> None:
    cfg = OmegaConf.create({"agentrl": {"compat": "open_agentrl"}, "data": {"max_response_length": 20480}})
    assert RewardKwargs.from_trainer_config(cfg).tool_bonus == "released"
    with pytest.raises(ValueError, match=r"agentrl\.compat must be one of"):
        RewardKwargs.from_trainer_config(OmegaConf.create({"agentrl": {"compat": "verl"}}))


def test_reward_kwargs_defaults_are_the_papers() -> None:
    kw = RewardKwargs.from_dict({"max_resp_len": 20480})
    buf = kw.overlong_buffer_cfg
    assert (buf.enable, buf.len, buf.penalty_factor) == (True, 4096, 1.0)
    assert (kw.tool_bonus_cap, kw.tool_bonus_per_call, kw.math_verifier, kw.overlong_count) == (
        -0.6,
        0.1,
        "strict",
        "all",
    )
