"""The inputs of ``make rl-smoke`` / ``make rl-smoke-paper-layout``: the tiny offline model and a 16-row math/code RL
parquet under ``outputs/rl_smoke/``, built on CPU in seconds (:func:`prepare_smoke`)."""

from __future__ import annotations

import json
from pathlib import Path

from agentrl_recipe import names
from agentrl_recipe.tiny_model import TinyModelSpec, build_tiny_model
from data_prep.files import atomic_write_parquet

SMOKE_CONFIG = "agentrl_rl_smoke"
# The paper's layout on the tiny model (8 GPUs): step 1 with a checkpoint, then a second launch resuming from it.
PAPER_LAYOUT_SMOKE_CONFIG = "agentrl_rl_smoke_paper_layout"
SMOKE_STAGES = {"rl-smoke": SMOKE_CONFIG, "rl-smoke-paper-layout": PAPER_LAYOUT_SMOKE_CONFIG}
SMOKE_DIR = Path("outputs/rl_smoke")


def prepare_smoke(out_dir: Path = SMOKE_DIR) -> dict[str, Path]:
    """The tiny model and a 16-row math/code RL parquet (train = val) for the GPU smoke run; CPU only, seconds."""
    # rows imports verl (~7 s): only the smoke stages pay it, not every `make sft|rl` launch.
    from data_prep.rows import rl_row

    model_dir = out_dir / "tiny_model"
    if not (model_dir / "config.json").is_file():
        # head_dim 64 (256 / 4): every vLLM attention backend supports it; the default tiny model's 32 is not universal.
        build_tiny_model(model_dir, TinyModelSpec(hidden_size=256, intermediate_size=512))
    rows = []
    for i in range(12):
        a, b = 17 + 3 * i, 5 + i
        rows.append(
            rl_row(
                names.DS_DAPO,
                f"Compute {a} * {b} with the code tool. Put the answer in \\boxed{{}}.",
                "math",
                str(a * b),
                {"source_id": f"smoke-math-{i}"},
            )
        )
    for i in range(4):
        tests = {"inputs": [f"{i}\n"], "outputs": [f"{i + 1}\n"], "fn_name": None}
        rows.append(
            rl_row(
                names.DS_SKYWORK_CODE,
                "Read an integer n and print n + 1. Answer in ```python```.",
                "code",
                json.dumps(tests),
                {"source_id": f"smoke-code-{i}"},
            )
        )
    for index, row in enumerate(rows):
        row["extra_info"]["index"] = index
    train = out_dir / "train.parquet"
    atomic_write_parquet(train, rows)
    return {"model": model_dir, "train": train}
