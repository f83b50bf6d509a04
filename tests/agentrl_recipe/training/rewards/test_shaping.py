"""The shaping rules: the wrong-answer tool bonus (released −1.1 constant, turns vs tool calls) and DAPO's overlong
penalty."""

from __future__ import annotations

import pytest

from agentrl_recipe.training.rewards.shaping import apply_tool_bonus, executed_calls, overlong_penalty


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
    with pytest.raises(ValueError, match="agentrl_tool_statuses"):
        apply_tool_bonus(-1.0, 10, "paper", count="tool_calls")


def test_only_calls_whose_program_ran_are_executed() -> None:
    """Issue 40 item 5: a call that never ran (bad arguments, the tool raised, unknown tool, refused as too large) or
    whose sandbox failed earns no bonus."""
    ran = ["ok", "runtime_error", "timeout", "memory_exceeded", "output_truncated"]
    never_ran = ["invalid_arguments", "tool_exception", "unknown_tool", "too_large", "infra_error"]
    assert executed_calls(ran + never_ran) == 5
    assert executed_calls(never_ran) == 0 and executed_calls([]) == 0 and executed_calls(None) is None


def test_overlong_penalty_is_zero_before_the_buffer_then_linear_to_minus_factor() -> None:
    assert overlong_penalty(100, 1000, 200, 1.0) == 0.0
    assert overlong_penalty(800, 1000, 200, 1.0) == 0.0
    assert overlong_penalty(900, 1000, 200, 1.0) == pytest.approx(-0.5)
    assert overlong_penalty(1000, 1000, 200, 0.5) == pytest.approx(-0.5)
