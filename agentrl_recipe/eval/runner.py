"""``run_eval(EvalConfig) -> report``: roll out k samples per problem, grade them, dump them, report.

The run folder holds ``protocol.json`` (the protocol the samples were drawn under), ``rollouts.jsonl`` (one record per
(prompt, sample), appended atomically per batch), ``report.json``, ``table.md`` and the PNG plots. Running again with
the same folder resumes: finished (prompt, sample) pairs are skipped, samples whose grading hit a sandbox
``infra_error`` are re-graded from their dumped response (never re-generated), and a changed protocol is refused
(the dumped samples would no longer match the report's protocol).
"""

from __future__ import annotations

import hashlib
import json
import logging
import platform
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.eval import report as report_lib
from agentrl_recipe.eval.dump import RolloutDump, atomic_write_json
from agentrl_recipe.eval.eval_set import EvalProblem, load_problems
from agentrl_recipe.eval.protocol import RESUMABLE_CHANGES, EvalConfig, protocol_deviations
from agentrl_recipe.eval.records import grade_items, make_record, regrade_infra_failures
from agentrl_recipe.eval.sampling import Generator, RolloutGenerator
from agentrl_recipe.eval.table import markdown_table
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.run_sync import run_coroutine_sync
from agentrl_sandbox import get_sandbox
from agentrl_sandbox.config import SandboxConfig

logger = logging.getLogger(__name__)

DUMP_FILE = "rollouts.jsonl"
PROTOCOL_FILE = "protocol.json"


# --- protocol check ---


def check_protocol(out_dir: Path, cfg: EvalConfig) -> dict[str, Any]:
    """Write ``protocol.json`` on the first run; on a resume, refuse protocol changes that invalidate the dump."""
    path = out_dir / PROTOCOL_FILE
    protocol = cfg.protocol()
    if not path.exists():
        atomic_write_json(path, protocol)
        return protocol
    with open(path, encoding="utf-8") as f:
        stored = json.load(f)
    changed = {
        k: (stored.get(k), protocol.get(k))
        for k in sorted(set(stored) | set(protocol))
        if k not in RESUMABLE_CHANGES and stored.get(k) != protocol.get(k)
    }
    if changed:
        lines = ", ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in changed.items())
        raise ValueError(
            f"{out_dir} holds samples drawn under another protocol ({lines}); resume with the same settings "
            "or choose a new output folder"
        )
    atomic_write_json(path, protocol)  # resumable fields (e.g. more samples) are updated
    return protocol


# --- work planning ---


def pending_samples(
    problems: Sequence[EvalProblem], done: dict[tuple[str, int], dict[str, Any]], n_samples: int
) -> list[tuple[EvalProblem, list[int]]]:
    """Per problem, the sample indices in ``[0, n_samples)`` not yet in the dump."""
    out = []
    for p in problems:
        missing = [s for s in range(n_samples) if (p.prompt_id, s) not in done]
        if missing:
            out.append((p, missing))
    return out


def batches(
    work: list[tuple[EvalProblem, list[int]]], problems_per_batch: int
) -> list[list[tuple[EvalProblem, list[int]]]]:
    return [work[i : i + problems_per_batch] for i in range(0, len(work), problems_per_batch)]


# --- reporting ---


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for dist in ("agentrl_recipe", "verl", "torch", "transformers", "vllm"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    return out


def write_report(
    out_dir: str | Path,
    *,
    protocol: dict[str, Any] | None = None,
    problems: Sequence[EvalProblem] | None = None,
    timing: dict[str, Any] | None = None,
    plots: bool = True,
) -> dict[str, Any]:
    """Build ``report.json``, ``table.md`` and the plots from the run folder's dump; returns the report."""
    from agentrl_recipe.eval.plots import write_plots  # matplotlib loads only when a report is written

    out = Path(out_dir)
    if protocol is None:
        with open(out / PROTOCOL_FILE, encoding="utf-8") as f:
            protocol = json.load(f)
    records = list(RolloutDump(out / DUMP_FILE).load().values())
    if problems is not None:  # report exactly this run's selection (a dump may hold more, e.g. a larger earlier k)
        wanted = {p.prompt_id for p in problems}
        n = int(protocol["n_samples"])
        records = [r for r in records if r["prompt_id"] in wanted and int(r["sample"]) < n]
    extra: dict[str, Any] = {
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "deviations_from_paper": protocol_deviations(protocol),
        "versions": _versions(),
        "files": {"dump": DUMP_FILE, "table": report_lib.TABLE_FILE},
    }
    if problems is not None:
        files = sorted({p.file for p in problems})
        extra["data"] = {
            "files": {f: {"sha256": _file_sha256(f)} for f in files},
            "problems_per_source": {
                s: sum(p.data_source == s for p in problems) for s in dict.fromkeys(p.data_source for p in problems)
            },
        }
    if timing:
        extra["timing"] = timing
    report = report_lib.build_report(records, protocol, extra=extra)
    report["files"]["plots"] = write_plots(report, out) if plots else []
    atomic_write_text(out / report_lib.TABLE_FILE, markdown_table(report))
    atomic_write_json(out / report_lib.REPORT_FILE, report)
    return report


# --- the run ---


def run_eval(cfg: EvalConfig, **kwargs: Any) -> dict[str, Any]:
    """Run (or resume) the eval described by ``cfg``; returns the report dict (also written to ``cfg.out_dir``).

    Blocking; safe to call from code that already runs an event loop (the run then gets a thread of its own).
    Keyword arguments are those of :func:`arun_eval`.
    """
    return run_coroutine_sync(arun_eval(cfg, **kwargs))


def _matched(batch: list[tuple[EvalProblem, list[int]]], trajectories: Sequence[Trajectory]) -> list[EvalProblem]:
    """The problem of each trajectory; raises unless the generator returned exactly the requested samples."""
    wanted = {(i, s) for i, (_, samples) in enumerate(batch) for s in samples}
    got = {(t.row_index, t.sample_index) for t in trajectories}
    if got != wanted or len(trajectories) != len(wanted):

        def named(pairs: set[tuple[int, int]]) -> list[tuple[str, int]]:
            return sorted((batch[i][0].prompt_id if 0 <= i < len(batch) else f"row {i}", s) for i, s in pairs)[:3]

        raise RuntimeError(
            f"the generator returned {len(trajectories)} trajectories for {len(wanted)} requested "
            f"(prompt, sample) pairs; missing {named(wanted - got)}, unexpected {named(got - wanted)}"
        )
    return [batch[t.row_index][0] for t in trajectories]


async def _generate_and_grade(
    cfg: EvalConfig,
    generator: Generator,
    work: list[tuple[EvalProblem, list[int]]],
    *,
    dump: RolloutDump,
    sandbox: Any,
    bar: Any,
    on_batch: Callable[[int], None] | None,
) -> tuple[float, float]:
    """Generate, grade and dump ``work`` batch by batch; returns (generation, grading) seconds."""
    gen_s = grade_s = 0.0
    for batch in batches(work, cfg.batch_size):
        t0 = time.monotonic()
        trajectories = await generator.generate([p for p, _ in batch], [s for _, s in batch])
        t1 = time.monotonic()
        problems_of = _matched(batch, trajectories)
        grades = await grade_items(
            [(p, t.response, t.messages) for p, t in zip(problems_of, trajectories, strict=True)],
            compat=cfg.compat,
            sandbox=sandbox,
            lcb_timeout_s=cfg.lcb_timeout_s,
        )
        written = dump.append(make_record(p, t, g) for p, t, g in zip(problems_of, trajectories, grades, strict=True))
        gen_s += t1 - t0
        grade_s += time.monotonic() - t1
        bar.update(written)
        if on_batch is not None:
            on_batch(written)
    return gen_s, grade_s


async def arun_eval(
    cfg: EvalConfig,
    *,
    generator: Generator | None = None,
    sandbox: Any = None,
    show_progress: bool = True,
    on_batch: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """:func:`run_eval` as a coroutine.

    ``generator`` defaults to the agent-loop rollout of ``cfg.backend``
    (:class:`agentrl_recipe.eval.sampling.RolloutGenerator`); tests and the demo may pass their own (it is then
    theirs to close). ``sandbox`` (grading) defaults to the one ``cfg.sandbox`` describes. ``on_batch`` is called
    with the number of records written after every batch (progress hooks).
    """
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    problems = load_problems(cfg.data, sources=cfg.sources, limit=cfg.limit)
    protocol = check_protocol(out, cfg)
    if sandbox is None:
        # The tool builds its sandbox from the same overrides, so grading shares the rollout's pool.
        sandbox = get_sandbox(SandboxConfig.from_dict(cfg.sandbox))
    dump = RolloutDump(out / DUMP_FILE)
    regraded = await regrade_infra_failures(
        dump, problems, compat=cfg.compat, sandbox=sandbox, lcb_timeout_s=cfg.lcb_timeout_s
    )
    if regraded:
        logger.info("re-graded %d samples whose grading had hit a sandbox infra_error", regraded)
    work = pending_samples(problems, dump.load(), cfg.n_samples)
    todo = sum(len(s) for _, s in work)
    total = cfg.n_samples * len(problems)
    gen_s = grade_s = 0.0
    if todo:
        own_generator = generator is None
        if generator is None:
            generator = RolloutGenerator(cfg)
        bar = tqdm(total=total, initial=total - todo, desc="eval", unit="traj", disable=not show_progress)
        try:
            gen_s, grade_s = await _generate_and_grade(
                cfg, generator, work, dump=dump, sandbox=sandbox, bar=bar, on_batch=on_batch
            )
        finally:
            bar.close()
            if own_generator:
                await generator.aclose()
    timing = {
        "generated_this_run": todo,
        "generation_s": round(gen_s, 3),
        "grading_s": round(grade_s, 3),
        "trajectories_per_s": round(todo / gen_s, 3) if gen_s > 0 else None,
        "regraded_infra_samples": regraded,
    }
    return write_report(out, protocol=protocol, problems=problems, timing=timing, plots=cfg.plots)
