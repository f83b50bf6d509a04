"""Atomic file writes, the one helper for the whole repository.

Every writer goes through :func:`atomic_path`: the content is written to a temp file in the destination's folder,
flushed to disk, and renamed over the destination, so a killed or failing writer leaves either the old file or the new
one (never half of one) and no temp file. Temp names start with a dot and end in ``.tmp``, so globs for the real
outputs never see them.

A leaf of ``core``: stdlib only at import time, because :mod:`agentrl_recipe.training.trace` uses it in every verl
worker.
``pyarrow`` and ``matplotlib`` are imported inside the writers that need them.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "atomic_path",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_jsonl",
    "atomic_write_parquet",
    "atomic_write_text",
    "save_figure",
]


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temp path next to ``path`` for the caller to write; on success rename it over ``path``.

    The temp file is not created here, so it gets the usual permissions of whatever writes it. On error (or when the
    body raises) it is removed and ``path`` is left as it was.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        yield tmp
        _fsync(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def build_dir_once(target: Path, marker: str, build: Callable[[Path], object]) -> Path:
    """``target``, built by ``build(staging)`` in a sibling folder renamed into place unless ``target/marker`` exists.

    ``build`` writes ``marker`` last. Processes that race build the same content: the loser drops its copy."""
    if (target / marker).is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        build(staging)
        try:
            staging.rename(target)
        except OSError:  # another process won the race; its build is identical
            if not (target / marker).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` as UTF-8, exactly as given (no newline added)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_json(
    path: str | os.PathLike[str],
    obj: Any,
    *,
    indent: int | None = 2,
    sort_keys: bool = False,
    ensure_ascii: bool = False,
    default: Callable[[Any], Any] | None = str,
) -> None:
    """Write ``obj`` as JSON followed by a newline; the keywords go to :func:`json.dumps`."""
    text = json.dumps(obj, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=default)
    atomic_write_text(path, text + "\n")


def atomic_write_jsonl(
    path: str | os.PathLike[str],
    records: Iterable[Any],
    *,
    ensure_ascii: bool = False,
    default: Callable[[Any], Any] | None = str,
) -> None:
    """Write one compact JSON line per record."""
    with atomic_path(path) as tmp, tmp.open("w", encoding="utf-8") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=ensure_ascii, default=default) + "\n")


def atomic_write_parquet(
    path: str | os.PathLike[str], rows: list[dict[str, Any]], *, allow_empty: bool = False
) -> None:
    """Write ``rows`` (list of dicts) as one parquet file; struct columns get the union of the rows' keys."""
    import pyarrow as pa  # heavy, and not needed by the workers that import this module for text writes
    import pyarrow.parquet as pq

    if not rows and not allow_empty:
        raise ValueError(f"refusing to write {path}: no rows")
    table = pa.Table.from_pylist(rows) if rows else pa.table({})
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def save_figure(fig: Any, path: str | os.PathLike[str], *, dpi: int = 110, **savefig_kwargs: Any) -> None:
    """Save a matplotlib figure as PNG atomically and close it; extra keywords go to ``fig.savefig``."""
    import matplotlib.pyplot as plt  # heavy; only plotting callers pay for it

    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=dpi, **savefig_kwargs)
    finally:
        plt.close(fig)
