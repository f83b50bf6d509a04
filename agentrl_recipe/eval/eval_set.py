"""Eval problems from the eval parquet files data prep writes (one verl RL row per problem).

Row format (CONTRACTS.md): ``data_source``, ``prompt`` (chat list), ``ability``, ``reward_model{ground_truth, style}``,
``extra_info{index, ...}``, ``agent_name``. Each problem gets a stable ``prompt_id = "<data_source>/<index>"`` (the row
number in its file when ``extra_info.index`` is missing), which keys the rollout dump for resuming. Files are read by
:func:`~agentrl_recipe.problems.read_problem_rows`, the one problems reader (data prep uses it too).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from agentrl_recipe.problems import prompt_id, read_problem_rows
from agentrl_recipe.tasks import task_kind


@dataclass
class EvalProblem:
    prompt_id: str
    data_source: str
    task: str  # math | gpqa | code (agentrl_recipe.tasks)
    ground_truth: Any
    row: dict[str, Any]  # the full row, handed to the rollout as-is
    file: str
    row_number: int

    @property
    def extra_info(self) -> dict[str, Any]:
        return self.row.get("extra_info") or {}


def _decode_json_field(value: Any, where: str) -> Any:
    # The original release stores LCB's reward_model / extra_info as JSON strings; accept both shapes.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as e:
            raise ValueError(f"{where}: is a string but not JSON ({e})") from e
    return value


def problem_from_row(row: dict[str, Any], *, file: str, row_number: int) -> EvalProblem:
    where = f"{file} row {row_number}"
    for key in ("data_source", "prompt", "reward_model"):
        if row.get(key) is None:
            raise ValueError(f"{where}: missing required field {key!r} (eval rows follow the verl RL row format)")
    row = dict(row)
    row["reward_model"] = _decode_json_field(row["reward_model"], f"{where} field 'reward_model'")
    row["extra_info"] = _decode_json_field(row.get("extra_info") or {}, f"{where} field 'extra_info'") or {}
    prompt = row["prompt"]
    if not isinstance(prompt, list) or not prompt or not all(isinstance(m, dict) and "role" in m for m in prompt):
        raise ValueError(f"{where}: 'prompt' must be a non-empty chat list of {{role, content}} messages")
    reward_model = row["reward_model"]
    if not isinstance(reward_model, dict) or "ground_truth" not in reward_model:
        raise ValueError(f"{where}: 'reward_model' must hold 'ground_truth'")
    data_source = str(row["data_source"])
    return EvalProblem(
        prompt_id=prompt_id(data_source, row["extra_info"], row_number),
        data_source=data_source,
        task=task_kind(data_source),
        ground_truth=reward_model["ground_truth"],
        row=row,
        file=file,
        row_number=row_number,
    )


def load_problems(paths: list[str], *, sources: list[str] | None = None, limit: int | None = None) -> list[EvalProblem]:
    """All problems of ``paths`` in file order, optionally only ``sources`` and the first ``limit`` per source."""
    problems = [problem_from_row(row, file=file, row_number=i) for file, i, row in read_problem_rows(paths)]
    dupes = [pid for pid, n in Counter(p.prompt_id for p in problems).items() if n > 1]
    if dupes:
        raise ValueError(
            f"duplicate prompt ids {dupes[:5]} (data_source/extra_info.index must be unique across the eval files)"
        )
    if sources:
        wanted = {s.lower() for s in sources}
        problems = [p for p in problems if p.data_source.lower() in wanted]
        if not problems:
            raise ValueError(f"no eval rows with data_source in {sorted(sources)}")
    if limit is not None:
        seen: Counter[str] = Counter()
        kept = []
        for p in problems:
            if seen[p.data_source] < limit:
                kept.append(p)
                seen[p.data_source] += 1
        problems = kept
    if not problems:
        raise ValueError(f"no eval rows in {paths}")
    return problems
