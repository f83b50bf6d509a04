"""A rollout server with vLLM's partial-rollout contract, for the agent-loop tests (uniquely named module).

verl's vLLM server cannot run on CPU. ``agentrl_hf`` keeps the same contract (``abort_all_requests`` cuts the batch
in flight, which returns its tokens with ``stop_reason="aborted"``, and ``resume_generation`` reopens the gate), but a
real model's turns and timing are not scripted, so this Ray actor plays the server side of verl 0.9.1's partial
rollout exactly as ``vllm_async_server.py`` does it, one token at a time, where a test can land a weight update at a
chosen token: ``abort_all_requests`` closes the admission gate and ends every in-flight request with the tokens
generated so far and ``stop_reason="aborted"``; requests that arrive behind the closed gate park until
``resume_generation``; every output carries ``extra_fields["global_steps"]`` = the weight version that generated it.
The "model" writes scripted assistant turns one token at a time; each token's log-prob encodes the weight version
that sampled it (``logprob_of(version)``), so a test can see which version wrote which token.
"""

from __future__ import annotations

import asyncio
from typing import Any

from transformers import AutoTokenizer
from verl.workers.rollout.replica import TokenOutput

HEADER = "<|im_start|>assistant\n"


def logprob_of(version: int) -> float:
    return -0.25 * (version + 1)


class AbortableScriptedServer:
    def __init__(self, model_dir: str, turns: list[str], token_delay_s: float):
        self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
        self.header = self.tokenizer.encode(HEADER, add_special_tokens=False)
        end = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.turns = [self.tokenizer.encode(text, add_special_tokens=False) + [end] for text in turns]
        self.delay = token_delay_s
        self.version = 0
        self.events: list[tuple[str, int, int]] = []  # (what, turn, tokens so far)
        self.generated = 0
        self.parked = 0  # requests that arrived behind the closed gate
        self._abort = asyncio.Event()
        self._open = asyncio.Event()
        self._open.set()

    def _position(self, prompt_ids: list[int]) -> tuple[int, int]:
        """(turn index, tokens of that turn already in the prompt) — a resumed request carries its partial tokens."""
        starts = [i for i in range(len(prompt_ids)) if prompt_ids[i : i + len(self.header)] == self.header]
        turn = len(starts) - 1
        done = prompt_ids[starts[-1] + len(self.header) :]
        expected = self.turns[turn][: len(done)]
        if done != expected:
            raise AssertionError(f"turn {turn}: the resumed prefix {done} is not the turn's first tokens {expected}")
        return turn, len(done)

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict, **kwargs: Any):
        if not self._open.is_set():
            self.parked += 1
        await self._open.wait()
        turn, done = self._position(list(prompt_ids))
        self.events.append(("start", turn, done))
        version, out = self.version, []
        for token in self.turns[turn][done:]:
            if self._abort.is_set():
                self.events.append(("aborted", turn, done + len(out)))
                return self._output(out, version, "aborted")
            await asyncio.sleep(self.delay)
            out.append(token)
            self.generated += 1
        self.events.append(("completed", turn, done + len(out)))
        return self._output(out, version, "completed")

    def _output(self, tokens: list[int], version: int, reason: str) -> TokenOutput:
        extra = {"global_steps": version}
        return TokenOutput(
            token_ids=tokens, log_probs=[logprob_of(version)] * len(tokens), stop_reason=reason, extra_fields=extra
        )

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        self._open.clear()
        self._abort.set()
        await asyncio.sleep(self.delay * 4)  # let every in-flight request see the flag and return

    async def update_weights(self, version: int) -> None:
        self.version = version

    async def resume_generation(self) -> None:
        self._abort.clear()
        self._open.set()

    def state(self) -> dict[str, Any]:
        return {
            "events": list(self.events),
            "generated": self.generated,
            "parked": self.parked,
            "version": self.version,
            "turn_tokens": [list(turn) for turn in self.turns],
            "turn_lengths": [len(turn) for turn in self.turns],
        }
