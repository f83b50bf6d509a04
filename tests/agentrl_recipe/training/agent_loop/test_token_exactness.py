"""The ids the loop builds turn by turn equal the chat template over the final conversation, tools included.

With ``agentrl.agent_loop.tool_turn_newline: false`` (open_agentrl) they equal it less the one ``\\n`` between a
generated ``<|im_end|>`` and the tool turn after it, as the released loop (verl 0.5) appended tool turns.

Run on the tiny Qwen3 model (verl's Qwen3 continuous-token builder) for the Qwen2.5 template the package ships, a
Qwen3-style one (think blocks; tests/agentrl_recipe/training/agent_loop/templates/qwen3_hermes.jinja), and the real
Qwen3-2507 templates the 4B run uses (templates/qwen3_4b_instruct_2507.jinja, the paper's base model, and
qwen3_4b_thinking_2507.jinja; sources in templates/README.md), with a system prompt, through verl's AgentLoopWorker with
the real code_interpreter tool and the plugin's render cache (agentrl_recipe/training/agent_loop/render_cache.py, which
must serve some of the renders). The conversation includes a malformed call answered with an error, so the exactness
covers the plugin's feedback turns too.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from loop_helpers import call, row, with_updates
from transformers import AutoTokenizer

from agentrl_recipe import names
from agentrl_recipe.cpu_task.tiny_model import QWEN25, chat_template
from agentrl_recipe.offline.rollout import Rollout
from agentrl_recipe.training.agent_loop import render_cache
from verl_client.token_output import ContextLimits
from verl_cpu.scripted import ScriptedClient, turns

TEMPLATES = Path(__file__).parent / "templates"
BROKEN = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"\n</tool_call>'
CODE = "x = 6\nprint(x * 7)"


def tool_call(code: str) -> dict:
    return {"type": "function", "function": {"name": names.TOOL_NAME, "arguments": {"code": code}}}


def qwen25_case() -> tuple[list[str], list[dict]]:
    unknown = "Try python.\n" + call("print(6*7)", name="python")  # valid JSON, unknown tool
    script = ["Let me compute.\n" + call("print(6*7)"), BROKEN, unknown, call(CODE), "The answer is \\boxed{42}."]
    conversation = [
        {"role": "assistant", "content": "Let me compute.", "tool_calls": [tool_call("print(6*7)")]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": BROKEN},
        {"role": "tool", "content": None},  # the loop's error message, filled in from the run
        {"role": "assistant", "content": unknown},
        {"role": "tool", "content": None},
        {"role": "assistant", "content": "", "tool_calls": [tool_call(CODE)]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": "The answer is \\boxed{42}."},
    ]
    return script, conversation


def qwen3_case() -> tuple[list[str], list[dict]]:
    def think(text: str) -> str:
        return f"<think>\n{text}\n</think>\n\n"

    script = [
        think("Let me compute.") + call("print(6*7)"),
        think("Retry.") + BROKEN,
        think("Again, properly.") + call(CODE),
        think("It printed 42.") + "The answer is \\boxed{42}.",
    ]
    conversation = [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Let me compute.",
            "tool_calls": [tool_call("print(6*7)")],
        },
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": think("Retry.") + BROKEN},
        {"role": "tool", "content": None},
        {"role": "assistant", "content": "", "reasoning_content": "Again, properly.", "tool_calls": [tool_call(CODE)]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": think("It printed 42.") + "The answer is \\boxed{42}."},
    ]
    return script, conversation


def think(text: str) -> str:
    return f"<think>\n{text}\n</think>\n\n"


def qwen3_instruct_2507_case() -> tuple[list[str], list[dict]]:
    """Qwen3-4B-Instruct-2507 renders an assistant's content as is (no think parsing): the think block stays in it."""
    script = [
        think("Let me compute.") + call("print(6*7)"),
        think("Retry.") + BROKEN,
        call(CODE),
        think("It printed 42.") + "The answer is \\boxed{42}.",
    ]
    conversation = [
        # the template writes "\n" between non-empty content and the first <tool_call>
        {"role": "assistant", "content": think("Let me compute.")[:-1], "tool_calls": [tool_call("print(6*7)")]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": think("Retry.") + BROKEN},
        {"role": "tool", "content": None},
        {"role": "assistant", "content": "", "tool_calls": [tool_call(CODE)]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": think("It printed 42.") + "The answer is \\boxed{42}."},
    ]
    return script, conversation


def qwen3_thinking_2507_case() -> tuple[list[str], list[dict]]:
    """Qwen3-4B-Thinking-2507's generation prompt opens the think block: the model writes from inside it."""
    script = [
        "Let me compute.\n</think>\n\n" + call("print(6*7)"),
        "Retry.\n</think>\n\n" + BROKEN,
        "Again, properly.\n</think>\n\n" + call(CODE),
        "It printed 42.\n</think>\n\nThe answer is \\boxed{42}.",
    ]
    conversation = [
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Let me compute.",
            "tool_calls": [tool_call("print(6*7)")],
        },
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": "Retry.\n</think>\n\n" + BROKEN},  # split at </think> by the template
        {"role": "tool", "content": None},
        {"role": "assistant", "content": "", "reasoning_content": "Again, properly.", "tool_calls": [tool_call(CODE)]},
        {"role": "tool", "content": "42\n"},
        {"role": "assistant", "content": "The answer is \\boxed{42}.", "reasoning_content": "It printed 42."},
    ]
    return script, conversation


def template_file(name: str):
    return lambda: (TEMPLATES / name).read_text()


CASES = {
    "qwen25": (lambda: chat_template(QWEN25), qwen25_case),
    "qwen3": (template_file("qwen3_hermes.jinja"), qwen3_case),
    "qwen3_instruct_2507": (template_file("qwen3_4b_instruct_2507.jinja"), qwen3_instruct_2507_case),
    "qwen3_thinking_2507": (template_file("qwen3_4b_thinking_2507.jinja"), qwen3_thinking_2507_case),
}
SYSTEM = {"role": "system", "content": "You are a careful solver. Use the code tool."}
WITH_SYSTEM = {"qwen3_instruct_2507", "qwen3_thinking_2507"}  # the 2507 cases also render a system prompt


def without_tool_turn_newlines(ids: list[int], tokenizer) -> list[int]:
    """``ids`` less each "\\n" between "<|im_end|>" and a "<|im_start|>user\\n<tool_response>" turn."""
    im_end, im_start = tokenizer.convert_tokens_to_ids(["<|im_end|>", "<|im_start|>"])
    (newline,) = tokenizer.encode("\n", add_special_tokens=False)
    tool_turn = tokenizer.encode("user\n<tool_response>", add_special_tokens=False)
    return [
        t
        for i, t in enumerate(ids)
        if not (
            t == newline
            and 0 < i < len(ids) - 1
            and ids[i - 1] == im_end
            and ids[i + 1] == im_start
            and ids[i + 2 : i + 2 + len(tool_turn)] == tool_turn
        )
    ]


@pytest.mark.parametrize("newline", [True, False], ids=["verl_newline", "released_no_newline"])
@pytest.mark.parametrize("name", list(CASES))
async def test_incremental_ids_equal_the_rendered_conversation(name, newline, tiny_model_dir, base_cfg):
    template_fn, case = CASES[name]
    template = template_fn()
    script, conversation = case()
    cfg = with_updates(
        base_cfg,
        actor_rollout_ref__model__custom_chat_template=template,
        agentrl__agent_loop__tool_turn_newline=newline,
    )
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    tokenizer.chat_template = template
    client = ScriptedClient(
        tokenizer, turns(*script), limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    )
    runner = await Rollout.create(cfg, client)
    task = row("What is 6*7?")
    if name in WITH_SYSTEM:
        task["prompt"] = [SYSTEM, *task["prompt"]]
    hits = render_cache.stats["hits"]
    result = await runner.run([task], progress=False)
    assert render_cache.stats["hits"] > hits  # the cached renders are the ones checked here
    (record,) = result.records
    n_malformed = sum(1 for m in conversation if m["role"] == "tool" and m["content"] is None)
    assert record.termination == "answer" and record.tool_calls == 2
    assert record.malformed_tool_calls == n_malformed

    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in runner.worker.tools]
    prompt = task["prompt"]
    assert record.messages[len(prompt) + 3]["content"].startswith("Error: the tool call is not valid JSON")
    for index, message in enumerate(conversation):
        if message["role"] == "tool" and message["content"] is None:  # the loop's error messages, from the run
            assert record.messages[index + len(prompt)]["content"].startswith("Error:")
            message["content"] = record.messages[index + len(prompt)]["content"]

    def template(messages: list[dict], **kwargs) -> list[int]:
        return list(tokenizer.apply_chat_template(messages, tools=schemas, tokenize=True, return_dict=False, **kwargs))

    def render(messages: list[dict], **kwargs) -> list[int]:
        ids = template(messages, **kwargs)
        return ids if newline else without_tool_turn_newlines(ids, tokenizer)

    assert record.prompt_ids == render(prompt, add_generation_prompt=True)
    ids = record.prompt_ids + record.response_ids
    newline_ids = tokenizer.encode("\n", add_special_tokens=False)
    # The conversation render ends with "<|im_end|>\n"; generation stopped at "<|im_end|>".
    assert ids + newline_ids == render(prompt + conversation)
    # The conversation the loop recorded renders to the same ids.
    assert ids + newline_ids == render(record.messages)
    tool_turns = sum(1 for m in conversation if m["role"] == "tool")
    assert len(template(prompt + conversation)) - len(ids + newline_ids) == (0 if newline else tool_turns)

    # The mask covers exactly the assistant turns: what the model generated, stop token included, nothing else.
    generated = [tokenizer.encode(text, add_special_tokens=False) + [tokenizer.eos_token_id] for text in script]
    masked = [t for t, m in zip(record.response_ids, record.response_mask, strict=True) if m]
    assert masked == [t for turn in generated for t in turn]
    spans, current = [], []
    for token, mask in zip(record.response_ids, record.response_mask, strict=True):
        if mask:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    assert spans == generated  # turn boundaries too, not just the concatenation
    assert all(lp == -1.0 for lp, m in zip(record.response_logprobs, record.response_mask, strict=True) if m)
    assert all(lp == 0.0 for lp, m in zip(record.response_logprobs, record.response_mask, strict=True) if not m)
