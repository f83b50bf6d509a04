"""Clients for an OpenAI-compatible server (vLLM ``vllm serve``): token-in/token-out rollouts and teacher chat.

:class:`OpenAICompletionsClient` implements verl's ``server_manager.generate`` over ``POST /v1/completions``: the
prompt goes as token ids, the reply's token ids come back through vLLM's ``return_token_ids`` (vLLM ≥ 0.10.2; older
servers: ``return_tokens_as_token_ids`` logprob tokens ``"token_id:<id>"``), so nothing is re-tokenized and the
ids — stop token included, as vLLM's ``CompletionOutput.token_ids`` has it — match what the server sampled. The
token budget is verl's (:class:`ContextLimits`), computed here because the server does not know verl's lengths.

:class:`OpenAIChatClient` talks ``POST /v1/chat/completions`` with tools, for teacher models in data prep (the server
applies its chat template and tool parser, e.g. ``--enable-auto-tool-choice --tool-call-parser hermes``).

Both retry connection errors and 5xx/429 replies with exponential backoff and bound in-flight requests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from typing import Any

import httpx
from verl.workers.rollout.replica import TokenOutput

from verl_client.token_output import ContextLimits, GenerationClient, check_sampling_params, make_token_output

logger = logging.getLogger(__name__)

_RETRY_STATUS = {429, 500, 502, 503, 504}
_TOKEN_ID_PREFIX = "token_id:"  # vLLM's return_tokens_as_token_ids spelling of a logprob token


class OpenAIServerError(RuntimeError):
    """The server answered with an error, or kept failing after the retries."""


class _JSONPoster:
    """``POST`` JSON with bounded concurrency and retries (connection errors, 429, 5xx)."""

    def __init__(
        self, base_url: str, api_key: str | None, timeout_s: float, max_concurrency: int, retries: int, backoff_s: float
    ):
        self.base_url = base_url.rstrip("/")
        if not self.base_url.endswith("/v1"):
            self.base_url += "/v1"
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = httpx.Timeout(timeout_s)
        self.retries = retries
        self.backoff_s = backoff_s
        self._semaphore = asyncio.Semaphore(max_concurrency)
        # A connection per request the semaphore lets through, each kept for the next: httpx's defaults (100
        # connections, 20 kept) held requests past the 100th in its own pool, so max_concurrency=256 ran 100 at once,
        # and closed all but 20 connections after each answer.
        self.limits = httpx.Limits(max_connections=max_concurrency, max_keepalive_connections=max_concurrency)
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def _http(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # an httpx client is bound to one event loop
            self._client = httpx.AsyncClient(timeout=self.timeout, headers=self.headers, limits=self.limits)
            self._client_loop = loop
        return self._client

    async def post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        last_error: str = ""
        async with self._semaphore:
            for attempt in range(self.retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff_s * 2 ** (attempt - 1))
                try:
                    reply = await self._http().post(url, json=payload)
                except (httpx.TransportError, httpx.TimeoutException) as e:
                    last_error = f"{type(e).__name__}: {e}"
                    continue
                if reply.status_code in _RETRY_STATUS:
                    last_error = f"HTTP {reply.status_code}: {reply.text[:500]}"
                    continue
                if reply.status_code != 200:
                    raise OpenAIServerError(f"{url} answered HTTP {reply.status_code}: {reply.text[:1000]}")
                return reply.json()
        raise OpenAIServerError(f"{url} failed after {self.retries + 1} attempts; last error: {last_error}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None


class OpenAICompletionsClient(GenerationClient):
    """verl generation client over a vLLM server's ``/v1/completions`` (token ids in, token ids + logprobs out).

    Args:
        base_url: e.g. ``http://node:8000`` (``/v1`` is appended when missing).
        model: the served model name.
        limits: the rollout's lengths, for verl's default token budget; ``max_model_len`` should be the server's.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        limits: ContextLimits,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_concurrency: int = 256,
        retries: int = 3,
        backoff_s: float = 1.0,
        global_steps: int | None = None,
    ):
        self.model = model
        self.limits = limits
        self.global_steps = global_steps
        self._http = _JSONPoster(base_url, api_key, timeout_s, max_concurrency, retries, backoff_s)

    def request_payload(
        self, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int | None = None
    ) -> dict[str, Any]:
        """The ``/v1/completions`` body for one verl ``generate`` call (vLLM's extra sampling keys included);
        ``max_new`` defaults to verl's budget for this prompt."""
        if max_new is None:
            check_sampling_params(sampling_params)
            max_new = self.limits.max_new_tokens(len(prompt_ids), sampling_params)
        payload: dict[str, Any] = {
            "model": self.model,
            "prompt": [int(t) for t in prompt_ids],
            "max_tokens": max_new,
            "temperature": float(sampling_params.get("temperature", 1.0)),
            "top_p": float(sampling_params.get("top_p", 1.0)),
            "top_k": int(sampling_params.get("top_k", -1)),
            "repetition_penalty": float(sampling_params.get("repetition_penalty", 1.0)),
            "skip_special_tokens": False,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
        }
        if sampling_params.get("logprobs"):
            payload["logprobs"] = 0  # the sampled token's logprob only, as verl's vLLM server asks for
        for key in ("stop_token_ids", "seed", "ignore_eos"):
            if sampling_params.get(key) is not None:
                payload[key] = sampling_params[key]
        if sampling_params.get("min_tokens"):
            payload["min_tokens"] = int(sampling_params["min_tokens"])
        return payload

    async def _generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int
    ) -> TokenOutput:
        payload = self.request_payload(prompt_ids, sampling_params, max_new)
        reply = await self._http.post("/completions", payload)
        token_ids, log_probs = parse_completion_choice(reply)
        want = bool(sampling_params.get("logprobs"))
        return make_token_output(token_ids, log_probs, want_logprobs=want, global_steps=self.global_steps)

    async def aclose(self) -> None:
        await self._http.aclose()


def parse_completion_choice(reply: dict[str, Any]) -> tuple[list[int], list[float] | None]:
    """Token ids and per-token logprobs of the first choice of a ``/v1/completions`` reply."""
    try:
        choice = reply["choices"][0]
    except (KeyError, IndexError, TypeError) as e:
        raise OpenAIServerError(f"completions reply has no choices: {str(reply)[:500]}") from e
    logprobs = choice.get("logprobs") or {}
    token_logprobs = logprobs.get("token_logprobs")
    token_ids = choice.get("token_ids")
    if token_ids is None:  # servers without return_token_ids: read ids off the logprob tokens
        tokens = logprobs.get("tokens")
        if not tokens or not all(isinstance(t, str) and t.startswith(_TOKEN_ID_PREFIX) for t in tokens):
            raise OpenAIServerError(
                "the server returned no token ids: it needs vLLM >= 0.10.2 (return_token_ids) or "
                "return_tokens_as_token_ids with logprobs"
            )
        token_ids = [int(t[len(_TOKEN_ID_PREFIX) :]) for t in tokens]
    log_probs = None
    if token_logprobs is not None:
        if len(token_logprobs) != len(token_ids):
            raise OpenAIServerError(f"{len(token_logprobs)} logprobs for {len(token_ids)} tokens")
        log_probs = [float(x) if x is not None else 0.0 for x in token_logprobs]
    return [int(t) for t in token_ids], log_probs


@dataclasses.dataclass
class ChatChoice:
    """One chat completion: the assistant message as the server returned it, plus parsed tool calls."""

    content: str
    reasoning_content: str | None
    # [{"id", "name", "arguments": dict | None, "raw_arguments"}]; arguments is None when not a JSON object
    tool_calls: list[dict[str, Any]]
    finish_reason: str | None
    message: dict[str, Any]  # the raw assistant message (OpenAI format), ready to append to the conversation


class OpenAIChatClient:
    """``/v1/chat/completions`` with tools, for teacher models (data prep) against vLLM or any compatible server."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout_s: float = 600.0,
        max_concurrency: int = 64,
        retries: int = 3,
        backoff_s: float = 1.0,
    ):
        self.model = model
        self._http = _JSONPoster(base_url, api_key, timeout_s, max_concurrency, retries, backoff_s)

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        n: int = 1,
        temperature: float = 1.0,
        top_p: float = 1.0,
        max_tokens: int | None = None,
        extra_body: dict[str, Any] | None = None,
    ) -> list[ChatChoice]:
        """``n`` completions of ``messages``; ``extra_body`` adds server-specific keys (e.g. ``top_k``)."""
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "n": n,
            "temperature": temperature,
            "top_p": top_p,
        }
        if tools:
            payload["tools"] = tools
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        payload.update(extra_body or {})
        reply = await self._http.post("/chat/completions", payload)
        choices = reply.get("choices")
        if not choices:
            raise OpenAIServerError(f"chat reply has no choices: {str(reply)[:500]}")
        return [_chat_choice(choice) for choice in choices]

    async def aclose(self) -> None:
        await self._http.aclose()


def _chat_choice(choice: dict[str, Any]) -> ChatChoice:
    message = dict(choice.get("message") or {})
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        raw = function.get("arguments")
        try:
            arguments = json.loads(raw) if isinstance(raw, str) else raw
        except json.JSONDecodeError:
            arguments = None
        if not isinstance(arguments, dict):  # a teacher's malformed call: the caller decides (skip, retry, ...)
            arguments = None
        calls.append({"id": call.get("id"), "name": function.get("name"), "arguments": arguments, "raw_arguments": raw})
    return ChatChoice(
        content=message.get("content") or "",
        reasoning_content=message.get("reasoning_content") or message.get("reasoning"),
        tool_calls=calls,
        finish_reason=choice.get("finish_reason"),
        message=message,
    )
