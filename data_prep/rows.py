"""Building verl RL rows from source rows: field access that names what is missing, and the convert loop."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from tqdm import tqdm

from agentrl_recipe import names
from data_prep.sink import RowSink


class ConvertError(ValueError):
    """A source row that cannot become a valid row; ``field`` names the source field at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def get_field(row: dict, path: str) -> Any:
    """``row["a"]["b"][0]`` for path ``a.b.0``; raises ConvertError naming the missing field."""
    value: Any = row
    for part in path.split("."):
        try:
            value = value[int(part)] if isinstance(value, list) else value[part]
        except (KeyError, IndexError, TypeError, ValueError):
            raise ConvertError(path, "missing") from None
    return value


def text_field(row: dict, path: str) -> str:
    value = get_field(row, path)
    if not isinstance(value, str) or not value.strip():
        raise ConvertError(path, f"must be a non-empty string, got {type(value).__name__} {str(value)[:40]!r}")
    return value


def rl_row(data_source: str, content: str, ability: str, ground_truth: str, extra: dict[str, Any]) -> dict[str, Any]:
    """One verl RL row in the project's contract (index is set when the final file is assembled)."""
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": content}],
        "ability": ability,
        "reward_model": {"ground_truth": ground_truth, "style": "rule"},
        "extra_info": {"index": 0, **extra},
        "agent_name": names.AGENT_LOOP,
    }


def convert_rows(
    rows: list[tuple[str, int, dict]], convert: Callable[[dict], dict | None], sink: RowSink, *, desc: str
) -> Counter[str]:
    """Convert ``(file, row_no, row)`` source rows into ``sink``: failures become rejects, None means 'not selected'.

    Returns counts: loaded, filtered (left out by a selection rule), kept, rejected.
    """
    counts: Counter[str] = Counter()
    for file, row_no, src in tqdm(rows, desc=desc, unit="row", mininterval=2):
        counts["loaded"] += 1
        try:
            out = convert(src)
        except ConvertError as e:
            sink.reject(file=file, row_no=row_no, field=e.field, error=str(e), source=src)
            counts["rejected"] += 1
            continue
        if out is None:
            counts["filtered"] += 1
            continue
        out.setdefault("extra_info", {}).update(source_file=file, source_row=row_no)
        if sink.add(out, file=file, row_no=row_no, source=src):
            counts["kept"] += 1
        else:
            counts["rejected"] += 1
    return counts
