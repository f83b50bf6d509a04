"""``agentrl_tool_agent``: verl's ``ToolAgentLoop`` with malformed-call feedback and per-trajectory tool metrics.

The paper trains with verl's stock ``tool_agent`` loop (hermes format, ≤16 assistant and ≤16 user turns, one call
per turn, tool output cut to 256 characters). This subclass keeps that loop — its state machine, Continuous-Token
tokenization, masks and limits are verl's — and changes three things through its hooks:

1. **Malformed tool calls get an answer instead of ending the trajectory.** verl's hermes parser drops a
   ``<tool_call>`` block whose JSON does not parse, and a turn with no parsed call ends the episode. Here every block
   is checked (JSON, ``name``/``arguments`` keys, a closing tag, a known tool, arguments that are a JSON object with
   the schema's required keys); a bad one becomes a :class:`MalformedCall` whose "tool response" is an error message
   telling the model what to fix, so it can retry in the next turn. Counted per trajectory, never an exception.
2. **Per-trajectory fields** in ``AgentLoopOutput.extra_fields`` (names in :mod:`agentrl_recipe.core.names`), which verl
   turns into ``non_tensor_batch`` columns and hands to the reward manager as ``tool_extra_fields``: turns, tool
   calls, per-call status and latency, failures, malformed calls, void turns, sandbox infra failures and why the
   trajectory ended. ``FIELD_NUM_TURNS`` equals verl's ``__num_turns__`` (prompt + assistant + tool turns).
3. **Stateful sessions** end with the trajectory: a tool exposing ``forget(request_id)`` (sync or async; the
   ``code_interpreter`` in stateful mode keys its interpreter state by ``agent_data.request_id``) is told when the
   trajectory that owned the state is over — verl creates and releases tool instances around every single call, so
   the tool cannot know, and with ``rollout.full_determinism`` request ids (``det-<priority>``) recur every step.

A *void turn* is an assistant turn the model ended (stop token) with neither a complete, valid tool call nor a final
answer — SimpleTIR's "void turn". A final answer is a closed ``\\boxed{...}`` for math and GPQA rows, and a closed
fenced code block (```` ```python ```` or ```` ``` ````) for code rows (routing by ``data_source`` through
``rewards.scoring.task_kind``). A turn with only malformed calls is void; a turn cut off by the response budget is
not (the model did not end it: that is the overlong case), and neither is its unfinished tool call malformed.

Settings: ``agentrl.agent_loop.*`` (:class:`~agentrl_recipe.core.agent_loop_config.AgentLoopSettings`). The limits are
verl's own keys under ``actor_rollout_ref.rollout.multi_turn``, at the paper's values in
``verl_configs/recipe/grpo_tcr.yaml``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Any

import numpy as np
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.tools.schemas import ToolResponse

from agentrl_recipe.core import compat, log_filters, names, trace
from agentrl_recipe.core.agent_loop_config import AgentLoopSettings
from agentrl_recipe.core.render_cache import memoize_renders
from agentrl_recipe.core.tools.sandbox import fleet_metrics

logger = logging.getLogger(__name__)
log_filters.install()  # verl's parser ERROR for a malformed call the loop handles (counted in agentrl_tools/*)

# verl's _call_tool turns a tool exception into this text (tool_agent_loop.py); it reports no status of its own.
_VERL_TOOL_EXCEPTION_PREFIX = "Error executing tool"
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)  # the hermes parser's regex
_TOOL_CALL_START = "<tool_call>"
_CODE_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n.*?```", re.DOTALL)
INFRA_STATUS = "infra_error"  # sandbox status: the sandbox failed, not the code


class Termination(str, Enum):
    """Why a trajectory ended (``FIELD_TERMINATION``)."""

    ANSWER = "answer"  # the model stopped with a final answer and no tool call
    NO_TOOL_CALL = "no_tool_call"  # the model stopped with neither a tool call nor a final answer (a void ending)
    RESPONSE_LENGTH = "response_length"  # rollout.response_length reached by generated tokens
    TOOL_RESPONSE_OVERFLOW = "tool_response_overflow"  # the tool response would not fit in response_length
    MAX_ASSISTANT_TURNS = "max_assistant_turns"
    MAX_USER_TURNS = "max_user_turns"


class MalformedCall(FunctionCall):
    """A tool call the loop will not execute; ``feedback`` is sent back as its tool response."""

    kind: str  # bad_json | missing_keys | unclosed | unknown_tool | arguments_not_object | missing_argument
    feedback: str


@dataclasses.dataclass
class TrajectoryStats:
    """Per-trajectory counters, kept on ``agent_data`` and written to ``extra_fields`` when the trajectory ends."""

    tool_statuses: list[str] = dataclasses.field(default_factory=list)
    tool_latency_s: list[float] = dataclasses.field(default_factory=list)
    malformed_kinds: list[str] = dataclasses.field(default_factory=list)
    sandbox_routes: list[dict] = dataclasses.field(default_factory=list)  # fleet_metrics.route_metrics per call
    void_turns: int = 0
    termination: Termination | None = None

    def record_call(self, status: str, latency_s: float, metrics: Mapping[str, Any]) -> None:
        """One executed tool call, from the tool's status, latency and metrics."""
        self.tool_statuses.append(status)
        self.tool_latency_s.append(latency_s)
        if fleet_metrics.SERVER in metrics:  # a sandbox_fusion call: per-server training metrics
            self.sandbox_routes.append(dict(metrics))

    def fields(self, agent_data: AgentData, response_length: int, messages: list[dict] | None) -> dict[str, Any]:
        failures = sum(status != "ok" for status in self.tool_statuses)
        out: dict[str, Any] = {
            names.FIELD_NUM_TURNS: agent_data.user_turns + agent_data.assistant_turns + 1,  # == verl's num_turns
            names.FIELD_ASSISTANT_TURNS: agent_data.assistant_turns,
            # verl cuts the response to response_length after the loop; count the model's tokens in what is kept
            names.FIELD_MODEL_TOKENS: sum(agent_data.response_mask[:response_length]),
            names.FIELD_TOOL_CALLS: len(self.tool_statuses),
            names.FIELD_TOOL_FAILURES: failures,
            names.FIELD_TOOL_STATUSES: list(self.tool_statuses),
            names.FIELD_TOOL_LATENCY_S: list(self.tool_latency_s),
            names.FIELD_MALFORMED_TOOL_CALL: len(self.malformed_kinds),
            names.FIELD_MALFORMED_KINDS: list(self.malformed_kinds),
            names.FIELD_VOID_TURN: self.void_turns > 0,
            names.FIELD_NUM_VOID_TURNS: self.void_turns,
            names.FIELD_TOOL_INFRA_FAILURE: INFRA_STATUS in self.tool_statuses,
            names.FIELD_TERMINATION: (self.termination or Termination.NO_TOOL_CALL).value,
        }
        out.update(fleet_metrics.trajectory_fields(self.sandbox_routes))
        if messages is not None:
            out[names.FIELD_MESSAGES] = messages
        return out


def has_final_answer(text: str, task_kind: str) -> bool:
    """A closed ``\\boxed{...}`` (math, gpqa) or a closed fenced code block (code) in ``text``."""
    if task_kind == "code":
        return _CODE_FENCE.search(text) is not None
    start = text.rfind("\\boxed{")
    if start < 0:
        return False
    depth = 0
    for char in text[start + len("\\boxed") :]:
        depth += {"{": 1, "}": -1}.get(char, 0)
        if depth == 0:
            return True
    return False


def check_hermes_blocks(text: str, parsed: list[FunctionCall]) -> list[FunctionCall]:
    """One call per ``<tool_call>`` block of a hermes turn, in order: verl's parsed call, or a MalformedCall for a
    block its parser dropped; plus a MalformedCall for a trailing unclosed ``<tool_call>``.

    verl's HermesToolParser keeps exactly the blocks whose JSON loads into an object with ``name`` and ``arguments``
    (in order), so the blocks failing that test are the ones it dropped.
    """
    calls: list[FunctionCall] = []
    parsed_iter = iter(parsed)
    last_end = 0
    for match in _TOOL_CALL_BLOCK.finditer(text):
        last_end = match.end()
        try:
            obj = json.loads(match.group(1))
        except json.JSONDecodeError as e:
            calls.append(_malformed("bad_json", f"the tool call is not valid JSON ({e.msg} at char {e.pos})"))
            continue
        if not isinstance(obj, dict) or "name" not in obj or "arguments" not in obj:
            calls.append(_malformed("missing_keys", 'the tool call must be a JSON object with "name" and "arguments"'))
            continue
        call = next(parsed_iter, None)
        if call is None:  # our reading and verl's parser disagree: verl dropped it, so it is malformed
            calls.append(_malformed("bad_json", "the tool call could not be parsed"))
            continue
        calls.append(call)
    if _TOOL_CALL_START in text[last_end:]:
        calls.append(_malformed("unclosed", "the tool call has no closing </tool_call> tag"))
    return calls


def check_call(call: FunctionCall, tools: dict[str, Any]) -> FunctionCall:
    """The call itself if the tool exists and its arguments are a JSON object with the required keys."""
    if isinstance(call, MalformedCall):
        return call
    tool = tools.get(call.name)
    if tool is None:
        return _malformed("unknown_tool", f"unknown tool {call.name!r}; available: {sorted(tools)}", name=call.name)
    try:
        arguments = json.loads(call.arguments)
    except (json.JSONDecodeError, TypeError):
        arguments = None
    if not isinstance(arguments, dict):
        return _malformed("arguments_not_object", '"arguments" must be a JSON object', name=call.name)
    required = tool.tool_schema.function.parameters.required
    missing = [key for key in required if key not in arguments]
    if missing:
        return _malformed("missing_argument", f"missing required argument(s) {missing}", name=call.name)
    return call


def valid_first(calls: list[FunctionCall]) -> list[FunctionCall]:
    """The calls with every valid one before every malformed one, each group in its order."""
    return [c for c in calls if not isinstance(c, MalformedCall)] + [c for c in calls if isinstance(c, MalformedCall)]


def _content_without_calls(text: str, calls: list[FunctionCall]) -> str:
    """The turn's text minus the blocks of the calls that will run (as the hermes parser's content, which drops all
    blocks): a malformed call's raw text stays, because the assistant message does not carry it as a tool call."""
    blocks = iter(calls)

    def drop_if_valid(match: re.Match[str]) -> str:
        call = next(blocks, None)
        return match.group(0) if call is None or isinstance(call, MalformedCall) else ""

    return _TOOL_CALL_BLOCK.sub(drop_if_valid, text)


def _malformed(kind: str, problem: str, *, name: str = "") -> MalformedCall:
    feedback = (
        f"Error: {problem}. Nothing was executed. Call a tool as <tool_call>\n"
        '{"name": "<tool name>", "arguments": {<arguments as JSON>}}\n</tool_call>'
    )
    return MalformedCall(name=name, arguments="{}", kind=kind, feedback=feedback)


class AgentRLToolAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` + malformed-call feedback, per-trajectory tool metrics and stateful-session cleanup.

    Registered by the plugin as ``agentrl_tool_agent`` (select it per row with ``agent_name`` or for a whole run with
    ``actor_rollout_ref.rollout.agent.default_agent_loop``). verl's ``AgentLoopWorker`` builds one instance per
    trajectory.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.settings = AgentLoopSettings.from_trainer_config(self.config)
        mode = compat.mode_of(self.config)
        for tool in self.tools.values():  # the tool YAML cannot see the trainer config: hand it agentrl.compat
            if hasattr(tool, "use_compat"):
                tool.use_compat(mode)
        if self.settings.memoize_renders:
            memoize_renders(self.continuous_token_builder)
        # Block-level checks know the hermes syntax only; other parsers still get the semantic checks (check_call).
        self._hermes = self.tool_parser_name == "hermes"
        self._task_kind = "math"
        self._stop_texts = [t for t in {self.tokenizer.eos_token, self.tokenizer.pad_token} if t]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any):
        from agentrl_recipe.core.rewards.scoring import task_kind

        self._task_kind = task_kind(str(kwargs.get("data_source") or ""))
        trace.mark(names.AGENT_LOOP)
        return await super().run(sampling_params, **kwargs)

    @staticmethod
    def stats(agent_data: AgentData) -> TrajectoryStats:
        stats = getattr(agent_data, "_agentrl_stats", None)
        if stats is None:
            stats = TrajectoryStats()
            agent_data._agentrl_stats = stats  # verl keeps its own per-sample extras the same way (_active_tools)
        return stats

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        n_messages = len(agent_data.messages)
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        stats = self.stats(agent_data)
        # verl appends the assistant message only when it got as far as parsing (no length/turn limit hit first).
        parsed = len(agent_data.messages) > n_messages
        text = self.tokenizer.decode(agent_data.response_ids, skip_special_tokens=False)

        if parsed:
            found = agent_data.tool_calls
        else:  # a limit ended the turn before verl parsed it; parse it here only to classify the turn
            tools = [tool.tool_schema for tool in getattr(agent_data, "_active_tools", self.tools).values()]
            _, found = await self.tool_parser.extract_tool_calls(agent_data.response_ids, tools)
        if self._hermes:
            found = check_hermes_blocks(text, found)
        calls = [check_call(call, getattr(agent_data, "_active_tools", self.tools)) for call in found]
        stopped = self._stopped(agent_data, sampling_params)
        if not stopped:
            # cut off by the budget mid-call: the model never finished that call, so it is not malformed
            calls = [call for call in calls if getattr(call, "kind", None) != "unclosed"]
        malformed = [call for call in calls if isinstance(call, MalformedCall)]
        stats.malformed_kinds.extend(call.kind for call in malformed)
        if parsed and malformed and self.settings.malformed_call_feedback:
            # valid calls first: with max_parallel_calls=1 a malformed block must not take a valid call's slot
            # (verl and the released code ran the valid one)
            agent_data.tool_calls = valid_first(calls)
            content = _content_without_calls(text, calls) if self._hermes else agent_data.messages[-1]["content"]
            agent_data.messages[-1] = self._build_assistant_message(content, agent_data)
            state = AgentState.PROCESSING_TOOLS

        valid_call = any(not isinstance(call, MalformedCall) for call in calls)
        answered = has_final_answer(_TOOL_CALL_BLOCK.sub("", text), self._task_kind)
        if stopped and not valid_call and not answered:
            stats.void_turns += 1

        if state == AgentState.TERMINATED:
            if not parsed:
                stats.termination = self._generation_termination(agent_data)
            else:
                stats.termination = Termination.ANSWER if answered else Termination.NO_TOOL_CALL
            await self._finish(agent_data)
        return state

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        state = await super()._handle_processing_tools_state(agent_data)
        if state == AgentState.TERMINATED:
            self.stats(agent_data).termination = Termination.TOOL_RESPONSE_OVERFLOW
            await self._finish(agent_data)
        return state

    async def _call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        if isinstance(tool_call, MalformedCall):
            return ToolResponse(text=tool_call.feedback), 0.0, {"status": "malformed", "kind": tool_call.kind}
        started = time.perf_counter()
        response, reward, metrics = await super()._call_tool(tool_call, tools_kwargs, agent_data)
        elapsed = time.perf_counter() - started
        metrics = metrics if isinstance(metrics, dict) else {}
        status = metrics.get("status")
        if status is None:  # a tool that reports no status: verl's exception text is the only failure signal
            status = "tool_exception" if (response.text or "").startswith(_VERL_TOOL_EXCEPTION_PREFIX) else "ok"
        self.stats(agent_data).record_call(str(status), float(metrics.get("latency_s", elapsed)), metrics)
        return response, reward, metrics

    def _build_assistant_message(self, content: str, agent_data: AgentData) -> dict[str, Any]:
        # Malformed calls are not tool calls of the message; their raw text stays in the content (see
        # _content_without_calls), which is what the model actually wrote.
        all_calls = agent_data.tool_calls
        agent_data.tool_calls = [call for call in all_calls if not isinstance(call, MalformedCall)]
        try:
            return super()._build_assistant_message(content, agent_data)
        finally:
            agent_data.tool_calls = all_calls

    def _stopped(self, agent_data: AgentData, sampling_params: dict[str, Any]) -> bool:
        """Whether the model ended the turn, rather than the token budget cutting it off.

        verl's per-call budget is never below what is left of ``response_length``, so a cut-off turn always fills
        the response; a turn that did not, or that ends on a stop token, was ended by the model (a model may also
        stop on EOS ids of its generation config that the tokenizer does not name).
        """
        if len(agent_data.response_mask) < self.response_length:
            return True
        stop_ids = {self.tokenizer.eos_token_id, *(sampling_params.get("stop_token_ids") or ())}
        stop_ids.update(self.tool_parser.stop_token_ids)
        return bool(agent_data.response_ids) and agent_data.response_ids[-1] in stop_ids

    def _generation_termination(self, agent_data: AgentData) -> Termination:
        # Same order as verl's checks in _handle_generating_state.
        if len(agent_data.response_mask) >= self.response_length:
            return Termination.RESPONSE_LENGTH
        if self.max_assistant_turns and agent_data.assistant_turns >= self.max_assistant_turns:
            return Termination.MAX_ASSISTANT_TURNS
        return Termination.MAX_USER_TURNS

    async def _finish(self, agent_data: AgentData) -> None:
        """Write the trajectory's fields and close stateful tool sessions; runs once, when the loop terminates."""
        stats = self.stats(agent_data)
        messages = self._clean_messages(agent_data.messages) if self.settings.record_messages else None
        agent_data.extra_fields.update(stats.fields(agent_data, self.response_length, messages))
        for tool in getattr(agent_data, "_active_tools", self.tools).values():
            forget = getattr(tool, "forget", None)
            if forget is None:
                continue
            try:
                done = forget(agent_data.request_id)
                if inspect.isawaitable(done):
                    await done
            except Exception:  # a session that cannot be dropped must not cost the trajectory
                logger.warning("ending the %s session of %s failed", tool.name, agent_data.request_id, exc_info=True)

    def _clean_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Copy of the conversation that the chat template renders back to the generated tokens.

        Assistant content loses the stop token the hermes parser leaves in, and — when the message carries tool
        calls — the one newline before the first call, which Qwen-style templates emit themselves.
        """
        cleaned = []
        for message in messages:
            message = dict(message)
            if message.get("role") == "assistant" and isinstance(message.get("content"), str):
                content = message["content"]
                for stop in self._stop_texts:
                    content = content.replace(stop, "")
                if message.get("tool_calls") and content.endswith("\n"):
                    content = content[:-1]
                message["content"] = content
            cleaned.append(message)
        return cleaned


def batch_metrics(
    columns: Mapping[str, Sequence[Any]], *, wall_s: float | None = None, prefix: str = "agentrl_tools"
) -> dict[str, float]:
    """Tracker metrics ("section/name") over a batch's columns (``non_tensor_batch`` or equivalent lists).

    Rows from other agent loops (``single_turn_agent``) carry ``None`` in the FIELD_* columns and only count for
    turns. ``wall_s`` (the rollout's wall time) adds calls per second.
    """
    tool_rows = [i for i, v in enumerate(columns.get(names.FIELD_TOOL_CALLS, ())) if v is not None]

    def column(name: str) -> list[Any]:
        values = columns.get(name)
        return [values[i] for i in tool_rows] if values is not None else []

    out: dict[str, float] = {}
    turns = [int(t) for t in columns.get("__num_turns__", ())]
    if turns:
        out[f"{prefix}/num_turns/mean"] = float(np.mean(turns))
        out[f"{prefix}/num_turns/max"] = float(np.max(turns))
    if not tool_rows:
        return out
    calls = [int(c) for c in column(names.FIELD_TOOL_CALLS)]
    statuses = Counter(str(s) for row in column(names.FIELD_TOOL_STATUSES) for s in row or ())
    latencies = [float(x) for row in column(names.FIELD_TOOL_LATENCY_S) for x in row or ()]
    malformed = Counter(str(k) for row in column(names.FIELD_MALFORMED_KINDS) for k in row or ())
    terminations = Counter(str(t) for t in column(names.FIELD_TERMINATION))
    total_calls = sum(calls)
    out[f"{prefix}/calls_per_traj/mean"] = float(np.mean(calls))
    out[f"{prefix}/calls_per_traj/max"] = float(np.max(calls))
    out[f"{prefix}/traj_with_calls_frac"] = float(np.mean([c > 0 for c in calls]))
    out[f"{prefix}/failure_rate"] = (total_calls - statuses.get("ok", 0)) / total_calls if total_calls else 0.0
    for status, count in statuses.items():
        out[f"{prefix}/status/{status}"] = float(count)
    if latencies:
        out[f"{prefix}/latency_s/p50"] = float(np.percentile(latencies, 50))
        out[f"{prefix}/latency_s/p99"] = float(np.percentile(latencies, 99))
    if wall_s:
        out[f"{prefix}/calls_per_s"] = total_calls / wall_s
    out[f"{prefix}/malformed_per_traj/mean"] = sum(malformed.values()) / len(tool_rows)
    for kind, count in malformed.items():
        out[f"{prefix}/malformed/{kind}"] = float(count)
    out[f"{prefix}/void_turn_frac"] = float(np.mean([bool(v) for v in column(names.FIELD_VOID_TURN)]))
    out[f"{prefix}/infra_failure_frac"] = float(np.mean([bool(v) for v in column(names.FIELD_TOOL_INFRA_FAILURE)]))
    for reason, count in terminations.items():
        out[f"{prefix}/termination/{reason}_frac"] = count / len(tool_rows)
    return out
