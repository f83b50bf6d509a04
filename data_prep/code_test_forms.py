"""Code-test encodings of the RL sources → the project's code-test object (CONTRACTS: the LiveCodeBench encoding).

Skywork-OR1/TACO I/O tests ``{"inputs", "outputs", "fn_name"}`` and LeetCode assert harnesses. A harness stays the
ground truth (graded by running its asserts); where every assert is a literal call it also gets a call-based conversion
(``extra_info.call_tests`` of the RL row, graded under ``reward.reward_kwargs.leetcode_tests: call``).
"""

from __future__ import annotations

import ast
import json
import re
from collections import Counter
from collections.abc import Iterable
from functools import cache
from typing import Any

from agentrl_recipe.training.rewards.code import _io_driver
from agentrl_recipe.training.rewards.code.assert_form import AssertTests
from data_prep.rows import ConvertError


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
    """Skywork/TACO I/O tests → the CONTRACTS code-test object; stdin tests carry no ``fn_name`` key (as Skywork's own
    loader reads them: a ``"fn_name": null`` key scores −1 under the released grader, see rewards/ground_truth.py)."""
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs) or not inputs:
        raise ConvertError("reward_model.ground_truth", "inputs/outputs must be equal-length non-empty lists")
    fn_name = tests.get("fn_name") or None
    call = fn_name is not None
    converted: dict[str, Any] = {
        "inputs": [_test_text(v, call_based=call, what="input") for v in inputs],
        "outputs": [_test_text(v, call_based=call, what="output") for v in outputs],
    }
    return {**converted, "fn_name": fn_name} if call else converted


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
            if any(k.arg is None for k in call.keywords):
                raise ValueError("**kwargs")
            kwargs = {str(k.arg): ast.literal_eval(k.value) for k in call.keywords}
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


def leetcode_asserts_and_call_tests(tests: dict, content: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the raw assert harness, its call-based conversion or None). The harness is the ground truth, graded as the
    original did, by running the asserts (agentrl_recipe/training/rewards/code/assert_tests.py); the conversion exists
    when every assert is a literal call (asserts on helper objects such as ListNode/TreeNode have none)."""
    raw = {k: tests.get(k) for k in ("import_prefix", "test_code", "entry_point")}
    try:
        call_tests: dict[str, Any] | None = leetcode_assert_tests(tests, content)
        literal_error = None
    except ConvertError as e:
        call_tests, literal_error = None, e
    try:
        AssertTests.parse(raw)
    except ValueError as e:
        field = literal_error.field if literal_error else "reward_model.ground_truth.test_code"
        raise ConvertError(field, f"{literal_error or 'literal asserts'}; as raw asserts: {e}") from e
    return raw, call_tests


# --- rows whose fn_name the graders' import prelude already binds (issue 34, item 9) ---


@cache
def prelude_names() -> frozenset[str]:
    """Every name LiveCodeBench's import prelude binds before the program (the released wrapper star-imports the same
    modules): the star-imports of string, re, math, operator, builtins, ... and the modules themselves."""
    imports = "\n".join(line for line in _io_driver.LCB_PRELUDE.splitlines() if line.startswith(("from ", "import ")))
    namespace: dict[str, Any] = {}
    exec(compile(imports, "<prelude>", "exec"), namespace)  # our own source: imports only
    return frozenset(name for name in namespace if not name.startswith("__"))


def _fn_name(ground_truth: Any) -> str | None:
    try:
        tests = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    except ValueError:
        return None
    fn_name = tests.get("fn_name") if isinstance(tests, dict) else None
    return fn_name if isinstance(fn_name, str) else None


def prelude_shadow_report(rows: Iterable[dict]) -> dict[str, Any]:
    """Code rows whose ``fn_name`` is a prelude name (``add`` from operator, ``gcd`` from math): the released grader
    calls ``globals()[fn_name]`` and so the prelude's function (any ``def add`` scores 1.0 there); the fixed grader
    looks only at the program's own names. ``{"rows": n, "fn_names": {name: rows}}`` for the data prep report."""
    names = prelude_names()
    gts = ((row.get("reward_model") or {}).get("ground_truth") for row in rows)
    shadowed = Counter(fn for gt in gts if (fn := _fn_name(gt)) in names)
    return {"rows": sum(shadowed.values()), "fn_names": dict(sorted(shadowed.items()))}
