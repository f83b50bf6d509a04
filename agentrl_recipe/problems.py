"""Problems: the rows of verl RL parquet files, read by one function for eval and for data prep's rollouts.

A problem has two ids, each persisted by a resumable log, so neither may change:

* :func:`prompt_id` ``"<data_source>/<extra_info.index>"`` (the row number when the index is missing) keys eval's
  rollout dump (:mod:`agentrl_recipe.eval.eval_set`); unique across the files of one eval.
* ``data_prep.rollouts.problem_key`` ``"<data_source>:<hash of the prompt>"`` keys data prep's progress logs: the same
  problem in two files is one problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq


def read_local_file(path: Path) -> list[dict[str, Any]]:
    """Every row of one ``.parquet``, ``.jsonl`` or ``.json`` (a list) file; a bad JSON line raises naming it."""
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json" and text.lstrip().startswith("["):
        return list(json.loads(text))
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}:{lineno}: not valid JSON ({e.msg})") from e
    return rows


def problem_files(paths: Sequence[str]) -> list[Path]:
    """Files as given, folders expanded to their ``*.parquet`` files (sorted; the rejects, stats and meta files that
    data prep writes next to its outputs are left out). Missing paths raise :class:`FileNotFoundError`."""
    out: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(path.glob("*.parquet"))
            if not found:
                raise FileNotFoundError(f"problem folder {path} holds no *.parquet files")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise FileNotFoundError(f"problem file {path} does not exist")
    return out


def read_problem_rows(paths: Sequence[str]) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """``(file, row_number, row)`` for every row of ``paths``, in file order (row numbers count from 0 per file)."""
    for path in problem_files(paths):
        try:
            rows = read_local_file(path)
        except Exception as e:  # a corrupt or foreign file: name it, whatever the reader raised
            raise ValueError(f"{path}: cannot read as problem rows ({type(e).__name__}: {e})") from e
        for i, row in enumerate(rows):
            yield str(path), i, row


def prompt_id(data_source: str, extra_info: dict[str, Any], row_number: int) -> str:
    index = extra_info.get("index")
    return f"{data_source}/{index if index is not None else row_number}"
