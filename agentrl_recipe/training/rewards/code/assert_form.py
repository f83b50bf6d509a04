"""LeetCode assert harnesses (Skywork-OR1's raw code ground truth), read in the trusted parent: each assert split into
the call the sandbox runs and the value it must return, and the returned value judged here.

Ground truth (Skywork-OR1 / LeetCodeDataset, a JSON string or a decoded mapping)::

    {"import_prefix": "from typing import *\\n...", "entry_point": "Solution().twoSum",
     "test_code": "def check(candidate):\\n    assert candidate(nums = [2,7,11,15], target = 9) == [0, 1]\\n ..."}

Supported assert shapes (every one seen in LeetCodeDataset's generated tests)::

    assert <expr with candidate(...)> == <expected>      (either side)
    assert is_same_list(<expr with candidate(...)>, <expected>)   / is_same_tree(...)
    assert <expr with candidate(...)> is None | True | False

where ``<expected>`` is a literal, ``inf``, or ``list_node(<literal>)`` / ``tree_node(<literal>)``. Any other shape
makes the ground truth invalid (:class:`AssertFormError`). Differences from a plain ``==``: a returned tuple equals a
list (LiveCodeBench's rule), and helper objects compare by their values (what ``is_same_list`` / ``is_same_tree`` do).
Grading runs in :mod:`.assert_tests`.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import math
from collections.abc import Mapping
from functools import cache
from typing import Any

from agentrl_recipe.training.rewards.code import _assert_driver
from agentrl_recipe.training.rewards.code.grade import CodeTests
from agentrl_recipe.training.rewards.code.lcb_rules import UNCOMPARABLE

ASSERT_KEYS = frozenset({"import_prefix", "test_code", "entry_point"})
_SAME = ("is_same_list", "is_same_tree")


class AssertFormError(ValueError):
    """An assert ground truth this grader cannot run faithfully (the row is invalid, not the answer)."""


@dataclasses.dataclass(frozen=True)
class AssertCase:
    call: str  # the expression run in the sandbox (contains ``candidate``)
    expected: Any  # canonical JSON value (see _assert_driver.canonical); never sent to the sandbox
    identity: bool = False  # ``is None/True/False``: the returned JSON must be exactly that constant


@dataclasses.dataclass(frozen=True)
class AssertTests:
    import_prefix: str
    entry_point: str
    cases: tuple[AssertCase, ...]

    def __len__(self) -> int:
        return len(self.cases)

    @classmethod
    def parse(cls, ground_truth: str | Mapping[str, Any]) -> AssertTests:
        data = _decode(ground_truth)
        if not isinstance(data, Mapping) or not set(data) >= ASSERT_KEYS:
            raise AssertFormError(f"assert ground truth needs keys {sorted(ASSERT_KEYS)}")
        prefix, entry, code = (data[k] for k in ("import_prefix", "entry_point", "test_code"))
        if not all(isinstance(v, str) for v in (prefix, entry, code)):
            raise AssertFormError("import_prefix, entry_point and test_code must be strings")
        try:
            ast.parse(prefix)
            ast.parse(entry, mode="eval")
        except SyntaxError as exc:
            raise AssertFormError(f"import_prefix/entry_point is not valid Python: {exc.msg}") from None
        lines = [line for line in code.split("\n") if line.strip()]
        if not lines or not lines[0].lstrip().startswith("def check(candidate"):
            raise AssertFormError("test_code must start with `def check(candidate):`")
        cases = tuple(parse_assert(line) for line in lines[1:] if not line.strip().startswith("#"))
        if not cases:
            raise AssertFormError("test_code has no assert lines")
        return cls(prefix, entry, cases)


def _decode(ground_truth: Any) -> Any:
    if isinstance(ground_truth, (str, bytes)):
        try:
            return json.loads(ground_truth)
        except ValueError as exc:
            raise AssertFormError(f"code ground truth is not valid JSON: {exc}") from None
    return ground_truth


def is_assert_form(ground_truth: Any) -> bool:
    """True when the ground truth is (meant to be) a LeetCode assert harness: it has one of its keys."""
    try:
        data = _decode(ground_truth)
    except AssertFormError:
        return False
    return isinstance(data, Mapping) and bool(ASSERT_KEYS & set(data))


def parse_code_tests(ground_truth: Any) -> CodeTests | AssertTests:
    """The code ground truth in either known form; ValueError (naming the problem) for any other, and for every
    failure to parse one (RecursionError from a value nested too deeply included)."""
    try:
        return AssertTests.parse(ground_truth) if is_assert_form(ground_truth) else CodeTests.parse(ground_truth)
    except ValueError:
        raise
    except Exception as exc:  # RecursionError, MemoryError, ...: invalid ground truth, not a grader error
        raise ValueError(f"code ground truth cannot be parsed ({type(exc).__name__}: {exc})") from None


def _mentions_candidate(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) and n.id == "candidate" for n in ast.walk(node))


def _is_same_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _SAME
        and len(node.args) == 2
        and not node.keywords
    )


def parse_assert(line: str) -> AssertCase:
    """One ``assert`` line of ``test_code`` → :class:`AssertCase`; AssertFormError for unsupported shapes."""
    try:
        node = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
        raise AssertFormError(f"not a Python statement: {line.strip()[:120]!r}") from None
    if not isinstance(node, ast.Assert) or node.msg is not None:
        raise AssertFormError(f"not a plain assert: {line.strip()[:120]!r}")
    test = node.test
    pair: tuple[ast.expr, ast.expr] | None = None
    identity = False
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        pair, op = (test.left, test.comparators[0]), test.ops[0]
        identity = isinstance(op, ast.Is)
        if not isinstance(op, (ast.Eq, ast.Is)):
            pair = None
    elif _is_same_call(test):
        assert isinstance(test, ast.Call)  # _is_same_call checked it
        pair = (test.args[0], test.args[1])
    if pair is None:
        raise AssertFormError(f"unsupported assert shape: {line.strip()[:120]!r}")
    left, right = pair
    if _mentions_candidate(right) and not _mentions_candidate(left):
        left, right = right, left
    if not _mentions_candidate(left) or _mentions_candidate(right):
        raise AssertFormError(f"exactly one side must call candidate: {line.strip()[:120]!r}")
    expected = expected_value(right)
    if identity and expected not in (None, True, False):
        raise AssertFormError(f"`is` compares only with None/True/False: {line.strip()[:120]!r}")
    return AssertCase(call=ast.unparse(left), expected=expected, identity=identity)


@cache
def _helpers() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(_assert_driver.HELPERS, "<helpers>", "exec"), namespace)  # our own trusted source
    return namespace


def expected_value(node: ast.expr) -> Any:
    """The canonical value of an expected-side expression: literals, ``inf``, ``list_node``/``tree_node`` of one."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list_node", "tree_node"):
        if len(node.args) != 1 or node.keywords:
            raise AssertFormError(f"{node.func.id} takes one literal list")
        built = _helpers()[node.func.id](_literal(node.args[0]))
        return _assert_driver.canonical(built)
    value = _literal(node)
    try:
        return json.loads(json.dumps(_assert_driver.canonical(value)))
    except (TypeError, ValueError):
        raise AssertFormError(f"expected value is not JSON-comparable: {ast.unparse(node)[:120]!r}") from None


def _literal(node: ast.expr) -> Any:
    inf = {"inf": math.inf}
    if isinstance(node, ast.Name) and node.id in inf:
        return inf[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Name):
        return -_literal(node.operand)
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        raise AssertFormError(f"expected value is not a literal: {ast.unparse(node)[:120]!r}") from None


def case_passes(case: AssertCase, out: str) -> bool:
    """The returned value (canonical JSON from the driver) against the expected one, here in the parent."""
    try:
        value = json.loads(out)
        if case.identity:
            return value is case.expected or (type(value) is type(case.expected) and value == case.expected)
        return value == case.expected
    except UNCOMPARABLE:  # too deep to parse or compare: fails
        return False
