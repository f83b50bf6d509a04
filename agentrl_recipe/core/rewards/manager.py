"""``agentrl_reward``: verl 0.9.1 reward-loop manager for the paper's rewards, that never stalls a batch.

Selected with ``reward.reward_manager.name=agentrl_reward`` (registered by :mod:`agentrl_recipe.core.plugin`); settings
come from ``reward.reward_kwargs.*`` (:class:`RewardKwargs`, every key documented there with the paper's value), the
sandbox from ``agentrl.sandbox`` (:meth:`SandboxConfig.from_trainer_config`, the same block the rollout tool uses).

Per trajectory (``run_single`` on verl's 1-row DataProto):

1. decode the valid response (all response tokens, tool outputs included — what the original scored);
2. score it per row with :func:`agentrl_recipe.core.rewards.scoring.acompute_score` (or the ``custom_reward_function``
   when one is configured), at most ``max_concurrency`` at a time and under a hard ``grader_timeout_s``;
3. wrong answers (score < 0) get the tool bonus ``min(cap, s + per_call·(num_turns − 2)/2)`` (``tool_bonus``);
4. DAPO overlong shaping: ``min(−(len − (max_resp_len − buffer))/buffer · factor, 0)`` added to the reward.

``reward_extra_info`` has the same keys for every row (verl stacks them into batch columns from the first row's
keys): :data:`REWARD_INFO_KEYS`. verl's validation groups them per data source (``val-core/<ds>/acc/mean@N``);
:func:`agentrl_recipe.core.rewards.metrics.reward_metrics` turns a training batch into per-source metrics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.utils.reward_score import default_compute_score

from agentrl_recipe.core import compat, names, trace
from agentrl_recipe.core.config import SandboxConfig, from_mapping, to_plain
from agentrl_recipe.core.rewards import scoring
from agentrl_recipe.core.rewards.isolation import GraderTimeout
from agentrl_recipe.core.tools.sandbox import fleet_metrics, get_sandbox

logger = logging.getLogger(__name__)

TOOL_BONUS_MODES = ("paper", "released", "off")
TOOL_BONUS_COUNTS = ("turns", "tool_calls")
CODE_RULES = ("open_agentrl", "lcb")
OVERLONG_COUNTS = ("all", "model")

# Keys of every row's reward_extra_info (fixed, so verl can stack rows of different task kinds into columns).
REWARD_INFO_KEYS = (
    "score",  # the task score before shaping (math/GPQA ±1, code pass fraction or −1)
    "acc",  # correct (code: all tests passed); None when the grade is unknown (infra failure)
    "pred",  # the boxed answer (math/GPQA; verl's maj@N uses it), None for code
    "task_kind",  # math | gpqa | code
    "tests_passed",  # code: tests passed (None for math/GPQA)
    "tests_total",  # code: tests run (None for math/GPQA)
    "num_turns",  # verl's __num_turns__ (None when absent)
    "tool_bonus",  # what the wrong-answer tool bonus added (0.0 when not applied)
    "overlong",  # the response entered the overlong buffer
    "overlong_reward",  # the overlong penalty added (≤ 0)
    "response_tokens",  # the length the overlong rule measured
    names.FIELD_GRADER_TIMEOUT,  # the grade hit grader_timeout_s (or math-verify's hard timeout)
    names.FIELD_GRADER_INFRA_FAILURE,  # the sandbox failed while grading: score says nothing, mask it
    names.FIELD_REWARD_SANDBOX_ROUTES,  # JSON: the sandbox_fusion servers the grade reached (per-server metrics)
    "grade_s",  # seconds spent grading (for latency metrics)
)


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
    # the agent loop's names.FIELD_MODEL_TOKENS field.
    overlong_count: str = "all"
    # Keys left None take the value agentrl.compat gives them (agentrl_recipe/core/compat.py): open_agentrl = the
    # released code, agentrl = our fixes.
    # Wrong-answer tool bonus min(cap, s + per_call·n) [paper Eq. 8; code reward.py]:
    # "paper" (compat agentrl) — n counted as tool_bonus_count says;
    # "released" (compat open_agentrl) — what the released code computed: its DAPO manager never passed num_turns, so
    #   n = (0 − 2)/2 and every wrong answer scores min(cap, s − per_call) = −1.1 (Open-AgentRL issue #13, PR #15);
    # "off" — no bonus.
    tool_bonus: str | None = None
    # What n counts for tool_bonus=paper. "turns" (compat open_agentrl; the formula of [code] reward.py):
    # (verl's __num_turns__ − 2)/2, where an answered malformed call (agent_loop.malformed_call_feedback) is a turn
    # too, so each one earns per_call. "tool_calls" (compat agentrl): the tool calls the loop executed
    # (agentrl_tool_calls, malformed ones excluded); equal to "turns" when no call is malformed.
    tool_bonus_count: str | None = None
    tool_bonus_cap: float = -0.6  # [code] −0.6: a wrong answer never scores above this
    tool_bonus_per_call: float = 0.1  # [code] 0.1 per tool call
    # "strict" [paper]/[code]: exact match of the last \boxed{}. "math_verify": same extraction, math-verify
    # equivalence (a deviation; the original used math-verify only for code rows without tests).
    math_verifier: str = "strict"
    math_verify_timeout_s: float = 10.0  # hard kill of the math-verify helper process (not in the original)
    # Code grading rules. "open_agentrl" (compat open_agentrl): the released code_math.py, rule for rule
    # (agentrl_recipe/core/rewards/code_released.py: each test run alone, concurrently, 30 s and 1024 MB, exit code 0
    # and stdout.rstrip("\n") == expected, call results printed as json.dumps/str, a missing function −1).
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
    # None: code_rules=open_agentrl 1024 MB ([code] reward), lcb agentrl.sandbox.memory_mb ([code] tool: 2048 MB).
    code_memory_mb: int | None = None
    # Hard cap on one row's grading, any task kind (queueing for a slot excluded). A timed-out row is scored as a
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
    def from_dict(cls, values: Mapping[str, Any] | None, *, mode: str = compat.DEFAULT_MODE) -> RewardKwargs:
        """The kwargs with every None behaviour key set from compat ``mode``."""
        kwargs = from_mapping(cls, _plain(values), where="reward.reward_kwargs")
        keys = ("tool_bonus", "tool_bonus_count", "code_rules", "code_timeout_s_per_test", "code_total_timeout_s")
        return dataclasses.replace(kwargs, **{k: compat.default(k, getattr(kwargs, k), mode) for k in keys})

    @classmethod
    def from_trainer_config(cls, config: Any) -> RewardKwargs:
        reward = config.get("reward") if hasattr(config, "get") else None
        values = _plain(reward.get("reward_kwargs") if reward is not None else None)
        kwargs = cls.from_dict(values, mode=compat.mode_of(config))
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


def _check_choice(key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"reward.reward_kwargs.{key} must be one of {choices}, got {value!r}")


def _plain(values: Any) -> dict[str, Any]:
    return dict(to_plain(values) or {})


# --- the shaping rules, as pure functions (tested directly and through the manager) ---


def apply_tool_bonus(
    score: float,
    num_turns: int | None,
    mode: str,
    *,
    cap: float = -0.6,
    per_call: float = 0.1,
    tool_calls: int | None = None,
    count: str = "turns",
):
    """Return (shaped score, bonus added). Only wrong answers (score < 0) are shaped.

    ``count="turns"``: n = (num_turns − 2)/2 (the released formula); ``"tool_calls"``: n = ``tool_calls``."""
    if mode == "off" or score >= 0:
        return score, 0.0
    if mode == "released":
        n = (0 - 2) / 2
    elif count == "tool_calls":
        if tool_calls is None:
            raise ValueError(
                f"tool_bonus_count=tool_calls needs the agent loop's {names.FIELD_TOOL_CALLS!r} field, which this "
                "trajectory lacks; run through agentrl_tool_agent or set reward.reward_kwargs.tool_bonus_count=turns"
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


class AgentRLRewardManager(RewardManagerBase):
    """The paper's rewards (per-row scorers, tool bonus, DAPO overlong shaping) with bounded, timed grading."""

    def __init__(
        self,
        config: Any,
        tokenizer: Any,
        compute_score: Any = None,
        reward_router_address: str | None = None,
        reward_model_tokenizer: Any = None,
        **unused: Any,
    ) -> None:
        super().__init__(config, tokenizer, compute_score)
        if unused:
            logger.warning("agentrl_reward ignores constructor arguments %s", sorted(unused))
        self.settings = RewardKwargs.from_trainer_config(config)
        self.sandbox_config = SandboxConfig.from_trainer_config(config)
        # verl hands us its default_compute_score unless reward.custom_reward_function is set; ours replaces it.
        self.custom_score_fn = None if _is_verl_default(compute_score) else compute_score
        self.reward_router_address = reward_router_address
        self.reward_model_tokenizer = reward_model_tokenizer
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    # --- verl API ---
    async def run_single(self, data: DataProto) -> dict:
        trace.mark(names.REWARD_MANAGER)
        item = data[-1:][0]  # multi-sequence outputs: reward the last sequence, as verl's managers do
        response_ids = item.batch["responses"]
        response_len = response_ids.shape[-1]
        valid_len = int(item.batch["attention_mask"][-response_len:].sum())
        valid_ids = response_ids[:valid_len]
        non_tensor = item.non_tensor_batch
        data_source = non_tensor["data_source"]
        ground_truth = non_tensor["reward_model"]["ground_truth"]
        num_turns = _optional_int(non_tensor.get("__num_turns__"))
        tool_fields = non_tensor.get("tool_extra_fields")
        tool_fields = dict(tool_fields) if isinstance(tool_fields, Mapping) else {}
        extra_info = dict(non_tensor.get("extra_info") or {})
        extra_info.update(tool_fields)
        extra_info["num_turns"] = num_turns

        loop = asyncio.get_running_loop()
        solution_str = await loop.run_in_executor(
            None, functools.partial(self.tokenizer.decode, valid_ids, skip_special_tokens=True)
        )
        result, timed_out, grade_s = await self._grade(data_source, solution_str, ground_truth, extra_info)

        score = float(result["score"])
        infra = bool(result.get("infra_failure", False))
        shaped, bonus = (score, 0.0)
        if not infra:
            shaped, bonus = apply_tool_bonus(
                score,
                num_turns,
                self.settings.tool_bonus,
                cap=self.settings.tool_bonus_cap,
                per_call=self.settings.tool_bonus_per_call,
                tool_calls=_optional_int(tool_fields.get(names.FIELD_TOOL_CALLS)),
                count=self.settings.tool_bonus_count,
            )
        length = self._measured_length(item, valid_len, tool_fields)
        buf = self.settings.overlong_buffer_cfg
        penalty = 0.0
        if buf.enable:
            penalty = overlong_penalty(length, int(self.settings.max_resp_len), int(buf.len), float(buf.penalty_factor))
        info = {key: value for key, value in result.items() if key not in ("infra_failure",)}
        info.update(
            {
                "score": score,
                "acc": result.get("acc"),
                "pred": result.get("pred"),
                "task_kind": result.get("task_kind", scoring.task_kind(data_source)),
                "tests_passed": result.get("tests_passed"),
                "tests_total": result.get("tests_total"),
                "num_turns": num_turns,
                "tool_bonus": bonus,
                "overlong": penalty < 0,
                "overlong_reward": penalty,
                "response_tokens": length,
                names.FIELD_GRADER_TIMEOUT: timed_out,
                names.FIELD_GRADER_INFRA_FAILURE: infra,
                "grade_s": grade_s,
            }
        )
        return {"reward_score": shaped + penalty, "reward_extra_info": info}

    # --- internals ---
    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(int(self.settings.max_concurrency))
        return sem

    async def _grade(
        self, data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any]
    ) -> tuple[dict[str, Any], bool, float]:
        """(result, timed_out, seconds). Queueing for a slot is not part of the timeout."""
        sandbox = fleet_metrics.RouteRecorder(functools.partial(get_sandbox, self.sandbox_config))
        async with self._semaphore():
            start = time.monotonic()
            try:
                result = await asyncio.wait_for(
                    self._score(data_source, solution_str, ground_truth, extra_info, sandbox),
                    timeout=float(self.settings.grader_timeout_s),
                )
                timed_out = False
            except (asyncio.TimeoutError, GraderTimeout):
                logger.warning("agentrl_reward: grading a %s row timed out; scored as wrong and flagged", data_source)
                result, timed_out = _timeout_result(data_source), True
            result = {**result, names.FIELD_REWARD_SANDBOX_ROUTES: sandbox.to_json()}
            return result, timed_out, time.monotonic() - start

    async def _score(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: Any,
        extra_info: dict[str, Any],
        sandbox: fleet_metrics.RouteRecorder,
    ) -> dict[str, Any]:
        if self.custom_score_fn is None:
            s = self.settings
            return await scoring.acompute_score(
                data_source,
                solution_str,
                ground_truth,
                extra_info,
                math_verifier=s.math_verifier,
                math_verify_timeout_s=s.math_verify_timeout_s,
                sandbox=sandbox,
                code_rules=s.code_rules,
                code_timeout_s_per_test=s.code_timeout_s_per_test,
                code_total_timeout_s=s.code_total_timeout_s,
                code_memory_mb=s.code_memory_mb if s.code_rules == "open_agentrl" else self._lcb_memory_mb(),
            )
        kwargs = {"data_source": data_source, "solution_str": solution_str, "ground_truth": ground_truth}
        kwargs["extra_info"] = extra_info
        if self.reward_router_address is not None:
            kwargs.update(
                reward_router_address=self.reward_router_address, reward_model_tokenizer=self.reward_model_tokenizer
            )
        fn = self.custom_score_fn
        if _is_coroutine_fn(fn):
            result = await fn(**kwargs)
        else:
            # A sync custom scorer cannot be killed: past the timeout its thread is abandoned (and keeps running).
            result = await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, **kwargs))
        if not isinstance(result, Mapping):
            result = {"score": float(result), "acc": float(result) > 0}
        return dict(result)

    def _lcb_memory_mb(self) -> int:
        s = self.settings
        return s.code_memory_mb if s.code_memory_mb is not None else self.sandbox_config.memory_mb

    def _measured_length(self, item: Any, valid_len: int, tool_fields: Mapping[str, Any]) -> int:
        if self.settings.overlong_count == "all":
            return valid_len
        if "response_mask" in item.batch.keys():  # noqa: SIM118 - TensorDict has no `in`
            return int(item.batch["response_mask"][:valid_len].sum())
        if names.FIELD_MODEL_TOKENS in tool_fields:
            return int(tool_fields[names.FIELD_MODEL_TOKENS])
        raise ValueError(
            "reward.reward_kwargs.overlong_count=model needs the response_mask or the agent loop's "
            f"{names.FIELD_MODEL_TOKENS!r} field (agentrl_tool_agent writes it); this trajectory has neither"
        )


def _timeout_result(data_source: str) -> dict[str, Any]:
    kind = scoring.task_kind(data_source)
    wrong = 0.0 if kind == "code" else -1.0  # code: "all tests failed"; math/GPQA: a wrong answer
    return {"score": wrong, "acc": False, "pred": None, "task_kind": kind, "infra_failure": False}


def _optional_int(value: Any) -> int | None:
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    return int(value)


def _is_verl_default(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn is None or fn is default_compute_score


def _is_coroutine_fn(fn: Any) -> bool:
    while isinstance(fn, functools.partial):
        if inspect.iscoroutinefunction(fn.func):
            return True
        fn = fn.func
    return inspect.iscoroutinefunction(fn)
