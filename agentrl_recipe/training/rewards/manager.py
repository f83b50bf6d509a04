"""``agentrl_reward``: verl 0.9.1 reward-loop manager for the paper's rewards, that never stalls a batch.

Selected with ``reward.reward_manager.name=agentrl_reward`` (registered by :mod:`agentrl_recipe.plugin`); settings
come from ``reward.reward_kwargs.*`` (:class:`~agentrl_recipe.training.rewards.reward_kwargs.RewardKwargs`, every key
documented there with the paper's value), the
sandbox from ``agentrl.sandbox`` (:attr:`agentrl_recipe.training.recipe_config.RecipeConfig.sandbox`, the same object
the rollout tool uses).

Per trajectory (``run_single`` on verl's 1-row DataProto):

1. decode the valid response (all response tokens, tool outputs included — what the original scored), or for
   math/GPQA with ``answer_source: final_turn`` (compat agentrl) the model's final turn without its thinking and
   tool calls (:mod:`agentrl_recipe.training.rewards.answer_source`);
2. score it per row with :func:`agentrl_recipe.training.rewards.scoring.acompute_score` (or the
``custom_reward_function``
   when one is configured), at most ``max_concurrency`` at a time and under a hard ``grader_timeout_s`` of
   execution (waiting for a sandbox slot is not counted: :mod:`agentrl_recipe.training.rewards.grade_budget`);
3. wrong answers (score < 0) get the tool bonus ``min(cap, s + per_call·(num_turns − 2)/2)`` (``tool_bonus``;
   the rules are :mod:`agentrl_recipe.training.rewards.shaping`);
4. DAPO overlong shaping: ``min(−(len − (max_resp_len − buffer))/buffer · factor, 0)`` added to the reward.

``reward_extra_info`` has the same keys for every row (verl stacks them into batch columns from the first row's
keys): :data:`REWARD_INFO_KEYS`. verl's validation groups them per data source (``val-core/<ds>/acc/mean@N``);
:func:`agentrl_recipe.training.rewards.step_metrics.reward_metrics` turns a training batch into per-source metrics.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
import weakref
from collections.abc import Mapping
from typing import Any, NamedTuple

from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.utils.reward_score import default_compute_score

from agentrl_recipe import fields, names, tasks
from agentrl_recipe.training import recipe_config, sandbox_routes, trace
from agentrl_recipe.training.rewards import hack_patterns, scoring
from agentrl_recipe.training.rewards.answer_source import FINAL_TURN_KINDS, answer_part, last_model_run
from agentrl_recipe.training.rewards.grade_budget import QueueClock, within_budget
from agentrl_recipe.training.rewards.isolation import GraderTimeout
from agentrl_recipe.training.rewards.reward_kwargs import RewardKwargs
from agentrl_recipe.training.rewards.shaping import apply_tool_bonus, executed_calls, overlong_penalty
from agentrl_sandbox import get_sandbox

logger = logging.getLogger(__name__)

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
    fields.GRADER_TIMEOUT.column,  # the grade hit grader_timeout_s (or math-verify's hard timeout)
    fields.GRADER_INFRA_FAILURE.column,  # the sandbox failed while grading: score says nothing, mask it
    fields.GRADER_ERROR.column,  # grading raised: scored as a wrong answer, counted, the step goes on
    fields.REWARD_HACK_PATTERNS.column,  # code: the released grader's hacks the graded program shows (hack_patterns)
    fields.REWARD_SANDBOX_ROUTES.column,  # JSON: the sandbox_fusion servers the grade reached (per-server metrics)
    "grade_s",  # seconds spent grading (for latency metrics)
    "sandbox_queue_s",  # of those, seconds the grade's sandbox runs waited for a slot (not in grader_timeout_s)
)


class _RowFields(NamedTuple):
    """What the scorer and the shaping read from a row's non-tensor fields."""

    data_source: str
    ground_truth: Any
    num_turns: int | None
    tool_fields: dict[str, Any]  # the agent loop's tool_extra_fields
    extra_info: dict[str, Any]  # the row's extra_info, with tool_fields and num_turns added

    @classmethod
    def of(cls, non_tensor: Mapping[str, Any]) -> _RowFields:
        data_source = non_tensor["data_source"]
        ground_truth = non_tensor["reward_model"]["ground_truth"]
        num_turns = _optional_int(non_tensor.get("__num_turns__"))
        tool_fields = non_tensor.get("tool_extra_fields")
        tool_fields = dict(tool_fields) if isinstance(tool_fields, Mapping) else {}
        extra_info = dict(non_tensor.get("extra_info") or {})
        extra_info.update(tool_fields)
        extra_info["num_turns"] = num_turns
        return cls(data_source, ground_truth, num_turns, tool_fields, extra_info)


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
        self.recipe = recipe_config.resolve(config)
        self.settings = RewardKwargs.from_trainer_config(config)
        self.sandbox_config = self.recipe.sandbox  # the tool's, in a process that runs both
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
        row = _RowFields.of(item.non_tensor_batch)

        solution_str = await asyncio.get_running_loop().run_in_executor(
            None, functools.partial(self._solution_str, item, response_ids[:valid_len], row)
        )
        graded = await self._grade(row.data_source, solution_str, row.ground_truth, row.extra_info)
        result, timed_out, grade_s, queue_s = graded

        score = float(result["score"])
        infra = bool(result.get("infra_failure", False))
        shaped, bonus = (score, 0.0) if infra else self._tool_bonus(score, row)
        length = self._measured_length(item, valid_len, row.tool_fields)
        penalty = self._overlong_penalty(length)
        info = {key: value for key, value in result.items() if key not in ("infra_failure",)}
        info.update(
            {
                "score": score,
                "acc": result.get("acc"),
                "pred": result.get("pred"),
                "task_kind": result.get("task_kind", tasks.task_kind(row.data_source)),
                "tests_passed": result.get("tests_passed"),
                "tests_total": result.get("tests_total"),
                "num_turns": row.num_turns,
                "tool_bonus": bonus,
                "overlong": penalty < 0,
                "overlong_reward": penalty,
                "response_tokens": length,
                fields.GRADER_TIMEOUT.column: timed_out,
                fields.GRADER_INFRA_FAILURE.column: infra,
                fields.GRADER_ERROR.column: bool(result.get(fields.GRADER_ERROR.column, False)),
                "grade_s": grade_s,
                "sandbox_queue_s": queue_s,
            }
        )
        info[fields.REWARD_HACK_PATTERNS.column] = self._hack_patterns(info["task_kind"], solution_str)
        return {"reward_score": shaped + penalty, "reward_extra_info": info}

    # --- internals ---
    @property
    def _decode(self) -> Any:
        """verl's tokenizer's decode (a PreTrainedTokenizer; verl annotates it as AutoTokenizer, the factory)."""
        return self.tokenizer.decode  # type: ignore[attr-defined]

    def _solution_str(self, item: Any, response_ids: Any, row: _RowFields) -> str:
        """The text the row is scored on: the decoded response, or for math/GPQA with answer_source=final_turn the
        answer part of the model's final turn (rewards/answer_source.py)."""
        if self.settings.answer_source != "final_turn" or tasks.task_kind(row.data_source) not in FINAL_TURN_KINDS:
            return self._decode(response_ids, skip_special_tokens=True)
        start, end = self._final_turn(item, len(response_ids), row)
        return answer_part(self._decode(response_ids[start:end], skip_special_tokens=True))

    @staticmethod
    def _final_turn(item: Any, valid_len: int, row: _RowFields) -> tuple[int, int]:
        """(start, end) of the final assistant turn in the valid response."""
        if "response_mask" in item.batch.keys():  # noqa: SIM118 - TensorDict has no `in`
            return last_model_run(item.batch["response_mask"][:valid_len].tolist())
        start = _optional_int(row.tool_fields.get(fields.FINAL_TURN_START.column))
        if start is not None:  # verl's streaming reward path carries no mask: agentrl_tool_agent says where
            return min(start, valid_len), valid_len
        if row.num_turns == 2:  # prompt + one assistant turn: the whole response is the final turn
            return 0, valid_len
        raise ValueError(
            "reward.reward_kwargs.answer_source=final_turn needs the batch's response_mask or the agent loop's "
            f"{fields.FINAL_TURN_START.column!r} field (agentrl_tool_agent writes it) for a multi-turn trajectory; "
            "this one has neither (set answer_source=response to score the whole response)"
        )

    def _tool_bonus(self, score: float, row: _RowFields) -> tuple[float, float]:
        s = self.settings
        assert s.tool_bonus is not None and s.tool_bonus_count is not None  # resolved from agentrl.compat
        return apply_tool_bonus(
            score,
            row.num_turns,
            s.tool_bonus,
            cap=s.tool_bonus_cap,
            per_call=s.tool_bonus_per_call,
            tool_calls=executed_calls(row.tool_fields.get(fields.TOOL_STATUSES.column)),
            count=s.tool_bonus_count,
        )

    def _overlong_penalty(self, length: int) -> float:
        buf = self.settings.overlong_buffer_cfg
        if not buf.enable:
            return 0.0
        max_len = self.settings.max_resp_len
        if max_len is None:  # RewardKwargs refuses an enabled overlong buffer without it; kept for the type
            raise ValueError("reward.reward_kwargs.max_resp_len is needed by overlong_buffer_cfg.enable")
        return overlong_penalty(length, int(max_len), int(buf.len), float(buf.penalty_factor))

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(int(self.settings.max_concurrency))
        return sem

    async def _grade(
        self, data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any]
    ) -> tuple[dict[str, Any], bool, float, float]:
        """(result, timed_out, seconds, of which queued for a sandbox slot). Queueing for a slot (of this manager or
        of the sandbox) is not part of the timeout."""
        routes = sandbox_routes.RouteRecorder(functools.partial(get_sandbox, self.sandbox_config))
        sandbox = QueueClock(routes)
        async with self._semaphore():
            start = time.monotonic()
            try:
                result = await within_budget(
                    self._score(data_source, solution_str, ground_truth, extra_info, sandbox),
                    float(self.settings.grader_timeout_s),
                    sandbox,
                )
                timed_out = False
            except (TimeoutError, GraderTimeout):
                logger.warning("agentrl_reward: grading a %s row timed out; scored as wrong and flagged", data_source)
                result, timed_out = _timeout_result(data_source), True
            except Exception as exc:  # one row's grader failure never fails the step (verl awaits us with no try)
                result, timed_out = _grader_error_result(data_source, exc), False
            result = {**result, fields.REWARD_SANDBOX_ROUTES.column: routes.to_json()}
            return result, timed_out, time.monotonic() - start, sandbox.queued_s

    async def _score(
        self,
        data_source: str,
        solution_str: str,
        ground_truth: Any,
        extra_info: dict[str, Any],
        sandbox: QueueClock,
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
                ground_truth_form=s.ground_truth_form,
                leetcode_tests=s.leetcode_tests,
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

    def _hack_patterns(self, task_kind: Any, solution_str: str) -> str:
        if task_kind != "code":
            return ""
        rules = "open_agentrl" if self.settings.code_rules == "open_agentrl" else "lcb"
        return hack_patterns.in_response(solution_str, rules)

    def _lcb_memory_mb(self) -> int:
        s = self.settings
        return s.code_memory_mb if s.code_memory_mb is not None else self.sandbox_config.memory_mb

    def _measured_length(self, item: Any, valid_len: int, tool_fields: Mapping[str, Any]) -> int:
        if self.settings.overlong_count == "all":
            return valid_len
        if "response_mask" in item.batch.keys():  # noqa: SIM118 - TensorDict has no `in`
            return int(item.batch["response_mask"][:valid_len].sum())
        if fields.MODEL_TOKENS.column in tool_fields:
            return int(tool_fields[fields.MODEL_TOKENS.column])
        raise ValueError(
            "reward.reward_kwargs.overlong_count=model needs the response_mask or the agent loop's "
            f"{fields.MODEL_TOKENS.column!r} field (agentrl_tool_agent writes it); this trajectory has neither"
        )


def _timeout_result(data_source: str) -> dict[str, Any]:
    task = tasks.task_for(data_source)  # its timeout score: this kind's "wrong answer"
    return {"score": task.timeout_score, "acc": False, "pred": None, "task_kind": task.name, "infra_failure": False}


def _grader_error_result(data_source: str, exc: Exception) -> dict[str, Any]:
    """A row whose grading raised: scored like a wrong answer (a timeout's score), flagged ``grader_error`` for the
    step metrics and the guard (``agentrl.infra_guard.max_grader_error_rate``)."""
    logger.warning(
        "agentrl_reward: grading a %s row raised %s: %.300s; scored as wrong and flagged",
        data_source,
        type(exc).__name__,
        exc,
    )
    return {**_timeout_result(data_source), fields.GRADER_ERROR.column: True}


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
