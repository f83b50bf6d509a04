"""The paper's eval sets → verl RL parquet: AIME24 (30), AIME25 (30), GPQA-Diamond (198), LiveCodeBench v6 (175).

Each source is either the upstream benchmark or the Open-AgentRL-Eval file (detected by its columns; ``--released``
takes all four from that dataset, as the released eval scripts did); prompts are the original's map_fn /
map_fn_gpqa / map_lcb texts. GPQA options are shuffled with a fixed seed per question and the gold
letter becomes the ground truth. LiveCodeBench tests (public + private, the private ones base64/zlib/pickled in the
release) are decoded into the project's code-test JSON string. Writes ``<name>.parquet`` per benchmark (every
``ground_truth`` is a string, so verl can take them together in one ``val_files`` list), rejects and a stats report.
"""

from __future__ import annotations

import argparse
import random
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_parquet
from data_prep import prompts, standalone
from data_prep.eval_lcb import make_lcb_converter, upstream_tests
from data_prep.files import earlier_report, fingerprint, is_local_source, load_source, mark_done, source_fingerprint
from data_prep.rows import ConvertError, convert_rows, rl_row, text_field
from data_prep.sink import RowSink
from data_prep.stats import plot_length_histogram, write_report

PAPER_ROWS = {names.DS_AIME24: 30, names.DS_AIME25: 30, names.DS_GPQA: 198, names.DS_LCB_V6: 175}
HUB_SOURCES = {
    names.DS_AIME24: "Maxwell-Jia/AIME_2024",
    names.DS_AIME25: "yentinglin/aime_2025",
    names.DS_GPQA: "Idavidrein/gpqa (config gpqa_diamond; gated: accept its terms, then pass a local copy or the id)",
    names.DS_LCB_V6: "hf://datasets/livecodebench/code_generation_lite/test6.jsonl",
}
EVAL_VERSION = 1
# Open-AgentRL-Eval, as the released eval scripts read it (eval_qwen3_4b_aime_gpqa.sh:6-8,
# eval_qwen3_4b_livecodebench.sh:6): `--released <folder | hub id>` takes each benchmark from there
RELEASED_HUB_ID = "Gen-Verse/Open-AgentRL-Eval"
RELEASED_FILES = {
    "aime24": "aime2024/aime_2024_problems.parquet",
    "aime25": "aime2025/aime_2025_problems.parquet",
    "gpqa": "gpqa-diamond/gpqa_diamond.parquet",
    "lcb": "livecodebench-v6/lcb_v6_2502_2505.parquet",
}


# ----------------------------------------------------------------------------------------------- AIME
def _answer_text(value: Any, field: str) -> str:
    if isinstance(value, bool) or value is None:
        raise ConvertError(field, f"missing or invalid answer {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value).strip()
    if not text:
        raise ConvertError(field, "empty answer")
    return text


def _aime(
    data_source: str, problem_keys: tuple[str, ...], answer_keys: tuple[str, ...], id_keys: tuple[str, ...]
) -> Callable[[dict], dict]:
    def convert(row: dict) -> dict:
        pkey = next((k for k in problem_keys if k in row), problem_keys[0])
        akey = next((k for k in answer_keys if k in row), answer_keys[0])
        problem = text_field(row, pkey).strip()
        answer = _answer_text(row.get(akey), akey)
        extra = {"question": problem, "source_id": str(next((row[k] for k in id_keys if k in row), ""))}
        return rl_row(data_source, prompts.math_agent_prompt(problem), "MATH", answer, extra)

    return convert


convert_aime24 = _aime(names.DS_AIME24, ("Problem", "problem"), ("Answer", "answer"), ("ID", "id"))
convert_aime25 = _aime(names.DS_AIME25, ("problem", "Problem"), ("answer", "Answer"), ("id", "ID"))


# ----------------------------------------------------------------------------------------------- GPQA
def shuffle_options(correct: str, incorrect: list[str], key: str, seed: int) -> tuple[list[str], str]:
    """Options in a fixed pseudo-random order (seeded by ``seed`` and the question), and the gold letter."""
    options = [correct, *incorrect]
    order = list(range(len(options)))
    random.Random(f"{seed}:{key}").shuffle(order)
    shuffled = [options[i] for i in order]
    return shuffled, string.ascii_uppercase[order.index(0)]


def render_gpqa(question: str, options: list[str]) -> str:
    return question.strip() + "\n" + "\n".join(f"({string.ascii_uppercase[i]}) {o}" for i, o in enumerate(options))


def make_gpqa_converter(seed: int) -> Callable[[dict], dict]:
    def convert(row: dict) -> dict:
        if "Question" in row:  # upstream Idavidrein/gpqa
            question = text_field(row, "Question")
            correct = text_field(row, "Correct Answer").strip()
            wrong = [text_field(row, f"Incorrect Answer {i}").strip() for i in (1, 2, 3)]
            domain = text_field(row, "High-level domain").strip()
            options, letter = shuffle_options(correct, wrong, row.get("Record ID") or question, seed)
            problem = render_gpqa(question, options)
            extra = {"question": question.strip(), "source_id": str(row.get("Record ID", "")), "options": options}
        else:  # Open-AgentRL-Eval: options already rendered into `problem`, letter in `solution`
            problem = text_field(row, "problem").strip()
            letter = text_field(row, "solution").strip().strip("()")
            domain = text_field(row, "domain").strip()
            extra = {"question": problem, "source_id": str(row.get("id", ""))}
        if len(letter) != 1 or letter not in string.ascii_uppercase:
            raise ConvertError("solution", f"expected one option letter, got {letter!r}")
        extra["domain"] = domain
        return rl_row(names.DS_GPQA, prompts.gpqa_prompt(problem, domain), domain, letter, extra)

    return convert


# ----------------------------------------------------------------------------------------------- driver
def released_sources(root: str) -> dict[str, str]:
    """The four Open-AgentRL-Eval files under ``root``: a local copy of the dataset, or its hub id."""
    if is_local_source(root):
        return {flag: str(Path(root) / rel) for flag, rel in RELEASED_FILES.items()}
    return {flag: f"hf://datasets/{root}/{rel}" for flag, rel in RELEASED_FILES.items()}


def build_eval_sets(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "released", None):  # the released eval's files; a benchmark flag given too wins
        for flag, source in released_sources(args.released).items():
            setattr(args, flag, getattr(args, flag) or source)
    out_dir = Path(args.out_dir)
    full = None
    if args.lcb_tests_from:  # an Open-AgentRL-Eval LCB file graded on LiveCodeBench's own tests
        full = upstream_tests([row for _, _, row in load_source(args.lcb_tests_from, default_split="test")])
    specs = {
        names.DS_AIME24: (args.aime24, convert_aime24, None),
        names.DS_AIME25: (args.aime25, convert_aime25, None),
        names.DS_GPQA: (args.gpqa, make_gpqa_converter(args.seed), "gpqa_diamond"),
        names.DS_LCB_V6: (args.lcb, make_lcb_converter(args.lcb_tests, args.lcb_start, args.lcb_end, full), None),
    }
    given = {k: v for k, v in specs.items() if v[0]}
    if not given:
        raise SystemExit("give at least one of --aime24 --aime25 --gpqa --lcb")
    settings = {
        "sources": {k: source_fingerprint(v[0]) for k, v in given.items()},
        **{k: getattr(args, k) for k in ("seed", "lcb_tests", "lcb_start", "lcb_end")},
        "lcb_tests_from": source_fingerprint(args.lcb_tests_from) if args.lcb_tests_from else None,
        "version": EVAL_VERSION,
    }
    key = fingerprint(settings)
    stats_path = out_dir / "eval.stats.json"  # written last: its meta file marks the whole set as done
    outputs_exist = all((out_dir / f"{name}.parquet").exists() for name in given)
    earlier = None
    if outputs_exist:
        message = f"{out_dir} is up to date; --force rebuilds it"
        earlier = earlier_report(stats_path, key, force=args.force, message=message, stats=stats_path)
    if earlier is not None:
        return earlier
    report: dict[str, Any] = {"out_dir": str(out_dir), "benchmarks": {}, "settings": settings}
    total = 0
    lengths: dict[str, list[int]] = {}
    for name, (source, convert, config) in given.items():
        out = out_dir / f"{name}.parquet"
        sink = RowSink("rl", out)
        rows = load_source(source, default_split="test" if name == names.DS_LCB_V6 else "train", config=config)
        counts = convert_rows(rows, convert, sink, desc=f"convert {name}")
        for i, row in enumerate(sink.rows):
            row["extra_info"]["index"] = i
        if sink.rows:
            atomic_write_parquet(out, sink.rows)
        else:
            out.unlink(missing_ok=True)  # never leave a stale file from an earlier run next to a fresh report
        sink.write_rejects()
        total += len(sink.rows)
        lengths[name] = [len(r["prompt"][-1]["content"]) for r in sink.rows]
        entry = {"source": source, **counts, "written": len(sink.rows), "paper_rows": PAPER_ROWS[name]}
        if sink.rejects:
            entry["reject_reasons"] = sink.reason_counts()
        if len(sink.rows) != PAPER_ROWS[name]:
            print(f"warning: {name}: {len(sink.rows)} rows, the paper's set has {PAPER_ROWS[name]}")
        report["benchmarks"][name] = entry
    if not total:
        raise SystemExit("no eval rows were written; see the rejects files")
    report["total_written"] = total
    plot_length_histogram(out_dir / "eval.prompt_length.png", lengths, unit="characters", title="eval prompts")
    write_report(stats_path, report)
    mark_done(stats_path, key, rows=total)
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    for name, flag in ((names.DS_AIME24, "aime24"), (names.DS_AIME25, "aime25"), (names.DS_GPQA, "gpqa")):
        parser.add_argument(
            f"--{flag}", metavar="SOURCE", help=f"file/folder or hub id[:split] (paper: {HUB_SOURCES[name]})"
        )
    parser.add_argument(
        "--lcb",
        metavar="SOURCE",
        help=f"LiveCodeBench jsonl shard(s) or Open-AgentRL file (paper: {HUB_SOURCES[names.DS_LCB_V6]})",
    )
    parser.add_argument(
        "--lcb-tests",
        choices=("all", "public"),
        default="all",
        help="grade on public + private tests (default) or public only (what Open-AgentRL's file holds)",
    )
    parser.add_argument(
        "--lcb-tests-from",
        metavar="SOURCE",
        help="grade an Open-AgentRL-Eval LCB file on LiveCodeBench's own public + private tests (its official "
        f"evaluation, how the paper's LCB numbers were graded), matched by question_id (paper: "
        f"{HUB_SOURCES[names.DS_LCB_V6]})",
    )
    parser.add_argument("--lcb-start", metavar="YYYY-MM-DD", help="keep LCB problems with contest_date >= this")
    parser.add_argument("--lcb-end", metavar="YYYY-MM-DD", help="keep LCB problems with contest_date <= this")
    parser.add_argument(
        "--released",
        metavar="SOURCE",
        help=f"the released eval's files: a local {RELEASED_HUB_ID} folder or the hub id (what `eval run --compat "
        "open_agentrl` grades as the paper's numbers were graded: GPQA options as the file renders them, LCB on its "
        "public tests)",
    )
    parser.add_argument("--seed", type=int, default=0, help="GPQA option-shuffle seed (default 0)")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--force", action="store_true")


def main(args: argparse.Namespace) -> int:
    report = build_eval_sets(args)
    for name, entry in report["benchmarks"].items():
        print(
            f"{name:18s} written={entry['written']} (paper {entry['paper_rows']}) rejected={entry.get('rejected', 0)}"
        )
    print(f"wrote {report['total_written']} rows → {report['out_dir']}/<benchmark>.parquet")
    return 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
