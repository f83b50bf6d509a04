"""The reward shaping rules of ``agentrl_reward``, as pure functions: the wrong-answer tool bonus and DAPO's overlong
penalty (tested directly and through :class:`agentrl_recipe.training.rewards.manager.AgentRLRewardManager`)."""

from __future__ import annotations

from collections.abc import Iterable

from agentrl_recipe import fields

# The sandbox statuses of a call whose program ran (agentrl_sandbox.types.STATUSES): what tool_bonus_count=tool_calls
# counts. Not counted: calls that never ran (invalid_arguments, tool_exception, unknown_tool, too_large: refused by the
# server) and infra_error (the sandbox failed; not the policy's call).
EXECUTED_STATUSES = frozenset({"ok", "runtime_error", "timeout", "memory_exceeded", "output_truncated"})


def executed_calls(statuses: Iterable[str] | None) -> int | None:
    """How many of a trajectory's calls ran (``fields.TOOL_STATUSES``); None without the statuses."""
    return None if statuses is None else sum(str(s) in EXECUTED_STATUSES for s in statuses)


def apply_tool_bonus(
    score: float,
    num_turns: int | None,
    mode: str,
    *,
    cap: float = -0.6,
    per_call: float = 0.1,
    tool_calls: int | None = None,
    count: str = "turns",
) -> tuple[float, float]:
    """Return (shaped score, bonus added). Only wrong answers (score < 0) are shaped.

    ``count="turns"``: n = (num_turns − 2)/2 (the released formula); ``"tool_calls"``: n = ``tool_calls``, the
    executed calls (:func:`executed_calls` of the trajectory's statuses)."""
    if mode == "off" or score >= 0:
        return score, 0.0
    if mode == "released":
        n = (0 - 2) / 2
    elif count == "tool_calls":
        if tool_calls is None:
            raise ValueError(
                f"tool_bonus_count=tool_calls needs the agent loop's {fields.TOOL_STATUSES.column!r} field, which "
                "this trajectory lacks; run through agentrl_tool_agent or set "
                "reward.reward_kwargs.tool_bonus_count=turns"
            )
        n = int(tool_calls)
    elif num_turns is None:
        raise ValueError(
            "tool_bonus=paper needs the trajectory's num_turns (verl's __num_turns__), which this batch lacks; "
            "run through verl's agent loop or set reward.reward_kwargs.tool_bonus to released/off"
        )
    else:
        n = (int(num_turns) - 2) / 2
    shaped = min(cap, score + per_call * n)
    return shaped, shaped - score


def overlong_penalty(length: int, max_resp_len: int, buffer_len: int, penalty_factor: float) -> float:
    """DAPO's soft overlong punishment (verl dapo.py): 0 up to max_resp_len − buffer, then linear down to −factor."""
    exceed = length - (max_resp_len - buffer_len)
    return min(-exceed / buffer_len * penalty_factor, 0.0)
