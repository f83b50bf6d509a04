"""The ``agentrl_hf`` rollout through verl's own classes: ``LLMServerManager`` builds the replica from the registry
(standalone mode: verl's resource pool and ``CheckpointEngineWorker`` hosting our ``HFServerAdapter``), its client
generates, weights are pushed by verl's ``CheckpointEngineManager`` through the ``agentrl_ray`` engine from a trainer
in another process, and the returned logprobs are what verl's actor computes for the same tokens — before and after
the push. The server's admission gate (partial rollout) parks or rejects requests between abort and resume.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import ray
import torch
from engine_peers import EnginePeer, PeerGroup
from transformers import AutoModelForCausalLM
from verl.checkpoint_engine import CheckpointEngineManager
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.torch_functional import logprobs_from_logits

from agentrl_recipe.offline.rollout import compose_config
from verl_cpu import names
from verl_cpu.hf_rollout import HFServerAdapter, drain_weights, server_name

HERE = Path(__file__).resolve().parent
PROMPT = [5, 17, 42, 99, 7, 311, 12]
TEMPERATURE = 0.7
SAMPLING = {"temperature": TEMPERATURE, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def _config(model_dir: Path):
    return compose_config(
        model_dir,
        prompt_length=32,
        response_length=12,
        overrides=[
            f"actor_rollout_ref.rollout.name={names.ROLLOUT_REPLICA}",
            "actor_rollout_ref.rollout.nnodes=1",
            "actor_rollout_ref.rollout.n_gpus_per_node=1",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=1",
            "actor_rollout_ref.rollout.dtype=float32",
            f"actor_rollout_ref.rollout.checkpoint_engine.backend={names.CHECKPOINT_ENGINE}",
            "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=1",
        ],
    )


def actor_logprobs(model, prompt: list[int], response: list[int], temperature: float) -> list[float]:
    """Old log-probs as verl's actor computes them: logits / rollout temperature, then verl's logprobs_from_logits."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    step_logits = logits[len(prompt) - 1 : len(prompt) - 1 + len(response)] / temperature
    return logprobs_from_logits(step_logits, torch.tensor(response)).tolist()


@pytest.fixture(scope="module")
def manager(tiny_model_dir: Path):
    """verl's LLMServerManager in standalone mode on a local Ray cluster (one logical GPU: verl's resource pool)."""
    from verl.workers.rollout.llm_server import LLMServerManager

    env = {"VERL_PLATFORM": names.PLATFORM, "RAY_AUTH_MODE": "disabled", "TOKENIZERS_PARALLELISM": "false"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])  # engine_peers
    if ray.is_initialized():  # an earlier module's in-process Ray (other resources, no logical GPU)
        ray.shutdown()
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, runtime_env={"env_vars": env})
    try:
        yield LLMServerManager.create(config=_config(tiny_model_dir))
    finally:
        ray.shutdown()


def _generate(manager, request_id: str, params: dict = SAMPLING):
    return asyncio.run(manager.get_client().generate(request_id, prompt_ids=PROMPT, sampling_params=params))


@pytest.mark.slow
def test_logprobs_are_the_actors_before_and_after_a_weight_push(manager, tiny_model_dir):
    replica = manager.rollout_replicas[0]
    assert type(replica).__name__ == "HFReplica" and manager.server_addresses == [f"agentrl_hf://{server_name(0)}"]
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()

    out = _generate(manager, "before")
    assert 0 < len(out.token_ids) == len(out.log_probs) <= 12
    assert out.log_probs == pytest.approx(actor_logprobs(model, PROMPT, out.token_ids, TEMPERATURE), abs=1e-4)

    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    # verl's path for separate_async: abort, our engine from a trainer process to the CheckpointEngineWorker, resume
    trainer = ray.remote(EnginePeer).remote(names.CHECKPOINT_ENGINE, 1 << 20, is_master=True)
    trainer_wg = PeerGroup([trainer], list(model.state_dict().items()))
    engine_config = omega_conf_to_dataclass(_config(tiny_model_dir).actor_rollout_ref.rollout.checkpoint_engine)
    CheckpointEngineManager(engine_config, trainer_wg, [replica]).update_weights(global_steps=3)
    assert trainer_wg.modes == [names.CHECKPOINT_ENGINE]
    assert ray.get(replica.servers[0].get_weight_version.remote()) == 1
    assert ray.get(replica.servers[0].gate_state.remote())["open"]  # resumed after the sync

    after = _generate(manager, "after")
    expected = actor_logprobs(model, PROMPT, after.token_ids, TEMPERATURE)
    assert after.log_probs == pytest.approx(expected, abs=1e-4)
    assert after.extra_fields["global_steps"] == 3
    fixed = out.token_ids  # a fixed sequence: the server scores it with the new weights, as the actor does
    scored = ray.get(replica.servers[0].compute_log_probs.remote(PROMPT, fixed, TEMPERATURE))
    assert scored == pytest.approx(actor_logprobs(model, PROMPT, fixed, TEMPERATURE), abs=1e-4)
    assert scored != pytest.approx(out.log_probs, abs=1e-3)  # the new weights, not the old ones


@pytest.mark.slow
def test_a_partial_or_misshapen_update_is_refused_before_any_weight_changes(manager):
    server = manager.rollout_replicas[0].servers[0]
    greedy = {**SAMPLING, "temperature": 0}
    before = _generate(manager, "g1", greedy)
    with pytest.raises(ray.exceptions.RayTaskError, match="missing"):
        ray.get(server.update_weights.remote({"model.norm.weight": torch.zeros(64)}))
    with pytest.raises(ray.exceptions.RayTaskError, match="unexpected"):
        ray.get(server.update_weights.remote({"not.a.weight": torch.zeros(1)}))
    after = _generate(manager, "g2", greedy)
    assert (after.token_ids, after.log_probs) == (before.token_ids, before.log_probs)


@pytest.mark.slow
def test_every_lifecycle_call_verls_trainer_makes_is_served(manager):
    replica = manager.rollout_replicas[0]

    async def cycle():
        await replica.sleep()
        await replica.abort_all_requests()
        await replica.release_kv_cache()
        await replica.resume_kv_cache()
        await replica.clear_kv_cache()
        await replica.resume_generation()
        await replica.wake_up()

    asyncio.run(cycle())
    assert len(_generate(manager, "still-serving").token_ids) > 0


@pytest.mark.slow
def test_requests_behind_the_closed_gate_wait_for_the_resume_or_are_rejected(manager):
    replica = manager.rollout_replicas[0]
    server = replica.servers[0]
    client = manager.get_client()

    async def scenario() -> tuple:
        await replica.abort_all_requests()
        parked = asyncio.ensure_future(client.generate("parked", prompt_ids=PROMPT, sampling_params=SAMPLING))
        while (await server.gate_state.remote())["parked"] < 1:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        waited = not parked.done()
        await replica.resume_generation()
        served = await parked
        await replica.abort_all_requests(reject_request=True)  # leaving rotation: late requests come back at once
        rejected = await client.generate("rejected", prompt_ids=PROMPT, sampling_params=SAMPLING)
        await replica.resume_generation()
        return waited, served, rejected, await server.gate_state.remote()

    waited, served, rejected, gate = asyncio.run(scenario())
    assert waited and served.stop_reason == "completed" and len(served.token_ids) > 0
    assert (rejected.stop_reason, rejected.token_ids) == ("aborted", [])
    assert gate == {"open": True, "rejecting": False, "parked": 1}


# ------------------------------------------------------------------- the in-worker side, without Ray


def _adapter(tiny_model_dir: Path, rank: int, monkeypatch) -> HFServerAdapter:
    monkeypatch.setenv("RANK", str(rank))
    cfg = _config(tiny_model_dir).actor_rollout_ref
    return HFServerAdapter(config=cfg.rollout, model_config=cfg.model, device_mesh=None)


def test_adapter_refuses_what_it_cannot_serve(tiny_model_dir, monkeypatch):
    adapter = _adapter(tiny_model_dir, 0, monkeypatch)
    assert adapter.is_leader_rank and adapter.replica_rank == 0
    with pytest.raises(NotImplementedError, match="wire_format"):
        asyncio.run(adapter.update_weights(iter([]), wire_format="delta_flush"))
    with pytest.raises(NotImplementedError, match=r"lora\.merge"):
        asyncio.run(adapter.update_weights(iter([]), peft_config={"r": 8}))
    with pytest.raises(RuntimeError, match="no tensors"):
        asyncio.run(adapter.update_weights(iter([])))
    with pytest.raises(ValueError, match="unknown resume tags"):
        asyncio.run(adapter.resume(tags=["optimizer"]))


def test_every_rank_drains_the_generator_and_only_the_leader_keeps_copies(tiny_model_dir, monkeypatch):
    follower = _adapter(tiny_model_dir, 1, monkeypatch)  # tensor_model_parallel_size=1: rank 1 leads replica 1
    assert follower.is_leader_rank and follower.replica_rank == 1
    source = torch.ones(3)
    drained: list[str] = []

    def weights():
        for name in ("a", "b"):
            drained.append(name)
            yield name, source

    assert asyncio.run(drain_weights(weights(), keep=False)) == {} and drained == ["a", "b"]
    kept = asyncio.run(drain_weights(weights(), keep=True))
    source.add_(1)  # the engine's tensors alias live parameters; the copy must not follow them
    assert set(kept) == {"a", "b"} and torch.equal(kept["a"], torch.ones(3))

    async def async_weights():
        yield "c", torch.zeros(2)

    assert set(asyncio.run(drain_weights(async_weights(), keep=True))) == {"c"}


def test_dtensors_are_gathered_to_full_tensors(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor

    if dist.is_initialized():
        pytest.skip("a process group already exists in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        mesh = init_device_mesh("cpu", (1,))
        full = torch.arange(6.0).reshape(3, 2)
        kept = asyncio.run(drain_weights(iter([("w", distribute_tensor(full, mesh, [Shard(0)]))]), keep=True))
        assert type(kept["w"]) is torch.Tensor and torch.equal(kept["w"], full)
    finally:
        dist.destroy_process_group()
