"""OpenAI-compatible clients against a fake vLLM-shaped server on 127.0.0.1 (FastAPI + uvicorn; no network)."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentrl_recipe.offline.openai_client import OpenAIChatClient, OpenAICompletionsClient, OpenAIServerError
from verl_client.token_output import ContextLimits

REPLY_IDS = [11, 12, 13, 2]  # the last one plays the EOS, which vLLM keeps in token_ids
REPLY_LOGPROBS = [-0.5, -0.25, -1.0, -0.125]
HOLD_S = 5.0


class FakeServer:
    """Records request bodies; ``mode`` picks the reply shape, ``failures`` makes the next N requests 503."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.mode = "token_ids"
        self.failures = 0
        self.hold = 0  # > 0: each request waits until this many are in at once (or HOLD_S passed)
        self.in_flight = self.peak = 0
        app = FastAPI()

        @app.post("/v1/completions")
        async def completions(request: Request):
            body = await request.json()
            self.requests.append(body)
            if self.hold:
                await self._held()
            if self.failures:
                self.failures -= 1
                return JSONResponse({"error": "overloaded"}, status_code=503)
            if self.mode == "bad_request":
                return JSONResponse({"error": "max_tokens too large"}, status_code=400)
            choice: dict[str, Any] = {"index": 0, "text": "abc", "finish_reason": "stop", "stop_reason": None}
            if body.get("logprobs") is not None:
                choice["logprobs"] = {"tokens": [f"token_id:{t}" for t in REPLY_IDS], "token_logprobs": REPLY_LOGPROBS}
            if self.mode == "token_ids":
                choice["token_ids"] = REPLY_IDS
            return {"id": "cmpl-1", "object": "text_completion", "choices": [choice]}

        @app.post("/v1/chat/completions")
        async def chat(request: Request):
            body = await request.json()
            self.requests.append(body)
            calls = [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "code_interpreter", "arguments": '{"code": "print(6*7)"}'},
                },
                {"id": "call_1", "type": "function", "function": {"name": "code_interpreter", "arguments": "{oops"}},
            ]
            message = {"role": "assistant", "content": None, "reasoning_content": "think", "tool_calls": calls}
            return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}

        self.app = app

    async def _held(self) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        deadline = time.monotonic() + HOLD_S
        while self.peak < self.hold and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self.in_flight -= 1


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeServer, str]]:
    fake = FakeServer()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(fake.app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        if time.monotonic() > deadline:
            raise RuntimeError("fake server did not start")
        time.sleep(0.02)
    yield fake, f"http://127.0.0.1:{port}"
    uv.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def fake(server) -> FakeServer:
    server[0].requests.clear()
    server[0].mode, server[0].failures = "token_ids", 0
    server[0].hold = server[0].in_flight = server[0].peak = 0
    return server[0]


LIMITS = ContextLimits(prompt_length=100, response_length=50)
PARAMS = {"temperature": 1.0, "top_p": 0.6, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def test_completions_token_in_token_out(server, fake):
    client = OpenAICompletionsClient(server[1], "policy", limits=LIMITS)
    out = asyncio.run(client.generate("r", prompt_ids=list(range(120)), sampling_params=PARAMS))
    assert out.token_ids == REPLY_IDS and out.log_probs == REPLY_LOGPROBS
    body = fake.requests[-1]
    assert body["prompt"] == list(range(120))  # token ids, not text
    assert body["max_tokens"] == 100 + 50 - 120  # verl's budget: min(R, P + R - len(prompt))
    assert (body["top_k"], body["top_p"], body["logprobs"], body["model"]) == (-1, 0.6, 0, "policy")
    assert body["return_token_ids"] is True and body["skip_special_tokens"] is False


def test_completions_without_logprobs_and_with_stop_tokens(server, fake):
    client = OpenAICompletionsClient(server[1], "policy", limits=LIMITS)
    params = {**PARAMS, "logprobs": False, "stop_token_ids": [7], "seed": 3}
    out = asyncio.run(client.generate("r", prompt_ids=[1, 2], sampling_params=params))
    assert out.token_ids == REPLY_IDS and out.log_probs is None
    assert "logprobs" not in fake.requests[-1]
    assert fake.requests[-1]["stop_token_ids"] == [7] and fake.requests[-1]["seed"] == 3


def test_older_vllm_ids_from_logprob_tokens(server, fake):
    fake.mode = "logprob_tokens"
    client = OpenAICompletionsClient(server[1], "policy", limits=LIMITS)
    out = asyncio.run(client.generate("r", prompt_ids=[1], sampling_params=PARAMS))
    assert out.token_ids == REPLY_IDS
    with pytest.raises(OpenAIServerError, match="no token ids"):
        asyncio.run(client.generate("r", prompt_ids=[1], sampling_params={**PARAMS, "logprobs": False}))


def test_retries_then_errors(server, fake):
    client = OpenAICompletionsClient(server[1], "policy", limits=LIMITS, retries=2, backoff_s=0.01)
    fake.failures = 2
    assert asyncio.run(client.generate("r", prompt_ids=[1], sampling_params=PARAMS)).token_ids == REPLY_IDS
    assert len(fake.requests) == 3
    fake.failures = 5
    with pytest.raises(OpenAIServerError, match="after 3 attempts"):
        asyncio.run(client.generate("r", prompt_ids=[1], sampling_params=PARAMS))
    fake.failures, fake.mode = 0, "bad_request"
    with pytest.raises(OpenAIServerError, match="HTTP 400"):
        asyncio.run(client.generate("r", prompt_ids=[1], sampling_params=PARAMS))
    dead = OpenAICompletionsClient("http://127.0.0.1:9", "policy", limits=LIMITS, retries=1, backoff_s=0.01)
    with pytest.raises(OpenAIServerError, match="ConnectError"):
        asyncio.run(dead.generate("r", prompt_ids=[1], sampling_params=PARAMS))


def test_max_concurrency_requests_reach_the_server_at_once(server, fake):
    """max_concurrency is what runs: httpx's default pool (100 connections) held the requests past the 100th."""
    fake.hold = concurrency = 120
    client = OpenAICompletionsClient(server[1], "policy", limits=LIMITS, max_concurrency=concurrency)

    async def burst() -> list:
        try:
            return await asyncio.gather(*(client.generate("r", prompt_ids=[1], sampling_params=PARAMS)
                                          for _ in range(concurrency)))  # fmt: skip
        finally:
            await client.aclose()

    started = time.monotonic()
    outputs = asyncio.run(burst())
    assert fake.peak == concurrency and len(outputs) == concurrency
    assert time.monotonic() - started < HOLD_S  # released when all were in, not by the server's deadline


def test_chat_client_with_tools(server, fake):
    client = OpenAIChatClient(server[1] + "/v1", "teacher")
    tools = [{"type": "function", "function": {"name": "code_interpreter", "parameters": {"type": "object"}}}]
    messages = [{"role": "user", "content": "6*7?"}]
    (choice,) = asyncio.run(
        client.chat(messages, tools=tools, temperature=0.7, max_tokens=64, extra_body={"top_k": 20})
    )
    body = fake.requests[-1]
    assert body["tools"] == tools and body["messages"] == messages and body["top_k"] == 20 and body["max_tokens"] == 64
    assert choice.finish_reason == "tool_calls" and choice.reasoning_content == "think" and choice.content == ""
    assert choice.tool_calls[0] == {
        "id": "call_0",
        "name": "code_interpreter",
        "arguments": {"code": "print(6*7)"},
        "raw_arguments": '{"code": "print(6*7)"}',
    }
    assert choice.tool_calls[1]["arguments"] is None  # a teacher's malformed call is reported, not raised
    assert choice.message["tool_calls"][0]["id"] == "call_0"
