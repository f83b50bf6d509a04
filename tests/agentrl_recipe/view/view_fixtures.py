"""Dumps for the viewer tests: the recorded fast demo run (fixtures/demo_fast) and synthetic dumps written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DEMO_FAST = Path(__file__).parent / "fixtures" / "demo_fast"
XSS_SCRIPT = "<script>window.__xss = 1</script>"
XSS_IMG = '<img src=x onerror="window.__xss = 2">'


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def eval_record(prompt_id: str, sample: int, *, correct: bool, tool_output: str = "4", calls: int = 1) -> dict:
    return {
        "prompt_id": prompt_id,
        "sample": sample,
        "data_source": "toy",
        "task": "math",
        "messages": [
            {"role": "user", "content": "What is 2+2?"},
            {
                "role": "assistant",
                "content": '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(2+2)"}}</tool_call>',
            },
            {"role": "tool", "content": tool_output},
            {"role": "assistant", "content": "\\boxed{4}"},
        ],
        "response": "",
        "correct": correct,
        "score": 1.0 if correct else -1.0,
        "tool_calls": calls,
        "tool_failures": 0,
        "tool_statuses": ["ok"] * calls,
        "tool_latency_s": [0.01] * calls,
        "malformed_tool_calls": 0,
        "void_turn": False,
        "tool_infra_failure": False,
        "response_tokens": 12,
        "termination": "answer",
    }


def training_record(step: int, i: int, *, calls: int, acc: bool, pad: str = "") -> dict:
    return {
        "step": step,
        "key": f"uid{i // 8}_{i % 8}_0",
        "data_source": "toy",
        "ground_truth": "4",
        "score": 1.0 if acc else -0.9,
        "masked": False,
        "mask_flags": [],
        "fields": {
            "acc": acc,
            "score": 1.0 if acc else -1.0,
            "tool_bonus": 0.0 if acc else 0.1,
            "overlong_reward": 0.0,
            "agentrl_tool_calls": calls,
            "agentrl_tool_failures": 0,
            "agentrl_tool_statuses": ["ok"] * calls,
            "agentrl_termination": "answer",
        },
        "prompt_ids": [1, 2],
        "response_ids": [3, 4, 5],
        "response_mask": [1, 0, 1],
        "prompt_text": ["Q", ":"],
        "response_text": [" a", pad or " tool", " b"],
    }


WORDS = ("[UNK]", "What", "is", "2", "+", "?", "print", "(", ")", "4", "<tool_call>")


def word_tokenizer(folder: Path) -> Path:
    """A word-level tokenizer over :data:`WORDS` saved to ``folder`` (built in milliseconds, no training)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="[UNK]").save_pretrained(folder)
    return folder


def eval_tokens(prompt_id: str, sample: int) -> dict:
    """The sidecar line (rollouts.tokens.jsonl) of :func:`eval_record`: "What is 2 + 2 ?" then a call and its output."""
    return {
        "prompt_id": prompt_id,
        "sample": sample,
        "prompt_ids": [1, 2, 3, 4, 3, 5],
        "response_ids": [10, 6, 9, 9],
        "response_mask": [1, 1, 0, 1],
    }
