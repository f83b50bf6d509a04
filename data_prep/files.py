"""Reading sources and writing outputs safely: atomic files, resumable JSONL logs, cached stages, rejects files.

A source is a local file (``.parquet``, ``.jsonl``, ``.json``), a folder of such files, or a Hugging Face hub id
(optionally ``id:split``), loaded with :func:`datasets.load_dataset`. Every output is written through
:mod:`agentrl_recipe.atomic_io` (temp file + rename), so a killed run leaves either the old file or the new one.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import (
    atomic_write_json,
    atomic_write_parquet,
)
from agentrl_recipe.problems import read_local_file

LOCAL_SUFFIXES = (".parquet", ".jsonl", ".json")


# ----------------------------------------------------------------------------------------------- reading sources
def is_local_source(spec: str) -> bool:
    return Path(spec).exists()


def source_files(spec: str) -> list[Path]:
    """The data files behind a local source (a file, or every parquet/jsonl/json file under a folder)."""
    path = Path(spec)
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in LOCAL_SUFFIXES and not p.name.startswith("."))
        if not files:
            raise FileNotFoundError(f"{spec}: folder holds no {'/'.join(LOCAL_SUFFIXES)} files")
        return files
    if path.suffix not in LOCAL_SUFFIXES:
        raise ValueError(f"{spec}: unsupported file type {path.suffix!r}; use one of {LOCAL_SUFFIXES}")
    return [path]


def load_source(spec: str, *, default_split: str = "train", config: str | None = None) -> list[tuple[str, int, dict]]:
    """Load every row of a source as ``(file_label, row_number, row)`` (row numbers count from 0 per file).

    Hub ids go through ``datasets.load_dataset(id, config, split=...)``; ``id:split`` picks the split.
    """
    if is_local_source(spec):
        out: list[tuple[str, int, dict[str, Any]]] = []
        for path in source_files(spec):
            out.extend((str(path), i, row) for i, row in enumerate(read_local_file(path)))
        return out
    import datasets  # Hugging Face datasets: seconds to import, only hub sources need it

    if spec.startswith("hf://"):  # files inside a hub repo, e.g. LiveCodeBench's jsonl shards (no loading script)
        builder = "json" if spec.endswith((".jsonl", ".json")) else "parquet"
        ds = datasets.load_dataset(builder, data_files=spec, split="train")
        return [(spec, i, row) for i, row in enumerate(ds)]
    hub_id, _, split = spec.partition(":")
    split = split or default_split

    ds = datasets.load_dataset(hub_id, config, split=split)
    label = f"hf://{hub_id}:{split}"
    return [(label, i, row) for i, row in enumerate(ds)]


def source_fingerprint(spec: str) -> str:
    """Cheap identity of a source: path + size + mtime of each local file, or the hub id string."""
    if not is_local_source(spec):
        return f"hub:{spec}"
    parts = []
    for path in source_files(spec):
        st = path.stat()
        parts.append(f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def fingerprint(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------------------------- resumable work
def meta_path(output: str | os.PathLike) -> Path:
    return Path(str(output) + ".meta.json")


def is_up_to_date(output: str | os.PathLike, key: str) -> bool:
    """True when ``output`` exists and was built by a run whose inputs+settings fingerprint was ``key``."""
    meta = meta_path(output)
    if not Path(output).exists() or not meta.exists():
        return False
    try:
        return json.loads(meta.read_text()).get("fingerprint") == key
    except (OSError, json.JSONDecodeError):
        return False


def earlier_report(
    output: str | os.PathLike, key: str, *, force: bool, message: str, stats: str | os.PathLike | None = None
) -> dict | None:
    """The stats report of the up-to-date run that built ``output`` (printing ``message``), or None: build it.

    ``stats`` defaults to ``<output>.stats.json``; ``force`` (``--force``) always rebuilds.
    """
    if force or not is_up_to_date(output, key):
        return None
    print(message)
    return json.loads(Path(stats or Path(output).with_suffix(".stats.json")).read_text())


def mark_done(output: str | os.PathLike, key: str, **info: Any) -> None:
    atomic_write_json(meta_path(output), {"fingerprint": key, **info}, sort_keys=True)


def cached_rows(path: Path, key: str, build: Callable[[], list[dict]]) -> tuple[list[dict], bool]:
    """Rows of a cached stage: load ``path`` if its fingerprint is ``key``, else build, write and mark it.

    Returns ``(rows, was_cached)``. Used so that a rerun after a kill redoes only the unfinished stages.
    """
    if is_up_to_date(path, key):
        return read_local_file(path), True
    rows = build()
    atomic_write_parquet(path, rows, allow_empty=True)  # an empty stage is a valid result; reruns skip it too
    mark_done(path, key, rows=len(rows))
    return rows, False


class JsonlLog:
    """Append-only JSONL log of finished work items, keyed by ``key_field``; the unit of resumption.

    Each record is flushed and fsynced as it is appended, so a kill loses at most the item in flight. A torn last
    line (killed mid-write) is cut off on open.
    """

    def __init__(self, path: str | os.PathLike, key_field: str = "key") -> None:
        self.path = Path(path)
        self.key_field = key_field
        self.records: dict[str, dict] = {}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self._load()

    def _load(self) -> None:
        data = self.path.read_bytes()
        good_end = 0
        pos = 0
        for line in data.splitlines(keepends=True):
            pos += len(line)
            if not line.endswith(b"\n"):
                break
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                break
            self.records[str(rec[self.key_field])] = rec
            good_end = pos
        if good_end != len(data):
            with self.path.open("r+b") as f:
                f.truncate(good_end)

    def __contains__(self, key: object) -> bool:
        return str(key) in self.records

    def __len__(self) -> int:
        return len(self.records)

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self.path.open("a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.records[str(record[self.key_field])] = record

    def values(self) -> list[dict]:
        return list(self.records.values())
