"""The config keys :mod:`agentrl_recipe.cli.preflight` reads, for one config kind (:class:`Layout`), and the size of a
local model (:func:`model_parameters`), which its GPU-memory and disk budgets need."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from agentrl_recipe.config import to_plain


@dataclasses.dataclass
class Layout:
    """The config keys the checks read, for one config kind (rl or sft)."""

    kind: str
    device: str
    nnodes: int
    gpus_per_node: int
    tensor_parallel: int
    gpu_memory_utilization: float
    attn_implementation: str
    model_path: str
    checkpoint_dir: str
    save_freq: int
    total_steps: int | None
    keep: int | None
    hf_export: bool
    storage_units: int
    ray_init_num_cpus: int | None

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    return to_plain(OmegaConf.select(cfg, key, default=default))


def layout(cfg: Any, kind: str) -> Layout:
    """The keys of a composed ``kind`` (rl / sft) config that the preflight checks read."""
    rl = kind == "rl"
    model = "actor_rollout_ref.model" if rl else "model"
    contents = _get(cfg, "actor_rollout_ref.actor.checkpoint.save_contents" if rl else "checkpoint.save_contents")
    uses_tq = bool(_get(cfg, "trainer.use_v1", False) or _get(cfg, "transfer_queue.enable", False))
    return Layout(
        kind=kind,
        device=str(_get(cfg, "trainer.device", "cuda")),
        nnodes=int(_get(cfg, "trainer.nnodes", 1)),
        gpus_per_node=int(_get(cfg, "trainer.n_gpus_per_node", 1)),
        tensor_parallel=int(_get(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1) or 1) if rl else 1,
        gpu_memory_utilization=float(_get(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5) or 0.5),
        attn_implementation=str(_get(cfg, f"{model}.override_config.attn_implementation", None) or "flash_attention_2"),
        model_path=str(_get(cfg, f"{model}.path", "")),
        checkpoint_dir=str(_get(cfg, "trainer.default_local_dir", "checkpoints")),
        save_freq=int(_get(cfg, "trainer.save_freq", -1) or -1),
        total_steps=_get(cfg, "trainer.total_training_steps", None),
        keep=_get(cfg, "trainer.max_actor_ckpt_to_keep" if rl else "trainer.max_ckpt_to_keep", None),
        hf_export="hf_model" in (contents or []),
        storage_units=int(_get(cfg, "transfer_queue.backend.SimpleStorage.num_data_storage_units", 8))
        if uses_tq
        else 0,
        ray_init_num_cpus=_get(cfg, "ray_kwargs.ray_init.num_cpus", None),
    )


def model_parameters(path: str) -> int | None:
    """Parameter count of a local HF model directory from its safetensors sizes and dtype (None if not local)."""
    directory = Path(path)
    files = list(directory.glob("*.safetensors")) if directory.is_dir() else []
    if not files:
        return None
    dtype = "bfloat16"
    config_file = directory / "config.json"
    if config_file.is_file():
        config = json.loads(config_file.read_text())
        dtype = str(config.get("torch_dtype") or config.get("dtype") or dtype)
    width = 4 if "32" in dtype else 2
    return sum(f.stat().st_size for f in files) // width
