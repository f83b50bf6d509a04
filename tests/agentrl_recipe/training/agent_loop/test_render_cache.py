"""render_cache: memoized Continuous-Token renders give the same ids as verl's, and the constant prefix hits."""

from __future__ import annotations

from transformers import AutoTokenizer
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

from agentrl_recipe import names
from agentrl_recipe.training.agent_loop import render_cache
from agentrl_recipe.training.verl_adapters import continuous_token_builder

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": names.TOOL_NAME,
            "description": "run code",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


def tool_turns(builder, n_turns: int) -> list[int]:
    messages = [{"role": "user", "content": "What is 6*7?"}]
    ids = builder.build_initial_tokens(messages, tools=TOOLS)
    for turn in range(n_turns):
        ids = ids + [builder.tokenizer.eos_token_id]  # the assistant turn's stop token
        call = {"type": "function", "function": {"name": names.TOOL_NAME, "arguments": {"code": f"print({turn})"}}}
        previous = [*messages, {"role": "assistant", "content": "", "tool_calls": [call]}]
        messages = [*previous, {"role": "tool", "content": f"{turn}\n"}]
        ids = builder.merge_context_tokens(previous, messages, ids, tools=TOOLS).token_ids
    return ids


def test_memoized_renders_are_identical_and_hit(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    plain = create_continuous_token_builder(tokenizer, hf_model_type="qwen2")
    cached = render_cache.memoize_renders(create_continuous_token_builder(tokenizer, hf_model_type="qwen2"))
    assert render_cache.memoize_renders(cached) is cached  # idempotent
    hits = render_cache.stats["hits"]
    assert tool_turns(cached, 4) == tool_turns(plain, 4)
    assert render_cache.stats["hits"] - hits >= 3  # the synthetic prefix, from the second tool turn on
    # a second trajectory (verl builds a new builder per trajectory) shares the tokenizer's cache
    again = render_cache.memoize_renders(create_continuous_token_builder(tokenizer, hf_model_type="qwen2"))
    hits = render_cache.stats["hits"]
    assert tool_turns(again, 4) == tool_turns(plain, 4)
    assert render_cache.stats["hits"] - hits >= 4


def test_template_change_is_not_served_from_the_cache(tiny_model_dir):
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    builder = render_cache.memoize_renders(create_continuous_token_builder(tokenizer, hf_model_type="qwen2"))
    messages = [{"role": "user", "content": "hi"}]
    before = builder.build_initial_tokens(messages, tools=TOOLS)
    edited = tokenizer.chat_template.replace("You may call one or more functions", "You may call functions")
    assert edited != tokenizer.chat_template  # the tools header: in the Qwen3-2507 and Qwen2.5 templates alike
    tokenizer.chat_template = edited
    after = builder.build_initial_tokens(messages, tools=TOOLS)
    assert before != after
    assert after == create_continuous_token_builder(tokenizer, hf_model_type="qwen2").build_initial_tokens(
        messages, tools=TOOLS
    )


def test_key_order_is_part_of_the_key(tiny_model_dir):
    """The template writes tools and tool-call arguments with `tojson`, which keeps key order: two renders that differ
    only in key order differ, so the cache must not serve one for the other (its key once sorted the keys)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    function = TOOLS[0]["function"]
    reordered = [{"function": {k: function[k] for k in reversed(list(function))}, "type": "function"}]
    builder = render_cache.memoize_renders(create_continuous_token_builder(tokenizer, hf_model_type="qwen2"))
    plain = create_continuous_token_builder(tokenizer, hf_model_type="qwen2")
    messages = [{"role": "user", "content": "What is 6*7?"}]
    first = builder.build_initial_tokens(messages, tools=TOOLS)
    second = builder.build_initial_tokens(messages, tools=reordered)
    assert second == plain.build_initial_tokens(messages, tools=reordered) and second != first

    def with_call(arguments: dict) -> list[dict]:
        call = {"type": "function", "function": {"name": names.TOOL_NAME, "arguments": arguments}}
        return [*messages, {"role": "assistant", "content": "", "tool_calls": [call]}, {"role": "tool", "content": "1"}]

    render = continuous_token_builder.render_tokens(builder)
    plain_render = continuous_token_builder.render_tokens(plain)
    for arguments in ({"code": "print(1)", "timeout": 5}, {"timeout": 5, "code": "print(1)"}):
        conversation = with_call(arguments)
        assert render(conversation, add_generation_prompt=True) == plain_render(
            conversation, add_generation_prompt=True
        )
