"""What every generation client shares: verl's token budget, stop tokens and the ``TokenOutput`` it returns.

verl's agent loops call ``server_manager.generate(request_id, *, prompt_ids, sampling_params, **kwargs)`` and expect
``TokenOutput(token_ids, log_probs, stop_reason, ...)`` back, where ``token_ids`` holds only the new tokens *including*
the stop token (``QwenContinuousTokenBuilder`` relies on that to insert the ``\\n`` after ``<|im_end|>``). The budget
follows ``verl/workers/rollout/vllm_rollout/vllm_async_server.py::generate`` so that a run on CPU stops where the same
run on vLLM would.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from verl.workers.rollout.replica import TokenOutput

# sampling_params keys verl's agent loops send (agent_loop.py::generate_sequences, tool_agent_loop.py) plus the vLLM
# keys a caller may add. Anything else is rejected so a typo does not silently sample with defaults.
KNOWN_SAMPLING_KEYS = frozenset(
    {
        "temperature",
        "top_p",
        "top_k",
        "repetition_penalty",
        "logprobs",
        "stop_token_ids",
        "max_tokens",
        "max_new_tokens",
        "ignore_eos",
        "seed",
        "min_tokens",
    }
)

STOP_REASONS = ("completed", "aborted")  # what verl's vLLM server returns (vllm_async_server.py::generate)


@dataclass(frozen=True)
class ContextLimits:
    """Token limits of one rollout, as verl's ``actor_rollout_ref.rollout`` config defines them."""

    prompt_length: int
    response_length: int
    max_model_len: int | None = None  # None = prompt_length + response_length

    @classmethod
    def from_rollout_config(cls, rollout_config: Any) -> ContextLimits:
        return cls(
            prompt_length=int(rollout_config.prompt_length),
            response_length=int(rollout_config.response_length),
            max_model_len=rollout_config.get("max_model_len") if hasattr(rollout_config, "get") else None,
        )

    @property
    def context_len(self) -> int:
        return self.max_model_len or (self.prompt_length + self.response_length)

    def max_new_tokens(self, prompt_len: int, sampling_params: Mapping[str, Any]) -> int:
        """New-token budget for one call, exactly as verl's vLLM server computes it."""
        headroom = self.context_len - prompt_len
        if headroom < 1:
            raise ValueError(
                f"Prompt length ({prompt_len}) leaves no room to generate within the maximum context length "
                f"({self.context_len}); need at least 1 token of headroom."
            )
        if "max_tokens" in sampling_params:
            budget = int(sampling_params["max_tokens"])
        elif "max_new_tokens" in sampling_params:
            budget = int(sampling_params["max_new_tokens"])
        else:
            budget = min(self.response_length, self.prompt_length + self.response_length - prompt_len)
        return max(1, min(budget, headroom))


def check_sampling_params(sampling_params: Mapping[str, Any]) -> None:
    unknown = sorted(set(sampling_params) - KNOWN_SAMPLING_KEYS)
    if unknown:
        raise ValueError(f"unsupported sampling_params {unknown}; supported: {sorted(KNOWN_SAMPLING_KEYS)}")


def stop_token_set(eos_token_ids: Iterable[int], sampling_params: Mapping[str, Any]) -> frozenset[int]:
    """EOS ids of the model plus the request's ``stop_token_ids`` (empty when ``ignore_eos`` is set)."""
    extra = set(sampling_params.get("stop_token_ids") or ())
    if sampling_params.get("ignore_eos"):
        return frozenset(extra)
    return frozenset(set(eos_token_ids) | extra)


def model_eos_ids(tokenizer: Any, generation_config: Any = None) -> list[int]:
    """EOS ids: the generation config's (may be a list) and the tokenizer's."""
    ids: list[int] = []
    gen_eos = getattr(generation_config, "eos_token_id", None) if generation_config is not None else None
    for value in (gen_eos, getattr(tokenizer, "eos_token_id", None)):
        if value is None:
            continue
        for item in value if isinstance(value, list | tuple) else [value]:
            if int(item) not in ids:
                ids.append(int(item))
    if not ids:
        raise ValueError("the tokenizer/generation config define no EOS token; generation could never stop")
    return ids


def make_token_output(
    token_ids: list[int],
    log_probs: list[float] | None,
    *,
    want_logprobs: bool,
    global_steps: int | None = None,
    extra_fields: dict[str, Any] | None = None,
    stop_reason: str = "completed",
) -> TokenOutput:
    """Build the ``TokenOutput`` verl's loops consume; logprobs only when requested, one per token.

    ``stop_reason`` is vLLM's: ``"completed"`` (stop token or budget) or ``"aborted"`` (cut by ``abort_all_requests``;
    verl's ``FullyAsyncLLMServerClient`` re-sends prompt + these tokens after ``resume_generation``).
    """
    if stop_reason not in STOP_REASONS:
        raise ValueError(f"stop_reason must be one of {STOP_REASONS}, got {stop_reason!r}")
    if want_logprobs and (log_probs is None or len(log_probs) != len(token_ids)):
        got = None if log_probs is None else len(log_probs)
        raise ValueError(f"logprobs requested but got {got} for {len(token_ids)} tokens")
    fields = {"global_steps": global_steps, "min_global_steps": global_steps, "max_global_steps": global_steps}
    fields.update(extra_fields or {})
    return TokenOutput(
        token_ids=[int(t) for t in token_ids],
        log_probs=[float(x) for x in log_probs] if want_logprobs and log_probs is not None else None,
        stop_reason=stop_reason,
        num_preempted=0,
        extra_fields=fields,
    )


class GenerationClient(ABC):
    """verl's ``server_manager`` interface: ``generate`` checks the request, subclasses implement :meth:`_generate`.

    ``limits`` (a :class:`ContextLimits`) must be set by the subclass; it gives the token budget of each call.
    """

    limits: ContextLimits

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
        video_data: Any = None,
        audio_data: Any = None,
        mm_processor_kwargs: Any = None,
        **kwargs: Any,  # priority, mm_processor_output: scheduling hints these clients have no use for
    ) -> TokenOutput:
        if image_data is not None or video_data is not None or audio_data is not None:
            raise ValueError(f"{type(self).__name__} is text-only; got multimodal inputs")
        check_sampling_params(sampling_params)
        prompt_ids = [int(t) for t in prompt_ids]
        max_new = self.limits.max_new_tokens(len(prompt_ids), sampling_params)
        return await self._generate(request_id, prompt_ids, sampling_params, max_new)

    @abstractmethod
    async def _generate(
        self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any], max_new: int
    ) -> TokenOutput:
        """Generate at most ``max_new`` tokens (verl's budget) for a checked, text-only request."""
