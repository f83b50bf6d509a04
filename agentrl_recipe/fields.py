"""Every per-trajectory field the plugin's components exchange, declared once.

A field has one spelling: its :attr:`Field.name` is the :class:`~agentrl_recipe.training.agent_loop.trajectory.
Trajectory` attribute and the key of a dumped record, and ``agentrl_<name>`` (:attr:`Field.column`) the key verl
carries it under (``AgentLoopOutput.extra_fields`` -> ``non_tensor_batch`` column -> the reward manager's
``tool_extra_fields``). :data:`LOOP_FIELDS` are written by the agent loop (``Trajectory.to_extra_fields`` and
``from_extra_fields`` are generated from them); :data:`REWARD_FIELDS` by the reward manager (``reward_extra_info``).
A new field is one line here, its writer and its reader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

PREFIX = "agentrl_"
INFRA_STATUS = "infra_error"  # a tool call's sandbox status when the sandbox failed, not the code


def _str_list(value: Any) -> list[str]:
    return [str(v) for v in value]


def _float_list(value: Any) -> list[float]:
    return [float(v) for v in value]


def _same(value: Any) -> Any:
    return value


class Field(NamedTuple):
    name: str
    read: Callable[[Any], Any]  # a batched value (numpy scalar, array, list) -> the plain Python value
    default: Callable[[], Any]  # the value of a trajectory that never set it
    doc: str

    @property
    def column(self) -> str:
        return PREFIX + self.name


NUM_TURNS = Field("num_turns", int, int, "= verl's __num_turns__: prompt + assistant + tool turns (bonus (n-2)/2)")
ASSISTANT_TURNS = Field("assistant_turns", int, int, "assistant (generation) turns")
MODEL_TOKENS = Field("model_tokens", int, int, "response tokens the model generated (response_mask 1)")
FINAL_TURN_START = Field(
    "final_turn_start", int, int, "response index where the last assistant turn starts (answer_source=final_turn)"
)
TOOL_CALLS = Field("tool_calls", int, int, "tool calls executed")
TOOL_FAILURES = Field("tool_failures", int, int, "tool calls whose status was not ok")
TOOL_STATUSES = Field("tool_statuses", _str_list, list, "per call: the sandbox status")
TOOL_LATENCY_S = Field("tool_latency_s", _float_list, list, "per call: seconds")
MALFORMED_TOOL_CALLS = Field("malformed_tool_calls", int, int, "tool calls that could not be parsed")
MALFORMED_KINDS = Field("malformed_kinds", _str_list, list, "per malformed call: its kind (turn_checks.MalformedCall)")
VOID_TURN = Field("void_turn", bool, bool, "an assistant turn ended with neither a tool call nor an answer")
NUM_VOID_TURNS = Field("num_void_turns", int, int, "how many assistant turns were void")
TOOL_INFRA_FAILURE = Field("tool_infra_failure", bool, bool, "a tool call's sandbox failed (infra_error)")
TERMINATION = Field("termination", str, lambda: "no_tool_call", "why the trajectory ended (agent_loop.Termination)")
SANDBOX_SERVERS = Field("sandbox_servers", _str_list, list, "sandbox_fusion: per answered call, the server")
SANDBOX_LATENCY_S = Field("sandbox_latency_s", _float_list, list, "sandbox_fusion: per answered call, its round trip")
SANDBOX_FAILED = Field("sandbox_failed", _str_list, list, "sandbox_fusion: per failed attempt, the server")
MESSAGES = Field("messages", _same, lambda: None, "the conversation (only with agentrl.agent_loop.record_messages)")

LOOP_FIELDS = (
    NUM_TURNS,
    ASSISTANT_TURNS,
    MODEL_TOKENS,
    FINAL_TURN_START,
    TOOL_CALLS,
    TOOL_FAILURES,
    TOOL_STATUSES,
    TOOL_LATENCY_S,
    MALFORMED_TOOL_CALLS,
    MALFORMED_KINDS,
    VOID_TURN,
    NUM_VOID_TURNS,
    TOOL_INFRA_FAILURE,
    TERMINATION,
    SANDBOX_SERVERS,
    SANDBOX_LATENCY_S,
    SANDBOX_FAILED,
    MESSAGES,
)

GRADER_INFRA_FAILURE = Field("grader_infra_failure", bool, bool, "a sandbox infra_error while grading")
REWARD_SANDBOX_ROUTES = Field(
    "reward_sandbox_routes", str, lambda: "[]", "JSON list of the sandbox_fusion servers the code grade reached"
)
GRADER_TIMEOUT = Field("grader_timeout", bool, bool, "the grade hit the per-item timeout")
GRADER_ERROR = Field("grader_error", bool, bool, "grading raised (a grader bug): scored as wrong, counted, guarded")
REWARD_HACK_PATTERNS = Field(
    "reward_hack_patterns", str, str, "the released grader's reward hacks the graded program shows, ','-joined"
)

REWARD_FIELDS = (GRADER_INFRA_FAILURE, REWARD_SANDBOX_ROUTES, GRADER_TIMEOUT, GRADER_ERROR, REWARD_HACK_PATTERNS)
