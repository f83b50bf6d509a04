"""What a folder holds for the viewer: training runs (file-logger ``metrics.jsonl``, the trajectory dump
``step_<N>.jsonl``), eval runs (``rollouts.jsonl`` with its token sidecar ``rollouts.tokens.jsonl`` and
``report.json``), or both (the demo's output folder). Nothing here writes to them: a torn last line (a dump being
written) is skipped.

Each piece that is absent becomes one line in :attr:`Inputs.notes`; nothing absent is an error unless the folder holds
nothing at all.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentrl_recipe.eval.dump import TOKEN_KEYS, tokens_path
from agentrl_recipe.view import records

METRICS_FILE = "metrics.jsonl"  # verl's file logger (VERL_FILE_LOGGER_PATH; the demo's runs/<stage>/metrics.jsonl)
EVAL_DUMP = "rollouts.jsonl"  # agentrl_recipe.eval.runner.DUMP_FILE
EVAL_REPORT = "report.json"
STEP_FILE = re.compile(r"^step_(\d+)\.jsonl$")  # agentrl_recipe.training.trajectory_dump.STEP_FILE
MAX_DEPTH = 4


Key = tuple[str, int]  # an eval sample: (prompt_id, sample)
# The key at the head of an eval dump line (both files write prompt_id and sample first); other lines are parsed whole.
EVAL_KEY = re.compile(rb'^\{"prompt_id": ?("(?:[^"\\]|\\.)*"), ?"sample": ?(-?\d+)[,}]')


@dataclasses.dataclass(eq=False)
class StepFile:
    """One (run, step) of trajectories on disk."""

    run: str
    step: str
    path: Path
    kind: str  # "train" | "eval"
    tokenizer: str | None = None  # eval: decodes the sidecar's token ids (the eval's model)
    _offsets: tuple[dict[Key, int], dict[Key, int]] | None = None  # eval: key -> byte offset in the dump, the sidecar

    def read(self, tokens: bool = True) -> Iterator[dict[str, Any]]:
        """Every trajectory of the file; ``tokens=False``: an eval's without reading its token sidecar."""
        if self.kind == "train":
            for record in _json_lines(self.path):
                yield records.from_training(record, self.run)
            return
        joined = {_key(r): r for r in _json_lines(tokens_path(self.path))} if tokens else {}
        latest = {_key(r): r for r in _json_lines(self.path)}  # a re-graded sample's later line wins, as in the report
        for key, record in latest.items():
            yield self._eval(record, joined.get(key, {}))

    def _eval(self, record: dict[str, Any], ids: dict[str, Any]) -> dict[str, Any]:
        return records.from_eval(record | {k: ids[k] for k in TOKEN_KEYS if k in ids}, self.run, self.tokenizer)

    def find(self, trajectory_id: str) -> dict[str, Any] | None:
        """One eval trajectory with its tokens, read at its byte offsets (both files indexed on the first call), so
        ``--serve`` never holds a whole eval's token ids."""
        prompt_id, _, sample = trajectory_id.removeprefix(f"{self.run}/").rpartition("/")
        if self._offsets is None:
            self._offsets = (_line_offsets(self.path), _line_offsets(tokens_path(self.path)))
        key = (prompt_id, int(sample)) if sample.lstrip("-").isdigit() else None
        if key not in self._offsets[0]:
            return None
        ids = _line_at(tokens_path(self.path), self._offsets[1][key]) if key in self._offsets[1] else {}
        return self._eval(_line_at(self.path, self._offsets[0][key]), ids)


def _key(record: dict[str, Any]) -> Key:
    return str(record.get("prompt_id")), int(record.get("sample") or 0)


def _line_offsets(path: Path) -> dict[Key, int]:
    """Each eval sample's byte offset in ``path`` (the later line of a key wins; a torn last line is skipped)."""
    out: dict[Key, int] = {}
    if not path.is_file():
        return out
    offset = 0
    with open(path, "rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            if line.strip():
                head = EVAL_KEY.match(line)
                out[(json.loads(head[1]), int(head[2])) if head else _key(json.loads(line))] = offset
            offset += len(line)
    return out


def _line_at(path: Path, offset: int) -> dict[str, Any]:
    with open(path, "rb") as f:
        f.seek(offset)
        return dict(json.loads(f.readline()))


def _json_lines(path: Path) -> Iterator[dict[str, Any]]:
    """The JSON lines of ``path`` (none when absent); a torn last line — a dump being written — is skipped."""
    if not path.is_file():
        return
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.endswith("\n"):
                return
            if line.strip():
                yield json.loads(line)


@dataclasses.dataclass
class Inputs:
    root: Path
    metrics: dict[str, dict[int, dict[str, Any]]] = dataclasses.field(default_factory=dict)  # run -> step -> metrics
    steps: list[StepFile] = dataclasses.field(default_factory=list)
    reports: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)  # eval run -> report.json
    notes: list[str] = dataclasses.field(default_factory=list)


def _files(root: Path, name: str | re.Pattern[str]) -> list[Path]:
    """``*.jsonl`` files named ``name`` (or matching it) under ``root``, at most :data:`MAX_DEPTH` folders deep."""
    found = []
    for path in sorted(root.rglob("*.jsonl")):
        named = bool(name.match(path.name)) if isinstance(name, re.Pattern) else path.name == name
        if named and len(path.relative_to(root).parts) <= MAX_DEPTH + 1:
            found.append(path)
    return found


def _run_name(root: Path, folder: Path) -> str:
    rel = folder.relative_to(root).as_posix()
    return root.name if rel == "." else rel


def read_metrics(path: Path) -> dict[int, dict[str, Any]]:
    """verl's file-logger lines (``{"step": N, "data": {...}}``) merged by step; a torn last line is skipped."""
    by_step: dict[int, dict[str, Any]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and "step" in record and isinstance(record.get("data"), dict):
            by_step.setdefault(int(record["step"]), {}).update(record["data"])
    return by_step


def _train_run_folder(step_file: Path) -> Path:
    folder = step_file.parent
    return folder.parent if folder.name == "trajectories" else folder


def discover(root: Path, tokenizer: str | None = None) -> Inputs:
    """Every input under ``root`` (up to :data:`MAX_DEPTH` folders deep); ``tokenizer`` decodes the eval runs' token
    ids (default: each eval's model, from its report)."""
    root = root.resolve()
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a folder")
    found = Inputs(root=root)
    for path in _files(root, METRICS_FILE):
        found.metrics[_run_name(root, path.parent)] = read_metrics(path)
    step_files = _files(root, STEP_FILE)
    for path in step_files:
        match = STEP_FILE.match(path.name)
        assert match is not None
        run = _run_name(root, _train_run_folder(path))
        found.steps.append(StepFile(run=run, step=str(int(match.group(1))), path=path, kind="train"))
    found.steps.sort(key=lambda s: (s.run, int(s.step)))
    evals = []
    for path in _files(root, EVAL_DUMP):
        run = _run_name(root, path.parent)
        report = path.parent / EVAL_REPORT
        if report.is_file():
            found.reports[run] = json.loads(report.read_text(encoding="utf-8"))
        model = tokenizer or (found.reports.get(run, {}).get("protocol") or {}).get("model")
        evals.append(StepFile(run=run, step=run, path=path, kind="eval", tokenizer=model))
        if not tokens_path(path).is_file():
            found.notes.append(f"{run}: no {tokens_path(path).name} (an eval older than it): no token mode")
    # in the order they ran (eval_before before eval_after): by their report's time, then by name
    found.steps += sorted(evals, key=lambda e: (str(found.reports.get(e.run, {}).get("created_utc") or "~"), e.run))
    if not found.metrics and not found.steps:
        raise FileNotFoundError(
            f"{root}: no {METRICS_FILE} (verl's file logger), no step_<N>.jsonl (agentrl.trajectory_dump) and no "
            f"{EVAL_DUMP} (an eval run) within {MAX_DEPTH} folders"
        )
    if not found.metrics:
        found.notes.append(f"no {METRICS_FILE} (trainer.logger file): the run overview has no per-step metrics")
    if not step_files:
        found.notes.append(
            "no training trajectory dump (agentrl.trajectory_dump.dir): the reasoning-mode view shows eval runs only"
        )
    if not any(s.kind == "eval" for s in found.steps):
        found.notes.append(f"no eval run ({EVAL_DUMP}): before/after compares training steps only")
    return found
