"""The tiny offline model: Qwen-compatible tokenisation, the Qwen3-2507 / Qwen2.5 chat templates, verl's hermes
parser, the Qwen3 / Qwen2 architectures."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from agentrl_recipe.cpu_task.tiny_model import (
    QWEN3,
    QWEN25,
    TOOL_TOKENS,
    TinyModelSpec,
    build_tiny_model,
    chat_template,
)

TEMPLATES = Path(__file__).parents[2] / "agentrl_recipe" / "training" / "agent_loop" / "templates"

CODE_TOOL = {
    "type": "function",
    "function": {
        "name": "code_interpreter",
        "description": "Run Python code and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to run."}},
            "required": ["code"],
        },
    },
}
CONVERSATION = [
    {"role": "user", "content": "What is 6*7?"},
    {
        "role": "assistant",
        "content": "Let me compute.",
        "tool_calls": [
            {"type": "function", "function": {"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}}
        ],
    },
    {"role": "tool", "content": "42"},
    {"role": "assistant", "content": "The answer is \\boxed{42}."},
]


def test_tokenizer_loads_as_qwen_and_matches_the_raw_file(tiny_model_dir: Path, tiny_tokenizer) -> None:
    # transformers 5 rebuilds qwen2 tokenizers from vocab+merges; ids must still equal the trained file's.
    raw = Tokenizer.from_file(str(tiny_model_dir / "tokenizer.json"))
    text = "def f(n):\n    return 12345 + n  # café\n<tool_call>\n{}\n</tool_call><|im_end|>"
    assert tiny_tokenizer.encode(text, add_special_tokens=False) == raw.encode(text, add_special_tokens=False).ids
    assert [tiny_tokenizer.decode([i]) for i in tiny_tokenizer.encode("2024", add_special_tokens=False)] == list("2024")
    assert len(tiny_tokenizer.encode("\n", add_special_tokens=False)) == 1  # QwenContinuousTokenBuilder needs this
    assert tiny_tokenizer.eos_token == "<|im_end|>" and tiny_tokenizer.pad_token == "<|endoftext|>"
    for token in ("<|im_start|>", "<|im_end|>", "<|endoftext|>", *TOOL_TOKENS):  # one id each, as in Qwen3
        assert tiny_tokenizer.encode(token, add_special_tokens=False) == [tiny_tokenizer.convert_tokens_to_ids(token)]
    special = {t.content for t in tiny_tokenizer.added_tokens_decoder.values() if t.special}
    assert special == {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}  # the tool and think tokens are not special


def test_the_default_template_is_qwen3_2507_instruct(tiny_tokenizer) -> None:
    # Qwen/Qwen3-4B-Instruct-2507's template: no default system prompt (Qwen2.5's adds one), "\n" only between
    # non-empty content and a call, and the generation prompt opens no think block.
    assert tiny_tokenizer.chat_template == chat_template(QWEN3)
    assert tiny_tokenizer.chat_template == (TEMPLATES / "qwen3_4b_instruct_2507.jinja").read_text()
    user = CONVERSATION[:1]
    assert tiny_tokenizer.apply_chat_template(user, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>user\nWhat is 6*7?<|im_end|>\n<|im_start|>assistant\n"
    )
    call_only = [*user, {**CONVERSATION[1], "content": ""}]
    assert tiny_tokenizer.apply_chat_template(call_only, tokenize=False).endswith(
        '<|im_start|>assistant\n<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}\n'
        "</tool_call><|im_end|>\n"
    )


def test_chat_template_renders_tools_and_tool_calls_and_round_trips(tiny_tokenizer) -> None:
    text = tiny_tokenizer.apply_chat_template(CONVERSATION, tools=[CODE_TOOL], tokenize=False)
    assert "# Tools" in text and json.dumps(CODE_TOOL) in text
    assert (
        '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}\n</tool_call><|im_end|>' in text
    )
    assert "<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>" in text
    ids = tiny_tokenizer.apply_chat_template(CONVERSATION, tools=[CODE_TOOL], tokenize=True, return_dict=False)
    assert tiny_tokenizer.decode(ids) == text
    # arguments given as a JSON string render identically to a dict
    as_string = [dict(m) for m in CONVERSATION]
    call = as_string[1]["tool_calls"][0]["function"]
    as_string[1] = {**as_string[1], "tool_calls": [{"function": {**call, "arguments": json.dumps(call["arguments"])}}]}
    assert tiny_tokenizer.apply_chat_template(as_string, tools=[CODE_TOOL], tokenize=False) == text


def test_verl_hermes_parser_extracts_a_call_from_tiny_tokenizer_ids(tiny_tokenizer) -> None:
    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = ToolParser.get_tool_parser("hermes", tiny_tokenizer)
    response = (
        'Let me compute.\n<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}\n</tool_call>'
    )
    ids = tiny_tokenizer.encode(response, add_special_tokens=False) + [tiny_tokenizer.eos_token_id]
    content, calls = asyncio.run(parser.extract_tool_calls(ids))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("code_interpreter", {"code": "print(6*7)"})]
    assert content.startswith("Let me compute.")


def test_model_is_a_million_parameter_qwen3_and_generates(tiny_model_dir: Path, tiny_tokenizer) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    assert type(model).__name__ == "Qwen3ForCausalLM" and model.config.model_type == "qwen3"
    assert model.config.tie_word_embeddings and model.lm_head.weight is model.model.embed_tokens.weight
    attention = model.model.layers[0].self_attn
    assert attention.q_norm.weight.shape == attention.k_norm.weight.shape == (32,)  # per head, vLLM CPU's minimum
    assert attention.q_proj.bias is None  # Qwen3 has no qkv bias (Qwen2 has)
    assert (model.config.num_attention_heads, model.config.num_key_value_heads, model.config.head_dim) == (4, 2, 32)
    assert 0.5e6 < sum(p.numel() for p in model.parameters()) < 2e6
    prompt = tiny_tokenizer.apply_chat_template(
        CONVERSATION[:1], tokenize=True, add_generation_prompt=True, return_dict=False
    )
    out = model.generate(torch.tensor([prompt]), max_new_tokens=8, do_sample=False)
    assert out.shape[1] == len(prompt) + 8


def test_the_qwen25_family_is_qwen2_with_the_qwen25_template(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = TinyModelSpec(family=QWEN25, hidden_size=64, num_hidden_layers=1, intermediate_size=64, corpus_lines=500)
    out = build_tiny_model(tmp_path / "qwen25", spec)
    model = AutoModelForCausalLM.from_pretrained(out)
    assert type(model).__name__ == "Qwen2ForCausalLM" and model.model.layers[0].self_attn.q_proj.bias is not None
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template == chat_template(QWEN25)
    assert tokenizer.apply_chat_template(CONVERSATION[:1], tokenize=False) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 6*7?<|im_end|>\n"
    )


def test_an_unknown_family_fails_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown tiny model family 'qwen4'; known: \['qwen2.5', 'qwen3'\]"):
        chat_template("qwen4")


def test_build_is_deterministic(tmp_path: Path) -> None:
    spec = TinyModelSpec(hidden_size=32, num_hidden_layers=1, intermediate_size=64, corpus_lines=2000)
    a, b = build_tiny_model(tmp_path / "a", spec), build_tiny_model(tmp_path / "b", spec)
    assert (a / "tokenizer.json").read_text() == (b / "tokenizer.json").read_text()
    assert (a / "model.safetensors").read_bytes() == (b / "model.safetensors").read_bytes()
