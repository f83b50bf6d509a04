"""Batched incremental decoding on a Hugging Face causal LM, with vLLM's per-request sampling semantics.

``transformers``' ``generate`` shares one set of sampling parameters and one RNG across a batch; verl's agent loop
sends independent requests (their own temperature, stop tokens, budget and, for reproducibility, seed). This loop
decodes a left-padded batch with a KV cache and samples each row on its own: repetition penalty (over prompt and
output, as vLLM), then temperature, top-k (``-1`` = off), top-p; greedy at temperature 0; ``min_tokens`` masks the
stop tokens; a row stops at its first stop token (kept) or its own budget.

Logprobs follow the request's ``logprobs_mode``, with vLLM's meanings:

- ``processed_logprobs`` (verl's default, ``actor_rollout_ref.rollout.logprobs_mode``): the log-probability of the
  chosen token under the distribution it was sampled from — penalties and ``min_tokens`` applied, logits divided by
  the temperature, top-k / top-p applied, then ``log_softmax``. Greedy rows (temperature 0) use temperature 1, as
  vLLM does. With top-k / top-p off and no penalty this is exactly what verl's actor computes as the old log-prob
  (``log_softmax(logits / rollout.temperature)``, ``workers/engine/fsdp/transformer_impl.py``), so the rollout-vs-actor
  ratio is 1 for the weights that sampled;
- ``raw_logprobs``: ``log_softmax`` of the model's logits, before any processing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import torch

LOGPROBS_MODES = ("processed_logprobs", "raw_logprobs")


@dataclasses.dataclass(frozen=True)
class DecodeRequest:
    prompt_ids: list[int]
    max_new: int
    stop_ids: frozenset[int]
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    repetition_penalty: float = 1.0
    min_tokens: int = 0
    seed: int | None = None  # None: torch's global RNG
    logprobs_mode: str = "processed_logprobs"

    def __post_init__(self) -> None:
        if self.logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode {self.logprobs_mode!r} is not supported; use one of {LOGPROBS_MODES}")

    @classmethod
    def from_sampling_params(
        cls,
        prompt_ids: list[int],
        params: dict[str, Any],
        *,
        max_new: int,
        stop_ids: frozenset[int],
        seed: int | None,
        logprobs_mode: str = "processed_logprobs",
    ) -> DecodeRequest:
        return cls(
            prompt_ids=prompt_ids,
            max_new=max_new,
            stop_ids=stop_ids,
            temperature=float(params.get("temperature", 1.0)),
            top_p=float(params.get("top_p", 1.0)),
            top_k=int(params.get("top_k", -1)),
            repetition_penalty=float(params.get("repetition_penalty", 1.0)),
            min_tokens=int(params.get("min_tokens", 0)),
            seed=seed,
            logprobs_mode=logprobs_mode,
        )


def process_logits(logits: torch.Tensor, request: DecodeRequest, output: list[int]) -> torch.Tensor:
    """One row's logits after vLLM's processing: penalty, ``min_tokens``, temperature, top-k, top-p (``-inf`` = cut)."""
    row = logits.float().clone()
    if request.repetition_penalty != 1.0:
        seen = torch.tensor(sorted(set(request.prompt_ids) | set(output)), device=row.device)
        values = row[seen]
        row[seen] = torch.where(values > 0, values / request.repetition_penalty, values * request.repetition_penalty)
    if len(output) < request.min_tokens and request.stop_ids:
        row[torch.tensor(sorted(request.stop_ids), device=row.device)] = float("-inf")
    if request.temperature <= 0.0:
        return row  # greedy: argmax of the penalised logits, logprobs at temperature 1 (vLLM)
    row = row / request.temperature
    if 0 < request.top_k < row.numel():
        kth = torch.topk(row, request.top_k).values[-1]
        row[row < kth] = float("-inf")
    if request.top_p < 1.0:
        sorted_logits, order = torch.sort(row, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        drop = probs.cumsum(-1) - probs > request.top_p  # keep the smallest prefix reaching top_p (at least one)
        row[order[drop]] = float("-inf")
    return row


def _choose(logits: torch.Tensor, request: DecodeRequest, output: list[int], generator: Any) -> tuple[int, float]:
    """The next token of one row and its logprob in the request's ``logprobs_mode``."""
    row = process_logits(logits, request, output)
    if request.temperature <= 0.0:
        token = int(row.argmax())
    else:
        token = int(torch.multinomial(torch.softmax(row, dim=-1), 1, generator=generator))
    scored = row if request.logprobs_mode == "processed_logprobs" else logits.float()
    return token, float(torch.log_softmax(scored, dim=-1)[token])


def finished(request: DecodeRequest, token_ids: Sequence[int]) -> bool:
    """Whether a row ended on its own (stop token or budget), i.e. was not cut short by ``should_stop``."""
    return len(token_ids) >= request.max_new or (bool(token_ids) and token_ids[-1] in request.stop_ids)


@torch.inference_mode()
def decode_batch(
    model: Any,
    requests: Sequence[DecodeRequest],
    *,
    pad_id: int,
    should_stop: Callable[[], bool] | None = None,
) -> list[tuple[list[int], list[float]]]:
    """New token ids (stop token included) and their logprobs (each request's ``logprobs_mode``), one pair each.

    ``should_stop`` is polled before every token: when it returns true the batch ends there and each row keeps the
    tokens it has (:func:`finished` tells the rows that were cut from those that ended) — vLLM's abort.
    """
    from transformers import DynamicCache

    device = next(model.parameters()).device
    batch = len(requests)
    width = max(len(r.prompt_ids) for r in requests)
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros((batch, width), dtype=torch.long, device=device)
    for i, request in enumerate(requests):
        input_ids[i, width - len(request.prompt_ids) :] = torch.tensor(request.prompt_ids, device=device)
        attention[i, width - len(request.prompt_ids) :] = 1
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    generators = [torch.Generator(device=device).manual_seed(r.seed) if r.seed is not None else None for r in requests]
    outputs: list[list[int]] = [[] for _ in requests]
    logprobs: list[list[float]] = [[] for _ in requests]
    done = [r.max_new <= 0 for r in requests]

    cache = DynamicCache()
    logits = model(
        input_ids=input_ids, attention_mask=attention, position_ids=positions, past_key_values=cache, use_cache=True
    ).logits[:, -1, :]
    next_position = positions[:, -1:] + 1
    for _ in range(max(r.max_new for r in requests)):
        if should_stop is not None and should_stop():
            break
        step = []
        for i, request in enumerate(requests):
            if done[i]:
                step.append(pad_id)  # finished rows ride along; their outputs are ignored
                continue
            token, logprob = _choose(logits[i], request, outputs[i], generators[i])
            outputs[i].append(token)
            logprobs[i].append(logprob)
            done[i] = token in request.stop_ids or len(outputs[i]) >= request.max_new
            step.append(token)
        if all(done):
            break
        attention = torch.cat([attention, torch.ones((batch, 1), dtype=torch.long, device=device)], dim=1)
        logits = model(
            input_ids=torch.tensor(step, device=device)[:, None],
            attention_mask=attention,
            position_ids=next_position,
            past_key_values=cache,
            use_cache=True,
        ).logits[:, -1, :]
        next_position = next_position + 1
    return list(zip(outputs, logprobs, strict=True))
