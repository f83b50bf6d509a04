"""In-process Hugging Face generation behind verl's ``server_manager.generate`` interface.

``AgentLoopWorker(cfg, llm_client=HFGenerationClient(...))`` runs verl's own agent loops — prompt building, tool
calls, masks, padding — on a local model with no vLLM and no GPU. Sampling follows vLLM's conventions: temperature 0
is greedy, ``top_k=-1`` disables top-k, ``stop_token_ids`` stop like EOS and are returned, the token budget is the
vLLM server's (:meth:`ContextLimits.max_new_tokens`), and logprobs are the *raw* model logprobs of the chosen tokens
(vLLM's default ``logprobs_mode``), one per returned token.

Calls are serialized on the model (one lock; HF ``generate`` and the global RNG are not safe to share between
threads) and run in a worker thread so the event loop keeps serving the other trajectories' tool calls.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from typing import Any

import torch
from verl.workers.rollout.replica import TokenOutput

from agentrl_recipe.generation.common import (
    ContextLimits,
    GenerationClient,
    make_token_output,
    model_eos_ids,
    stop_token_set,
)
from agentrl_recipe.generation.scripted import ScriptFn, ScriptRequest, TurnCounter, encode_scripted


class HFGenerationClient(GenerationClient):
    """verl generation client backed by ``transformers`` ``generate`` on a local causal LM.

    Args:
        model: a ``PreTrainedModel`` (eval mode is set here).
        tokenizer: its tokenizer.
        limits: prompt/response lengths of the rollout (``ContextLimits.from_rollout_config(cfg.actor_rollout_ref
            .rollout)``), used for the default budget.
        max_concurrency: requests admitted at once; the model itself runs one at a time.
        seed: when set, each call samples from a generator seeded by (seed, request_id, prompt length), so a run is
            reproducible whatever order the event loop schedules trajectories in. A per-request ``seed`` in
            ``sampling_params`` (vLLM's key) takes precedence.
        script: optional :data:`ScriptFn`; a turn it returns is forced instead of sampled (its logprobs are still
            the model's), ``None`` lets the model generate.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        limits: ContextLimits,
        max_concurrency: int = 1,
        seed: int | None = None,
        script: ScriptFn | None = None,
        global_steps: int | None = None,
    ):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.limits = limits
        self.seed = seed
        self.script = script
        self.global_steps = global_steps
        self.eos_ids = model_eos_ids(tokenizer, getattr(model, "generation_config", None))
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad) if pad is not None else self.eos_ids[0]
        self.device = next(model.parameters()).device
        self._semaphore = asyncio.Semaphore(max_concurrency)
        self._model_lock = threading.Lock()
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
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=dtype).to(device)
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

        async with self._semaphore:
            if forced is not None:
                token_ids = forced
                log_probs = await asyncio.to_thread(self._score, prompt_ids, forced) if want_logprobs else None
            else:
                seed = self._call_seed(request_id, len(prompt_ids), sampling_params)
                token_ids, log_probs = await asyncio.to_thread(
                    self._sample, prompt_ids, sampling_params, max_new, stop_ids, seed, want_logprobs
                )
        self.num_generated_tokens += len(token_ids)
        return make_token_output(token_ids, log_probs, want_logprobs=want_logprobs, global_steps=self.global_steps)

    def _call_seed(self, request_id: str, prompt_len: int, sampling_params: dict[str, Any]) -> int | None:
        base = sampling_params.get("seed", self.seed)
        if base is None:
            return None
        digest = hashlib.blake2b(f"{base}:{request_id}:{prompt_len}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "little") & ((1 << 63) - 1)

    def _sample(
        self,
        prompt_ids: list[int],
        params: dict[str, Any],
        max_new: int,
        stop_ids: frozenset[int],
        seed: int | None,
        want_logprobs: bool,
    ) -> tuple[list[int], list[float] | None]:
        from transformers import GenerationConfig

        temperature = float(params.get("temperature", 1.0))
        greedy = temperature <= 0.0
        top_k = int(params.get("top_k", -1))
        config = GenerationConfig(
            max_new_tokens=max_new,
            min_new_tokens=min(int(params.get("min_tokens", 0)), max_new),
            do_sample=not greedy,
            temperature=None if greedy else temperature,
            top_p=None if greedy else float(params.get("top_p", 1.0)),
            top_k=None if greedy else (0 if top_k < 0 else top_k),  # vLLM: -1 = off; HF: 0 = off
            repetition_penalty=float(params.get("repetition_penalty", 1.0)),
            eos_token_id=sorted(stop_ids) if stop_ids else None,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_logits=want_logprobs,
        )
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=self.device)
        with self._model_lock, torch.inference_mode(), torch.random.fork_rng(devices=[], enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            out = self.model.generate(
                input_ids=input_ids, attention_mask=torch.ones_like(input_ids), generation_config=config
            )
        new_ids = out.sequences[0, len(prompt_ids) :].tolist()
        for position, token in enumerate(new_ids):  # keep the stop token, drop anything after it
            if token in stop_ids:
                new_ids = new_ids[: position + 1]
                break
        if not want_logprobs:
            return new_ids, None
        logits = torch.stack([step[0] for step in out.logits[: len(new_ids)]]).float()
        chosen = torch.tensor(new_ids, device=logits.device)
        log_probs = torch.log_softmax(logits, dim=-1).gather(1, chosen[:, None])[:, 0]
        return new_ids, log_probs.tolist()

    def _score(self, prompt_ids: list[int], forced: list[int]) -> list[float]:
        """Raw model logprobs of forced tokens (teacher forcing), so scripted turns carry real logprobs."""
        if not forced:
            return []
        ids = torch.tensor([prompt_ids + forced], dtype=torch.long, device=self.device)
        with self._model_lock, torch.inference_mode():
            logits = self.model(input_ids=ids).logits[0].float()
        start = len(prompt_ids) - 1
        step_logits = logits[start : start + len(forced)]
        chosen = torch.tensor(forced, device=step_logits.device)
        return torch.log_softmax(step_logits, dim=-1).gather(1, chosen[:, None])[:, 0].tolist()
