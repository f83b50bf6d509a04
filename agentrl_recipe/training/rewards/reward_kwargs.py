"""``reward.reward_kwargs`` of the ``agentrl_reward`` manager: every key, with the paper's value, and its checks.

Keys left None take the value ``agentrl.compat`` gives them (:mod:`agentrl_recipe.training.compat`); unknown keys are an
error. Read by :class:`agentrl_recipe.training.rewards.manager.AgentRLRewardManager`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agentrl_recipe.training.recipe_config import RecipeConfig, from_mapping, resolve, standalone, to_plain
from agentrl_recipe.training.rewards import scoring
from agentrl_recipe.training.rewards.answer_source import ANSWER_SOURCES
from agentrl_recipe.training.rewards.ground_truth import GROUND_TRUTH_FORMS, LEETCODE_TESTS

TOOL_BONUS_MODES = ("paper", "released", "off")
TOOL_BONUS_COUNTS = ("turns", "tool_calls")
CODE_RULES = ("open_agentrl", "lcb")
OVERLONG_COUNTS = ("all", "model")


@dataclasses.dataclass
class OverlongBufferConfig:
    """``reward.reward_kwargs.overlong_buffer_cfg`` — the same block as verl's DAPO manager."""

    enable: bool = True  # [paper Eq. 9]/[code] True
    len: int = 4096  # [code] 4096: the penalty grows linearly over the last 4096 tokens before max_resp_len
    penalty_factor: float = 1.0  # [code] 1.0: the penalty reaches −1.0 at max_resp_len
    # verl's DAPO key ([code] false). Kept so a DAPO block can be pasted unchanged; agentrl always reports
    # `overlong` / `overlong_reward` in reward_extra_info (the metrics need them), so this switch changes nothing.
    log: bool = True


@dataclasses.dataclass
class RewardKwargs:
    """``reward.reward_kwargs`` of ``agentrl_reward``. Unknown keys are an error (verl would ignore them silently)."""

    overlong_buffer_cfg: OverlongBufferConfig = dataclasses.field(default_factory=OverlongBufferConfig)
    # [code] 20480 (= data.max_response_length). None: take data.max_response_length from the trainer config.
    max_resp_len: int | None = None
    # Which tokens the overlong rule counts. "all" [paper]/[code]/verl DAPO: every response token, tool outputs
    # included. "model": only tokens the model generated (response_mask == 1) — needs the batch's response_mask or
    # the agent loop's fields.MODEL_TOKENS.column field.
    overlong_count: str = "all"
    # Keys left None take the value agentrl.compat gives them (agentrl_recipe/training/compat.py): open_agentrl = the
    # released code, agentrl = our fixes.
    # Wrong-answer tool bonus min(cap, s + per_call·n) [paper Eq. 8; code reward.py]:
    # "paper" (compat agentrl) — n counted as tool_bonus_count says;
    # "released" (compat open_agentrl) — what the released code computed: its DAPO manager never passed num_turns, so
    #   n = (0 − 2)/2 and every wrong answer scores min(cap, s − per_call) = −1.1 (Open-AgentRL issue #13, PR #15);
    # "off" — no bonus.
    tool_bonus: str | None = None
    # What n counts for tool_bonus=paper. "turns" (compat open_agentrl; the formula of [code] reward.py):
    # (verl's __num_turns__ − 2)/2, where an answered malformed call (agent_loop.malformed_call_feedback) is a turn
    # too, so each one earns per_call. "tool_calls" (compat agentrl): the calls whose program ran (agentrl_tool_statuses
    # ok/runtime_error/timeout/memory_exceeded/output_truncated: rewards/shaping.py EXECUTED_STATUSES; malformed,
    # invalid_arguments, tool_exception, unknown_tool, too_large and infra_error calls excluded); equal to "turns"
    # when every call ran.
    tool_bonus_count: str | None = None
    tool_bonus_cap: float = -0.6  # [code] −0.6: a wrong answer never scores above this
    tool_bonus_per_call: float = 0.1  # [code] 0.1 per tool call
    # Where a math/GPQA answer is read (rewards/answer_source.py). "response" (compat open_agentrl; [code]): the whole
    # decoded response, tool outputs and tool-call code included — a program that prints \boxed{} scores.
    # "final_turn" (compat agentrl): the model's final assistant turn without its <think> and <tool_call> blocks.
    answer_source: str | None = None
    # "strict" [paper]/[code]: exact match of the last \boxed{}. "math_verify": same extraction, math-verify
    # equivalence (a deviation; the original used math-verify only for code rows without tests).
    math_verifier: str = "strict"
    math_verify_timeout_s: float = 10.0  # hard kill of the math-verify helper process (not in the original)
    # Code grading rules. "open_agentrl" (compat open_agentrl): the released code_math.py, rule for rule
    # (agentrl_recipe/training/rewards/code/released.py: each test run alone, concurrently, 30 s and 1024 MB, exit code
    # 0 and stdout.rstrip("\n") == expected, call results printed as json.dumps/str, a missing function −1).
    # "lcb" (compat agentrl): LiveCodeBench's rules (rewards/code_grading.py: stripped lines, Decimal equality,
    # JSON values, a missing function scores 0).
    code_rules: str | None = None
    # lcb rules: per-test timeout, tests of one program in sequence. [code] 30 s per test case, cases concurrent
    # (compat open_agentrl: 30, and code_rules=open_agentrl always uses 30); 6 s (compat agentrl) is LiveCodeBench's
    # harness default, which the paper's LCB numbers use.
    code_timeout_s_per_test: float | None = None
    # lcb rules: cap on grading one program (all its tests); tests not reached count as timeouts. [code] none
    # (compat open_agentrl: None); compat agentrl: 60 s.
    code_total_timeout_s: float | None = None
    # The form the ground truth is graded in (rewards/ground_truth.py). "published" (compat open_agentrl): as stored,
    # as [code] graded Open-AgentRL-30K: a code ground truth with "fn_name": null scores −1 (code_math.py:281-284), a
    # one-element list answer '["15625"]' is compared as that text (math_dapo.py:217). "normalized" (compat agentrl):
    # null-valued keys dropped (stdin tests), a one-element list answer graded as its element.
    ground_truth_form: str | None = None
    # LeetCode rows. "asserts" (compat open_agentrl): graded by their assert harness, as [code] did
    # (code_math.py:197-250). "call" (compat agentrl): a row with a call-based conversion (extra_info.call_tests,
    # written by `data rl-mix`) is graded by it; rows without one (the released 30K) run their asserts.
    leetcode_tests: str | None = None
    # None: code_rules=open_agentrl 1024 MB ([code] reward), lcb agentrl.sandbox.memory_mb ([code] tool: 2048 MB).
    code_memory_mb: int | None = None
    # Hard cap on one row's grading, any task kind (waiting for a grading or sandbox slot excluded: the wait is
    # logged as reward/sandbox_queue_wait_s; rewards/grade_budget.py). A timed-out row is scored as a
    # wrong answer and flagged agentrl_grader_timeout. Not in the original (a stuck grade stalled the batch).
    grader_timeout_s: float = 120.0
    max_concurrency: int = 64  # rows graded at once per reward worker (the sandbox has its own limit)

    def __post_init__(self) -> None:
        if isinstance(self.overlong_buffer_cfg, Mapping):
            self.overlong_buffer_cfg = from_mapping(
                OverlongBufferConfig, self.overlong_buffer_cfg, where="reward.reward_kwargs.overlong_buffer_cfg"
            )
        _check_choice("tool_bonus", self.tool_bonus, (*TOOL_BONUS_MODES, None))
        _check_choice("tool_bonus_count", self.tool_bonus_count, (*TOOL_BONUS_COUNTS, None))
        _check_choice("code_rules", self.code_rules, (*CODE_RULES, None))
        _check_choice("answer_source", self.answer_source, (*ANSWER_SOURCES, None))
        _check_choice("ground_truth_form", self.ground_truth_form, (*GROUND_TRUTH_FORMS, None))
        _check_choice("leetcode_tests", self.leetcode_tests, (*LEETCODE_TESTS, None))
        _check_choice("overlong_count", self.overlong_count, OVERLONG_COUNTS)
        _check_choice("math_verifier", self.math_verifier, scoring.MATH_VERIFIERS)
        for key in ("math_verify_timeout_s", "code_timeout_s_per_test", "code_total_timeout_s", "grader_timeout_s"):
            if getattr(self, key) is not None and not float(getattr(self, key)) > 0:
                raise ValueError(f"reward.reward_kwargs.{key} must be > 0, got {getattr(self, key)!r}")
        if int(self.max_concurrency) < 1:
            raise ValueError(f"reward.reward_kwargs.max_concurrency must be >= 1, got {self.max_concurrency!r}")
        buf = self.overlong_buffer_cfg
        if buf.enable:
            if int(buf.len) <= 0:
                raise ValueError("reward.reward_kwargs.overlong_buffer_cfg.len must be > 0 when enable=true")
            if self.max_resp_len is not None and int(self.max_resp_len) < int(buf.len):
                raise ValueError(
                    f"reward.reward_kwargs.max_resp_len ({self.max_resp_len}) must be >= overlong_buffer_cfg.len "
                    f"({buf.len})"
                )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None, *, recipe: RecipeConfig | None = None) -> RewardKwargs:
        """The kwargs with every None behaviour key set from ``recipe``'s compat mode (default: the plugin's)."""
        recipe = recipe or standalone()
        kwargs = from_mapping(cls, _plain(values), where="reward.reward_kwargs")
        keys = (
            "tool_bonus",
            "tool_bonus_count",
            "code_rules",
            "code_timeout_s_per_test",
            "code_total_timeout_s",
            "ground_truth_form",
            "leetcode_tests",
            "answer_source",
        )
        return dataclasses.replace(kwargs, **{k: recipe.behaviour(k, getattr(kwargs, k)) for k in keys})

    @classmethod
    def from_trainer_config(cls, config: Any) -> RewardKwargs:
        reward = config.get("reward") if hasattr(config, "get") else None
        values = _plain(reward.get("reward_kwargs") if reward is not None else None)
        kwargs = cls.from_dict(values, recipe=resolve(config))
        if kwargs.max_resp_len is None:
            data = config.get("data") if hasattr(config, "get") else None
            max_len = data.get("max_response_length") if data is not None else None
            if max_len is not None:
                kwargs = dataclasses.replace(kwargs, max_resp_len=int(max_len))
        if kwargs.overlong_buffer_cfg.enable and kwargs.max_resp_len is None:
            raise ValueError(
                "reward.reward_kwargs.max_resp_len is required for the overlong penalty (or set "
                "data.max_response_length, or overlong_buffer_cfg.enable=false)"
            )
        return kwargs


def _check_choice(key: str, value: Any, choices: tuple[str | None, ...]) -> None:
    if value not in choices:
        raise ValueError(f"reward.reward_kwargs.{key} must be one of {choices}, got {value!r}")


def _plain(values: Any) -> dict[str, Any]:
    return dict(to_plain(values) or {})
