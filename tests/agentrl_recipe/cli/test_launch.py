"""The launcher on CPU: the GPU smoke run's inputs (the tiny model and 16 RL rows with distinct indices)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from agentrl_recipe.cli.launch import SMOKE_STAGES, prepare_smoke


def test_prepare_smoke(tmp_path: Path) -> None:
    made = prepare_smoke(tmp_path)
    assert (made["model"] / "config.json").is_file()
    rows = pd.read_parquet(made["train"])
    assert len(rows) == 16
    assert sorted(r["index"] for r in rows["extra_info"]) == list(range(16))
    assert list(rows["ability"].value_counts().sort_index()) == [4, 12]  # code, math
    assert set(SMOKE_STAGES) == {"rl-smoke", "rl-smoke-paper-layout"}
