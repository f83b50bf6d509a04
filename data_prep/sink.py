"""Where converted rows go: kept when valid, else to ``<output>.rejects.jsonl`` with file, row, field and reason."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import atomic_write_jsonl
from data_prep.schema import VALIDATORS, FieldError, SchemaError


def rejects_path(output: str | Path) -> Path:
    output = Path(output)
    return output.with_name(output.name.removesuffix(".parquet") + ".rejects.jsonl")


class RowSink:
    """Collects validated rows for one output file; invalid rows go to its rejects file, with the reason."""

    def __init__(self, kind: str, output: str | Path) -> None:
        if kind not in VALIDATORS:
            raise ValueError(f"unknown row kind {kind!r}; choose from {sorted(VALIDATORS)}")
        self.kind = kind
        self.output = Path(output)
        self.validate = VALIDATORS[kind]
        self.rows: list[dict] = []
        self.rejects: list[dict] = []

    def add(self, row: Any, *, file: str, row_no: int, source: Any = None) -> bool:
        """Validate and keep ``row``; on failure record it (and the source row) as a reject. Returns kept?"""
        errors = self.validate(row)
        if errors:
            self.reject(file=file, row_no=row_no, errors=errors, row=row, source=source)
            return False
        self.rows.append(row)
        return True

    def reject(
        self,
        *,
        file: str,
        row_no: int,
        errors: list[FieldError] | None = None,
        field: str | None = None,
        error: str | None = None,
        row: Any = None,
        source: Any = None,
    ) -> None:
        """Record a row that could not be converted or failed validation."""
        errors = errors or [FieldError(field or "<row>", error or "rejected")]
        self.rejects.append(
            {
                "file": file,
                "row": row_no,
                "field": errors[0].field,
                "error": errors[0].message,
                "errors": [dataclasses.asdict(e) for e in errors],
                "output_row": row,
                "source_row": source,
            }
        )

    def reason_counts(self) -> dict[str, int]:
        return dict(Counter(f"{r['field']}: {r['error'][:80]}" for r in self.rejects).most_common())

    def write_rejects(self) -> Path:
        """Write the rejects file (always, so an empty file says 'zero rejects' for this output)."""
        path = rejects_path(self.output)
        atomic_write_jsonl(path, self.rejects)
        return path

    def first_error(self) -> SchemaError | None:
        if not self.rejects:
            return None
        r = self.rejects[0]
        return SchemaError(r["file"], r["row"], r["field"], r["error"])
