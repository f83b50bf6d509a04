"""Grade a program against a LeetCode assert harness (Skywork-OR1's raw code ground truth) without trusting it.

Ground truth (Skywork-OR1 / LeetCodeDataset, a JSON string or a decoded mapping)::

    {"import_prefix": "from typing import *\\n...", "entry_point": "Solution().twoSum",
     "test_code": "def check(candidate):\\n    assert candidate(nums = [2,7,11,15], target = 9) == [0, 1]\\n ..."}

The released code ran ``import_prefix + program + check(<entry_point>)`` once per assert line and counted a return
code of 0 as a pass, so ``os._exit(0)`` or a returned object whose ``__eq__`` is always true passed every test. Here
each assert is split in the parent (:func:`parse_assert`) into the expression that calls ``candidate`` and the
expected value; only the call runs in the sandbox (:mod:`agentrl_recipe.core.rewards._assert_driver`), its value comes
back in canonical JSON under a per-request nonce, and the comparison happens here. Score = fraction of asserts passed,
as in the original. Supported assert shapes (every one seen in LeetCodeDataset's generated tests)::

    assert <expr with candidate(...)> == <expected>      (either side)
    assert is_same_list(<expr with candidate(...)>, <expected>)   / is_same_tree(...)
    assert <expr with candidate(...)> is None | True | False

where ``<expected>`` is a literal, ``inf``, or ``list_node(<literal>)`` / ``tree_node(<literal>)``. Any other shape
makes the ground truth invalid (:class:`AssertFormError`): rejected at data prep, a flagged failure at train time.
Rows whose tests build ``ListNode`` / ``TreeNode`` objects are graded with LeetCode's helper classes available.
Differences from a plain ``==``: a returned tuple equals a list (LiveCodeBench's rule), and helper objects compare by
their values (what ``is_same_list`` / ``is_same_tree`` do).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import logging
import math
import secrets
import time
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from agentrl_recipe.core.rewards import _assert_driver
from agentrl_recipe.core.rewards.code_grading import CodeGrade, CodeTests, parse_frames

ASSERT_KEYS = frozenset({"import_prefix", "test_code", "entry_point"})
_SAME = ("is_same_list", "is_same_tree")
_STARTUP_SLACK_S = 5.0
_INFRA_RETRIES = 2
_MAX_FRAME_CHARS = 256 * 1024
logger = logging.getLogger(__name__)


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
    """The code ground truth in either known form; ValueError (naming the problem) for any other."""
    return AssertTests.parse(ground_truth) if is_assert_form(ground_truth) else CodeTests.parse(ground_truth)


def invalid_ground_truth(error: Exception, ground_truth: Any) -> dict[str, Any]:
    """The code scorer's result for a ground truth no grader can run: not a wrong answer, flagged like a sandbox
    failure (``infra_failure``: masked by ``agentrl.masks.infra_failure``, counted by the infra guard, which stops a
    run where many rows are broken), and logged with the reason. ``data validate`` rejects such rows beforehand."""
    logger.error("code ground truth cannot be graded (%s): %.200r", error, ground_truth)
    return {"score": 0.0, "acc": None, "pred": None, "tests_passed": 0, "tests_total": 0, "infra_failure": True}


# --- splitting an assert into (call, expected) ---


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
    except ValueError:
        return False
    if case.identity:
        return value is case.expected or (type(value) is type(case.expected) and value == case.expected)
    return value == case.expected


# --- running the asserts ---


@cache
def driver_source() -> str:
    text = resources.files("agentrl_recipe.core.rewards").joinpath("_assert_driver.py").read_text(encoding="utf-8")
    return text + "\n_main()\n"


def _judge(frame: Mapping[str, Any], case: AssertCase) -> str:
    status = frame.get("status")
    if status != "ok":
        return "timeout" if status == "timeout" else "runtime_error"
    out = frame.get("out")
    return "passed" if isinstance(out, str) and case_passes(case, out) else "wrong_answer"


_DEATH_STATUS = {"timeout": "timeout", "memory_exceeded": "memory_exceeded", "output_truncated": "output_truncated"}


async def agrade_asserts(
    program: str,
    tests: AssertTests,
    *,
    sandbox: Any,
    timeout_s_per_test: float,
    total_timeout_s: float | None = None,
    memory_mb: int | None = None,
) -> CodeGrade:
    """Run every assert's call in the sandbox (one execution, resumed after a death) and judge here."""
    n = len(tests)
    total_timeout_s = (timeout_s_per_test + 1.0) * n + 5.0 if total_timeout_s is None else total_timeout_s
    started = time.monotonic()
    deadline = started + total_timeout_s
    statuses: list[str | None] = [None] * n
    first_error: str | None = None
    executions = infra_attempts = start = 0
    infra_failure = False
    while start < n and deadline - time.monotonic() > 0.05:
        nonce = secrets.token_hex(16)
        payload = {
            "nonce": nonce,
            "program": program,
            "import_prefix": tests.import_prefix,
            "entry_point": tests.entry_point,
            "calls": [c.call for c in tests.cases[start:]],  # never the expected values
            "start": start,
            "timeout_s": timeout_s_per_test,
            "max_frame_chars": _MAX_FRAME_CHARS,
        }
        budget = min(deadline - time.monotonic(), timeout_s_per_test * (n - start) + _STARTUP_SLACK_S)
        res = await sandbox.arun(driver_source(), stdin=json.dumps(payload), timeout_s=budget, memory_mb=memory_mb)
        executions += 1
        if res.status == "infra_error":
            infra_attempts += 1
            if infra_attempts > _INFRA_RETRIES:
                infra_failure, first_error = True, first_error or f"sandbox infra_error: {res.message}"
                statuses[start:] = ["infra_error"] * (n - start)
                break
            continue
        finished = False
        for frame in parse_frames(res.stdout, nonce):
            if frame.get("t") == "setup_error":
                first_error = first_error or str(frame.get("error"))
                statuses[start:] = ["compile_error"] * (n - start)
                start, finished = n, True
            elif frame.get("t") == "end":
                finished = True
            elif frame.get("t") == "result" and frame.get("i") == start:  # in order, else not from the driver
                statuses[start] = _judge(frame, tests.cases[start])
                if statuses[start] == "runtime_error" and first_error is None:
                    first_error = str(frame.get("error") or "runtime error")
                start += 1
            if finished:
                break
        if finished or start >= n:
            break
        statuses[start] = _DEATH_STATUS.get(res.status, "runtime_error")  # died before reporting this test
        start += 1
    final = [s or "timeout" for s in statuses]
    return CodeGrade(
        passed=final.count("passed"),
        total=n,
        statuses=final,
        infra_failure=infra_failure,
        executions=executions,
        duration_s=time.monotonic() - started,
        first_error=first_error,
    )
