"""In-process Hugging Face generation behind verl's ``server_manager.generate`` interface.

``AgentLoopWorker(cfg, llm_client=HFGenerationClient(...))`` runs verl's own agent loops — prompt building, tool
calls, masks, padding — on a local model with no vLLM and no GPU. Sampling follows vLLM's conventions: temperature 0
is greedy, ``top_k=-1`` disables top-k, ``stop_token_ids`` stop like EOS and are returned, the token budget is the
vLLM server's (:meth:`ContextLimits.max_new_tokens`), and logprobs, one per returned token, follow ``logprobs_mode``
as vLLM does: ``processed_logprobs`` (verl's default; the sampling distribution's — temperature-scaled — logprobs,
which is what verl's actor computes as the old log-prob) or ``raw_logprobs`` (see
:mod:`~verl_cpu.hf_decode`).

Concurrent requests (the trajectories of a batch, each at its own turn) are coalesced: whatever is waiting when the
model frees up is decoded as one left-padded batch (:func:`~verl_cpu.hf_decode.decode_batch`, up
to ``max_batch_size`` rows, each row with its own sampling parameters and seed) in a worker thread, so the event loop
keeps serving the other trajectories' tool calls meanwhile.

Partial rollout (vLLM's ``pause_generation``): :meth:`HFGenerationClient.abort` cuts the batch in flight before its
next token and answers every queued request; each returns the tokens it has with ``stop_reason="aborted"`` until
:meth:`HFGenerationClient.resume`. Every output carries the weight version (``global_steps``) its batch started with,
read under the model lock that :meth:`HFGenerationClient.load_weights` takes, so a version always names the weights
that sampled the tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import threading
from pathlib import Path
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput

from verl_client.token_output import ContextLimits, GenerationClient, make_token_output, model_eos_ids, stop_token_set
from verl_cpu.hf_decode import LOGPROBS_MODES, DecodeRequest, decode_batch, finished
from verl_cpu.scripted import ScriptFn, ScriptRequest, TurnCounter, encode_scripted


@dataclasses.dataclass(frozen=True)
class Decoded:
    """One request's decode: new tokens, their logprobs, the weight version that sampled them, whether it was cut."""

    token_ids: list[int]
    log_probs: list[float]
    global_steps: int | None
    aborted: bool = False


class HFGenerationClient(GenerationClient):
    """verl generation client backed by ``transformers`` ``generate`` on a local causal LM.

    Args:
        model: a ``PreTrainedModel`` (eval mode is set here).
        tokenizer: its tokenizer.
        limits: prompt/response lengths of the rollout (``ContextLimits.from_rollout_config(cfg.actor_rollout_ref
            .rollout)``), used for the default budget.
        max_batch_size: requests decoded together at most (1 = one at a time).
        seed: when set, each call samples from its own generator seeded by (seed, request_id, prompt length), so a run
            is reproducible whatever order the event loop schedules trajectories in and however they are batched (use
            ``rollout.full_determinism`` for stable request ids). A per-request ``seed`` in ``sampling_params``
            (vLLM's key) takes precedence.
        script: optional :data:`ScriptFn`; a turn it returns is forced instead of sampled (its logprobs are still
            the model's: at the request's temperature in ``processed_logprobs`` mode), ``None`` lets the model generate.
        logprobs_mode: ``processed_logprobs`` (verl's ``rollout.logprobs_mode`` default) or ``raw_logprobs``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        limits: ContextLimits,
        max_batch_size: int = 16,
        seed: int | None = None,
        script: ScriptFn | None = None,
        global_steps: int | None = None,
        logprobs_mode: str = "processed_logprobs",
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.limits = limits
        self.seed = seed
        self.script = script
        self.global_steps = global_steps
        if logprobs_mode not in LOGPROBS_MODES:
            raise ValueError(f"logprobs_mode {logprobs_mode!r} is not supported; use one of {LOGPROBS_MODES}")
        self.logprobs_mode = logprobs_mode
        self.eos_ids = model_eos_ids(tokenizer, getattr(model, "generation_config", None))
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]
        self.device = next(model.parameters()).device
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        self.max_batch_size = max_batch_size
        self._model_lock = threading.Lock()
        self._abort = threading.Event()  # read by the decode thread before every token
        self._pending: list[tuple[DecodeRequest, asyncio.Future]] = []
        self._drainer: asyncio.Task | None = None
        self.batch_sizes: list[int] = []  # rows of every decode batch, for tests and tuning
        self._turns = TurnCounter()
        self.num_generated_tokens = 0

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        limits: ContextLimits,
        dtype: torch.dtype = torch.float32,
        device: str = "cpu",
        **kwargs: Any,
    ) -> HFGenerationClient:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(device)  # type: ignore[arg-type]
        return cls(model, tokenizer, limits=limits, **kwargs)

    async def _generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int
    ) -> TokenOutput:
        stop_ids = stop_token_set(self.eos_ids, sampling_params)
        want_logprobs = bool(sampling_params.get("logprobs"))
        turn = self._turns.next(request_id, prompt_ids)

        forced: list[int] | None = None
        if self.script is not None:
            answer = self.script(ScriptRequest(request_id, turn, prompt_ids, self.tokenizer))
            if answer is not None:
                forced = encode_scripted(answer, self.tokenizer, self.eos_ids, stop_ids, max_new)

        if forced is not None:
            temperature = float(sampling_params.get("temperature", 1.0))
            version = self.global_steps
            log_probs = await asyncio.to_thread(self._score, prompt_ids, forced, temperature) if want_logprobs else None
            result = Decoded(forced, log_probs or [], version)
        else:
            seed = self._call_seed(request_id, len(prompt_ids), sampling_params)
            request = DecodeRequest.from_sampling_params(
                prompt_ids,
                sampling_params,
                max_new=max_new,
                stop_ids=stop_ids,
                seed=seed,
                logprobs_mode=self.logprobs_mode,
            )
            result = await self._decode(request)
        self.num_generated_tokens += len(result.token_ids)
        return make_token_output(
            result.token_ids,
            result.log_probs,
            want_logprobs=want_logprobs,
            global_steps=result.global_steps,
            stop_reason="aborted" if result.aborted else "completed",
        )

    def _call_seed(self, request_id: str, prompt_len: int, sampling_params: dict[str, Any]) -> int | None:
        base = sampling_params.get("seed", self.seed)
        if base is None:
            return None
        digest = hashlib.blake2b(f"{base}:{request_id}:{prompt_len}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") & ((1 << 63) - 1)

    async def _decode(self, request: DecodeRequest) -> Decoded:
        if self._abort.is_set():  # arrived between abort and resume (a server's gate normally parks it earlier)
            return Decoded([], [], self.global_steps, aborted=True)
        loop = asyncio.get_running_loop()
        # requests left behind by an event loop that has since ended (asyncio.run per call) can never be answered
        self._pending = [(r, f) for r, f in self._pending if f.get_loop() is loop and not f.done()]
        future = loop.create_future()
        self._pending.append((request, future))
        if self._drainer is None or self._drainer.done():  # one drainer per burst; it exits when nothing is left
            self._drainer = asyncio.ensure_future(self._drain())
        return await future

    async def _drain(self) -> None:
        while self._pending:
            if self._abort.is_set():  # queued requests never start: answered as aborted with no tokens
                for _, future in self._pending:
                    if not future.done():
                        future.set_result(Decoded([], [], self.global_steps, aborted=True))
                self._pending.clear()
                return
            batch = self._pending[: self.max_batch_size]
            del self._pending[: self.max_batch_size]
            try:
                results = await asyncio.to_thread(self._decode_locked, [request for request, _ in batch])
            except Exception as exc:  # fail the requests of this batch, keep serving the others
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            for (_, future), result in zip(batch, results, strict=True):
                if not future.done():
                    future.set_result(result)

    def _decode_locked(self, requests: list[DecodeRequest]) -> list[Decoded]:
        with self._model_lock:
            version = self.global_steps  # the weights this whole batch samples with (loads wait for the lock)
            self.batch_sizes.append(len(requests))
            rows = decode_batch(self.model, requests, pad_id=self.pad_id, should_stop=self._abort.is_set)
        return [
            Decoded(tokens, logprobs, version, aborted=not finished(request, tokens))
            for request, (tokens, logprobs) in zip(requests, rows, strict=True)
        ]

    def abort(self) -> None:
        """Cut the batch in flight before its next token and answer every queued request, as aborted."""
        self._abort.set()

    def resume(self) -> None:
        """Decode again after :meth:`abort`."""
        self._abort.clear()

    @property
    def aborting(self) -> bool:
        return self._abort.is_set()

    async def wait_idle(self) -> None:
        """Return once no batch of this event loop is decoding or queued (after :meth:`abort`: at once, nearly)."""
        drainer = self._drainer
        if drainer is not None and not drainer.done() and drainer.get_loop() is asyncio.get_running_loop():
            await asyncio.shield(drainer)

    def load_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None = None) -> None:
        """Copy new weights into the model between decode batches (a batch in flight finishes on the old ones) and,
        in the same critical section, set the version (``global_steps``) later batches report.

        Every key must be one of the model's, with its shape; keys left out must be tied to one that is given
        (``lm_head.weight`` with tied embeddings). Anything else raises before a single weight is copied: a partial
        update would serve a model nobody trained.
        """
        with self._model_lock, torch.no_grad():
            check_state_dict(self.model, state_dict)
            self.model.load_state_dict(state_dict, strict=False)
            if global_steps is not None:
                self.global_steps = global_steps

    def score(self, prompt_ids: list[int], response_ids: list[int], temperature: float = 1.0) -> list[float]:
        """Logprobs of ``response_ids`` after ``prompt_ids`` under the served model (teacher forcing), in this
        client's ``logprobs_mode`` at ``temperature`` (no top-k / top-p)."""
        return self._score(prompt_ids, response_ids, temperature)

    def _score(self, prompt_ids: list[int], forced: list[int], temperature: float = 1.0) -> list[float]:
        """Model logprobs of forced tokens (teacher forcing), so scripted turns carry real logprobs."""
        if not forced:
            return []
        ids = torch.tensor([prompt_ids + forced], dtype=torch.long, device=self.device)
        with self._model_lock, torch.inference_mode():
            logits = self.model(input_ids=ids).logits[0].float()
        start = len(prompt_ids) - 1
        step_logits = logits[start : start + len(forced)]
        if self.logprobs_mode == "processed_logprobs" and temperature > 0:
            step_logits = step_logits / temperature
        chosen = torch.tensor(forced, device=step_logits.device)
        return torch.log_softmax(step_logits, dim=-1).gather(1, chosen[:, None])[:, 0].tolist()


def check_state_dict(model: Any, state_dict: dict[str, torch.Tensor]) -> None:
    """Raise unless ``state_dict`` covers every weight of ``model`` (tied ones may be left out) with the same shapes."""
    own = model.state_dict(keep_vars=True)
    given_ptrs = {own[key].data_ptr() for key in state_dict if key in own}
    unexpected = sorted(set(state_dict) - set(own))
    missing = sorted(k for k in set(own) - set(state_dict) if own[k].data_ptr() not in given_ptrs)
    reshaped = sorted(k for k in set(state_dict) & set(own) if tuple(state_dict[k].shape) != tuple(own[k].shape))
    if unexpected or missing or reshaped:
        raise ValueError(
            f"weights do not match the served model: unexpected {unexpected[:5]}, missing {missing[:5]}, "
            f"other shape {reshaped[:5]}"
        )
