"""The agent loop's checks of one assistant turn (pure functions, no verl state): malformed hermes blocks, call
arguments against the tool schema, and whether the text holds a final answer.

Used by :class:`agentrl_recipe.training.agent_loop.loop.AgentRLToolAgentLoop`; see its module docstring for what a
malformed call and a void turn are.
"""

from __future__ import annotations

import json
import re
from typing import Any

from verl.experimental.agent_loop.tool_parser import FunctionCall

TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)  # the hermes parser's regex
_TOOL_CALL_START = "<tool_call>"
_CODE_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n.*?```", re.DOTALL)


class MalformedCall(FunctionCall):
    """A tool call the loop will not execute; ``feedback`` is sent back as its tool response."""

    kind: str  # bad_json | missing_keys | unclosed | unknown_tool | arguments_not_object | missing_argument
    feedback: str


def has_code_block(text: str) -> bool:
    """A closed fenced code block in ``text`` (a code task's final answer)."""
    return _CODE_FENCE.search(text) is not None


def has_boxed_answer(text: str) -> bool:
    """A closed ``\\boxed{...}`` in ``text`` (a math or GPQA task's final answer)."""
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
    for match in TOOL_CALL_BLOCK.finditer(text):
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


def content_without_calls(text: str, calls: list[FunctionCall]) -> str:
    """The turn's text minus the blocks of the calls that will run (as the hermes parser's content, which drops all
    blocks): a malformed call's raw text stays, because the assistant message does not carry it as a tool call."""
    blocks = iter(calls)

    def drop_if_valid(match: re.Match[str]) -> str:
        call = next(blocks, None)
        return match.group(0) if call is None or isinstance(call, MalformedCall) else ""

    return TOOL_CALL_BLOCK.sub(drop_if_valid, text)


def _malformed(kind: str, problem: str, *, name: str = "") -> MalformedCall:
    feedback = (
        f"Error: {problem}. Nothing was executed. Call a tool as <tool_call>\n"
        '{"name": "<tool name>", "arguments": {<arguments as JSON>}}\n</tool_call>'
    )
    return MalformedCall(name=name, arguments="{}", kind=kind, feedback=feedback)
