"""One actor update of the paper's model through verl's actor worker, with our registered loss and estimator.

Imported only by :mod:`.check`, after :func:`.stubs.install`. verl's ``ActorRolloutRefWorker`` (role ``actor``) is
built in this process from the composed paper config (``agentrl_rl_qwen3_4b``: clip 0.2/0.315, dual clip 10,
token-mean, lr 1e-6, grad clip 1, gradient checkpointing, dynamic batch of 23,040 tokens per GPU) and driven as verl's
trainer drives it: ``compute_log_prob`` for the old log-probs, our ``agentrl_grpo`` for the advantages,
``update_actor`` for one optimizer step (``ray_trainer.py`` ``_compute_old_log_prob`` / ``_update_actor``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import transformers
import verl
from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import core_algos
from verl.utils import tensordict_utils as tu
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.engine.utils import prepare_micro_batches
from verl.workers.engine_workers import ActorRolloutRefWorker
from verl.workers.utils.padding import left_right_2_no_padding

import agentrl_recipe.plugin
from agentrl_recipe import names
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.gpu_check import reference

PAPER_CONFIG = "agentrl_rl_qwen3_4b"
CLIP_BRANCHES = ("actor/pg_clipfrac_low", "actor/pg_clipfrac_high", "actor/pg_clipfrac_dual")
# Qwen3-4B-Instruct-2507's config.json (the dims that set memory and time)
QWEN3_4B = {
    "hidden_size": 2560,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 9728,
    "vocab_size": 151936,
    "tie_word_embeddings": True,
    "max_position_embeddings": 262144,
    "rope_theta": 5000000.0,
    "rms_norm_eps": 1e-6,
}
TINY = {**QWEN3_4B, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "intermediate_size": 128, "vocab_size": 512, "max_position_embeddings": 256}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Shape:
    """The batch: ``groups`` prompts × ``n`` samples; prompt ``prompt`` tokens, responses ``response - step·k``."""

    groups: int
    n: int
    prompt: int
    response: int
    step: int
    budget: int  # ppo_max_token_len_per_gpu / log_prob_max_token_len_per_gpu


# 8 sequences padded to 576 + 2304 = 2880 tokens: the padded micro-batch is 8 × 2880 = 23,040 tokens (the paper's
# per-GPU budget, what activations scale with); 22,144 of them are real, so verl's dynamic batch puts all 8 in one.
GPU_SHAPE = Shape(groups=2, n=4, prompt=576, response=2304, step=32, budget=23040)
DRY_SHAPE = Shape(groups=2, n=4, prompt=8, response=24, step=2, budget=256)


def _model_dir(dims: dict[str, Any], device: str, root: Path) -> Path:
    """A random-weight Qwen3 at ``dims`` (bf16 safetensors): verl's engine loads a checkpoint from disk."""
    config = transformers.Qwen3Config(**dims)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 on the device: 4 B parameters in seconds, 8 GB on disk
    try:
        with torch.device(device):
            model = transformers.Qwen3ForCausalLM(config)
    finally:
        torch.set_default_dtype(torch.float32)
    path = root / "qwen3_model"
    model.save_pretrained(path)
    del model
    return path


@dataclasses.dataclass(frozen=True)
class Plan:
    """One actor update: ``layers`` decoder layers (None: the model's), FSDP2's CPU offload policy or all on device."""

    name: str
    layers: int | None
    offload_policy: bool


# An 80 GB GPU cannot hold Qwen3-4B's fp32 parameters, gradients and Adam state (16 B x 4.02 B = 64 GB) next to the
# 23,040-token micro-batch's activations and 151,936-wide logits, log-softmax and their gradient (7 GB each in bf16,
# twice that if upcast); the paper shards the states 8 ways. One GPU runs (1) 16 of the 36 layers with everything on
# the GPU (2.0 B parameters, 32 GB of states: the GPU's own tokens/s and memory), then (2) the whole model with FSDP2's
# CPUOffloadPolicy (states and the optimizer step on the CPU: the GPU holds the activations). The dry run has (1) only:
# CPUOffloadPolicy pins memory, which needs an accelerator.
GPU_PLANS = (Plan("qwen3_4b_16_layers_on_gpu", 16, False), Plan("qwen3_4b_36_layers_cpu_offload_policy", None, True))
DRY_PLANS = (Plan("tiny_on_device", None, False),)


def _overrides(model: Path, shape: Shape, dry: bool, offload_policy: bool) -> list[str]:
    actor = "actor_rollout_ref.actor"
    out = [
        f"actor_rollout_ref.model.path={model}",
        "+actor_rollout_ref.model.load_tokenizer=false",  # the update needs no tokenizer
        # flash-attn is not on a bare machine: sdpa, with verl's padded (not remove-padding) path
        "actor_rollout_ref.model.use_remove_padding=false",
        "+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
        f"{actor}.strategy=fsdp2",
        f"{actor}.ulysses_sequence_parallel_size=1",  # one GPU: the paper's SP 4 splits 4 × 23,040 over 4 GPUs
        f"{actor}.ppo_mini_batch_size={shape.groups}",
        f"actor_rollout_ref.rollout.n={shape.n}",
        f"{actor}.optim.total_training_steps=1",
        # the paper's param/optimizer offload moves states off the GPU between phases only (for vLLM), not in the update
        f"{actor}.fsdp_config.param_offload=false",
        f"{actor}.fsdp_config.optimizer_offload=false",
        f"{actor}.fsdp_config.offload_policy={offload_policy}",
        f"{actor}.ppo_max_token_len_per_gpu={shape.budget}",
        f"actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu={shape.budget}",
    ]
    if dry:
        out += ["trainer.device=cpu"]
    return out


def _batch(shape: Shape, vocab: int, seed: int) -> tuple[DataProto, list[int], torch.Tensor]:
    """Left-padded prompts, right-padded responses of decreasing length, one score per trajectory (±1, seeded)."""
    g = torch.Generator().manual_seed(seed)
    rows = shape.groups * shape.n
    prompts = torch.randint(0, vocab, (rows, shape.prompt), generator=g)
    responses = torch.randint(0, vocab, (rows, shape.response), generator=g)
    lengths = torch.tensor([shape.response - shape.step * (i % shape.n + i // shape.n) for i in range(rows)])
    response_mask = (torch.arange(shape.response)[None, :] < lengths[:, None]).long()
    attention_mask = torch.cat([torch.ones(rows, shape.prompt, dtype=torch.long), response_mask], dim=1)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    groups = [i // shape.n for i in range(rows)]
    scores = (torch.randint(0, 2, (rows,), generator=g) * 2 - 1).float()
    scores[:: shape.n] = torch.tensor([1.0, -1.0] * shape.groups)[: shape.groups]  # no group with one score only
    token_rewards = torch.zeros(rows, shape.response)
    token_rewards[torch.arange(rows), lengths - 1] = scores
    batch = DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "input_ids": torch.cat([prompts, responses], dim=1),
            "attention_mask": attention_mask,
            "position_ids": position_ids,
            "response_mask": response_mask,
            "token_level_rewards": token_rewards,
        },
        non_tensors={"uid": np.array([f"group-{k}" for k in groups], dtype=object)},
    )
    return batch, groups, scores


def _advantages(batch: DataProto, algorithm: Any) -> torch.Tensor:
    """Our registered estimator, called as verl's ``compute_advantage`` calls a registered one."""
    estimator = core_algos.get_adv_estimator_fn(algorithm.adv_estimator)
    advantages, returns = estimator(
        token_level_rewards=batch.batch["token_level_rewards"],
        response_mask=batch.batch["response_mask"],
        index=batch.non_tensor_batch["uid"],
        config=algorithm,
    )
    batch.batch["advantages"], batch.batch["returns"] = advantages, returns
    return advantages


def _old_log_probs(worker: ActorRolloutRefWorker, batch: DataProto, cfg: Any) -> torch.Tensor:
    from verl.workers.utils.padding import no_padding_2_padding

    rollout = cfg.actor_rollout_ref.rollout
    batch.meta_info.update(multi_turn=rollout.multi_turn.enable, temperature=rollout.temperature)  # as the trainer
    td = left_right_2_no_padding(batch.to_tensordict())
    tu.assign_non_tensor(td, calculate_entropy=True, calculate_sum_pi_squared=False, compute_loss=False)
    output = worker.compute_log_prob(td)
    return no_padding_2_padding(tu.get(output, "log_probs"), td).float()


def _update(worker: ActorRolloutRefWorker, batch: DataProto, cfg: Any) -> dict[str, Any]:
    td = left_right_2_no_padding(batch.to_tensordict())
    mini = cfg.actor_rollout_ref.actor.ppo_mini_batch_size * cfg.actor_rollout_ref.rollout.n
    tu.assign_non_tensor(
        td,
        calculate_entropy=bool(cfg.actor_rollout_ref.actor.entropy_coeff != 0.0),
        distillation_use_topk=False,
        distillation_only=False,
        global_batch_size=mini,
        mini_batch_size=mini,
        epochs=cfg.actor_rollout_ref.actor.ppo_epochs,
        seed=cfg.actor_rollout_ref.actor.data_loader_seed,
        dataloader_kwargs={"shuffle": cfg.actor_rollout_ref.actor.shuffle},
        compute_loss=True,
    )
    return dict(tu.get(worker.update_actor(td), "metrics"))


def _micro_batches(batch: DataProto, budget: int) -> int:
    """How many micro-batches verl's dynamic batching cuts this mini-batch into (its own function, its inputs)."""
    td = left_right_2_no_padding(batch.to_tensordict())
    tu.assign_non_tensor(td, use_dynamic_bsz=True, max_token_len_per_gpu=budget, sp_size=1)
    micro, _ = prepare_micro_batches(td)
    return len(micro)


def _scalar(value: Any) -> float:
    while isinstance(value, list):
        value = value[0] if len(value) == 1 else float(np.mean([_scalar(v) for v in value]))
    return float(getattr(value, "value", value))


def _loss_reference_check(actor_cfg: Any, device: str, seed: int) -> dict[str, Any]:
    """Our registered loss on ``device`` (float32) vs the float64 CPU formula, every clip branch hit."""
    g = torch.Generator().manual_seed(seed)
    rows, length = 6, 40
    old = -torch.rand(rows, length, generator=g) * 3
    log_ratio = (torch.rand(rows, length, generator=g) - 0.5) * 6  # ratios e^-3 .. e^3: low, high and dual clip
    new = old + log_ratio
    adv = torch.randn(rows, 1, generator=g).expand(rows, length).contiguous()
    mask = (torch.rand(rows, length, generator=g) > 0.2).float()
    actor_cfg.global_batch_info.update(
        dp_size=1, batch_num_tokens=int(mask.sum()), global_batch_size=rows, loss_scale_factor=None
    )
    fn = core_algos.get_policy_loss_fn(actor_cfg.policy_loss.loss_mode)
    ours, metrics = fn(
        old.to(device), new.to(device), adv.to(device), mask.to(device), actor_cfg.loss_agg_mode, actor_cfg
    )
    eps_low, eps_high = actor_cfg.clip_ratio_low, actor_cfg.clip_ratio_high
    expected = reference.tcr_loss(old, new, adv, mask, eps_low, eps_high, actor_cfg.clip_ratio_c)
    got = float(ours.detach().double().cpu())
    return {
        "loss_mode": actor_cfg.policy_loss.loss_mode,
        "device_float32": got,
        "cpu_float64": expected,
        "abs_diff": abs(got - expected),
        "tolerance": 1e-5 * max(1.0, abs(expected)),
        "clip_fractions": {k: _scalar(metrics[k]) for k in CLIP_BRANCHES},
    }


def _gib(n_bytes: int) -> float:
    return round(n_bytes / 2**30, 3)


def _device() -> str:
    return "cpu" if os.environ.get("VERL_PLATFORM") == "agentrl_cpu" else "cuda"


def run(plan: Plan, dry: bool, seed: int = 0) -> dict[str, Any]:
    device = _device()
    shape = DRY_SHAPE if dry else GPU_SHAPE
    dims = dict(TINY if dry else QWEN3_4B)
    if plan.layers:
        dims["num_hidden_layers"] = plan.layers
    report: dict[str, Any] = {
        "plan": dataclasses.asdict(plan),
        "model": {"class": "Qwen3ForCausalLM", "dims": dims, "full_depth_layers": QWEN3_4B["num_hidden_layers"]},
        "shape": dataclasses.asdict(shape),
    }
    with tempfile.TemporaryDirectory(prefix="agentrl_gpu_check_") as tmp:
        model = _model_dir(dims, device, Path(tmp))
        overrides = _overrides(model, shape, dry, plan.offload_policy)
        cfg, _ = compose(PAPER_CONFIG, overrides)
        shown = [o.replace(str(model), "<random Qwen3>") for o in overrides]
        report["config"] = {"name": PAPER_CONFIG, "overrides": shown}
        actor = cfg.actor_rollout_ref.actor
        report["actor"] = {k: OmegaConf.select(actor, k) for k in (
            "strategy", "policy_loss.loss_mode", "policy_loss.token_mean_scope", "loss_agg_mode", "clip_ratio_low",
            "clip_ratio_high", "clip_ratio_c", "optim.lr", "grad_clip", "use_dynamic_bsz", "ppo_max_token_len_per_gpu",
            "entropy_coeff", "use_kl_loss", "fsdp_config.offload_policy")}  # fmt: skip
        report["actor"]["gradient_checkpointing"] = cfg.actor_rollout_ref.model.enable_gradient_checkpointing
        report["loss_reference"] = _loss_reference_check(omega_conf_to_dataclass(actor), device, seed)

        t0 = time.perf_counter()
        worker = ActorRolloutRefWorker(config=cfg.actor_rollout_ref, role="actor")
        worker.init_model()
        report["init_s"] = round(time.perf_counter() - t0, 2)

        batch, groups, scores = _batch(shape, int(dims["vocab_size"]), seed)
        advantages = _advantages(batch, cfg.algorithm)
        valid = batch.batch["response_mask"].sum(-1) > 0
        expected_adv = reference.grpo_advantages(scores, groups, valid)
        report["advantage_reference"] = {
            "estimator": cfg.algorithm.adv_estimator,
            "max_abs_diff": float((advantages[:, 0].double() - expected_adv).abs().max()),
            "tolerance": 1e-6,
        }
        batch.batch["old_log_probs"] = _old_log_probs(worker, batch, cfg)
        report.update(_measure_update(worker, batch, cfg, device))
        n_tokens = batch.batch["response_mask"].sum(-1).double()
        adv_rows = batch.batch["advantages"][:, 0].double()
        report["expected_pg_loss_at_ratio_1"] = float(-(adv_rows * n_tokens).sum() / n_tokens.sum())
        del worker
    _release(device)
    report["checks"] = _checks(report, dry)
    report["ok"] = all(report["checks"].values())
    return report


def _release(device: str) -> None:
    import gc

    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def environment(dry: bool) -> dict[str, Any]:
    device = _device()
    return {
        "mode": "dry" if dry else "gpu",
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "gpu_memory_gib": _gib(torch.cuda.get_device_properties(0).total_memory) if device == "cuda" else None,
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "verl": verl.__version__,
            "cuda": torch.version.cuda,
        },
        "registered": {
            "policy_loss": names.POLICY_LOSS,
            "adv_estimator": names.ADV_ESTIMATOR,
            "plugin": agentrl_recipe.plugin.__name__,
        },
    }


def _measure_update(worker: ActorRolloutRefWorker, batch: DataProto, cfg: Any, device: str) -> dict[str, Any]:
    tokens = int(batch.batch["attention_mask"].sum())
    padded = int(batch.batch["attention_mask"].numel())
    micro_batches = _micro_batches(batch, int(cfg.actor_rollout_ref.actor.ppo_max_token_len_per_gpu))
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    metrics = _update(worker, batch, cfg)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {
        "update": {
            "seconds": round(seconds, 3),
            "tokens": tokens,
            "padded_tokens": padded,
            "tokens_per_s": round(tokens / seconds, 1),
            "peak_memory_allocated_gib": _gib(torch.cuda.max_memory_allocated()) if device == "cuda" else None,
            "peak_memory_reserved_gib": _gib(torch.cuda.max_memory_reserved()) if device == "cuda" else None,
            "loss": _scalar(metrics["loss"]),
            "pg_loss": _scalar(metrics["actor/pg_loss"]),
            "grad_norm": _scalar(metrics["grad_norm"]),
            "ratio_max": _scalar(metrics["actor/ratio_max"]),
            "ratio_min": _scalar(metrics["actor/ratio_min"]),
            "loss_tokens": _scalar(metrics.get("actor/loss_tokens_per_update", float("nan"))),
            "micro_batches": micro_batches,
            "metric_keys": sorted(metrics),
        }
    }


def _checks(report: dict[str, Any], dry: bool) -> dict[str, bool]:
    update = report["update"]
    ref = report["loss_reference"]
    checks = {
        "loss_finite": bool(np.isfinite(update["loss"])),
        "grad_norm_finite_and_positive": bool(np.isfinite(update["grad_norm"]) and update["grad_norm"] > 0),
        "loss_matches_float64_reference": ref["abs_diff"] <= ref["tolerance"],
        "every_clip_branch_hit": all(v > 0 for v in ref["clip_fractions"].values()),
        "advantages_match_float64_reference": report["advantage_reference"]["max_abs_diff"] <= 1e-6,
        "one_micro_batch_of_the_budget": update["micro_batches"] == 1
        and update["padded_tokens"] == report["shape"]["budget"],
    }
    if dry:  # fp32 on CPU: the update's first step sees the old policy exactly (ratio 1), so the loss is known
        checks["ratio_is_1"] = abs(update["ratio_max"] - 1) < 1e-5 and abs(update["ratio_min"] - 1) < 1e-5
        expected = report["expected_pg_loss_at_ratio_1"]
        checks["pg_loss_equals_minus_token_mean_advantage"] = abs(update["pg_loss"] - expected) < 1e-5
    return checks


def write(report: dict[str, Any], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "gpu_check_report.json"
    path.write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    return path
