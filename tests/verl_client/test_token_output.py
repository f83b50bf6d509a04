"""The generation-client contract: verl's vLLM-server token budget, stop tokens, EOS ids and the ``TokenOutput``."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from verl.workers.rollout.replica import TokenOutput

from verl_client.token_output import (
    ContextLimits,
    GenerationClient,
    make_token_output,
    model_eos_ids,
    stop_token_set,
)


def test_context_limits_match_vllm_server() -> None:
    limits = ContextLimits(prompt_length=100, response_length=50)
    assert limits.max_new_tokens(10, {}) == 50
    assert limits.max_new_tokens(120, {}) == 30
    assert limits.max_new_tokens(10, {"max_tokens": 7}) == 7
    assert limits.max_new_tokens(10, {"max_new_tokens": 9}) == 9
    assert limits.max_new_tokens(140, {"max_tokens": 70}) == 10  # clamped to the context headroom
    assert ContextLimits(100, 50, max_model_len=1000).max_new_tokens(140, {"max_tokens": 70}) == 70
    with pytest.raises(ValueError, match="no room to generate"):
        limits.max_new_tokens(150, {})


def test_stop_tokens_and_eos_ids() -> None:
    assert stop_token_set([2, 3], {"stop_token_ids": [7]}) == frozenset({2, 3, 7})
    assert stop_token_set([2, 3], {"stop_token_ids": [7], "ignore_eos": True}) == frozenset({7})
    tokenizer, generation = SimpleNamespace(eos_token_id=5), SimpleNamespace(eos_token_id=[6, 5])
    assert model_eos_ids(tokenizer, generation) == [6, 5]
    with pytest.raises(ValueError, match="no EOS token"):
        model_eos_ids(SimpleNamespace(eos_token_id=None))


def test_token_output_carries_logprobs_only_when_asked() -> None:
    out = make_token_output([1, 2], [-0.5, -1.0], want_logprobs=True, global_steps=4)
    assert (out.token_ids, out.log_probs, out.stop_reason) == ([1, 2], [-0.5, -1.0], "completed")
    assert out.extra_fields == {"global_steps": 4, "min_global_steps": 4, "max_global_steps": 4}
    assert make_token_output([1], [-0.1], want_logprobs=False).log_probs is None
    with pytest.raises(ValueError, match="logprobs requested but got 1 for 2 tokens"):
        make_token_output([1, 2], [-0.1], want_logprobs=True)
    with pytest.raises(ValueError, match="stop_reason must be one of"):
        make_token_output([1], None, want_logprobs=False, stop_reason="length")


class Echo(GenerationClient):
    def __init__(self) -> None:
        self.limits = ContextLimits(prompt_length=8, response_length=4)

    async def _generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int
                        ) -> TokenOutput:  # fmt: skip
        return make_token_output(prompt_ids[:max_new], None, want_logprobs=False)


def test_a_client_gets_only_checked_text_requests_with_verls_budget() -> None:
    client = Echo()
    out = asyncio.run(client.generate("r", prompt_ids=[9, 8, 7, 6, 5, 4, 3, 2, 1, 0], sampling_params={}))
    assert out.token_ids == [9, 8]  # 12-token context, 10-token prompt: 2 new tokens at most
    with pytest.raises(ValueError, match="unsupported sampling_params"):
        asyncio.run(client.generate("r", prompt_ids=[1], sampling_params={"temprature": 0.5}))
    with pytest.raises(ValueError, match="text-only"):
        asyncio.run(client.generate("r", prompt_ids=[1], sampling_params={}, image_data=[object()]))
