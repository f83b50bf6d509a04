"""The paper's diverse RL mix: DAPO-Math-17k + Skywork-OR1 (math, code) + MegaScience → one verl RL parquet.

Steps: convert each source (cached per source, so a rerun after a kill redoes only unfinished sources) → exact and
normalised-text dedup across sources (earlier sources win) → decontamination against the eval sets (word n-gram
overlap) → per-source sampling (``--count`` / ``--weight``) → shuffle → validate → write atomically, with a stats
JSON, a prompt-length histogram PNG, a ``.removed.jsonl`` listing every row removed by dedup/decontamination and a
``.rejects.jsonl`` listing every source row that could not be converted.

Paper (App. A.4): DAPO-Math-17k (deduplicated ≈17.4K) + Skywork-OR1 4,902 math + 3,586 code + MegaScience ≈3K.
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_jsonl, atomic_write_parquet
from agentrl_recipe.problems import read_local_file
from data_prep import standalone
from data_prep.code_test_forms import prelude_shadow_report
from data_prep.files import earlier_report, fingerprint, mark_done, source_files, source_fingerprint
from data_prep.rl_sources import CONVERTER_VERSION, SOURCES, convert_source
from data_prep.schema import validate_rl_row
from data_prep.sink import rejects_path
from data_prep.stats import plot_length_histogram, summarize, write_report
from data_prep.text import Decontaminator, dedup


# ----------------------------------------------------------------------------------------------- mixing
def eval_texts(paths: list[str]) -> list[tuple[str, str]]:
    """(eval id, problem text) from eval parquet files written by ``data eval-sets`` (or any verl RL parquet)."""
    out = []
    for path in [f for spec in paths for f in source_files(spec) if f.suffix == ".parquet"]:
        for i, row in enumerate(read_local_file(path)):
            extra = row.get("extra_info") or {}
            text = extra.get("question") or row["prompt"][-1]["content"]
            out.append((f"{row.get('data_source', Path(path).stem)}:{extra.get('source_id', i)}", text))
    return out


def parse_source_numbers(items: list[str] | None, what: str, cast: Callable[[str], float]) -> dict[str, float]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or name not in SOURCES:
            raise SystemExit(f"--{what} {item!r}: expected SOURCE=VALUE with SOURCE in {sorted(SOURCES)}")
        try:
            out[name] = cast(value)
        except ValueError:
            raise SystemExit(f"--{what} {item!r}: {value!r} is not a number") from None
        if out[name] < 0:
            raise SystemExit(f"--{what} {item!r}: must be >= 0")
    return out


def sample_rows(rows: list[dict], target: int, rng: np.random.Generator) -> list[dict]:
    """``target`` rows: a subsample without replacement, or whole copies plus a subsample when upsampling."""
    if target <= len(rows):
        idx = sorted(rng.choice(len(rows), size=target, replace=False).tolist())
        return [rows[i] for i in idx]
    copies, rest = divmod(target, len(rows))
    extra = sorted(rng.choice(len(rows), size=rest, replace=False).tolist())
    return rows * copies + [rows[i] for i in extra]


def prompt_lengths(rows: list[dict], tokenizer_path: str | None) -> tuple[dict[str, list[int]], str]:
    by_source: dict[str, list[int]] = defaultdict(list)
    tok = None
    if tokenizer_path:
        from transformers import AutoTokenizer  # seconds to import; only --tokenizer needs it

        tok = AutoTokenizer.from_pretrained(tokenizer_path)
    for row in tqdm(rows, desc="prompt lengths", unit="row", mininterval=2, disable=tok is None):
        text = row["prompt"][-1]["content"]
        by_source[row["data_source"]].append(len(tok.encode(text)) if tok else len(text))
    return dict(by_source), "tokens" if tok else "characters"


def build_rl_mix(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    given = {name: getattr(args, spec.option) for name, spec in SOURCES.items() if getattr(args, spec.option)}
    if not given:
        raise SystemExit(
            "give a source: --dapo, --skywork-math, --skywork-code, --megascience (released set: `data rl-released`)"
        )
    counts_wanted = parse_source_numbers(args.count, "count", int)
    weights = parse_source_numbers(args.weight, "weight", float)
    for name in set(counts_wanted) & set(weights):
        raise SystemExit(f"{name}: give --count or --weight, not both")
    settings = {
        "sources": {k: source_fingerprint(v) for k, v in given.items()},
        "eval": [source_fingerprint(p) for p in args.eval or []],
        "count": counts_wanted,
        "weight": weights,
        **{k: getattr(args, k) for k in ("ngram", "threshold", "seed", "shuffle", "megascience_answers", "tokenizer")},
        "version": CONVERTER_VERSION,
    }
    key = fingerprint(settings)
    if (
        earlier := earlier_report(
            out, key, force=args.force, message=f"{out} is up to date (same sources and settings); --force rebuilds it"
        )
    ) is not None:
        return earlier

    report: dict[str, Any] = {"output": str(out), "sources": {}, "settings": settings}
    all_rows, all_rejects = _convert_all(given, out.parent / f".{out.stem}.work", args, report)
    kept, removed = _dedup_and_decontaminate(all_rows, args)
    removed_counts = Counter((r["data_source"], r["reason"]) for r in removed)
    for name, entry in report["sources"].items():
        for reason in ("duplicate_exact", "duplicate_normalized", "contaminated"):
            entry[reason] = removed_counts.get((name, reason), 0)
        entry["duplicate_exact"] += entry.pop("duplicate_exact_in_source", 0)
    final = _mix(kept, given, counts_wanted, weights, args, report)

    lengths, unit = prompt_lengths(final, args.tokenizer)
    report["total_written"] = len(final)
    report["code_fn_name_shadows_prelude"] = prelude_shadow_report(final)  # issue 34: code_test_forms.py
    report["prompt_length"] = {"unit": unit, **{k: summarize(v) for k, v in lengths.items()}}
    report["rejects_file"] = str(rejects_path(out))
    report["removed_file"] = str(out.with_suffix(".removed.jsonl"))
    atomic_write_jsonl(rejects_path(out), all_rejects)
    atomic_write_jsonl(out.with_suffix(".removed.jsonl"), removed)
    plot_length_histogram(out.with_suffix(".prompt_length.png"), lengths, unit=unit, title=f"{out.name}: prompts")
    write_report(out.with_suffix(".stats.json"), report)
    atomic_write_parquet(out, final)
    mark_done(out, key, rows=len(final))
    return report


def _convert_all(
    given: dict[str, str], work_dir: Path, args: argparse.Namespace, report: dict[str, Any]
) -> tuple[list[dict], list[dict]]:
    """Every source through its (cached) converter; per-source counts go to ``report["sources"]``."""
    all_rows: list[dict] = []
    all_rejects: list[dict] = []
    for name, source in given.items():
        options = {"answers": args.megascience_answers} if name == names.DS_MEGASCIENCE else {}
        res = convert_source(SOURCES[name], source, work_dir, options=options)
        all_rows += res["rows"]
        all_rejects += res["rejects"]
        report["sources"][name] = {
            "source": source,
            **res["counts"],
            "rejected": len(res["rejects"]),
            "converted": len(res["rows"]),
            "cached": res["cached"],
        }
    return all_rows, all_rejects


def _dedup_and_decontaminate(all_rows: list[dict], args: argparse.Namespace) -> tuple[list[dict], list[dict]]:
    """(kept rows, removed-row records): cross-source dedup (earlier sources win), then eval decontamination."""
    removed: list[dict] = []
    kept, dups = dedup(all_rows, lambda r: r["extra_info"]["question"])
    for d in dups:
        row, first = all_rows[d.item_index], all_rows[d.first_index]
        removed.append(_removed(row, f"duplicate_{d.how}", match=_row_id(first)))
    if args.eval:
        decon = Decontaminator(eval_texts(args.eval), n=args.ngram, threshold=args.threshold)
        clean = []
        for row in tqdm(kept, desc="decontaminate", unit="row", mininterval=2):
            hit = decon.check(row["extra_info"]["question"])
            if hit is None:
                clean.append(row)
            else:
                removed.append(_removed(row, "contaminated", match=hit.eval_id, score=round(hit.score, 4)))
        kept = clean
    return kept, removed


def _mix(
    kept: list[dict],
    given: dict[str, str],
    counts_wanted: dict[str, float],
    weights: dict[str, float],
    args: argparse.Namespace,
    report: dict[str, Any],
) -> list[dict]:
    """Per-source sampling (``--count`` / ``--weight``), shuffle, final ``extra_info.index`` and a last validation."""
    rng = np.random.default_rng(args.seed)
    by_source: dict[str, list[dict]] = defaultdict(list)
    for row in kept:
        by_source[row["data_source"]].append(row)
    mixed: list[dict] = []
    for name in given:
        rows = by_source.get(name, [])
        wanted = counts_wanted.get(name)
        target = int(wanted) if wanted is not None else round(weights.get(name, 1.0) * len(rows))
        if target and not rows:
            raise SystemExit(f"{name}: {target} rows requested but none survived conversion/dedup/decontamination")
        if target > len(rows):
            print(f"warning: {name}: {target} rows requested, {len(rows)} available — upsampling with repeats")
        picked = sample_rows(rows, target, rng) if target else []
        report["sources"][name]["written"] = len(picked)
        mixed += picked
    if args.shuffle:
        mixed = [mixed[i] for i in rng.permutation(len(mixed))]
    final = []
    for i, row in enumerate(mixed):
        row = {**row, "extra_info": {**row["extra_info"], "index": i}}
        errors = validate_rl_row(row)
        if errors:  # converted rows were validated already; this is a bug, not bad input
            raise AssertionError(f"row {i} invalid after mixing: {errors}")
        final.append(row)
    if not final:
        raise SystemExit("no rows left to write")
    return final


def _row_id(row: dict) -> str:
    extra = row["extra_info"]
    return f"{row['data_source']}:{extra.get('source_id', extra.get('source_row'))}"


def _removed(row: dict, reason: str, **info: Any) -> dict:
    return {
        "reason": reason,
        "data_source": row["data_source"],
        "id": _row_id(row),
        "question": row["extra_info"]["question"][:300],
        **info,
    }


# ----------------------------------------------------------------------------------------------- CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    for spec in SOURCES.values():
        parser.add_argument(
            f"--{spec.option.replace('_', '-')}",
            dest=spec.option,
            metavar="SOURCE",
            help=f"local parquet/jsonl file or folder, or hub id[:split] (paper: {spec.hub_id})",
        )
    parser.add_argument("--out", required=True, help="output parquet (stats, plots, rejects are written next to it)")
    parser.add_argument("--count", action="append", metavar="SOURCE=N", help="rows to take from a source")
    parser.add_argument("--weight", action="append", metavar="SOURCE=W", help="fraction (>1 upsamples) of a source")
    parser.add_argument(
        "--eval",
        nargs="*",
        metavar="PARQUET",
        help="eval parquet files/folders (from `data eval-sets`) to decontaminate against",
    )
    parser.add_argument("--ngram", type=int, default=13, help="word n-gram size for decontamination (default 13)")
    parser.add_argument(
        "--threshold", type=float, default=0.5, help="n-gram overlap fraction that marks a row contaminated (0.5)"
    )
    parser.add_argument(
        "--megascience-answers",
        choices=("numeric", "any"),
        default="numeric",
        help="keep MegaScience rows with a numeric reference answer only (default), or any non-empty one",
    )
    parser.add_argument("--tokenizer", help="measure prompt lengths in this tokenizer's tokens (default: characters)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-shuffle", dest="shuffle", action="store_false")
    parser.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")


def main(args: argparse.Namespace) -> int:
    report = build_rl_mix(args)
    for name, entry in report["sources"].items():
        print(f"{name:14s} " + " ".join(f"{k}={v}" for k, v in entry.items() if isinstance(v, int | bool)))
    print(f"wrote {report['total_written']} rows → {report['output']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
