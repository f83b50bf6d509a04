"""Scripted turns: fixed assistant responses for deterministic tests and the loop-overhead benchmark.

A *script* is a callable ``script(request) -> str | ScriptedTurn | None`` that sees which trajectory
(``request.request_id``) and which of its assistant turns (``request.turn``, 0-based) is being generated. Returning
``None`` means "no scripted answer": :class:`ScriptedClient` then raises, while
:class:`~verl_cpu.hf_client.HFGenerationClient` generates with its model.
:func:`turns` builds the common case, the same list of turns for every trajectory.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from verl.workers.rollout.replica import TokenOutput

from verl_client.token_output import ContextLimits, GenerationClient, make_token_output, model_eos_ids, stop_token_set


@dataclass(frozen=True)
class ScriptedTurn:
    """One forced assistant turn: ``text`` (tokenized without special-token parsing surprises) or raw ``token_ids``.

    ``stop=True`` appends the model's EOS (``<|im_end|>``) unless the turn already ends with a stop token, as an
    engine does when the model stops by itself; ``stop=False`` leaves the turn open (it then runs into the budget).
    """

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    stop: bool = True

    def __post_init__(self) -> None:
        if (self.text is None) == (self.token_ids is None):
            raise ValueError("ScriptedTurn needs exactly one of text or token_ids")


@dataclass
class ScriptRequest:
    """What a script sees for one ``generate`` call."""

    request_id: str
    turn: int  # 0-based index of this assistant turn within the trajectory (request_id)
    prompt_ids: list[int]
    tokenizer: Any

    @cached_property
    def prompt_text(self) -> str:
        return self.tokenizer.decode(self.prompt_ids, skip_special_tokens=False)


ScriptFn = Callable[[ScriptRequest], "str | ScriptedTurn | None"]


def turns(*responses: str | ScriptedTurn, then: str | ScriptedTurn | None = None) -> ScriptFn:
    """A script giving every trajectory the same turns; after the last one, ``then`` (None = unscripted)."""
    fixed = list(responses)

    def script(request: ScriptRequest) -> str | ScriptedTurn | None:
        return fixed[request.turn] if request.turn < len(fixed) else then

    return script


class TurnCounter:
    """Assistant-turn index per trajectory, LRU-bounded (a long data-prep run must not grow it without limit).

    A trajectory is a request id whose prompts extend each other; a prompt that does not extend the previous one
    under the same id starts a new trajectory (verl reuses ``det-<priority>`` ids every step under
    ``rollout.full_determinism``).
    """

    def __init__(self, capacity: int = 65536):
        self._state: OrderedDict[str, tuple[int, int, int]] = OrderedDict()  # id -> (turn, prompt len, prompt hash)
        self._capacity = capacity

    def next(self, request_id: str, prompt_ids: Sequence[int]) -> int:
        turn, length, digest = self._state.pop(request_id, (-1, 0, hash(())))
        continues = len(prompt_ids) > length and hash(tuple(prompt_ids[:length])) == digest
        turn = turn + 1 if continues else 0
        self._state[request_id] = (turn, len(prompt_ids), hash(tuple(prompt_ids)))
        if len(self._state) > self._capacity:
            self._state.popitem(last=False)
        return turn


def encode_scripted(
    answer: str | ScriptedTurn, tokenizer: Any, eos_ids: Sequence[int], stop_ids: frozenset[int], max_new: int
) -> list[int]:
    """Token ids of a scripted turn, with EOS appended when it stops, cut to the budget like an engine would."""
    turn = answer if isinstance(answer, ScriptedTurn) else ScriptedTurn(text=answer)
    if turn.token_ids is not None:
        ids = list(turn.token_ids)
    else:
        ids = list(tokenizer.encode(turn.text, add_special_tokens=False))
    if turn.stop and not (ids and ids[-1] in stop_ids):
        ids.append(int(eos_ids[0]))
    for position, token in enumerate(ids):  # an engine stops at the first stop token
        if token in stop_ids:
            ids = ids[: position + 1]
            break
    return ids[:max_new]


class ScriptedClient(GenerationClient):
    """A generation client with no model: every turn comes from ``script``; logprobs are a constant placeholder.

    Zero latency by design — the loop-overhead benchmark measures everything *but* generation with it.
    """

    def __init__(
        self,
        tokenizer: Any,
        script: ScriptFn,
        *,
        limits: ContextLimits,
        logprob: float = -1.0,
        global_steps: int | None = None,
        record_calls: bool = False,
    ):
        self.tokenizer = tokenizer
        self.script = script
        self.limits = limits
        self.logprob = float(logprob)
        self.global_steps = global_steps
        self.eos_ids = model_eos_ids(tokenizer)
        self._turns = TurnCounter()
        self.calls: list[ScriptRequest] = []  # every request seen, with record_calls (tests); unbounded, so off
        self.record_calls = record_calls

    async def _generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int
    ) -> TokenOutput:
        request = ScriptRequest(request_id, self._turns.next(request_id, prompt_ids), list(prompt_ids), self.tokenizer)
        if self.record_calls:
            self.calls.append(request)
        answer = self.script(request)
        if answer is None:
            raise LookupError(f"script has no turn {request.turn} for request {request_id!r}")
        stop_ids = stop_token_set(self.eos_ids, sampling_params)
        ids = encode_scripted(answer, self.tokenizer, self.eos_ids, stop_ids, max_new)
        await asyncio.sleep(0)  # yield like a real client would, so concurrent trajectories interleave
        want = bool(sampling_params.get("logprobs"))
        return make_token_output(ids, [self.logprob] * len(ids), want_logprobs=want, global_steps=self.global_steps)
