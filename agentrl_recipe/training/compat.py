"""``agentrl.compat``: one switch between the released code's behaviour and ours, and what it sets.

``open_agentrl`` reproduces what produced the published checkpoint (Gen-Verse/Open-AgentRL ``recipe/demystify`` and
its vendored verl 0.5), its mistakes included; ``agentrl`` turns on this recipe's fixes. Each behaviour below is also
a key of its own (``None`` there = take the value of the mode), so an ablation flips one behaviour and keeps the rest.

| behaviour key | open_agentrl (released code) | agentrl (ours) |
| --- | --- | --- |
| ``reward.reward_kwargs.tool_bonus`` | ``released``: every wrong answer −1.1 | ``paper``: Eq. 8's bonus |
| ``reward.reward_kwargs.tool_bonus_count`` | ``turns``: (num_turns − 2)/2 | ``tool_calls``: calls that ran |
| ``reward.reward_kwargs.answer_source`` | ``response``: the whole response | ``final_turn``: the model's last turn |
| ``reward.reward_kwargs.code_rules`` | ``open_agentrl``: rewards/code_released.py | ``lcb``: LiveCodeBench's rules |
| ``reward.reward_kwargs.code_timeout_s_per_test`` | 30 s, tests concurrent | 6 s (LCB) |
| ``reward.reward_kwargs.code_total_timeout_s`` | none (tests run at once) | 60 s |
| ``agentrl.agent_loop.malformed_call_feedback`` | false: a turn of only bad calls ends | true: answered |
| tool ``auto_print`` (verl_configs/tools/*.yaml) | ``last_line``: ``print(<last line>)`` | ``expression`` (ast) |
| tool ``failure_reply`` | ``no_stdout``: "no stdout here" | ``explain``: partial output + why |
| ``reward.reward_kwargs.ground_truth_form`` | ``published``: as stored | ``normalized``: rewards/ground_truth.py |
| ``reward.reward_kwargs.leetcode_tests`` | ``asserts``: LeetCode asserts run | ``call``: the rebuilt mix's conversion |
| ``agentrl.agent_loop.tool_turn_newline`` | false: ``<|im_end|><|im_start|>user`` | true: verl 0.9.1's ``\\n`` |
| ``agentrl.agent_loop.error_text`` + tool ``error_text`` | ``released``: ``Error when executing tool`` | ``explain`` |
| tool ``large_output`` | ``timeout``: over 131,072 bytes a stream = a timeout | ``keep``: returned (cut by verl) |
| tool ``call_arguments`` | ``released``: the model's ``timeout``/``language`` as sent | ``bounded``: ≤ ``timeout_s`` |
| ``actor_rollout_ref.actor.policy_loss.token_mean_scope`` | ``micro_batch``: × its sequences | ``mini_batch`` (verl) |
| ``data.agentrl.prompt_filter_counts_tools`` | false: the prompt alone | true: prompt + tool schemas (verl) |
| ``trainer.v1.sampler.sampler_kwargs.batch_partition`` | ``released``: 8 length-balanced cuts | ``verl``: 0.9.1's |
| ``actor_rollout_ref.actor.policy_loss.micro_batches`` | ``released``: token-balanced | ``verl``: 0.9.1's |
| ``data.agentrl.keep_released_rows`` | true: every published row | false: rows flagged ``released_only`` dropped |
"""

from __future__ import annotations

from typing import Any

MODES = ("open_agentrl", "agentrl")
DEFAULT_MODE = "agentrl"  # a config without agentrl.compat gets the plugin's own behaviour

DEFAULTS: dict[str, dict[str, Any]] = {
    "tool_bonus": {"open_agentrl": "released", "agentrl": "paper"},
    "tool_bonus_count": {"open_agentrl": "turns", "agentrl": "tool_calls"},
    "answer_source": {"open_agentrl": "response", "agentrl": "final_turn"},
    "code_rules": {"open_agentrl": "open_agentrl", "agentrl": "lcb"},
    "code_timeout_s_per_test": {"open_agentrl": 30.0, "agentrl": 6.0},
    "code_total_timeout_s": {"open_agentrl": None, "agentrl": 60.0},
    "malformed_call_feedback": {"open_agentrl": False, "agentrl": True},
    "auto_print": {"open_agentrl": "last_line", "agentrl": "expression"},
    "failure_reply": {"open_agentrl": "no_stdout", "agentrl": "explain"},
    "ground_truth_form": {"open_agentrl": "published", "agentrl": "normalized"},
    "leetcode_tests": {"open_agentrl": "asserts", "agentrl": "call"},
    "tool_turn_newline": {"open_agentrl": False, "agentrl": True},
    "error_text": {"open_agentrl": "released", "agentrl": "explain"},
    "large_output": {"open_agentrl": "timeout", "agentrl": "keep"},
    "call_arguments": {"open_agentrl": "released", "agentrl": "bounded"},
    "token_mean_scope": {"open_agentrl": "micro_batch", "agentrl": "mini_batch"},
    "prompt_filter_counts_tools": {"open_agentrl": False, "agentrl": True},
    "keep_released_rows": {"open_agentrl": True, "agentrl": False},
    "batch_partition": {"open_agentrl": "released", "agentrl": "verl"},
    "micro_batches": {"open_agentrl": "released", "agentrl": "verl"},
}


def check_mode(mode: Any, *, where: str = "agentrl.compat") -> str:
    if mode not in MODES:
        raise ValueError(f"{where} must be one of {MODES}, got {mode!r}")
    return mode


def default(key: str, value: Any, mode: str) -> Any:
    """``value`` when set, else the value ``mode`` gives behaviour ``key``. Components call it through
    :meth:`agentrl_recipe.training.recipe_config.RecipeConfig.behaviour`, the one place a behaviour is resolved."""
    return DEFAULTS[key][check_mode(mode)] if value is None else value
