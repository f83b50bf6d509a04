"""``agentrl_hf``: a verl rollout replica that generates with Hugging Face ``transformers`` in a Ray actor on CPU.

verl's ``AgentLoopWorker`` reaches a replica's server through ``LLMServerClient.generate``
(``verl/workers/rollout/llm_server.py``), which calls ``server.generate.remote(request_id=, prompt_ids=,
sampling_params=, image_data=, video_data=, **kw)`` and expects a ``TokenOutput``. :class:`HFServer` answers it with
:class:`~verl_cpu.hf_client.HFGenerationClient` (concurrent requests coalesced into batches,
per-request sampling parameters and seeds, token ids in and out, logprobs in the rollout's ``logprobs_mode``).

Weights: the server loads ``actor_rollout_ref.model.path`` at the rollout's ``dtype``; after every actor update the
in-worker :class:`~verl_cpu.hf_rollout.HFServerAdapter` sends it one CPU state dict
(:meth:`HFServer.update_weights`), loaded between decode batches.

What verl's trainer calls and what it does here (``replica.py``, ``checkpoint_engine/base.py``):
- ``sleep`` / ``wake_up`` (hybrid: around every weight sync), ``clear_kv_cache``, ``release_kv_cache`` /
  ``resume_kv_cache`` (non-naive sync): nothing to do — the model lives in host memory and each decode batch's KV
  cache is freed when the batch ends;
- ``abort_all_requests`` / ``resume_generation`` (partial rollout; colocate_async after sampling, every non-naive
  sync): vLLM's contract (``vllm_async_server.py``). Abort closes the admission gate, cuts the decode batch in flight
  before its next token and returns once it has: each request in flight or queued gets the tokens it has with
  ``stop_reason="aborted"``, which verl's ``FullyAsyncLLMServerClient`` re-sends as prompt + tokens after the resume.
  Requests that arrive behind the closed gate wait for ``resume_generation`` — or, after
  ``abort_all_requests(reject_request=True)``, come back at once as aborted with no tokens;
- ``start_profile`` / ``stop_profile``: no profiler; logged as ignored.

Every output's ``extra_fields["global_steps"]`` is the version its decode batch started with (set together with the
weights, under the model lock), so verl's ``min/max_global_steps`` and staleness metrics name the weights that
sampled each token.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
from verl.utils.fs import copy_to_local
from verl.utils.torch_dtypes import PrecisionType
from verl.workers.rollout.replica import RolloutReplica, TokenOutput

from verl_client.token_output import ContextLimits, make_token_output
from verl_cpu import names
from verl_cpu.hf_client import HFGenerationClient
from verl_cpu.hf_rollout import server_name

logger = logging.getLogger(__name__)


def model_source(model_config: Any) -> tuple[str, str, bool]:
    """(model dir, tokenizer dir, trust_remote_code) from verl's ``actor_rollout_ref.model`` (DictConfig or
    ``HFModelConfig``), copied to local disk by verl's own ``copy_to_local`` (hdfs:// etc.)."""
    path = model_config.get("local_path") or model_config.get("path")
    if not path:
        raise ValueError(f"{names.ROLLOUT_REPLICA}: actor_rollout_ref.model.path is not set")
    tokenizer = model_config.get("local_tokenizer_path") or model_config.get("tokenizer_path") or path
    return copy_to_local(path), copy_to_local(tokenizer), bool(model_config.get("trust_remote_code", False))


def load_client(config: Any, model_config: Any, replica_rank: int) -> HFGenerationClient:
    """The generation client of one replica: the HF model on CPU at ``rollout.dtype``."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir, tokenizer_dir, trust = model_source(model_config)
    override = model_config.get("override_config") or {}
    extra = {"attn_implementation": override["attn_implementation"]} if override.get("attn_implementation") else {}
    model = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=PrecisionType.to_dtype(config.dtype), trust_remote_code=trust, **extra
    )
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir, trust_remote_code=trust)
    return HFGenerationClient(
        model,
        tokenizer,
        limits=ContextLimits.from_rollout_config(config),
        max_batch_size=int(config.max_num_seqs),
        seed=int(config.seed) + replica_rank,  # as verl's vLLM server seeds its engine
        logprobs_mode=config.logprobs_mode,
    )


class AdmissionGate:
    """vLLM's submission gate (``_park_until_admitted``): closed between ``abort_all_requests`` and
    ``resume_generation``; a request behind it waits, or is turned away when the abort asked to reject."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self.rejecting = False
        self.parked = 0  # requests that have waited behind the gate (for tests and logs)

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    def close(self, reject: bool) -> None:
        self._open.clear()
        self.rejecting = reject  # re-declared by every abort, cleared by the resume (as vLLM does)

    def open(self) -> None:
        self.rejecting = False
        self._open.set()

    async def admit(self) -> bool:
        """Wait until open; False when the request is to be turned away instead."""
        while not self._open.is_set():
            if self.rejecting:
                return False
            self.parked += 1
            await self._open.wait()
        return True


class HFServer:
    """The server actor of one ``agentrl_hf`` replica (wrapped with ``ray.remote`` by :class:`HFReplica`)."""

    def __init__(self, config: Any, model_config: Any, replica_rank: int):
        self.replica_rank = replica_rank
        self.client = load_client(config, model_config, replica_rank)
        self.weight_version = 0  # how many updates this server has loaded
        self.gate = AdmissionGate()
        self.in_flight: set[str] = set()  # request ids admitted and not yet answered

    def ready(self) -> dict[str, Any]:
        model = self.client.model
        return {"dtype": str(next(model.parameters()).dtype), "device": str(self.client.device)}

    async def generate(
        self,
        request_id: str,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: Any = None,
        video_data: Any = None,
        **kwargs: Any,
    ) -> TokenOutput:
        if not await self.gate.admit():
            return make_token_output(
                [], None, want_logprobs=False, global_steps=self.client.global_steps, stop_reason="aborted"
            )
        self.in_flight.add(request_id)
        try:
            return await self.client.generate(
                request_id,
                prompt_ids=prompt_ids,
                sampling_params=sampling_params,
                image_data=image_data,
                video_data=video_data,
                **kwargs,
            )
        finally:
            self.in_flight.discard(request_id)

    async def update_weights(self, state_dict: dict[str, torch.Tensor], global_steps: int | None = None) -> int:
        """Load a full state dict (between decode batches); returns the new weight version."""
        await asyncio.to_thread(self.client.load_weights, state_dict, global_steps)
        self.weight_version += 1
        return self.weight_version

    async def compute_log_probs(
        self, prompt_ids: list[int], response_ids: list[int], temperature: float
    ) -> list[float]:
        """Logprobs of a fixed response under the served weights (``logprobs_mode`` at ``temperature``)."""
        return await asyncio.to_thread(self.client.score, list(prompt_ids), list(response_ids), temperature)

    def get_weight_version(self) -> int:
        return self.weight_version

    async def sleep(self) -> None:
        return None

    async def wake_up(self, tags: list[str] | None = None) -> None:
        return None

    async def clear_kv_cache(self) -> None:
        return None

    async def release_kv_cache(self) -> None:
        return None

    async def resume_kv_cache(self) -> None:
        return None

    async def abort_all_requests(self, reject_request: bool = False) -> dict[str, Any]:
        """Close the gate, cut what is decoding or queued, and return once nothing is (vLLM's pause_generation)."""
        self.gate.close(reject_request)
        request_ids = sorted(self.in_flight)
        self.client.abort()
        await self.client.wait_idle()
        if request_ids:
            logger.info(
                "%s replica %d: aborted %d requests", names.ROLLOUT_REPLICA, self.replica_rank, len(request_ids)
            )
        return {"aborted_count": len(request_ids), "request_ids": request_ids}  # vLLM's answer

    async def resume_generation(self) -> None:
        self.client.resume()
        self.gate.open()

    def gate_state(self) -> dict[str, Any]:
        return {"open": self.gate.is_open, "rejecting": self.gate.rejecting, "parked": self.gate.parked}

    async def start_profile(self, **kwargs: Any) -> None:
        logger.warning("%s has no profiler; start_profile ignored", names.ROLLOUT_REPLICA)

    async def stop_profile(self) -> None:
        return None


class HFReplica(RolloutReplica):
    """verl ``RolloutReplica`` for ``actor_rollout_ref.rollout.name: agentrl_hf``: one CPU server actor per replica."""

    def rollout_worker_use_gpu(self) -> bool:
        return False

    def _kind(self) -> str:
        return "reward_" if self.is_reward_model else "teacher_" if self.is_teacher_model else ""

    async def _scheduling(self) -> dict[str, Any]:
        if not self.workers:
            return {}
        node_id = await self.workers[0].__ray_call__.remote(lambda _self: ray.get_runtime_context().get_node_id())
        return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)}

    async def launch_servers(self) -> None:
        name = server_name(self.replica_rank, self._kind(), self.name_suffix)
        server: Any = (  # an actor handle: Ray's stubs type its methods as plain callables
            ray.remote(HFServer)
            .options(name=name, max_concurrency=self.max_concurrency, **await self._scheduling())
            .remote(config=self.config, model_config=self.model_config, replica_rank=self.replica_rank)
        )
        info = await server.ready.remote()  # raises here, with the load error, if the model cannot be served
        logger.info("%s server %s ready (%s)", names.ROLLOUT_REPLICA, name, info)
        self.servers = [server]
        self._server_handle = server
        self._server_address = f"{names.ROLLOUT_REPLICA}://{name}"  # a key for verl's load balancer, not HTTP
