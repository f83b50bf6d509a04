"""HFGenerationClient: vLLM sampling conventions, verl's token budget and logprobs (both modes) on the tiny model."""

from __future__ import annotations

import asyncio
import threading

import pytest
import torch

from verl_client.token_output import ContextLimits
from verl_cpu.hf_client import HFGenerationClient
from verl_cpu.scripted import ScriptedTurn, turns

GREEDY = {"temperature": 0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


@pytest.fixture(scope="module")
def client(tiny_model_dir) -> HFGenerationClient:
    return HFGenerationClient.from_pretrained(
        tiny_model_dir, limits=ContextLimits(prompt_length=64, response_length=24)
    )


@pytest.fixture(scope="module")
def prompt(client) -> list[int]:
    return client.tokenizer.encode("What is 6 * 7? Let me compute.")


def test_greedy_is_argmax_and_logprobs_are_the_models(client, prompt):
    out = asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params=GREEDY))
    assert out.stop_reason == "completed"
    assert len(out.log_probs) == len(out.token_ids) > 0
    ids = torch.tensor([prompt + out.token_ids])
    with torch.no_grad():
        logits = client.model(input_ids=ids).logits[0, len(prompt) - 1 : -1]
    assert out.token_ids == logits.argmax(-1).tolist()
    expected = torch.log_softmax(logits, -1).gather(1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert out.log_probs == pytest.approx(expected.tolist(), abs=1e-4)
    assert all(lp <= 0 for lp in out.log_probs)


@pytest.mark.parametrize("mode", ["processed_logprobs", "raw_logprobs"])
def test_sampled_logprobs_follow_logprobs_mode(client, prompt, mode):
    """processed (verl's default): log_softmax(logits / T), what verl's actor computes; raw: before the temperature."""
    sampler = HFGenerationClient(client.model, client.tokenizer, limits=client.limits, seed=1, logprobs_mode=mode)
    params = {"temperature": 0.6, "top_p": 1.0, "top_k": -1, "logprobs": True}
    out = asyncio.run(sampler.generate("r", prompt_ids=prompt, sampling_params=params))
    with torch.no_grad():
        logits = client.model(input_ids=torch.tensor([prompt + out.token_ids])).logits[0, len(prompt) - 1 : -1]
    scaled = logits / 0.6 if mode == "processed_logprobs" else logits
    expected = torch.log_softmax(scaled, -1).gather(1, torch.tensor(out.token_ids)[:, None])[:, 0]
    assert out.log_probs == pytest.approx(expected.tolist(), abs=1e-4)
    assert sampler.score(prompt, out.token_ids, 0.6) == pytest.approx(expected.tolist(), abs=1e-4)


def test_unknown_logprobs_mode_is_refused(client):
    with pytest.raises(ValueError, match="processed_logits"):
        HFGenerationClient(client.model, client.tokenizer, limits=client.limits, logprobs_mode="processed_logits")


def test_budget_follows_verls_vllm_server(client, prompt):
    # min_tokens keeps the random model from stopping early, so the budget alone decides the length.
    params = {**GREEDY, "min_tokens": 1000}
    # default: min(response_length, prompt_length + response_length - len(prompt)) = min(24, 88 - 13)
    out = asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params=params))
    assert len(out.token_ids) == 24
    long_prompt = (prompt * 8)[:74]  # leaves 88 - 74 = 14 tokens
    out = asyncio.run(client.generate("r", prompt_ids=long_prompt, sampling_params=params))
    assert len(out.token_ids) == 14
    out = asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params={**params, "max_tokens": 3}))
    assert len(out.token_ids) == 3


def test_stop_token_ids_stop_and_are_returned(client, prompt):
    free = asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params=GREEDY)).token_ids
    stop = free[2]
    first = free.index(stop)
    out = asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params={**GREEDY, "stop_token_ids": [stop]}))
    assert out.token_ids == free[: first + 1]


def test_sampling_is_seeded_per_request(tiny_model_dir, prompt):
    limits = ContextLimits(prompt_length=64, response_length=24)
    params = {"temperature": 1.0, "top_p": 0.9, "top_k": 50, "logprobs": False}
    a = HFGenerationClient.from_pretrained(tiny_model_dir, limits=limits, seed=7)
    b = HFGenerationClient.from_pretrained(tiny_model_dir, limits=limits, seed=7)

    async def two(c: HFGenerationClient) -> list[list[int]]:
        outs = await asyncio.gather(*(c.generate(rid, prompt_ids=prompt, sampling_params=params) for rid in "xy"))
        return [o.token_ids for o in outs]

    first, second = asyncio.run(two(a)), asyncio.run(two(b))
    assert first == second  # same seed and request ids → same samples, whatever the scheduling order
    assert first[0] != first[1]  # different requests draw different samples
    assert asyncio.run(a.generate("x", prompt_ids=prompt, sampling_params=params)).log_probs is None


def test_scripted_turn_is_forced_with_model_logprobs(tiny_model_dir, prompt):
    limits = ContextLimits(prompt_length=64, response_length=24)
    client = HFGenerationClient.from_pretrained(tiny_model_dir, limits=limits, script=turns("The answer is 42."))
    forced = asyncio.run(client.generate("s", prompt_ids=prompt, sampling_params=GREEDY))
    tok = client.tokenizer
    assert forced.token_ids == tok.encode("The answer is 42.") + [tok.eos_token_id]
    assert forced.log_probs == pytest.approx(client._score(prompt, forced.token_ids), abs=1e-5)
    # the next turn of the same trajectory (its prompt extends the first): the script has none → the model generates
    next_prompt = prompt + forced.token_ids + tok.encode("\n<|im_start|>user\nok<|im_end|>\n")
    free = asyncio.run(client.generate("s", prompt_ids=next_prompt, sampling_params=GREEDY))
    assert free.token_ids != tok.encode("The answer is 42.") + [tok.eos_token_id]
    # the same request id with a prompt that does not extend it is a new trajectory: turn 0 again
    again = asyncio.run(client.generate("s", prompt_ids=prompt, sampling_params=GREEDY))
    assert again.token_ids == forced.token_ids
    # an open turn (stop=False) gets no EOS and is cut to the budget
    open_client = HFGenerationClient.from_pretrained(
        tiny_model_dir, limits=limits, script=turns(ScriptedTurn(text="x " * 100, stop=False))
    )
    cut = asyncio.run(open_client.generate("o", prompt_ids=prompt, sampling_params=GREEDY))
    assert len(cut.token_ids) == 24 and tok.eos_token_id not in cut.token_ids


def test_bad_requests_fail_clearly(client, prompt):
    with pytest.raises(ValueError, match="unsupported sampling_params"):
        asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params={"temprature": 0.5}))
    with pytest.raises(ValueError, match="no room to generate"):
        asyncio.run(client.generate("r", prompt_ids=[1] * 88, sampling_params=GREEDY))
    with pytest.raises(ValueError, match="text-only"):
        asyncio.run(client.generate("r", prompt_ids=prompt, sampling_params=GREEDY, image_data=[object()]))


def test_concurrent_requests_are_batched_without_changing_results(tiny_model_dir):
    """Coalesced rows decode as they would alone: greedy ids and logprobs match, seeded samples match."""
    limits = ContextLimits(prompt_length=64, response_length=16)
    batched = HFGenerationClient.from_pretrained(tiny_model_dir, limits=limits, seed=3, max_batch_size=8)
    alone = HFGenerationClient.from_pretrained(tiny_model_dir, limits=limits, seed=3, max_batch_size=1)
    tok = batched.tokenizer
    prompts = [tok.encode(text) for text in ("What is 6 * 7?", "Print the sum of 2 and 3 please.", "def f(x):")]
    sampled = {"temperature": 1.0, "top_p": 0.9, "top_k": 40, "logprobs": True, "repetition_penalty": 1.1}

    async def run(client: HFGenerationClient, params: dict) -> list:
        outs = await asyncio.gather(
            *(client.generate(f"r{i}", prompt_ids=p, sampling_params=params) for i, p in enumerate(prompts))
        )
        return [(o.token_ids, o.log_probs) for o in outs]

    for params in (GREEDY, sampled):
        together, separately = asyncio.run(run(batched, params)), asyncio.run(run(alone, params))
        for (ids_a, lp_a), (ids_b, lp_b) in zip(together, separately, strict=True):
            assert ids_a == ids_b
            assert lp_a == pytest.approx(lp_b, abs=1e-4)
    assert max(batched.batch_sizes) == 3 and max(alone.batch_sizes) == 1


def test_top_k_and_top_p_restrict_the_choice(client, prompt):
    """top_k=1 (and a tiny top_p) leave only the argmax: sampling then equals greedy decoding."""
    greedy = asyncio.run(client.generate("g", prompt_ids=prompt, sampling_params=GREEDY)).token_ids
    for params in ({"temperature": 1.0, "top_k": 1}, {"temperature": 1.0, "top_p": 1e-6}):
        assert asyncio.run(client.generate("k", prompt_ids=prompt, sampling_params=params)).token_ids == greedy


# ------------------------------------------------------------------- partial rollout: abort, resume, weight version


class PausedForward:
    """The model's forward, stopped inside its ``pause_at``-th call until released (the batch is then mid-decode)."""

    def __init__(self, model, pause_at: int):
        self.inner, self.pause_at, self.calls = model.forward, pause_at, 0
        self.reached, self.release = threading.Event(), threading.Event()
        model.forward = self

    def __call__(self, *args, **kwargs):
        self.calls += 1
        if self.calls == self.pause_at:
            self.reached.set()
            assert self.release.wait(60), "never released"
        return self.inner(*args, **kwargs)


LONG = {**GREEDY, "ignore_eos": True, "max_tokens": 10}  # no early stop: only the abort can end it short


async def test_abort_cuts_the_batch_and_resume_continues_from_the_partial_tokens(tiny_model_dir, prompt):
    client = HFGenerationClient.from_pretrained(
        tiny_model_dir, limits=ContextLimits(prompt_length=64, response_length=24), max_batch_size=1
    )
    uncut = await client.generate("u", prompt_ids=prompt, sampling_params=LONG)
    paused = PausedForward(client.model, pause_at=4)  # prefill + 2 steps done: 3 tokens chosen at the pause
    first = asyncio.ensure_future(client.generate("a", prompt_ids=prompt, sampling_params=LONG))
    queued = asyncio.ensure_future(client.generate("b", prompt_ids=prompt, sampling_params=LONG))
    await asyncio.to_thread(paused.reached.wait, 60)
    client.abort()
    paused.release.set()
    cut, never_started = await first, await queued
    assert (cut.stop_reason, cut.token_ids) == ("aborted", uncut.token_ids[:3])
    assert cut.log_probs == pytest.approx(uncut.log_probs[:3], abs=1e-5)
    assert (never_started.stop_reason, never_started.token_ids) == ("aborted", [])
    late = await client.generate("c", prompt_ids=prompt, sampling_params=LONG)  # between abort and resume
    assert (late.stop_reason, late.token_ids) == ("aborted", [])

    client.resume()  # what FullyAsyncLLMServerClient sends next: prompt + tokens so far, the rest of the budget
    rest = await client.generate("a", prompt_ids=prompt + cut.token_ids, sampling_params={**LONG, "max_tokens": 7})
    assert rest.stop_reason == "completed"
    assert cut.token_ids + rest.token_ids == uncut.token_ids
    assert cut.log_probs + rest.log_probs == pytest.approx(uncut.log_probs, abs=1e-4)


async def test_the_version_is_the_one_the_batch_started_with(tiny_model_dir, prompt):
    client = HFGenerationClient.from_pretrained(
        tiny_model_dir, limits=ContextLimits(prompt_length=64, response_length=24), global_steps=1
    )
    new_weights = {name: tensor + 0.01 for name, tensor in client.model.state_dict().items()}
    paused = PausedForward(client.model, pause_at=2)
    request = asyncio.ensure_future(client.generate("v", prompt_ids=prompt, sampling_params=LONG))
    await asyncio.to_thread(paused.reached.wait, 60)
    update = asyncio.ensure_future(asyncio.to_thread(client.load_weights, new_weights, 2))  # waits for the batch
    await asyncio.sleep(0.2)
    assert not update.done() and client.global_steps == 1
    paused.release.set()
    out = await request
    await update
    assert client.global_steps == 2  # loaded, but after every token of the request was sampled
    assert out.stop_reason == "completed" and len(out.token_ids) == 10
    assert out.extra_fields["global_steps"] == out.extra_fields["max_global_steps"] == 1
    after = await client.generate("w", prompt_ids=prompt, sampling_params=LONG)
    assert after.extra_fields["global_steps"] == 2
