"""The agent loop's pure pieces: final-answer detection, hermes block checks against verl's parser, call checks,
and the tracker metrics over batch columns."""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace

import pytest
from loop_helpers import call
from transformers import AutoTokenizer
from verl.experimental.agent_loop.tool_parser import FunctionCall, HermesToolParser
from verl.tools.schemas import OpenAIFunctionToolSchema

from agentrl_recipe import fields, names, tasks
from agentrl_recipe.training.agent_loop.turn_checks import MalformedCall, check_call, check_hermes_blocks
from agentrl_recipe.training.metrics import batch_metrics


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("So the answer is \\boxed{42}.", "math", True),
        ("\\boxed{\\frac{1}{2}} done", "gpqa", True),
        ("almost \\boxed{\\frac{1}{2}", "math", False),
        ("no answer here", "math", False),
        ("```python\nprint(sum(map(int, input().split())))\n```", "code", True),
        ("```\nprint(1)\n```", "code", True),
        ("```python\nprint(1)", "code", False),
        ("\\boxed{3}", "code", False),  # a code row needs its program
    ],
)
def test_final_answer(text, kind, expected):  # through the task table, as the loop checks a turn
    assert tasks.load(tasks.by_name(kind).answer_check)(text) is expected


@pytest.fixture(scope="module")
def parser(tiny_model_dir):
    return HermesToolParser(AutoTokenizer.from_pretrained(tiny_model_dir))


def blocks(parser, text: str) -> list:
    ids = parser.tokenizer.encode(text + "<|im_end|>", add_special_tokens=False)
    decoded = parser.tokenizer.decode(ids, skip_special_tokens=False)
    _, parsed = asyncio.run(parser.extract_tool_calls(ids))
    return check_hermes_blocks(decoded, parsed)


def test_blocks_in_order_with_verls_parsed_calls(parser):
    bad = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "1"}\n</tool_call>'
    found = blocks(parser, "a " + call("print(1)") + " b " + bad + " c " + call("print(2)") + " <tool_call>\n{")
    kinds = [getattr(c, "kind", "ok") for c in found]
    assert kinds == ["ok", "bad_json", "ok", "unclosed"]
    assert [json.loads(c.arguments)["code"] for c in found if not isinstance(c, MalformedCall)] == [
        "print(1)",
        "print(2)",
    ]
    assert blocks(parser, "plain text, no call") == []
    assert [c.kind for c in blocks(parser, '<tool_call>\n["x"]\n</tool_call>')] == ["missing_keys"]


def test_call_checks():
    schema = OpenAIFunctionToolSchema.model_validate(
        {
            "type": "function",
            "function": {
                "name": names.TOOL_NAME,
                "description": "d",
                "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
            },
        }
    )
    tools = {names.TOOL_NAME: SimpleNamespace(tool_schema=schema)}

    def kind(name: str, arguments: str) -> str:
        checked = check_call(FunctionCall(name=name, arguments=arguments), tools)
        return getattr(checked, "kind", "ok")

    assert kind(names.TOOL_NAME, '{"code": "1"}') == "ok"
    assert kind("python", '{"code": "1"}') == "unknown_tool"
    assert kind(names.TOOL_NAME, '"print(1)"') == "arguments_not_object"
    assert kind(names.TOOL_NAME, '{"source": "1"}') == "missing_argument"
    feedback = check_call(FunctionCall(name="python", arguments="{}"), tools).feedback
    assert feedback.startswith("Error: unknown tool 'python'") and len(feedback) <= 256  # fits verl's default cut


def test_batch_metrics_over_mixed_rows():
    columns = {
        "__num_turns__": [4, 2, 6],
        fields.TOOL_CALLS.column: [1, None, 2],  # the middle row is a single_turn_agent row
        fields.TOOL_STATUSES.column: [["ok"], None, ["ok", "timeout"]],
        fields.TOOL_LATENCY_S.column: [[0.1], None, [0.2, 30.0]],
        fields.MALFORMED_KINDS.column: [[], None, ["bad_json"]],
        fields.VOID_TURN.column: [False, None, True],
        fields.TOOL_INFRA_FAILURE.column: [False, None, False],
        fields.TERMINATION.column: ["no_tool_call", None, "max_assistant_turns"],
    }
    m = batch_metrics(columns, wall_s=2.0)
    assert m["agentrl_tools/num_turns/mean"] == 4.0 and m["agentrl_tools/num_turns/max"] == 6.0
    assert m["agentrl_tools/calls_per_traj/mean"] == 1.5 and m["agentrl_tools/calls_per_s"] == 1.5
    assert m["agentrl_tools/failure_rate"] == pytest.approx(1 / 3)
    assert m["agentrl_tools/status/timeout"] == 1.0 and m["agentrl_tools/status/ok"] == 2.0
    assert m["agentrl_tools/latency_s/p50"] == pytest.approx(0.2)
    assert m["agentrl_tools/malformed/bad_json"] == 1.0 and m["agentrl_tools/void_turn_frac"] == 0.5
    assert m["agentrl_tools/termination/max_assistant_turns_frac"] == 0.5
    assert batch_metrics({"__num_turns__": [2, 2]}) == {
        "agentrl_tools/num_turns/mean": 2.0,
        "agentrl_tools/num_turns/max": 2.0,
    }
