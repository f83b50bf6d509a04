"""The released code reward, rule for rule (``agentrl.compat: open_agentrl``, ``reward_kwargs.code_rules``).

What produced DemyAgent-4B: Open-AgentRL's ``verl/utils/reward_score/livecodebench/code_math.py::compute_score`` on
top of its vendored ``sandbox_fusion/utils.py::check_correctness``. Reimplemented here on our sandbox, keeping the
observable outcomes, errors included:

* the solution is the text between the first and second ``</think>`` (``split("</think>")[1]``) when there is one;
  the program is the last ``re.findall(r"```python\\n(.*?)```")`` block; none, or one ``ast.parse`` rejects: −1.
* the ground truth goes through ``str()`` first (see :func:`released_form`). Substring tests route it:
  ``import_prefix`` → one run per assert line (return code 0 passes); ``inputs`` → the input/output tests. A dict
  ground truth becomes its Python repr, so the original's ``json.loads`` fails, it indexes a string, raises, and the
  row scores −1 (unless the program already has ``class Solution``: then ``ast.literal_eval`` reads the repr).
* ``fn_name`` rows: the named top-level function is moved into ``class Solution`` (``ast.unparse``: the program is
  re-rendered); no such function: −1. Each test feeds the input text on stdin to a wrapper that calls the function
  with one ``json.loads`` per line and prints ``json.dumps`` of dict/list/tuple/None/bool results and ``str()`` of
  anything else.
* every test runs on its own, concurrently, 30 s, 1024 MB; it passes when the run finishes with exit code 0 and
  ``stdout.rstrip("\\n") == str(expected).rstrip("\\n")`` (or ``expected is None``). Score = passed / tests in
  [0, 1], ``acc`` = all passed. Zero tests divide by zero in the original: −1.
* a ground truth with neither ``import_prefix`` nor ``inputs`` is graded as a math answer (math-verify of the last
  ``\\boxed{}`` against the tests' text): in practice −1, as there.

A sandbox ``infra_error`` fails that test as it did in the original (SandboxFusion's API error); the result also sets
``infra_failure`` so the infra guard sees it. Not reproduced: a test whose stdout exceeds our sandbox's 1 MiB cap
(SandboxFusion had none) fails here.
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from typing import Any

from verl.utils.reward_score.math_dapo import last_boxed_only_string

from agentrl_recipe.training.rewards.isolation import GraderCrashed, get_isolated_pool

TIMEOUT_S = 30  # code_math.compute_score(timeout=30), per test
MEMORY_MB = 1024  # check_correctness(memory_limit_mb=1024)
EQUIVALENCE_MODULE = "agentrl_recipe.training.rewards.equivalence"
_BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)

# Star-imported (then imported) before the model's code in the original's function-call wrapper, in this order.
_WRAPPER_MODULES = (
    "string re datetime collections heapq bisect copy math random statistics itertools functools operator io sys "
    "json builtins typing"
).split()

# Our wrapper: same lookup, argument parsing, result printing and exit status as the original's (which never exits
# non-zero: a failure is reported on stderr and prints nothing).
_CALL_DRIVER = """
def _released_call_():
    import json as _j, sys as _s, traceback as _t
    raw = _s.stdin.read()
    args = []
    if raw.strip():
        try:
            args = [_j.loads(line) for line in raw.split("\\n")]
        except _j.JSONDecodeError as e:
            _s.stderr.write(f"WrapperError: Invalid JSON input for {_SANDBOX_FN_NAME!r}: {e}\\n")
            return
    try:
        target = None
        if _SANDBOX_FN_NAME in globals():
            target = globals()[_SANDBOX_FN_NAME]
        elif "Solution" in globals():
            target = getattr(globals()["Solution"](), _SANDBOX_FN_NAME)
        if not target:
            _s.stderr.write(f"WrapperError: Function or method {_SANDBOX_FN_NAME!r} not found.\\n")
            return
        result = target(*args)
    except Exception:
        _s.stderr.write(_t.format_exc())
        return
    if isinstance(result, (dict, list, tuple)) or result is None or isinstance(result, bool):
        print(_j.dumps(result))
    else:
        print(str(result))


_released_call_()
"""


def _fail(pred: str | None = None) -> dict[str, Any]:
    return {"score": -1.0, "acc": False, "pred": pred, "tests_passed": 0, "tests_total": 0, "infra_failure": False}


def solution_text(completion: str) -> str:
    """``completion.split("</think>")[1]`` when it has ``</think>``, else the completion."""
    return completion.split("</think>")[1] if "</think>" in completion else completion


def last_block(solution: str) -> str | None:
    blocks = _BLOCK.findall(solution)
    return blocks[-1] if blocks else None


def to_class_method(program: str, fn_name: str) -> str | None:
    """The original's ``convert_function_to_class_method``: the top-level ``def fn_name`` moved, with a ``self``
    first argument, into a ``class Solution`` appended at the end; None when there is no such function."""
    tree = ast.parse(program)
    target = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == fn_name), None)
    if target is None:
        return None
    body = [n for n in tree.body if n is not target]
    if not (target.args.args and target.args.args[0].arg == "self"):
        target.args.args.insert(0, ast.arg(arg="self", annotation=None))
    body.append(ast.ClassDef(name="Solution", bases=[], keywords=[], body=[target], decorator_list=[]))
    tree.body = body
    return ast.unparse(tree)


def call_wrapper(program: str, fn_name: str) -> str:
    """The program inside the function-call wrapper (imports first, as the original's)."""
    imports = "\n".join(f"from {m} import *" for m in _WRAPPER_MODULES)
    plain = "\n".join(f"import {m}" for m in _WRAPPER_MODULES if m not in ("builtins", "typing"))
    return f"import traceback\n{imports}\n{plain}\n\n{program}\n\n_SANDBOX_FN_NAME = {fn_name!r}\n{_CALL_DRIVER}"


async def _run_case(sandbox: Any, code: str, stdin: str | None, expected: Any, memory_mb: int) -> tuple[bool, bool]:
    """(passed, infra_error) for one test run on its own."""
    res = await sandbox.arun(code, stdin=stdin, timeout_s=TIMEOUT_S, memory_mb=memory_mb)
    if res.status == "infra_error":
        return False, True
    if res.status != "ok" or res.exit_code != 0:  # SandboxFusion's "Failed": non-zero exit, timeout, killed
        return False, False
    return expected is None or res.stdout.rstrip("\n") == str(expected).rstrip("\n"), False


async def _check_correctness(sandbox: Any, tests: str, program: str, memory_mb: int) -> list[tuple[bool, bool]] | None:
    """(passed, infra_error) per test, as ``check_correctness`` decides them from a ground-truth string; None = it
    raised."""
    if "inputs" not in tests or "outputs" not in tests:
        return [(False, False)]  # "Invalid input/output data" → [-1]
    try:
        in_outs = ast.literal_eval(tests)
        inputs, outputs = in_outs["inputs"], in_outs["outputs"]
        inputs = ast.literal_eval(inputs) if isinstance(inputs, str) else inputs
        outputs = ast.literal_eval(outputs) if isinstance(outputs, str) else outputs
        fn_name = in_outs.get("fn_name")
        n = len(inputs)
        asserts = in_outs.get("assert_case", [""] * n)
    except Exception:
        return None
    if n == 0:
        return []
    if len(outputs) != n or len(asserts) != n:
        return [(False, False)] * n
    cases = []
    for i, stdin in enumerate(inputs):
        code = f"{program}\n\n{asserts[i]}" if asserts[i] else program
        code = call_wrapper(code, fn_name) if fn_name else code
        cases.append(_run_case(sandbox, code, None if stdin is None else str(stdin), outputs[i], memory_mb))
    return list(await asyncio.gather(*cases))


async def _grade_io(sandbox: Any, tests: str, program: str, memory_mb: int) -> dict[str, Any]:
    try:
        io = json.loads(tests)
    except ValueError:
        io = tests  # the original's fallback: json.loads(json.dumps(s)) is the string itself
    try:
        if "fn_name" in io and "class Solution" not in program:
            as_method = to_class_method(program, io["fn_name"])  # a string ground truth raises TypeError here
            if as_method is None:
                return _fail()
            program = as_method
    except Exception:
        return _fail(program)
    flags = await _check_correctness(sandbox, tests, program, memory_mb)
    if not flags:  # raised, or zero tests (ZeroDivisionError in the original)
        return _fail(program)
    return _result([f[0] for f in flags], program, any(f[1] for f in flags))


async def _grade_asserts(sandbox: Any, tests: str, program: str, memory_mb: int) -> dict[str, Any]:
    try:
        spec = json.loads(tests)
        prefixed = spec["import_prefix"] + program
        lines = [line for line in spec["test_code"].split("\n") if line != ""]
        entry = spec["entry_point"]
    except Exception:  # a dict ground truth's repr, or a key missing: the original's outer except
        return _fail()
    runs = [
        _run_case(sandbox, f"{prefixed}\n{lines[0]}{line}\ncheck({entry})", "prefix", None, memory_mb)
        for line in lines[1:]
    ]
    flags = list(await asyncio.gather(*runs))
    if not flags:
        return _fail()
    return _result([f[0] for f in flags], prefixed, any(f[1] for f in flags))


def _result(passed: list[bool], pred: str, infra: bool) -> dict[str, Any]:
    return {
        "score": sum(passed) / len(passed),
        "acc": all(passed),
        "pred": pred,
        "tests_passed": sum(passed),
        "tests_total": len(passed),
        "infra_failure": infra,
    }


async def _boxed_fallback(completion: str, tests: str) -> dict[str, Any]:
    """A ground truth with neither key (a test form the data prep flags ``released_only``): code_math.py:322-327 grades
    it as a math answer, math-verify of the last ``\\boxed{}`` against the tests' text, so in practice −1."""
    boxed = last_boxed_only_string(solution_text(completion))
    if boxed is None:
        return _fail()
    pred = boxed[len("\\boxed{") : -1]
    equal = pred == tests
    if not equal:
        pool = get_isolated_pool(preload=(EQUIVALENCE_MODULE, "math_verify"))
        try:
            equal = bool(await pool.acall(f"{EQUIVALENCE_MODULE}:math_verify_equal", pred, tests, timeout_s=10.0))
        except GraderCrashed:
            equal = False
    return {**_fail(pred), "score": 1.0 if equal else -1.0, "acc": equal}


def released_form(ground_truth: Any) -> str:
    """The ground truth as the released grader saw it: ``str()`` of it. A JSON text's ``"fn_name": null`` stays (the
    original then scores −1: ``"fn_name" in`` it holds, no function named None is found); under
    ``ground_truth_form: normalized`` the scorer gets the text without null-valued keys (rewards/ground_truth.py)."""
    return str(ground_truth)


async def ascore_code_released(
    completion: str, ground_truth: Any, *, sandbox: Any, memory_mb: int = MEMORY_MB
) -> dict[str, Any]:
    """The released code reward of one response: pass fraction in [0, 1], or −1 (see the module docstring)."""
    tests = released_form(ground_truth)
    if "import_prefix" not in tests and "inputs" not in tests:
        return await _boxed_fallback(completion, tests)
    program = last_block(solution_text(completion))
    if program is None:
        return _fail()
    try:
        ast.parse(program)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return _fail()
    if "import_prefix" in tests:
        return await _grade_asserts(sandbox, tests, program, memory_mb)
    return await _grade_io(sandbox, tests, program, memory_mb)
