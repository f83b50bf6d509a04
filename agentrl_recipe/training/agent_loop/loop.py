"""``agentrl_tool_agent``: verl's ``ToolAgentLoop`` with malformed-call feedback and per-trajectory tool metrics.

The paper trains with verl's stock ``tool_agent`` loop (hermes format, ≤16 assistant and ≤16 user turns, one call
per turn, tool output cut to 256 characters). This subclass keeps that loop — its state machine, Continuous-Token
tokenization, masks and limits are verl's — and changes four things through its hooks:

1. **Malformed tool calls get an answer instead of ending the trajectory.** verl's hermes parser drops a
   ``<tool_call>`` block whose JSON does not parse, and a turn with no parsed call ends the episode. Here every block
   is checked (JSON, ``name``/``arguments`` keys, a closing tag, a known tool, arguments that are a JSON object with
   the schema's required keys); a bad one becomes a :class:`MalformedCall` whose "tool response" is an error message
   telling the model what to fix, so it can retry in the next turn. Counted per trajectory, never an exception.
2. **Per-trajectory fields** in ``AgentLoopOutput.extra_fields`` (names in :mod:`agentrl_recipe.names`), which verl
   turns into ``non_tensor_batch`` columns and hands to the reward manager as ``tool_extra_fields``: turns, tool
   calls, per-call status and latency, failures, malformed calls, void turns, sandbox infra failures and why the
   trajectory ended. ``fields.NUM_TURNS`` equals verl's ``__num_turns__`` (prompt + assistant + tool turns).
3. **Stateful sessions** end with the trajectory: a tool exposing ``forget(request_id)`` (sync or async; the
   ``code_interpreter`` in stateful mode keys its interpreter state by ``agent_data.request_id``) is told when the
   trajectory that owned the state is over — verl creates and releases tool instances around every single call, so
   the tool cannot know, and with ``rollout.full_determinism`` request ids (``det-<priority>``) recur every step.

4. **Tool output is text.** Every tool response's added-token strings (``<|im_end|>``, ``<|im_start|>``,
   ``<tool_call>``, ...) are escaped before verl tokenizes the turn
   (:mod:`~agentrl_recipe.training.agent_loop.tool_text`), so a program's output never puts special-token ids, a
   forged turn boundary, into the context; in every mode.

A *void turn* is an assistant turn the model ended (stop token) with neither a complete, valid tool call nor a final
answer — SimpleTIR's "void turn". A final answer is a closed ``\\boxed{...}`` for math and GPQA rows, and a closed
fenced code block (```` ```python ```` or ```` ``` ````) for code rows (routing by ``data_source`` through
``agentrl_recipe.tasks``). A turn with only malformed calls is void; a turn cut off by the response budget is
not (the model did not end it: that is the overlong case), and neither is its unfinished tool call malformed.

Settings: ``agentrl.agent_loop.*`` (:class:`~agentrl_recipe.training.agent_loop.settings.AgentLoopSettings`). The limits
are verl's own keys under ``actor_rollout_ref.rollout.multi_turn``, at the paper's values in
``verl_configs/recipe/grpo_tcr.yaml``.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
import time
from enum import StrEnum
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopOutput
from verl.experimental.agent_loop.tool_agent_loop import AgentData, AgentState, ToolAgentLoop
from verl.experimental.agent_loop.tool_parser import FunctionCall
from verl.tools.schemas import ToolResponse
from verl.utils.tokenizer.continuous_token import MergeResult

from agentrl_recipe import names, tasks
from agentrl_recipe.training import log_filters, recipe_config, trace
from agentrl_recipe.training.agent_loop.code_interpreter import RELEASED_TOOL_ERROR  # [code] an exception of any call
from agentrl_recipe.training.agent_loop.render_cache import memoize_renders
from agentrl_recipe.training.agent_loop.settings import SECTION, AgentLoopSettings
from agentrl_recipe.training.agent_loop.tool_text import as_plain_text
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.agent_loop.turn_checks import (
    TOOL_CALL_BLOCK,
    MalformedCall,
    check_call,
    check_hermes_blocks,
    content_without_calls,
    valid_first,
)
from agentrl_recipe.training.verl_adapters.tool_agent_loop import active_tools

logger = logging.getLogger(__name__)
log_filters.install()  # verl's parser ERROR for a malformed call the loop handles (counted in agentrl_tools/*)

# verl's _call_tool turns a tool exception into this text (tool_agent_loop.py); it reports no status of its own.
_VERL_TOOL_EXCEPTION_PREFIX = "Error executing tool"


class Termination(StrEnum):
    """Why a trajectory ended (``fields.TERMINATION``)."""

    ANSWER = "answer"  # the model stopped with a final answer and no tool call
    NO_TOOL_CALL = "no_tool_call"  # the model stopped with neither a tool call nor a final answer (a void ending)
    RESPONSE_LENGTH = "response_length"  # rollout.response_length reached by generated tokens
    TOOL_RESPONSE_OVERFLOW = "tool_response_overflow"  # the tool response would not fit in response_length
    MAX_ASSISTANT_TURNS = "max_assistant_turns"
    MAX_USER_TURNS = "max_user_turns"


def close_trajectory(
    traj: Trajectory, agent_data: AgentData, response_length: int, messages: list[dict] | None
) -> Trajectory:
    """``traj`` with the counts verl kept on ``agent_data`` (turns, model tokens) and the conversation."""
    traj.num_turns = agent_data.user_turns + agent_data.assistant_turns + 1  # == verl's num_turns
    traj.assistant_turns = agent_data.assistant_turns
    # verl cuts the response to response_length after the loop; count the model's tokens in what is kept
    traj.model_tokens = sum(agent_data.response_mask[:response_length])
    traj.messages = messages
    return traj


def without_boundary_tokens(
    merge: MergeResult, mask: list[int], logprobs: list[float] | None, *, prefix_length: int, mask_length: int
) -> tuple[MergeResult, list[int], list[float] | None]:
    """A context merge and its aligned mask/logprobs with the builder's inserted boundary tokens taken out.

    verl puts them right after the (possibly trimmed) runtime prefix, and their mask-0 / logprob-0 entries right after
    the (equally trimmed) response metadata (``ContinuousTokenBuilder.align_response_metadata``)."""
    n = len(merge.inserted_token_ids)
    if n == 0:
        return merge, mask, logprobs
    at = prefix_length - merge.removed_prefix_token_count
    at_mask = mask_length - merge.removed_prefix_token_count
    token_ids = merge.token_ids[:at] + merge.token_ids[at + n :]
    if logprobs is not None:
        logprobs = logprobs[:at_mask] + logprobs[at_mask + n :]
    return (
        dataclasses.replace(merge, token_ids=token_ids, inserted_token_ids=[]),
        mask[:at_mask] + mask[at_mask + n :],
        logprobs,
    )


class AgentRLToolAgentLoop(ToolAgentLoop):
    """verl's ``ToolAgentLoop`` + malformed-call feedback, per-trajectory tool metrics and stateful-session cleanup.

    Registered by the plugin as ``agentrl_tool_agent`` (select it per row with ``agent_name`` or for a whole run with
    ``actor_rollout_ref.rollout.agent.default_agent_loop``). verl's ``AgentLoopWorker`` builds one instance per
    trajectory.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.recipe = recipe_config.resolve(self.config)
        self.settings: AgentLoopSettings = self.recipe.settings(SECTION)
        for tool in self.tools.values():  # the tool YAML cannot see the trainer config: hand it the agentrl block
            if hasattr(tool, "use_recipe"):
                tool.use_recipe(self.recipe)
        if self.settings.memoize_renders:
            memoize_renders(self.continuous_token_builder)
        # Block-level checks know the hermes syntax only; other parsers still get the semantic checks (check_call).
        self._hermes = self.tool_parser_name == "hermes"
        self._answer_check = tasks.load(tasks.by_name("math").answer_check)
        self._stop_texts = [t for t in {self._tok.eos_token, self._tok.pad_token} if t]

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        self._answer_check = tasks.load(tasks.task_for(str(kwargs.get("data_source") or "")).answer_check)
        trace.mark(names.AGENT_LOOP)
        return await super().run(sampling_params, **kwargs)

    @property
    def _tok(self) -> Any:
        """verl's tokenizer: a PreTrainedTokenizer, which verl annotates as AutoTokenizer (the factory)."""
        return self.tokenizer

    @staticmethod
    def trajectory(agent_data: AgentData) -> Trajectory:
        """The trajectory's fields so far, kept on ``agent_data``."""
        traj = getattr(agent_data, "_agentrl_trajectory", None)
        if traj is None:
            traj = Trajectory()
            # verl keeps its own per-sample extras on AgentData the same way (_active_tools)
            agent_data._agentrl_trajectory = traj  # type: ignore[attr-defined]
        return traj

    async def _handle_generating_state(
        self, agent_data: AgentData, sampling_params: dict[str, Any], ignore_termination: bool = False
    ) -> AgentState:
        n_messages = len(agent_data.messages)
        turn_start = len(agent_data.response_mask)  # the response so far; this turn's tokens are appended to it
        state = await super()._handle_generating_state(agent_data, sampling_params, ignore_termination)
        traj = self.trajectory(agent_data)
        traj.final_turn_start = turn_start  # the reward reads a final-turn answer from here (answer_source)
        # verl appends the assistant message only when it got as far as parsing (no length/turn limit hit first).
        parsed = len(agent_data.messages) > n_messages
        text = self._tok.decode(agent_data.response_ids, skip_special_tokens=False)
        stopped = self._stopped(agent_data, sampling_params)
        calls = await self._checked_calls(agent_data, text, parsed=parsed, stopped=stopped)
        malformed = [call for call in calls if isinstance(call, MalformedCall)]
        for call in malformed:
            traj.record_malformed(call.kind)
        if parsed and malformed and self.settings.malformed_call_feedback:
            # valid calls first: with max_parallel_calls=1 a malformed block must not take a valid call's slot
            # (verl and the released code ran the valid one)
            agent_data.tool_calls = valid_first(calls)
            content = content_without_calls(text, calls) if self._hermes else agent_data.messages[-1]["content"]
            agent_data.messages[-1] = self._build_assistant_message(content, agent_data)
            state = AgentState.PROCESSING_TOOLS

        valid_call = any(not isinstance(call, MalformedCall) for call in calls)
        answered = self._answer_check(TOOL_CALL_BLOCK.sub("", text))
        if stopped and not valid_call and not answered:
            traj.record_void_turn()

        if state == AgentState.TERMINATED:
            if not parsed:
                traj.termination = self._generation_termination(agent_data).value
            else:
                traj.termination = (Termination.ANSWER if answered else Termination.NO_TOOL_CALL).value
            await self._finish(agent_data)
        return state

    async def _checked_calls(
        self, agent_data: AgentData, text: str, *, parsed: bool, stopped: bool
    ) -> list[FunctionCall]:
        """The turn's calls, each checked (a MalformedCall where it fails); none cut off unfinished by the budget."""
        tools = active_tools(self, agent_data)
        if parsed:
            found = agent_data.tool_calls
        else:  # a limit ended the turn before verl parsed it; parse it here only to classify the turn
            _, found = await self.tool_parser.extract_tool_calls(
                agent_data.response_ids, [tool.tool_schema for tool in tools.values()]
            )
        if self._hermes:
            found = check_hermes_blocks(text, found)
        calls = [check_call(call, tools) for call in found]
        if not stopped:
            # cut off by the budget mid-call: the model never finished that call, so it is not malformed
            calls = [call for call in calls if getattr(call, "kind", None) != "unclosed"]
        return calls

    async def _handle_processing_tools_state(self, agent_data: AgentData) -> AgentState:
        state = await super()._handle_processing_tools_state(agent_data)
        if state == AgentState.TERMINATED:
            self.trajectory(agent_data).termination = Termination.TOOL_RESPONSE_OVERFLOW.value
            await self._finish(agent_data)
        return state

    async def _call_tool(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        """The call's answer, its text escaped so that no added token of the template is parsed in it (tool_text)."""
        response, reward, metrics = await self._answer_call(tool_call, tools_kwargs, agent_data)
        if response.text:
            response = response.model_copy(update={"text": as_plain_text(response.text, self._tok)})
        return response, reward, metrics

    async def _answer_call(
        self, tool_call: FunctionCall, tools_kwargs: dict[str, Any], agent_data: AgentData
    ) -> tuple[ToolResponse, float, dict]:
        if isinstance(tool_call, MalformedCall):
            return ToolResponse(text=tool_call.feedback), 0.0, {"status": "malformed", "kind": tool_call.kind}
        released = self.settings.error_text == "released"
        unknown = tool_call.name not in active_tools(self, agent_data)
        if released and unknown:  # [code] self.tools[tool_name] raised KeyError: "Error when executing tool: 'python'"
            self.trajectory(agent_data).record_call("unknown_tool", 0.0, {})
            return (
                ToolResponse(text=RELEASED_TOOL_ERROR + str(KeyError(tool_call.name))),
                0.0,
                {"status": "unknown_tool"},
            )
        started = time.perf_counter()
        response, reward, metrics = await super()._call_tool(tool_call, tools_kwargs, agent_data)
        elapsed = time.perf_counter() - started
        metrics = metrics if isinstance(metrics, dict) else {}
        status = metrics.get("status")
        if status is None and unknown:  # verl answered "Unknown function ..."
            status = "unknown_tool"
        elif status is None:  # a tool that reports no status: verl's exception text is the only failure signal
            status = "tool_exception" if (response.text or "").startswith(_VERL_TOOL_EXCEPTION_PREFIX) else "ok"
            if released and status == "tool_exception":  # verl: "Error executing tool '<name>': <e>"
                text = (response.text or "").removeprefix(f"{_VERL_TOOL_EXCEPTION_PREFIX} '{tool_call.name}': ")
                response = ToolResponse(text=RELEASED_TOOL_ERROR + text)
        self.trajectory(agent_data).record_call(str(status), float(metrics.get("latency_s", elapsed)), metrics)
        return response, reward, metrics

    async def ct_merge_context_msg(
        self,
        previous_messages: list[dict],
        updated_messages: list[dict],
        runtime_token_ids: list[int],
        response_mask: list[int],
        response_logprobs: list[float] | None = None,
        tools: list[dict] | None = None,
    ) -> tuple[MergeResult, list[int], list[float] | None]:
        """verl's merge of a tool turn; without the boundary tokens its builder inserts (the ``\\n`` after a
        generated ``<|im_end|>``) when ``tool_turn_newline`` is off, as the released loop appended tool turns."""
        merged = await super().ct_merge_context_msg(
            previous_messages,
            updated_messages,
            runtime_token_ids,
            response_mask,
            response_logprobs,
            tools=tools,  # type: ignore[arg-type]  # verl annotates list[dict] with a None default
        )
        if self.settings.tool_turn_newline:
            return merged
        return without_boundary_tokens(*merged, prefix_length=len(runtime_token_ids), mask_length=len(response_mask))

    def _build_assistant_message(self, content: str, agent_data: AgentData) -> dict[str, Any]:
        # Malformed calls are not tool calls of the message; their raw text stays in the content (see
        # content_without_calls), which is what the model actually wrote.
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
        stop_ids = {self._tok.eos_token_id, *(sampling_params.get("stop_token_ids") or ())}
        stop_ids.update(self.tool_parser.stop_token_ids)
        return bool(agent_data.response_ids) and agent_data.response_ids[-1] in stop_ids

    def _generation_termination(self, agent_data: AgentData) -> Termination:
        # Same order as verl's checks in ToolAgentLoop._handle_generating_state.
        if len(agent_data.response_mask) >= self.response_length:
            return Termination.RESPONSE_LENGTH
        if self.max_assistant_turns and agent_data.assistant_turns >= self.max_assistant_turns:
            return Termination.MAX_ASSISTANT_TURNS
        return Termination.MAX_USER_TURNS

    async def _finish(self, agent_data: AgentData) -> None:
        """Write the trajectory's fields and close stateful tool sessions; runs once, when the loop terminates."""
        messages = self._clean_messages(agent_data.messages) if self.settings.record_messages else None
        traj = close_trajectory(self.trajectory(agent_data), agent_data, self.response_length, messages)
        agent_data.extra_fields.update(traj.to_extra_fields())
        for tool in active_tools(self, agent_data).values():
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
