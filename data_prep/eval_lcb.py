"""LiveCodeBench v6 rows → eval RL rows: the upstream benchmark (public + private tests, the private ones
base64/zlib/pickled in the lite release) or Open-AgentRL-Eval's file, with map_lcb's prompt (``data eval-sets --lcb``).
"""

from __future__ import annotations

import base64
import builtins
import io
import json
import pickle
import zlib
from collections.abc import Callable
from typing import Any

from agentrl_recipe import names
from data_prep import prompts
from data_prep.rows import ConvertError, get_field, rl_row, text_field


class _BuiltinsOnlyUnpickler(pickle.Unpickler):
    """Unpickles plain data only: no module but ``builtins``, and only its data types (no callables like eval)."""

    ALLOWED = frozenset({"str", "bytes", "list", "tuple", "dict", "set", "frozenset", "int", "float", "bool"})

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in self.ALLOWED:
            return getattr(builtins, name)
        raise pickle.UnpicklingError(f"refusing to unpickle {module}.{name}: LCB tests are plain data")


def decode_lcb_tests(blob: str, field: str) -> list[dict]:
    """LCB test cases: a JSON list, or base64(zlib(pickle(JSON string))) as in the lite release.

    The pickle comes from the benchmark's own trusted file, and is read with a builtins-only unpickler anyway; this is
    the only place the project unpickles anything, and never on sandbox output.
    """
    if not isinstance(blob, str) or not blob.strip():
        return []
    text = blob.strip()
    if text.startswith("["):
        try:
            tests = json.loads(text)
        except json.JSONDecodeError as e:
            raise ConvertError(field, f"test cases are not valid JSON ({e.msg})") from e
    else:
        try:
            raw = zlib.decompress(base64.b64decode(text.encode("utf-8"), validate=True))
            obj = _BuiltinsOnlyUnpickler(io.BytesIO(raw)).load()
            tests = json.loads(obj) if isinstance(obj, str | bytes) else obj
        except (ValueError, zlib.error, pickle.UnpicklingError, EOFError) as e:
            raise ConvertError(field, f"cannot decode base64/zlib/pickle test cases: {e}") from e
    if not isinstance(tests, list) or not all(isinstance(t, dict) and "input" in t and "output" in t for t in tests):
        raise ConvertError(field, "test cases must be a list of {input, output, testtype}")
    return tests


def encode_lcb_tests(tests: list[dict]) -> str:
    """The release's encoding (used to build fixtures): base64(zlib(pickle(json string)))."""
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(tests)))).decode("utf-8")


def make_lcb_converter(
    tests_mode: str,
    start_date: str | None,
    end_date: str | None,
    full_tests: dict[str, dict[str, Any] | ConvertError] | None = None,
) -> Callable[[dict], dict | None]:
    """``full_tests`` (question_id → tests, :func:`upstream_tests`): an Open-AgentRL-Eval row is graded on them instead
    of the public tests its file holds."""

    def convert(row: dict) -> dict | None:
        if "question_content" in row:
            return _lcb_upstream(row, tests_mode, start_date, end_date)
        return _lcb_open_agentrl(row, full_tests)

    return convert


def upstream_tests(rows: list[dict]) -> dict[str, dict[str, Any] | ConvertError]:
    """question_id → public + private tests of upstream LiveCodeBench rows (what its official evaluation grades), or
    why they cannot be decoded (a row that asks for them is rejected with it)."""
    out: dict[str, dict[str, Any] | ConvertError] = {}
    for row in rows:
        try:
            public = decode_lcb_tests(row.get("public_test_cases", ""), "public_test_cases")
            tests = public + decode_lcb_tests(row.get("private_test_cases", ""), "private_test_cases")
        except ConvertError as e:
            out[str(row["question_id"])] = e
            continue
        fn_name = json.loads(row.get("metadata") or "{}").get("func_name") or None
        out[str(row["question_id"])] = {
            "inputs": [t["input"] for t in tests],
            "outputs": [t["output"] for t in tests],
            "fn_name": fn_name,
        }
    return out


def _lcb_upstream(row: dict, tests_mode: str, start_date: str | None, end_date: str | None) -> dict | None:
    date = str(row.get("contest_date") or "")[:10]
    if (start_date and date < start_date) or (end_date and date > end_date):
        return None
    content = text_field(row, "question_content").strip()
    public = decode_lcb_tests(row.get("public_test_cases", ""), "public_test_cases")
    private = decode_lcb_tests(row.get("private_test_cases", ""), "private_test_cases") if tests_mode == "all" else []
    if not public and not private:
        raise ConvertError("public_test_cases", "no tests at all")
    try:
        metadata = json.loads(row.get("metadata") or "{}")
    except json.JSONDecodeError as e:
        raise ConvertError("metadata", f"not JSON ({e.msg})") from e
    fn_name = metadata.get("func_name") or None
    tests = public + private
    gt = {"inputs": [t["input"] for t in tests], "outputs": [t["output"] for t in tests], "fn_name": fn_name}
    starter = str(row.get("starter_code") or "").strip("\n")
    problem = content + ("\n\n" + prompts.LCB_STARTER_CODE.format(starter_code=starter) if starter.strip() else "")
    content_prompt = prompts.lcb_prompt(problem, [t["input"] for t in public], [t["output"] for t in public])
    extra = {
        "question": content,
        "source_id": str(row.get("question_id", "")),
        "question_id": str(row.get("question_id", "")),
        "platform": str(row.get("platform", "")),
        "difficulty": str(row.get("difficulty", "")),
        "contest_date": date,
        "num_tests": len(tests),
        "num_public_tests": len(public),
    }
    return rl_row(names.DS_LCB_V6, content_prompt, "code", json.dumps(gt), extra)


def _lcb_open_agentrl(row: dict, full_tests: dict[str, dict[str, Any] | ConvertError] | None = None) -> dict:
    """Open-AgentRL-Eval's LCB file: ``reward_model`` / ``extra_info`` are JSON strings, tests are the public ones (the
    prompt shows them); with ``full_tests`` the row is graded on LiveCodeBench's own tests for its question_id."""
    problem = text_field(row, "problem").strip()
    rm = get_field(row, "reward_model")
    try:
        rm = json.loads(rm) if isinstance(rm, str) else rm
        gt = rm["ground_truth"]
        gt = json.loads(gt) if isinstance(gt, str) else gt
        inputs, outputs = list(gt["inputs"]), list(gt["outputs"])
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise ConvertError("reward_model", f"expected a JSON string with ground_truth.inputs/outputs ({e})") from e
    extra_raw = row.get("extra_info") or {}
    try:
        extra_in = json.loads(extra_raw) if isinstance(extra_raw, str) else dict(extra_raw)
    except json.JSONDecodeError as e:
        raise ConvertError("extra_info", f"not JSON ({e.msg})") from e
    fixed: dict[str, Any] = {"inputs": inputs, "outputs": outputs, "fn_name": gt.get("fn_name") or None}
    source_id = str(extra_in.get("question_id", extra_in.get("index", "")))
    if full_tests is not None:
        if source_id not in full_tests:
            raise ConvertError("extra_info.question_id", f"{source_id!r} is not among the upstream LCB problems")
        found = full_tests[source_id]
        if isinstance(found, ConvertError):
            raise found
        fixed = found
    extra = {"question": problem, "source_id": source_id, "num_tests": len(fixed["inputs"])}
    content = prompts.lcb_prompt(problem, inputs, outputs)
    return rl_row(names.DS_LCB_V6, content, str(row.get("ability") or "code"), json.dumps(fixed), extra)
