"""The two row formats data prep writes, validated: the verl RL row and the verl multi-turn SFT row.

A row that fails validation is never dropped silently and never kept: :class:`~data_prep.sink.RowSink`
moves it, with the file, row number, field and reason, to ``<output>.rejects.jsonl`` next to the output, and the
command reports the count.

RL row (``verl.utils.dataset.rl_dataset.RLHFDataset``)::

    {"data_source": "math_dapo", "prompt": [{"role": "user", "content": "..."}], "ability": "MATH",
     "reward_model": {"ground_truth": "34", "style": "rule"}, "extra_info": {"index": 0, ...},
     "agent_name": "agentrl_tool_agent"}

Code rows carry their tests as a JSON *string* in ``ground_truth``: ``{"inputs": [str], "outputs": [str],
"fn_name": str|null}`` (the LiveCodeBench encoding; see CONTRACTS), or a LeetCode assert harness ``{"import_prefix",
"test_code", "entry_point"}`` (raw Skywork-OR1; graded by running the asserts, see :func:`validate_code_tests`).
A row whose ``extra_info.released_only`` says why it is kept (a published row the released loader kept; see
``data_prep/jobs/rl_released.py``) skips the ground-truth checks: it is graded as the released code graded it.
Every ``ground_truth`` is a string, so math and code rows share one Arrow type and verl can concatenate files.

SFT row (``verl.utils.dataset.multiturn_sft_dataset.MultiTurnSFTDataset``)::

    {"messages": [{"role": "user", "content": "..."},
                  {"role": "assistant", "content": "...", "tool_calls": [{"type": "function", "function":
                      {"name": "code_interpreter", "arguments": {"code": "..."}}}]},
                  {"role": "tool", "content": "..."},
                  {"role": "assistant", "content": "... \\boxed{4}"}],
     "tools": [{"type": "function", "function": {"name": "code_interpreter", ...}}]}
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from agentrl_recipe.tasks import task_kind
from agentrl_recipe.training.rewards.code.assert_form import AssertTests, is_assert_form
from agentrl_recipe.training.rewards.code.grade import CodeTests
from agentrl_recipe.training.rewards.ground_truth import CALL_TESTS_KEY, RELEASED_ONLY_KEY, decoded_list_answer

PROMPT_ROLES = ("system", "user", "assistant")
SFT_ROLES = ("system", "user", "assistant", "tool")
KNOWN_DATA_SOURCES = names.RL_DATA_SOURCES + names.EVAL_DATA_SOURCES


@dataclasses.dataclass(frozen=True)
class FieldError:
    field: str  # dotted path into the row, e.g. "reward_model.ground_truth" or "messages[2].tool_calls[0]"
    message: str


class SchemaError(ValueError):
    """One invalid row: names the file, the row number and the field."""

    def __init__(self, file: str, row: int, field: str, message: str) -> None:
        super().__init__(f"{file}: row {row}: field {field!r}: {message}")
        self.file, self.row, self.field, self.message = file, row, field, message


# ----------------------------------------------------------------------------------------------- RL rows
def validate_code_tests(ground_truth: str, field: str = "reward_model.ground_truth") -> list[FieldError]:
    """Check that the code reward can grade this ground truth (a JSON string), in one of its two forms.

    I/O tests ``{"inputs": [str], "outputs": [str], "fn_name": str|null}`` (LiveCodeBench's encoding; an absent
    ``fn_name`` means stdin tests, as in raw Skywork-OR1 rows), or a LeetCode assert harness ``{"import_prefix",
    "test_code", "entry_point"}`` (raw Skywork-OR1 / LeetCodeDataset,
    :mod:`agentrl_recipe.training.rewards.code.assert_tests`). Any other form is an error here, so it is rejected at
    data prep and never reaches a reward. Every failure to parse is an error of the row (a value nested too deeply
    raises RecursionError in ``json``), never an exception out of validation.
    """
    try:
        return _code_test_errors(ground_truth, field)
    except Exception as e:  # RecursionError, MemoryError, ...: the row cannot be graded
        return [FieldError(field, f"code tests cannot be parsed ({type(e).__name__}: {e})")]


def _code_test_errors(ground_truth: str, field: str) -> list[FieldError]:
    try:
        tests = json.loads(ground_truth)
    except (TypeError, json.JSONDecodeError) as e:
        return [FieldError(field, f"code tests must be a JSON string ({e})")]
    if not isinstance(tests, dict):
        return [FieldError(field, f"code tests must be a JSON object, got {type(tests).__name__}")]
    if is_assert_form(tests):
        try:
            AssertTests.parse(tests)
        except ValueError as e:
            return [FieldError(field, f"LeetCode assert tests: {e}")]
        return []
    errors = []
    missing = {"inputs", "outputs"} - set(tests)
    if missing:
        errors.append(FieldError(field, f"unknown code-test form: keys {sorted(tests)} lack {sorted(missing)}"))
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    for key, value in (("inputs", inputs), ("outputs", outputs)):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            errors.append(FieldError(f"{field}.{key}", "must be a list of strings"))
    if isinstance(inputs, list) and isinstance(outputs, list):
        if len(inputs) != len(outputs):
            errors.append(FieldError(field, f"{len(inputs)} inputs but {len(outputs)} outputs"))
        elif not inputs:
            errors.append(FieldError(field, "no test cases"))
    fn_name = tests.get("fn_name")
    if fn_name is not None and (not isinstance(fn_name, str) or not fn_name.isidentifier()):
        errors.append(FieldError(f"{field}.fn_name", f"must be null or an identifier, got {fn_name!r}"))
    if not errors:
        try:  # what the scorer will parse (call tests: one JSON value per line)
            CodeTests.parse(tests)
        except ValueError as e:
            errors.append(FieldError(field, str(e)))
    return errors


def _validate_chat(prompt: Any) -> list[FieldError]:
    if not isinstance(prompt, list) or not prompt:
        return [FieldError("prompt", "must be a non-empty list of {role, content} messages")]
    errors = []
    for i, msg in enumerate(prompt):
        if not isinstance(msg, dict):
            errors.append(FieldError(f"prompt[{i}]", "must be a {role, content} dict"))
            continue
        if msg.get("role") not in PROMPT_ROLES:
            errors.append(FieldError(f"prompt[{i}].role", f"must be one of {PROMPT_ROLES}, got {msg.get('role')!r}"))
        content = msg.get("content")
        if not isinstance(content, str) or not content.strip():
            errors.append(FieldError(f"prompt[{i}].content", "must be a non-empty string"))
    if isinstance(prompt[-1], dict) and prompt[-1].get("role") != "user":
        errors.append(FieldError(f"prompt[{len(prompt) - 1}].role", "the last prompt message must be the user's"))
    return errors


def validate_rl_row(row: Any) -> list[FieldError]:
    """All schema errors of one RL row (empty list = valid)."""
    if not isinstance(row, dict):
        return [FieldError("<row>", f"must be a dict, got {type(row).__name__}")]
    errors: list[FieldError] = []
    data_source = row.get("data_source")
    if data_source not in KNOWN_DATA_SOURCES:
        errors.append(FieldError("data_source", f"must be one of {KNOWN_DATA_SOURCES}, got {data_source!r}"))
    errors += _validate_chat(row.get("prompt"))
    if not isinstance(row.get("ability"), str) or not row["ability"]:
        errors.append(FieldError("ability", "must be a non-empty string"))
    if row.get("agent_name") != names.AGENT_LOOP:
        errors.append(FieldError("agent_name", f"must be {names.AGENT_LOOP!r}, got {row.get('agent_name')!r}"))
    extra = row.get("extra_info")
    if not isinstance(extra, dict):
        errors.append(FieldError("extra_info", "must be a dict"))
    elif not isinstance(extra.get("index"), int) or isinstance(extra.get("index"), bool) or extra["index"] < 0:
        errors.append(FieldError("extra_info.index", f"must be a non-negative int, got {extra.get('index')!r}"))
    rm = row.get("reward_model")
    if not isinstance(rm, dict):
        return [*errors, FieldError("reward_model", "must be a {ground_truth, style} dict")]
    if rm.get("style") != "rule":
        errors.append(FieldError("reward_model.style", f"must be 'rule', got {rm.get('style')!r}"))
    gt = rm.get("ground_truth")
    if not isinstance(gt, str) or not gt.strip():
        return [*errors, FieldError("reward_model.ground_truth", "must be a non-empty string")]
    if data_source not in KNOWN_DATA_SOURCES or (isinstance(extra, dict) and extra.get(RELEASED_ONLY_KEY)):
        return errors  # a released_only row is graded as the released code did, never parsed
    kind = task_kind(data_source)
    if kind == "code":
        errors += validate_code_tests(gt)
        call_tests = extra.get(CALL_TESTS_KEY) if isinstance(extra, dict) else None
        if call_tests is not None:  # a LeetCode row's call-based conversion (reward_kwargs.leetcode_tests: call)
            errors += validate_code_tests(call_tests, f"extra_info.{CALL_TESTS_KEY}")
    elif kind == "gpqa":
        if len(gt) != 1 or not gt.isupper():
            errors.append(FieldError("reward_model.ground_truth", f"GPQA answer must be one letter, got {gt!r}"))
    else:
        if gt != gt.strip():
            errors.append(FieldError("reward_model.ground_truth", "has surrounding whitespace (exact-match scorer)"))
        if gt.startswith('["') and decoded_list_answer(gt) is None:  # '["15625"]' is a published form, graded per
            try:  # reward_kwargs.ground_truth_form; a list of other than one answer has no grading
                if isinstance(json.loads(gt), list):
                    errors.append(FieldError("reward_model.ground_truth", f"JSON list of not one answer {gt!r:.80}"))
            except json.JSONDecodeError:
                pass
    return errors


# ----------------------------------------------------------------------------------------------- SFT rows
def validate_tools(tools: Any) -> list[FieldError]:
    if not isinstance(tools, list) or not tools:
        return [FieldError("tools", "must be a non-empty list of OpenAI function schemas")]
    errors = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type") != "function" or not isinstance(fn, dict):
            errors.append(FieldError(f"tools[{i}]", "must be {type: 'function', function: {...}}"))
        elif not isinstance(fn.get("name"), str) or not isinstance(fn.get("parameters"), dict):
            errors.append(FieldError(f"tools[{i}].function", "needs a name and a parameters schema"))
    return errors


def validate_sft_row(row: Any) -> list[FieldError]:
    """All schema errors of one multi-turn SFT row (empty list = valid)."""
    if not isinstance(row, dict):
        return [FieldError("<row>", f"must be a dict, got {type(row).__name__}")]
    errors = validate_tools(row.get("tools"))
    tool_names = {t["function"]["name"] for t in row.get("tools") or [] if isinstance(t, dict) and "function" in t}
    messages = row.get("messages")
    if not isinstance(messages, list) or len(messages) < 2:
        return [*errors, FieldError("messages", "must be a list of at least a user and an assistant message")]
    pending_calls = 0  # tool calls of the last assistant turn still waiting for their tool message
    seen_user = False
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            errors.append(FieldError(where, "must be a dict"))
            continue
        role = msg.get("role")
        if role not in SFT_ROLES:
            errors.append(FieldError(f"{where}.role", f"must be one of {SFT_ROLES}, got {role!r}"))
            continue
        if not isinstance(msg.get("content"), str):
            errors.append(FieldError(f"{where}.content", "must be a string"))
        if role == "tool":
            if pending_calls == 0:
                errors.append(FieldError(where, "tool message without a preceding assistant tool call"))
            pending_calls = max(0, pending_calls - 1)
            continue
        if pending_calls:
            errors.append(FieldError(where, f"{pending_calls} tool call(s) of the previous turn got no tool message"))
            pending_calls = 0
        if role == "system" and i != 0:
            errors.append(FieldError(f"{where}.role", "a system message must come first"))
        elif role == "user":
            seen_user = True
        elif role == "assistant":
            if not seen_user:
                errors.append(FieldError(where, "assistant message before any user message"))
            calls = msg.get("tool_calls") or []
            if not isinstance(calls, list):
                errors.append(FieldError(f"{where}.tool_calls", "must be a list"))
                continue
            for j, call in enumerate(calls):
                errors += _validate_tool_call(call, f"{where}.tool_calls[{j}]", tool_names)
            if not calls and not (msg.get("content") or "").strip():
                errors.append(FieldError(f"{where}.content", "empty assistant message with no tool call"))
            pending_calls = len(calls)
    if pending_calls:
        errors.append(FieldError("messages", "ends with unanswered tool call(s)"))
    last = messages[-1]
    if not isinstance(last, dict) or last.get("role") != "assistant" or last.get("tool_calls"):
        errors.append(FieldError(f"messages[{len(messages) - 1}]", "must end with a final assistant answer"))
    return errors


def _validate_tool_call(call: Any, where: str, tool_names: set[str]) -> list[FieldError]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict) or call.get("type", "function") != "function":
        return [FieldError(where, "must be {type: 'function', function: {name, arguments}}")]
    errors = []
    if fn.get("name") not in tool_names:
        errors.append(FieldError(f"{where}.function.name", f"{fn.get('name')!r} is not in tools {sorted(tool_names)}"))
    args = fn.get("arguments")
    if not isinstance(args, dict):
        errors.append(FieldError(f"{where}.function.arguments", "must be a dict (verl renders it with the template)"))
    elif fn.get("name") == names.TOOL_NAME and not (isinstance(args.get("code"), str) and args["code"].strip()):
        errors.append(FieldError(f"{where}.function.arguments.code", "must be non-empty code"))
    return errors


VALIDATORS = {"rl": validate_rl_row, "sft": validate_sft_row}


def validate_file(path: str | Path, kind: str) -> list[SchemaError]:
    """Validate every row of an existing parquet/jsonl file; the errors name file, row and field."""
    validate = VALIDATORS[kind]
    out = []
    for i, row in enumerate(read_local_file(Path(path))):
        out += [SchemaError(str(path), i, e.field, e.message) for e in validate(drop_arrow_nulls(row))]
    return out


def drop_arrow_nulls(value: Any) -> Any:
    """Undo Arrow's struct-union padding (keys filled with None) so a re-read row validates like the written one."""
    if isinstance(value, dict):
        return {k: drop_arrow_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_arrow_nulls(v) for v in value]
    return value
