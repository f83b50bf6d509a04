"""The released RL set as published (``Gen-Verse/Open-AgentRL-30K``) → our verl RL parquet, templated as the original.

``agentrl-recipe data rl-released <parquet | folder | hub id> --out rl/open_agentrl_30k.parquet``

The released parquet stores the sources' own prompts; Open-AgentRL's ``CustomRLHFDataset``
(``recipe/demystify/reward.py``) adds its prompt templates at load time, with ONE map function for the whole file,
picked from the data_source of its FIRST row:

* row 0 ``math_dapo`` / ``mega-science`` → ``map_fn2`` on every row: the stored content + the "no units" sentence,
  code and Skywork math rows included (they get no agent note, no "submit your code");
* anything else → ``map_fn_skywork`` on every row: ``code`` in the row's data_source → content + agent note +
  "submit your code"; otherwise the agent math template + "final numerical value" sentence, DAPO rows included.

``--templating first_row`` (default, what trained DemyAgent-4B) reproduces that; ``--templating per_row`` (our fix)
gives each row the map function its own data_source selects. The texts are :mod:`data_prep.prompts`
(verbatim).

Ground truths are kept as published, byte for byte: math answers as their text, code tests as their raw JSON text in
either Skywork-OR1 form, I/O ``{"inputs", "outputs"[, "fn_name"]}`` or the LeetCode assert harness ``{"import_prefix",
"test_code", "entry_point"}``. How they are graded is ``reward.reward_kwargs.ground_truth_form`` and ``leetcode_tests``
(``agentrl_recipe/training/rewards/ground_truth.py``): under ``compat: open_agentrl`` as the original graded them
(asserts run as asserts; a ``"fn_name": null`` row −1; a one-element list answer ``'["15625"]'`` compared as that text),
under
``agentrl`` normalized (null keys dropped, the list's element). The stats count both quirks: ``list_answers`` and
``code_fn_name_null``. ``data_source`` labels become ours (``math_dapo``,
``mega-science``, ``skywork_math`` for ``train-math-*``, ``skywork_code`` for any label with ``code``); the
published label is ``extra_info.source_label``.

Every row the released loader kept is kept (it loaded the file whole): a row our schema would refuse (an unknown
label, graded as math as the released ``compute_score`` did: ``skywork_math`` here; a ground truth in no form our
graders parse, graded as ``code_math.py`` did) is flagged ``extra_info.released_only`` with the reason.
``data.agentrl.keep_released_rows`` keeps those rows (compat ``open_agentrl``) or drops them at load (``agentrl``); the
job prints how many the fixed mode drops, and why (``released_only`` in the stats). Only a row the released loader
could not have read either (no prompt text, no ground truth) goes to ``<out>.rejects.jsonl``.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_parquet
from agentrl_recipe.training.rewards.ground_truth import CALL_TESTS_KEY, RELEASED_ONLY_KEY, decoded_list_answer
from data_prep import prompts, standalone
from data_prep.code_test_forms import prelude_shadow_report
from data_prep.files import earlier_report, fingerprint, load_source, mark_done, source_fingerprint
from data_prep.rows import ConvertError, convert_rows, text_field
from data_prep.schema import validate_rl_row
from data_prep.sink import RowSink, rejects_path
from data_prep.stats import write_report

LOADER_VERSION = 3  # bump when the output for the same input changes, so an up-to-date output is rebuilt
HUB_ID = "Gen-Verse/Open-AgentRL-30K"
TEMPLATINGS = ("first_row", "per_row")
MAP_FN2_LABELS = ("math_dapo", "mega-science")  # CustomRLHFDataset's map_fn2 branch
FLAG = "released_only: "  # the counts' prefix of a flagged row's reason
EVAL_LABELS = ("AIME2024", "AIME2025", "gpqa_diamond", "LiveCodeBench_v6")  # its eval-only map functions


def map_fn_name(label: str) -> str:
    """The map function CustomRLHFDataset picks for a file whose first row has this data_source."""
    if label in EVAL_LABELS:
        raise ConvertError("data_source", f"{label!r} selects the original's eval templates; use `data eval-sets`")
    return "map_fn2" if label in MAP_FN2_LABELS else "map_fn_skywork"


def templated(map_fn: str, label: str, content: str) -> str:
    """The prompt the original's map function makes of a row's stored content."""
    if map_fn == "map_fn2":
        return prompts.dapo_prompt(content)
    if "code" in label:  # map_fn_skywork decides per row, by substring, case-sensitive
        return prompts.code_agent_prompt(content)
    return prompts.skywork_math_prompt(content)


def our_data_source(label: str) -> tuple[str, str | None]:
    """Our data_source of a published label, and why the fixed mode drops the row (None: it keeps it)."""
    if label in (names.DS_DAPO, names.DS_MEGASCIENCE):
        return label, None
    if "code" in label.lower():  # compute_score's own test: 'code' in data_source.lower() → the code grader
        return names.DS_SKYWORK_CODE, None
    if label.startswith("train-math-"):
        return names.DS_SKYWORK_MATH, None
    return names.DS_SKYWORK_MATH, f"unknown label {label!r} (not math_dapo, mega-science, train-math-*, *code*): math"


def ground_truth_reason(row: dict) -> str | None:
    """Why our schema refuses ``row``'s ground truth (the released grader graded it anyway), or None."""
    errors = [
        e
        for e in validate_rl_row(row)
        if e.field.startswith(("reward_model.ground_truth", f"extra_info.{CALL_TESTS_KEY}"))
    ]
    return f"{errors[0].field}: {errors[0].message}"[:120] if errors else None


def ground_truth_text(value: Any) -> str:
    """The ground truth as stored text (a parquet struct back to the JSON text the scorers parse)."""
    if isinstance(value, dict):
        return json.dumps(value)
    if not isinstance(value, str) or not value.strip():
        raise ConvertError("reward_model.ground_truth", f"must be a non-empty string, got {value!r:.60}")
    return value


def quirks(gt: str, *, code: bool) -> list[str]:
    """The published quirks a ground truth shows (counted in the stats; graded per ``ground_truth_form``)."""
    if not code:
        return ["list_answers"] if decoded_list_answer(gt) is not None else []
    try:
        tests = json.loads(gt)
    except json.JSONDecodeError:
        return []
    return ["code_fn_name_null"] if isinstance(tests, dict) and "fn_name" in tests and tests["fn_name"] is None else []


def convert_released(row: dict, *, templating: str, file_map_fn: str, counts: Counter[str]) -> dict:
    """One published row → our RL row (templated, ground truth as published)."""
    label = text_field(row, "data_source")
    content = text_field(row, "prompt.0.content")
    data_source, label_reason = our_data_source(label)
    code = data_source == names.DS_SKYWORK_CODE
    map_fn = file_map_fn if templating == "first_row" else map_fn_name(label)
    rm = row.get("reward_model")
    gt = ground_truth_text(rm.get("ground_truth") if isinstance(rm, dict) else None)
    counts.update(quirks(gt, code=code))
    counts[f"templated_{map_fn}"] += 1
    prompt = [dict(m) for m in row["prompt"]]
    prompt[0] = {**prompt[0], "content": templated(map_fn, label, content)}
    extra_info = row.get("extra_info")
    source_extra: dict[str, Any] = extra_info if isinstance(extra_info, dict) else {}
    extra: dict[str, Any] = {"index": 0, "source_label": label, "question": content.strip(), "map_fn": map_fn}
    if source_extra.get("index") is not None:
        extra["source_id"] = str(source_extra["index"])
    if source_extra:  # kept whole, as text: its struct type varies between files
        extra["source_extra_info"] = json.dumps(source_extra, default=str)
    ability = row.get("ability") if isinstance(row.get("ability"), str) and row["ability"] else None
    out = {
        "data_source": data_source,
        "prompt": prompt,
        "ability": ability or ("code" if code else "math"),
        "reward_model": {"ground_truth": gt, "style": "rule"},
        "extra_info": extra,
        "agent_name": names.AGENT_LOOP,
    }
    reason = label_reason or ground_truth_reason(out)
    if reason is not None:
        extra[RELEASED_ONLY_KEY] = reason
        counts[FLAG + reason] += 1
    return out


def build_released(args: argparse.Namespace) -> dict[str, Any]:
    """Load, template, validate and write; returns the stats report (also written next to the output)."""
    out = Path(args.out)
    key = fingerprint([LOADER_VERSION, source_fingerprint(args.source), args.templating])
    stats_path = out.with_suffix(".stats.json")
    if (
        earlier := earlier_report(
            out,
            key,
            force=args.force,
            message=f"{out} is up to date (same source and settings); --force rebuilds it",
            stats=stats_path,
        )
    ) is not None:
        return earlier
    rows = load_source(args.source, default_split="train")
    if not rows:
        raise SystemExit(f"{args.source}: no rows")
    first_file, _, first = rows[0]
    try:
        file_map_fn = map_fn_name(str(first.get("data_source")))
    except ConvertError as e:
        raise SystemExit(f"{first_file}: row 0: {e}") from None
    sink = RowSink("rl", out)
    counts: Counter[str] = Counter()

    def convert(src: dict) -> dict:
        return convert_released(src, templating=args.templating, file_map_fn=file_map_fn, counts=counts)

    counts.update(convert_rows(rows, convert, sink, desc=f"load {Path(args.source).name}"))
    final = [{**row, "extra_info": {**row["extra_info"], "index": i}} for i, row in enumerate(sink.rows)]
    if not final:
        raise SystemExit(f"no valid rows; see {sink.write_rejects()}")
    report = {
        "output": str(out),
        "source": args.source,
        "templating": args.templating,
        "first_row_data_source": first.get("data_source"),
        "file_map_fn": file_map_fn,
        "by_data_source": dict(Counter(r["data_source"] for r in final)),
        **{k: v for k, v in counts.items() if not k.startswith(FLAG)},
        "released_only": {k.removeprefix(FLAG): v for k, v in counts.items() if k.startswith(FLAG)},
        "total_written": len(final),
        "code_fn_name_shadows_prelude": prelude_shadow_report(final),  # issue 34: code_test_forms.py
        "rejects_file": str(rejects_path(out)),
    }
    sink.write_rejects()
    write_report(stats_path, report)
    atomic_write_parquet(out, final)
    mark_done(out, key, rows=len(final))
    return report


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help=f"local parquet/jsonl file or folder, or hub id (paper: {HUB_ID})")
    parser.add_argument("--out", required=True, help="output parquet (stats and rejects are written next to it)")
    parser.add_argument(
        "--templating",
        choices=TEMPLATINGS,
        default="first_row",
        help="first_row = the original's one map function per file, from its first row (default, what trained the "
        "checkpoint); per_row = each row its own (the fix)",
    )
    parser.add_argument("--force", action="store_true", help="rebuild even if the output is up to date")


def main(args: argparse.Namespace) -> int:
    report = build_released(args)
    print(
        f"{report['source']}: {report['loaded']} rows, {report['total_written']} written "
        f"({report['templating']}; row 0 is {report['first_row_data_source']!r} → {report['file_map_fn']}), "
        f"{report.get('rejected', 0)} rejected → {report['rejects_file']}"
    )
    flagged = report.get("released_only") or {}
    print(
        f"kept as the released loader did, flagged released_only: {sum(flagged.values())} row(s); the fixed mode "
        "(compat agentrl: data.agentrl.keep_released_rows false) drops them at load"
        + "".join(f"\n  {n:6d}  {reason}" for reason, n in sorted(flagged.items(), key=lambda kv: -kv[1]))
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
