"""The rollout dump: one JSON line per (prompt, sample), appended atomically, read back to resume.

A kill at any moment loses at most the batch being written: every batch is one ``write`` on an ``O_APPEND`` file
descriptor followed by ``fsync``, and a torn last line (the only damage a crash can do) is cut off on the next open
and reported. A malformed line anywhere else is an error, never skipped. When the same key appears twice the later
line wins, which is how a re-graded sample (after a sandbox ``infra_error``) replaces its first record.

Record keys (written by :mod:`agentrl_recipe.eval.runner`):
``prompt_id, sample, data_source, task, messages, response, final_answer, correct, score, grade, infra_failure,
num_turns, tool_calls, tool_failures, tool_statuses, tool_latency_s, malformed_tool_calls, void_turn,
tool_infra_failure, prompt_tokens, response_tokens``.

The trajectory's token ids go to a sidecar, ``rollouts.tokens.jsonl`` (:data:`TOKEN_KEYS` with the record's key, one
line per sample, written before its record): what ``agentrl-recipe view``'s token mode shows. Resume and the report
never read it, so its size (up to 9 bytes a token) costs them nothing; the same key twice: the later line wins.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentrl_recipe import atomic_io as core_io

logger = logging.getLogger(__name__)

Key = tuple[str, int]
TOKEN_KEYS = ("prompt_ids", "response_ids", "response_mask")  # the sidecar's (mask: 1 = model token, 0 = tool/template)


def record_key(record: dict[str, Any]) -> Key:
    return str(record["prompt_id"]), int(record["sample"])


def _json_default(value: Any) -> Any:
    # numpy scalars/arrays and tensors show up in rollout metadata; dump them as plain JSON values.
    if hasattr(value, "tolist"):
        return value.tolist()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, (set, tuple)):
        return list(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def tokens_path(dump_path: str | os.PathLike[str]) -> Path:
    """The token sidecar of the dump at ``dump_path``: ``rollouts.jsonl`` -> ``rollouts.tokens.jsonl``."""
    path = Path(dump_path)
    return path.with_name(f"{path.stem}.tokens{path.suffix}")


def _cut_torn_tail(path: Path) -> int:
    """Cut a last line without its newline (a write interrupted by a crash) off ``path``; returns the bytes cut."""
    if not path.exists():
        return 0
    size = path.stat().st_size
    if size == 0:
        return 0
    with open(path, "rb+") as f:
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return 0
        # Walk back to the last newline; everything after it is the torn line.
        pos, chunk = size, 1 << 16
        keep = 0
        while pos > 0:
            start = max(0, pos - chunk)
            f.seek(start)
            block = f.read(pos - start)
            nl = block.rfind(b"\n")
            if nl >= 0:
                keep = start + nl + 1
                break
            pos = start
        f.truncate(keep)
    logger.warning(
        "rollout dump %s: cut off a torn last line (%d bytes) left by an interrupted write", path, size - keep
    )
    return size - keep


def _append_lines(path: Path, lines: list[str]) -> None:
    """``lines`` as one ``write`` on an ``O_APPEND`` descriptor, then ``fsync``."""
    data = "".join(lines).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        view = memoryview(data)
        while view:  # os.write may write less than asked on some filesystems
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    finally:
        os.close(fd)


def _split_tokens(record: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``record`` without :data:`TOKEN_KEYS`, and its sidecar line (None when it has none of them)."""
    if not any(key in record for key in TOKEN_KEYS):
        return record, None
    line = {"prompt_id": record["prompt_id"], "sample": record["sample"]}
    line.update({key: record[key] for key in TOKEN_KEYS})
    return {k: v for k, v in record.items() if k not in TOKEN_KEYS}, line


class RolloutDump:
    """Append-only JSONL of per-sample records at ``path`` (created with its parent folder on first write), and the
    token sidecar :attr:`tokens_path`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.tokens_path = tokens_path(self.path)
        self.repaired_bytes = 0  # bytes of a torn last line cut off by the last load()

    def _repair_torn_tail(self) -> None:
        self.repaired_bytes = _cut_torn_tail(self.path)

    def iter_records(self) -> Iterator[dict[str, Any]]:
        """Every record in file order (after repairing a torn tail)."""
        self._repair_torn_tail()
        if not self.path.exists():
            return
        with open(self.path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    record_key(record)
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                    raise ValueError(
                        f"{self.path}:{lineno}: malformed rollout record ({e}); fix or move the file"
                    ) from e
                yield record

    def load(self) -> dict[Key, dict[str, Any]]:
        """``{(prompt_id, sample): record}``; later lines replace earlier ones with the same key."""
        return {record_key(r): r for r in self.iter_records()}

    def load_tokens(self) -> dict[Key, dict[str, Any]]:
        """The sidecar's ``{(prompt_id, sample): {prompt_ids, response_ids, response_mask}}`` (later lines win)."""
        _cut_torn_tail(self.tokens_path)
        if not self.tokens_path.exists():
            return {}
        out = {}
        with open(self.tokens_path, encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    row = json.loads(line)
                    out[record_key(row)] = {key: row[key] for key in TOKEN_KEYS}
        return out

    def append(self, records: Iterable[dict[str, Any]]) -> int:
        """Append ``records`` as one atomic write (their :data:`TOKEN_KEYS` to the sidecar, written first: a crash
        between the two leaves sidecar lines whose samples are generated again); returns how many were written."""
        split = [_split_tokens(r) for r in records]
        if not split:
            return 0
        tokens = [json.dumps(t, separators=(",", ":"), default=_json_default) + "\n" for _, t in split if t]
        if tokens:
            _append_lines(self.tokens_path, tokens)
        _append_lines(self.path, [json.dumps(r, ensure_ascii=False, default=_json_default) + "\n" for r, _ in split])
        return len(split)


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """JSON as eval writes it (indent 2, keys in insertion order, numpy values as plain ones), atomically."""
    core_io.atomic_write_json(path, obj, default=_json_default)
