"""The RL mix's sources, one converter each: DAPO-Math-17k, Skywork-OR1 (math, code) and MegaScience → verl RL rows.

:func:`convert_source` converts one source into a cached stage file next to the output (``.<out>.work/``), so a rerun
after a kill redoes only the unfinished sources; :mod:`data_prep.jobs.rl_mix` mixes the stages.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from agentrl_recipe.training.rewards.code.assert_form import AssertTests
from agentrl_recipe.training.rewards.ground_truth import CALL_TESTS_KEY
from data_prep import prompts
from data_prep.code_test_forms import io_tests, leetcode_asserts_and_call_tests
from data_prep.files import cached_rows, fingerprint, load_source, source_fingerprint
from data_prep.rows import ConvertError, convert_rows, get_field, rl_row, text_field
from data_prep.schema import drop_arrow_nulls
from data_prep.sink import RowSink, rejects_path
from data_prep.stats import write_report
from data_prep.text import exact_key

CONVERTER_VERSION = 4  # bump when a converter's output changes, so cached per-source stages are rebuilt


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


def convert_skywork_code(row: dict) -> dict:
    """Skywork-OR1 code: prompt + agent note + "submit your code"; tests → the CONTRACTS JSON string.

    A LeetCode row keeps its assert harness as its ground truth (graded by running the asserts, as the released grader
    did: ``reward_kwargs.leetcode_tests: asserts``, compat open_agentrl); its call-based conversion, where every assert
    is a literal call, goes to ``extra_info.call_tests`` (graded under ``leetcode_tests: call``, compat agentrl).
    """
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
        converted, call_tests = leetcode_asserts_and_call_tests(tests, content)
    else:
        raise ConvertError("reward_model.ground_truth", f"unknown test encoding with keys {sorted(tests)}")
    extra = _skywork_extra(row, content)
    extra["num_tests"] = len(converted["inputs"]) if "inputs" in converted else len(AssertTests.parse(converted))
    if "test_code" in tests and call_tests is not None:
        extra[CALL_TESTS_KEY] = json.dumps(call_tests)
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
