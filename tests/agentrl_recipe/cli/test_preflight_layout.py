"""The config keys the preflight checks read, and a local model's parameter count."""

from __future__ import annotations

import json
from pathlib import Path

from agentrl_recipe.cli import configs
from agentrl_recipe.cli.preflight_layout import Layout, layout, model_parameters


def test_the_paper_layout_as_the_checks_read_it(paper: Layout) -> None:
    assert (paper.gpus_per_node, paper.tensor_parallel, paper.storage_units) == (8, 4, 8)
    assert paper.attn_implementation == "flash_attention_2" and paper.keep == 4 and paper.save_freq == 30
    assert paper.kind == "rl" and paper.gpu


def test_an_sft_cpu_layout_reads_the_sft_keys() -> None:
    cfg, _ = configs.compose("agentrl_sft_cpu", ["trainer.max_ckpt_to_keep=2"])
    lay = layout(cfg, "sft")
    assert (lay.kind, lay.device, lay.gpu, lay.tensor_parallel, lay.storage_units) == ("sft", "cpu", False, 1, 0)
    assert lay.keep == 2 and lay.model_path == str(cfg.model.path)


def test_model_parameters_from_safetensors_sizes(tmp_path: Path) -> None:
    assert model_parameters(str(tmp_path)) is None  # no weights
    assert model_parameters("Qwen/Qwen3-4B") is None  # a hub id is not local
    (tmp_path / "model-1.safetensors").write_bytes(b"\0" * 600)
    (tmp_path / "model-2.safetensors").write_bytes(b"\0" * 400)
    assert model_parameters(str(tmp_path)) == 500  # bf16 by default
    (tmp_path / "config.json").write_text(json.dumps({"torch_dtype": "float32"}))
    assert model_parameters(str(tmp_path)) == 250
