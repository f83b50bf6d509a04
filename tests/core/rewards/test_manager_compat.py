"""``agentrl.compat`` in the reward manager: what each mode sets, and the released −1.1 constant."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.core.rewards.manager import RewardKwargs, apply_tool_bonus


def test_compat_sets_the_behaviour_keys_and_explicit_keys_win() -> None:
    released = RewardKwargs.from_dict({"max_resp_len": 20480}, mode="open_agentrl")
    assert (released.tool_bonus, released.tool_bonus_count, released.code_rules) == (
        "released",
        "turns",
        "open_agentrl",
    )
    assert (released.code_timeout_s_per_test, released.code_total_timeout_s) == (30.0, None)
    ours = RewardKwargs.from_dict({"max_resp_len": 20480}, mode="agentrl")
    assert (ours.tool_bonus, ours.tool_bonus_count, ours.code_rules) == ("paper", "tool_calls", "lcb")
    assert (ours.code_timeout_s_per_test, ours.code_total_timeout_s) == (6.0, 60.0)
    one_flip = RewardKwargs.from_dict({"tool_bonus": "paper"}, mode="open_agentrl")
    assert (one_flip.tool_bonus, one_flip.code_rules) == ("paper", "open_agentrl")


def test_the_trainer_configs_compat_is_read() -> None:
    cfg = OmegaConf.create({"agentrl": {"compat": "open_agentrl"}, "data": {"max_response_length": 20480}})
    assert RewardKwargs.from_trainer_config(cfg).tool_bonus == "released"
    with pytest.raises(ValueError, match=r"agentrl\.compat must be one of"):
        RewardKwargs.from_trainer_config(OmegaConf.create({"agentrl": {"compat": "verl"}}))


@pytest.mark.parametrize("num_turns", [None, 0, 2, 10, 40])
def test_released_bonus_is_the_constant_minus_1_1(num_turns) -> None:
    # [code] compute_score: num_turns = extra_info.get("num_turns", 0) = 0 under the DAPO manager
    shaped, bonus = apply_tool_bonus(-1.0, num_turns, "released")
    assert shaped == pytest.approx(-1.1) and bonus == pytest.approx(-0.1)
    assert apply_tool_bonus(0.0, num_turns, "released") == (0.0, 0.0)  # a failing program scores 0: not shaped
    assert apply_tool_bonus(1.0, num_turns, "released") == (1.0, 0.0)


def test_turns_count_malformed_replies_tool_calls_do_not() -> None:
    # 2 executed calls + 2 answered malformed calls: verl's num_turns = 1 + 5 assistant + 4 tool turns = 10
    by_turns, _ = apply_tool_bonus(-1.0, 10, "paper", count="turns")
    by_calls, _ = apply_tool_bonus(-1.0, 10, "paper", count="tool_calls", tool_calls=2)
    assert (by_turns, by_calls) == (pytest.approx(-0.6), pytest.approx(-0.8))
    with pytest.raises(ValueError, match="agentrl_tool_calls"):
        apply_tool_bonus(-1.0, 10, "paper", count="tool_calls")
