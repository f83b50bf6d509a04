"""The one problems reader: both ids (eval's prompt_id, data prep's problem_key) from the same rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl_recipe.atomic_io import atomic_write_jsonl, atomic_write_parquet
from agentrl_recipe.eval.eval_set import load_problems as load_eval_problems
from agentrl_recipe.problems import prompt_id, read_problem_rows
from data_prep.rollouts import problem_key
from data_prep.rows import rl_row


def test_folders_give_their_parquet_files_only_and_ids_stay_as_they_were(tmp_path: Path) -> None:
    rows = [rl_row("aime2024", "What is 1+1?", "MATH", "2", {"index": 7}), rl_row("aime2024", "2+2?", "MATH", "4", {})]
    rows[1]["extra_info"].pop("index")
    atomic_write_parquet(tmp_path / "a.parquet", rows)
    atomic_write_jsonl(tmp_path / "a.rejects.jsonl", [{"row": 0}])  # what data prep writes next to its outputs
    read = list(read_problem_rows([str(tmp_path)]))
    assert [(Path(f).name, i) for f, i, _ in read] == [("a.parquet", 0), ("a.parquet", 1)]
    assert prompt_id(read[0][2]["data_source"], read[0][2]["extra_info"], 0) == "aime2024/7"
    assert [p.prompt_id for p in load_eval_problems([str(tmp_path)])] == ["aime2024/7", "aime2024/1"]
    assert problem_key(read[0][2]).startswith("aime2024:") and len(problem_key(read[0][2])) == len("aime2024:") + 16
    with pytest.raises(FileNotFoundError):
        list(read_problem_rows([str(tmp_path / "missing.parquet")]))
