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
import ast
import json
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from agentrl_recipe.core import names
from agentrl_recipe.core.io import atomic_write_jsonl, atomic_write_parquet
from agentrl_recipe.core.rewards.assert_tests import AssertTests
from agentrl_recipe.harness.data import prompts, released
from agentrl_recipe.harness.data.io import (
    cached_rows,
    fingerprint,
    is_up_to_date,
    load_source,
    mark_done,
    read_local_file,
    source_files,
    source_fingerprint,
)
from agentrl_recipe.harness.data.rows import ConvertError, convert_rows, get_field, rl_row, text_field
from agentrl_recipe.harness.data.schema import RowSink, drop_arrow_nulls, rejects_path, validate_rl_row
from agentrl_recipe.harness.data.stats import plot_length_histogram, summarize, write_report
from agentrl_recipe.harness.data.text import Decontaminator, dedup, exact_key

CONVERTER_VERSION = 3  # bump when a converter's output changes, so cached per-source stages are rebuilt


# ----------------------------------------------------------------------------------------------- converters
def convert_dapo(row: dict) -> dict:
    """DAPO-Math-17k (verl schema already; prompt wrapped in DAPO's "Answer:" template) → map_fn2 prompt."""
    content = text_field(row, "prompt.0.content")
    answer = text_field(row, "reward_model.ground_truth").strip()
    extra = {
        "source_label": str(row.get("data_source", "math_dapo")),
        "source_id": str(get_field(row, "extra_info.index")),
        "question": prompts.strip_dapo_wrapper(content),
    }
    return rl_row(names.DS_DAPO, prompts.dapo_prompt(content), "MATH", answer, extra)


def _skywork_extra(row: dict, content: str) -> dict[str, Any]:
    extra: dict[str, Any] = {
        "source_label": text_field(row, "data_source"),
        "source_id": str(get_field(row, "extra_info.index")),
        "question": content.strip(),
    }
    difficulty = (row.get("extra_info") or {}).get("model_difficulty")
    if isinstance(difficulty, dict) and difficulty:
        extra["model_difficulty"] = {k: int(v) for k, v in difficulty.items() if v is not None}
    return extra


def convert_skywork_math(row: dict) -> dict:
    """Skywork-OR1 math: bare problem → map_fn_skywork math template; ground truth '["15625"]' → "15625"."""
    content = text_field(row, "prompt.0.content")
    raw = text_field(row, "reward_model.ground_truth")
    try:
        decoded = json.loads(raw)
    except json.JSONDecodeError:
        decoded = raw
    if isinstance(decoded, list):
        if not decoded or not isinstance(decoded[0], str | int | float) or not str(decoded[0]).strip():
            raise ConvertError("reward_model.ground_truth", f"empty or non-scalar answer list {raw[:80]!r}")
        decoded = decoded[0]
    answer = str(decoded).strip()
    return rl_row(
        names.DS_SKYWORK_MATH, prompts.skywork_math_prompt(content), "math", answer, _skywork_extra(row, content)
    )


def _test_text(value: Any, *, call_based: bool, what: str) -> str:
    """One test input/output as the string our code scorer expects (lists of lines / JSON args are joined)."""
    if isinstance(value, str):
        return value
    if call_based:
        if what == "input" and isinstance(value, list):
            return "\n".join(json.dumps(v) for v in value)
        return json.dumps(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return "\n".join(value) + ("\n" if value and not value[-1].endswith("\n") else "")
    if isinstance(value, int | float):
        return str(value)
    raise ConvertError(f"reward_model.ground_truth.{what}s", f"cannot use {type(value).__name__} as a test {what}")


def io_tests(tests: dict) -> dict[str, Any]:
    """Skywork/TACO I/O tests → the CONTRACTS code-test object."""
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise ConvertError("reward_model.ground_truth", "inputs/outputs must be equal-length non-empty lists")
    fn_name = tests.get("fn_name") or None
    call = fn_name is not None
    return {
        "inputs": [_test_text(v, call_based=call, what="input") for v in inputs],
        "outputs": [_test_text(v, call_based=call, what="output") for v in outputs],
        "fn_name": fn_name,
    }


def _signature_params(content: str, fn_name: str) -> list[str] | None:
    """Parameter names (without self) of ``def fn_name(self, ...)`` in the problem's starter code, if present."""
    m = re.search(rf"def\s+{re.escape(fn_name)}\s*\((.*?)\)\s*(->[^:]*)?:", content, re.DOTALL)
    if not m:
        return None
    try:
        fn = ast.parse(f"def f({m.group(1)}): pass").body[0]
    except SyntaxError:
        return None
    params = [a.arg for a in fn.args.args]  # type: ignore[attr-defined]
    return params[1:] if params and params[0] == "self" else params


def leetcode_assert_tests(tests: dict, content: str) -> dict[str, Any]:
    """LeetCode assert harness → call-based tests (one JSON value per line per argument, JSON expected output).

    Only ``assert candidate(<literal args>) == <literal>`` converts; helper-object asserts (ListNode, TreeNode, ...)
    cannot be expressed in the LiveCodeBench encoding and raise (the caller keeps them as raw asserts).
    """
    entry = tests.get("entry_point")
    code = tests.get("test_code")
    if not isinstance(entry, str) or not isinstance(code, str):
        raise ConvertError("reward_model.ground_truth", "LeetCode tests need entry_point and test_code strings")
    fn_name = entry.rsplit(".", 1)[-1]
    if not fn_name.isidentifier():
        raise ConvertError("reward_model.ground_truth.entry_point", f"cannot take a method name from {entry!r}")
    params = _signature_params(content, fn_name)
    inputs, outputs = [], []
    for line in code.splitlines()[1:]:
        stmt = line.strip()
        if not stmt or stmt.startswith("#"):
            continue
        try:
            node = ast.parse(stmt).body[0]
            if not (
                isinstance(node, ast.Assert)
                and isinstance(node.test, ast.Compare)
                and len(node.test.ops) == 1
                and isinstance(node.test.ops[0], ast.Eq)
                and isinstance(node.test.left, ast.Call)
                and isinstance(node.test.left.func, ast.Name)
                and node.test.left.func.id == "candidate"
            ):
                raise ValueError("not `assert candidate(...) == value`")
            call = node.test.left
            args = [ast.literal_eval(a) for a in call.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
            if None in kwargs:
                raise ValueError("**kwargs")
            if kwargs:
                order = params if params is not None else list(kwargs)
                rest = order[len(args) :]
                if set(rest) != set(kwargs):
                    raise ValueError(f"keywords {sorted(kwargs)} do not match the signature {order}")
                args += [kwargs[name] for name in rest]
            expected = ast.literal_eval(node.test.comparators[0])
            inputs.append("\n".join(json.dumps(a) for a in args))
            outputs.append(json.dumps(expected))
        except (SyntaxError, ValueError, TypeError, IndexError) as e:
            raise ConvertError(
                "reward_model.ground_truth.test_code", f"unconvertible assert {stmt[:100]!r}: {e}"
            ) from e
    if not inputs:
        raise ConvertError("reward_model.ground_truth.test_code", "no assert lines")
    return {"inputs": inputs, "outputs": outputs, "fn_name": fn_name}


def leetcode_assert_tests_or_raw(tests: dict, content: str) -> dict[str, Any]:
    """Literal asserts → call-based tests; asserts on helper objects (ListNode, TreeNode) stay a raw assert harness,
    graded as the original did, by running them (agentrl_recipe/core/rewards/assert_tests.py)."""
    try:
        return leetcode_assert_tests(tests, content)
    except ConvertError as literal_error:
        raw = {k: tests.get(k) for k in ("import_prefix", "test_code", "entry_point")}
        try:
            AssertTests.parse(raw)
        except ValueError as e:
            raise ConvertError(literal_error.field, f"{literal_error}; as raw asserts: {e}") from e
        return raw


def convert_skywork_code(row: dict) -> dict:
    """Skywork-OR1 code: prompt + agent note + "submit your code"; tests → the CONTRACTS JSON string."""
    content = text_field(row, "prompt.0.content")
    raw = text_field(row, "reward_model.ground_truth")
    try:
        tests = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConvertError("reward_model.ground_truth", f"not JSON ({e.msg})") from e
    if not isinstance(tests, dict):
        raise ConvertError("reward_model.ground_truth", f"expected a JSON object, got {type(tests).__name__}")
    tests = {k: v for k, v in tests.items() if v is not None}  # Skywork's own loader drops None-valued keys
    if "inputs" in tests:
        converted = io_tests(tests)
    elif "test_code" in tests:
        converted = leetcode_assert_tests_or_raw(tests, content)
    else:
        raise ConvertError("reward_model.ground_truth", f"unknown test encoding with keys {sorted(tests)}")
    extra = _skywork_extra(row, content)
    extra["num_tests"] = len(converted["inputs"]) if "inputs" in converted else len(AssertTests.parse(converted))
    return rl_row(names.DS_SKYWORK_CODE, prompts.code_agent_prompt(content), "code", json.dumps(converted), extra)


_NUMBER = re.compile(r"^[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^[-+]?\d+/\d+$")


def is_numeric_answer(text: str) -> bool:
    return bool(_NUMBER.match(text.strip().replace(",", "")))


def convert_megascience(row: dict, *, answers: str = "numeric") -> dict | None:
    """MegaScience: question + map_fn2's "no units" note; ground truth = reference_answer.

    ``answers="numeric"`` keeps only rows with a numeric reference answer (the "numerical value only" prompt implies
    that selection; the paper's exact rule is unpublished). Returns None for rows the selection leaves out.
    """
    question = text_field(row, "question")
    answer = str(row.get("reference_answer") or "").strip()
    if not answer or (answers == "numeric" and not is_numeric_answer(answer)):
        return None
    subject = str(row.get("subject") or "").strip()
    extra = {"source_label": "MegaScience", "question": question.strip(), "subject": subject}
    if row.get("source"):
        extra["source_id"] = str(row["source"])
    return rl_row(names.DS_MEGASCIENCE, prompts.dapo_prompt(question), subject or "science", answer, extra)


@dataclass(frozen=True)
class SourceSpec:
    name: str  # data_source written
    option: str  # CLI option
    default_split: str
    convert: Callable[..., dict | None]
    hub_id: str  # what the paper used


SOURCES: dict[str, SourceSpec] = {
    names.DS_DAPO: SourceSpec(names.DS_DAPO, "dapo", "train", convert_dapo, "BytedTsinghua-SIA/DAPO-Math-17k"),
    names.DS_SKYWORK_MATH: SourceSpec(
        names.DS_SKYWORK_MATH, "skywork_math", "math", convert_skywork_math, "Skywork/Skywork-OR1-RL-Data:math"
    ),
    names.DS_SKYWORK_CODE: SourceSpec(
        names.DS_SKYWORK_CODE, "skywork_code", "code", convert_skywork_code, "Skywork/Skywork-OR1-RL-Data:code"
    ),
    names.DS_MEGASCIENCE: SourceSpec(
        names.DS_MEGASCIENCE, "megascience", "train", convert_megascience, "MegaScience/MegaScience"
    ),
}


def convert_source(spec: SourceSpec, source: str, work_dir: Path, *, options: dict[str, Any]) -> dict[str, Any]:
    """Convert one source into a cached stage file; returns rows, rejects and counts."""
    stage = work_dir / f"{spec.name}.parquet"
    key = fingerprint([CONVERTER_VERSION, spec.name, source_fingerprint(source), options])
    sink = RowSink("rl", stage)
    counts: Counter[str] = Counter()

    def build() -> list[dict]:
        rows = load_source(source, default_split=spec.default_split)
        counts.update(convert_rows(rows, lambda src: spec.convert(src, **options), sink, desc=f"convert {spec.name}"))
        sink.write_rejects()
        # DAPO-Math-17k repeats each of its ~17.4K problems ~100×: drop exact repeats inside a source before the
        # stage is written (counted, not listed); the cross-source dedup later lists what it removes.
        unique: dict[str, dict] = {}
        for row in sink.rows:
            unique.setdefault(exact_key(row["extra_info"]["question"]), row)
        counts["duplicate_exact_in_source"] = len(sink.rows) - len(unique)
        write_report(stage.with_suffix(".counts.json"), dict(counts))
        return list(unique.values())

    rows, cached = cached_rows(stage, key, build)
    rows = [drop_arrow_nulls(r) for r in rows] if cached else rows
    rejects = read_local_file(rejects_path(stage))
    counts_file = stage.with_suffix(".counts.json")
    counts = Counter(json.loads(counts_file.read_text())) if counts_file.exists() else counts
    return {"rows": rows, "rejects": rejects, "counts": dict(counts), "cached": cached}


# ----------------------------------------------------------------------------------------------- mixing
def eval_texts(paths: list[str]) -> list[tuple[str, str]]:
    """(eval id, problem text) from eval parquet files written by ``data eval`` (or any verl RL parquet)."""
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
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(tokenizer_path)
    for row in tqdm(rows, desc="prompt lengths", unit="row", mininterval=2, disable=tok is None):
        text = row["prompt"][-1]["content"]
        by_source[row["data_source"]].append(len(tok.encode(text)) if tok else len(text))
    return dict(by_source), "tokens" if tok else "characters"


def build_rl_mix(args: argparse.Namespace) -> dict[str, Any]:
    out = Path(args.out)
    given = {name: getattr(args, spec.option) for name, spec in SOURCES.items() if getattr(args, spec.option)}
    if not given:
        raise SystemExit("give a source (--dapo, --skywork-math, --skywork-code, --megascience) or --released")
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
    if is_up_to_date(out, key) and not args.force:
        print(f"{out} is up to date (same sources and settings); --force rebuilds it")
        return json.loads(out.with_suffix(".stats.json").read_text())

    work_dir = out.parent / f".{out.stem}.work"
    report: dict[str, Any] = {"output": str(out), "sources": {}, "settings": settings}
    all_rows: list[dict] = []
    all_rejects: list[dict] = []
    for name, source in given.items():
        spec = SOURCES[name]
        options = {"answers": args.megascience_answers} if name == names.DS_MEGASCIENCE else {}
        res = convert_source(spec, source, work_dir, options=options)
        all_rows += res["rows"]
        all_rejects += res["rejects"]
        report["sources"][name] = {
            "source": source,
            **res["counts"],
            "rejected": len(res["rejects"]),
            "converted": len(res["rows"]),
            "cached": res["cached"],
        }

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
    removed_counts = Counter((r["data_source"], r["reason"]) for r in removed)
    for name, entry in report["sources"].items():
        for reason in ("duplicate_exact", "duplicate_normalized", "contaminated"):
            entry[reason] = removed_counts.get((name, reason), 0)
        entry["duplicate_exact"] += entry.pop("duplicate_exact_in_source", 0)

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

    lengths, unit = prompt_lengths(final, args.tokenizer)
    report["total_written"] = len(final)
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
    released.add_arguments(parser)  # --released / --templating: the published set instead of the mix
    parser.add_argument("--out", required=True, help="output parquet (stats, plots, rejects are written next to it)")
    parser.add_argument("--count", action="append", metavar="SOURCE=N", help="rows to take from a source")
    parser.add_argument("--weight", action="append", metavar="SOURCE=W", help="fraction (>1 upsamples) of a source")
    parser.add_argument(
        "--eval",
        nargs="*",
        metavar="PARQUET",
        help="eval parquet files/folders (from `data eval`) to decontaminate against",
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
    if args.released:
        mixed = [spec.option for spec in SOURCES.values() if getattr(args, spec.option)]
        if mixed:
            raise SystemExit(f"--released loads the published set as it is; drop --{mixed[0].replace('_', '-')}")
        return released.main(args)
    report = build_rl_mix(args)
    for name, entry in report["sources"].items():
        print(f"{name:14s} " + " ".join(f"{k}={v}" for k, v in entry.items() if isinstance(v, int | bool)))
    print(f"wrote {report['total_written']} rows → {report['output']}")
    return 0


if __name__ == "__main__":
    from agentrl_recipe.harness.data import standalone

    raise SystemExit(standalone(__name__))
