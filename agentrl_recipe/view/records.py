"""One trajectory shape for the page, from a training dump record (agentrl_recipe.training.trajectory_dump) or an eval
dump record (agentrl_recipe.eval.dump). Every value a model or a program wrote stays a plain string: the page escapes.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe import fields as F

TRUNCATED = ("length", "max_response_length", "response_length", "max_turns", "truncated")


def _hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", errors="replace")).hexdigest()[:12]


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _correct(value: Any) -> bool | None:
    return None if value is None else bool(value)


def flags(fields: Mapping[str, Any]) -> list[str]:
    """The trajectory's flags, by name: hack patterns, void turn, malformed, infra error, overlong, truncated, …"""
    out: list[str] = []
    hacks = str(fields.get(F.REWARD_HACK_PATTERNS.column) or "")
    out += [f"hack:{h}" for h in hacks.split(",") if h]
    if fields.get(F.VOID_TURN.column) or fields.get("void_turn"):
        out.append("void_turn")
    if int(fields.get(F.MALFORMED_TOOL_CALLS.column) or fields.get("malformed_tool_calls") or 0) > 0:
        out.append("malformed")
    infra = (
        F.TOOL_INFRA_FAILURE.column,
        F.GRADER_INFRA_FAILURE.column,
        "tool_infra_failure",
        "infra_failure",
    )
    if any(fields.get(k) for k in infra):
        out.append("infra_error")
    if fields.get("overlong"):
        out.append("overlong")
    termination = str(fields.get(F.TERMINATION.column) or fields.get("termination") or "")
    if any(word in termination for word in TRUNCATED):
        out.append("truncated")
    if fields.get(F.GRADER_ERROR.column):
        out.append("grader_error")
    if fields.get(F.GRADER_TIMEOUT.column):
        out.append("grader_timeout")
    return out


def _tokens(record: Mapping[str, Any], tokenizer: str | None = None) -> dict[str, Any] | None:
    """Prompt and response tokens with the loss mask (prompt tokens: mask 0), or None without token ids. Without
    per-token text in the record, ``tokenizer`` (a path) is kept to decode them when the page needs them
    (:func:`decode`)."""
    prompt_ids, response_ids = record.get("prompt_ids"), record.get("response_ids")
    if prompt_ids is None or response_ids is None:
        return None
    mask = list(record.get("response_mask") or [0] * len(response_ids))
    texts: Sequence[Any] = (record.get("prompt_text") or [None] * len(prompt_ids)) + (
        record.get("response_text") or [None] * len(response_ids)
    )
    ids = list(prompt_ids) + list(response_ids)
    tokens = {
        "text": [t if isinstance(t, str) else f"⟨{i}⟩" for t, i in zip(texts, ids, strict=True)],
        "mask": [0] * len(prompt_ids) + [int(bool(m)) for m in mask],
        "prompt_len": len(prompt_ids),
        "decoded": record.get("response_text") is not None,
    }
    if not tokens["decoded"] and tokenizer:
        tokens.update(ids=ids, tokenizer=tokenizer)
    return tokens


@functools.lru_cache(maxsize=4)
def _load_tokenizer(path: str) -> Any:
    from transformers import AutoTokenizer  # heavy: only when a page shows eval tokens

    return AutoTokenizer.from_pretrained(path, local_files_only=True)  # the viewer downloads nothing


def decode(tokens: dict[str, Any] | None) -> dict[str, Any] | None:
    """``tokens`` with each id's text, decoded one token at a time as the training dump does, when it still holds
    ids and a tokenizer; a tokenizer that does not load leaves the ids shown and says why in ``note``."""
    if not tokens or "ids" not in tokens:
        return tokens
    out = {k: v for k, v in tokens.items() if k not in ("ids", "tokenizer")}
    try:
        tokenizer = _load_tokenizer(tokens["tokenizer"])
    except (OSError, ValueError) as e:
        out["note"] = f"tokenizer {tokens['tokenizer']} did not load ({type(e).__name__}): ids shown"
        return out
    out["text"] = tokenizer.batch_decode([[i] for i in tokens["ids"]])
    out["decoded"] = True
    return out


def _turns_from_tokens(tokens: Mapping[str, Any]) -> list[dict[str, str]]:
    """The conversation as the trainer saw it: the prompt, then alternating runs of model (mask 1) and tool/template
    (mask 0) tokens."""
    text, mask, start = tokens["text"], tokens["mask"], tokens["prompt_len"]
    turns = [{"role": "prompt", "content": "".join(text[:start])}]
    i = start
    while i < len(text):
        j = i
        while j < len(text) and mask[j] == mask[i]:
            j += 1
        turns.append({"role": "assistant" if mask[i] else "tool", "content": "".join(text[i:j])})
        i = j
    return turns


def from_training(record: Mapping[str, Any], run: str) -> dict[str, Any]:
    """A training dump record (``<dir>/step_<N>.jsonl``)."""
    fields = dict(record.get("fields") or {})
    tokens = _tokens(record)
    messages = fields.get(F.MESSAGES.column)
    turns = messages if isinstance(messages, list) else (_turns_from_tokens(tokens) if tokens else [])
    prompt_key = "".join(tokens["text"][: tokens["prompt_len"]]) if tokens else str(record.get("key", ""))
    reward = _float(record.get("score"))
    return {
        "id": f"{run}/{record.get('step')}/{record.get('key')}",
        "kind": "train",
        "run": run,
        "step": str(record.get("step")),
        "source": str(record.get("data_source") or ""),
        "prompt": _hash(prompt_key),
        "correct": _correct(fields.get("acc")),
        "reward": reward,
        "breakdown": {
            "score": _float(fields.get("score")),
            "tool_bonus": _float(fields.get("tool_bonus")),
            "overlong_penalty": _float(fields.get("overlong_reward")),
            "final": reward,
        },
        "tool_calls": int(fields.get(F.TOOL_CALLS.column) or 0),
        "tool_failures": int(fields.get(F.TOOL_FAILURES.column) or 0),
        "statuses": [str(s) for s in fields.get(F.TOOL_STATUSES.column) or []],
        "latency_s": [_float(x) for x in fields.get(F.TOOL_LATENCY_S.column) or []],
        "flags": flags(fields),
        "masked": bool(record.get("masked")),
        "mask_flags": [str(m) for m in record.get("mask_flags") or []],
        "termination": str(fields.get(F.TERMINATION.column) or ""),
        "ground_truth": None if record.get("ground_truth") is None else str(record.get("ground_truth")),
        "turns": [{"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in turns],
        "response_tokens": (tokens and sum(tokens["mask"])) or int(fields.get(F.MODEL_TOKENS.column) or 0),
        "tokens": tokens,
    }


def from_eval(record: Mapping[str, Any], run: str, tokenizer: str | None = None) -> dict[str, Any]:
    """An eval dump record (``rollouts.jsonl``, its token ids joined from the sidecar ``rollouts.tokens.jsonl``); its
    step is the eval's name; ``tokenizer`` (the eval's model) decodes the token ids."""
    messages = record.get("messages") or [{"role": "assistant", "content": record.get("response") or ""}]
    score = _float(record.get("score"))
    tokens = _tokens(record, tokenizer)  # model tokens: its mask's ones (the record counts tool output too)
    return {
        "id": f"{run}/{record.get('prompt_id')}/{record.get('sample')}",
        "kind": "eval",
        "run": run,
        "step": run,
        "source": str(record.get("data_source") or ""),
        "prompt": str(record.get("prompt_id")),
        "correct": _correct(record.get("correct")),
        "reward": score,
        "breakdown": {"score": score, "tool_bonus": None, "overlong_penalty": None, "final": score},
        "tool_calls": int(record.get("tool_calls") or 0),
        "tool_failures": int(record.get("tool_failures") or 0),
        "statuses": [str(s) for s in record.get("tool_statuses") or []],
        "latency_s": [_float(x) for x in record.get("tool_latency_s") or []],
        "flags": flags(record),
        "masked": False,
        "mask_flags": [],
        "termination": str(record.get("termination") or ""),
        "ground_truth": None,
        "turns": [{"role": str(m.get("role", "")), "content": str(m.get("content", ""))} for m in messages],
        "response_tokens": (tokens and sum(tokens["mask"])) or int(record.get("response_tokens") or 0),
        "tokens": tokens,
    }
