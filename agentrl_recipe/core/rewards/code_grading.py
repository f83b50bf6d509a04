"""Grade one program against its tests in the sandbox, with LiveCodeBench's comparison rules, compared in the parent.

Used by the code reward (:mod:`agentrl_recipe.core.rewards.scoring`) and by the eval's offline LCB scorer.

How one program is graded (fast path: one sandbox execution for all its tests):

1. The trusted driver (:mod:`agentrl_recipe.core.rewards._driver`) runs in the sandbox with the program and the test
   *inputs* only. Per test it reports the program's stdout (stdin tests) or the JSON of its return value (call tests)
   in a frame tagged with a per-request random nonce; a per-test ``SIGALRM`` timeout bounds each test.
2. This module parses the frames and compares with the expected outputs here, in the trusted parent, using LCB's rules
   (:func:`stdout_matches`, :func:`call_result_matches`). Exit codes and anything else the program prints are ignored.
3. If the execution ends early (``os._exit``, segfault, memory kill, a program that disabled the alarm, output cap),
   the test in progress fails with that cause and a fresh execution resumes at the next test, until all tests are
   done or the overall deadline passes (then the rest count as timeouts).
4. A sandbox ``infra_error`` is retried; if it persists the grade says ``infra_failure=True`` — the sandbox failed,
   not the program, so callers must not score it as wrong.

Test format (LiveCodeBench's ``input_output``, also ``reward_model.ground_truth`` of code rows, as a JSON string):
``{"inputs": [str, ...], "outputs": [str, ...], "fn_name": str | null}``. stdin tests when ``fn_name`` is null;
call tests otherwise, where each input is one JSON value per line (one per positional argument) and each output one
JSON value.
"""

from __future__ import annotations

import asyncio
import dataclasses
import decimal
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

# Per-test statuses of a CodeGrade. Only "passed" passes.
TEST_STATUSES = (
    "passed",
    "wrong_answer",
    "runtime_error",  # raised, or the process died without reporting this test (os._exit, segfault)
    "timeout",  # per-test alarm, the execution's wall limit, or the overall deadline
    "memory_exceeded",
    "output_truncated",  # wrote past the sandbox's output cap (e.g. straight to the file descriptor) in this test
    "compile_error",  # SyntaxError, or (call tests) the module body / function lookup failed
    "unserializable",  # call test returned a value JSON cannot encode (LCB compares it to JSON and fails it too)
    "infra_error",  # the sandbox failed; not the program's fault
)

LCB_TIMEOUT_S = 6.0  # lcb_runner --timeout default, per test
_STARTUP_SLACK_S = 5.0  # interpreter start + driver set-up per execution, on top of the per-test budget
_INFRA_RETRIES = 2


@dataclasses.dataclass(frozen=True)
class CodeTests:
    """A program's tests. ``fn_name`` None = stdin/stdout tests; otherwise call-based (LCB encoding)."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn_name: str | None = None

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.outputs):
            raise ValueError(f"code tests have {len(self.inputs)} inputs but {len(self.outputs)} outputs")
        if not self.inputs:
            raise ValueError("code tests are empty: a program cannot be graded without at least one test")
        if self.fn_name is not None:
            if not isinstance(self.fn_name, str) or not self.fn_name.isidentifier():
                raise ValueError(f"fn_name must be a Python identifier or null, got {self.fn_name!r}")
            for i, (inp, out) in enumerate(zip(self.inputs, self.outputs, strict=True)):
                try:
                    [json.loads(line) for line in inp.split("\n")]
                    json.loads(out)
                except ValueError as exc:
                    raise ValueError(f"call-based test {i} is not one JSON value per line: {exc}") from exc

    @property
    def mode(self) -> str:
        return "stdin" if self.fn_name is None else "call"

    def __len__(self) -> int:
        return len(self.inputs)

    @classmethod
    def parse(cls, ground_truth: str | Mapping[str, Any] | CodeTests) -> CodeTests:
        """From a JSON string (the dataset encoding) or an already-decoded mapping (e.g. a parquet struct)."""
        if isinstance(ground_truth, CodeTests):
            return ground_truth
        data: Any = ground_truth
        if isinstance(ground_truth, (str, bytes)):
            try:
                data = json.loads(ground_truth)
            except ValueError as exc:
                raise ValueError(f"code ground truth is not valid JSON: {exc}; expected {_FORMAT}") from exc
        if not isinstance(data, Mapping) or "inputs" not in data or "outputs" not in data:
            raise ValueError(f"code ground truth must be {_FORMAT}, got {type(data).__name__}")
        inputs, outputs = data["inputs"], data["outputs"]
        if isinstance(inputs, (str, bytes)) or isinstance(outputs, (str, bytes)):
            raise ValueError(f"code ground truth 'inputs'/'outputs' must be lists of strings: {_FORMAT}")
        fn_name = data.get("fn_name") or None
        return cls(tuple(_as_text(x) for x in inputs), tuple(_as_text(x) for x in outputs), fn_name)


_FORMAT = '{"inputs": [str, ...], "outputs": [str, ...], "fn_name": str | null}'


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    raise ValueError(f"every code test input/output must be a string, got {type(value).__name__}: {value!r:.80}")


@dataclasses.dataclass
class CodeGrade:
    """Outcome of grading one program. ``statuses[i]`` is one of :data:`TEST_STATUSES`."""

    passed: int
    total: int
    statuses: list[str]
    infra_failure: bool = False  # the sandbox failed on some test: the grade is incomplete, not a wrong answer
    executions: int = 0  # sandbox executions used (1 unless the program died mid-way)
    duration_s: float = 0.0
    first_error: str | None = None  # the first runtime/compile error message, for logs and debugging

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """LiveCodeBench's correctness: every test passed."""
        return self.total > 0 and self.passed == self.total

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# --- LiveCodeBench's comparison rules (lcb_runner/evaluation/testing_util.py) ---


def stripped_lines(text: str) -> list[str]:
    """LCB ``get_stripped_lines``: strip the whole output, split on newlines, strip each line."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[decimal.Decimal] | None:
    try:
        return [decimal.Decimal(token) for token in line.split()]
    except (decimal.InvalidOperation, ValueError):
        return None


def stdout_matches(actual: str, expected: str) -> bool:
    """LCB stdin rule: same number of stripped lines; each line equal, or equal as lists of Decimals (no tolerance)."""
    got, want = stripped_lines(actual), stripped_lines(expected)
    if len(got) != len(want):
        return False
    for a, b in zip(got, want, strict=True):
        if a == b:
            continue
        da, db = _decimals(a), _decimals(b)
        if da is None or db is None or da != db:
            return False
    return True


def stripped_digest(text: str) -> str:
    """Digest of LCB's stripped lines (how the driver reports outputs too large to send whole)."""
    return hashlib.sha256("\n".join(stripped_lines(text)).encode("utf-8", "surrogatepass")).hexdigest()


def call_result_matches(result_json: str, expected_json: str) -> bool:
    """LCB call rule: ``prediction == json.loads(expected)`` with plain Python equality (a returned tuple is a list)."""
    try:
        return json.loads(result_json) == json.loads(expected_json)
    except ValueError:
        return False


# --- the driver protocol ---


@cache
def driver_source() -> str:
    return (
        resources.files("agentrl_recipe.core.rewards").joinpath("_driver.py").read_text(encoding="utf-8")
        + "\n_main()\n"
    )


def parse_frames(stdout: str, nonce: str) -> list[dict[str, Any]]:
    """Frames the driver wrote, in order. Lines without the nonce (or not JSON objects) are ignored."""
    prefix = nonce + " "
    frames = []
    for line in stdout.split("\n"):
        if line.startswith(prefix):
            try:
                frame = json.loads(line[len(prefix) :])
            except ValueError:
                continue
            if isinstance(frame, dict):
                frames.append(frame)
    return frames


def _judge(frame: Mapping[str, Any], tests: CodeTests, index: int) -> str:
    status = frame.get("status")
    if status != "ok":
        return status if status in ("timeout", "runtime_error", "unserializable") else "runtime_error"
    expected = tests.outputs[index]
    if "sha256" in frame:  # output too large to ship: LCB's exact-line rule by digest (stdin tests only)
        return "passed" if tests.fn_name is None and frame["sha256"] == stripped_digest(expected) else "wrong_answer"
    out = frame.get("out")
    if not isinstance(out, str):
        return "runtime_error"
    ok = stdout_matches(out, expected) if tests.fn_name is None else call_result_matches(out, expected)
    return "passed" if ok else "wrong_answer"


_DEATH_STATUS = {"timeout": "timeout", "memory_exceeded": "memory_exceeded", "output_truncated": "output_truncated"}


async def agrade_program(
    program: str,
    tests: CodeTests | str | Mapping[str, Any],
    *,
    sandbox: Any = None,
    timeout_s_per_test: float = LCB_TIMEOUT_S,
    total_timeout_s: float | None = None,
    memory_mb: int | None = None,
    max_frame_chars: int = 256 * 1024,
) -> CodeGrade:
    """Run ``program`` on every test in the sandbox and compare here. Never raises for anything the program does.

    ``total_timeout_s`` caps the whole grade (default LCB's ``(timeout + 1) * n_tests + 5``); tests not reached by then
    count as timeouts. ``sandbox`` is any :class:`agentrl_recipe.core.tools.sandbox.Sandbox` (default:
    ``get_sandbox()``).
    """
    tests = CodeTests.parse(tests)
    if sandbox is None:
        from agentrl_recipe.core.tools.sandbox import get_sandbox

        sandbox = get_sandbox()
    n = len(tests)
    if total_timeout_s is None:
        total_timeout_s = (timeout_s_per_test + 1.0) * n + 5.0
    started = time.monotonic()
    deadline = started + total_timeout_s
    statuses: list[str | None] = [None] * n
    first_error: str | None = None
    infra_failure = False
    executions = 0
    infra_attempts = 0
    start = 0
    while start < n:
        remaining = deadline - time.monotonic()
        if remaining <= 0.05:
            break
        nonce = secrets.token_hex(16)
        payload = {
            "nonce": nonce,
            "program": program,
            "fn_name": tests.fn_name,
            "inputs": list(tests.inputs[start:]),  # a resumed execution gets only the tests left
            "start": start,
            "timeout_s": timeout_s_per_test,
            "max_frame_chars": max_frame_chars,
        }
        exec_timeout = min(remaining, timeout_s_per_test * (n - start) + _STARTUP_SLACK_S)
        res = await sandbox.arun(
            driver_source(), stdin=json.dumps(payload), timeout_s=exec_timeout, memory_mb=memory_mb
        )
        executions += 1
        if res.status == "infra_error":
            infra_attempts += 1
            if infra_attempts > _INFRA_RETRIES:
                infra_failure = True
                first_error = first_error or f"sandbox infra_error: {res.message}"
                for i in range(start, n):
                    statuses[i] = "infra_error"
                break
            continue
        frames = parse_frames(res.stdout, nonce)
        progressed = False
        finished = False
        for frame in frames:
            kind = frame.get("t")
            if kind == "setup_error":
                status = frame.get("status")
                status = "timeout" if status == "timeout" else "compile_error"
                first_error = first_error or str(frame.get("error") or status)
                for i in range(start, n):
                    statuses[i] = status
                start, finished = n, True
                break
            if kind == "end":
                finished = True
                break
            if kind == "result" and frame.get("i") == start:  # in order; anything else is not from the driver
                statuses[start] = _judge(frame, tests, start)
                if statuses[start] == "runtime_error" and first_error is None:
                    first_error = str(frame.get("error") or "runtime error")
                start += 1
                progressed = True
        if finished or start >= n:
            break
        # The execution ended before reporting test `start`: blame that test, unless the output cap cut a run that
        # was making progress (the frames were fine; the budget for this execution ran out), then just resume.
        if res.status == "output_truncated" and progressed:
            continue
        statuses[start] = _DEATH_STATUS.get(res.status, "runtime_error")
        if statuses[start] == "runtime_error" and first_error is None:
            last_stderr_line = (res.stderr.strip().splitlines() or [""])[-1]
            first_error = last_stderr_line[-500:] or f"exited with code {res.exit_code} before reporting"
        start += 1
    final = [s if s is not None else "timeout" for s in statuses]
    return CodeGrade(
        passed=sum(s == "passed" for s in final),
        total=n,
        statuses=final,
        infra_failure=infra_failure,
        executions=executions,
        duration_s=time.monotonic() - started,
        first_error=first_error,
    )


def grade_program(program: str, tests: CodeTests | str | Mapping[str, Any], **kwargs: Any) -> CodeGrade:
    """Blocking :func:`agrade_program`; callable from sync code, including from inside a running event loop's thread."""
    return run_coroutine_sync(agrade_program(program, tests, **kwargs))


def run_coroutine_sync(coro: Any) -> Any:
    """``asyncio.run`` that also works when this thread already runs a loop (runs the coroutine in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="agentrl-grade-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def grade_many(
    programs: Sequence[str],
    tests: Sequence[CodeTests | str | Mapping[str, Any]],
    *,
    concurrency: int = 8,
    **kwargs: Any,
) -> list[CodeGrade]:
    """Grade ``programs[i]`` on ``tests[i]`` with at most ``concurrency`` programs in flight (eval, benchmarks)."""
    if len(programs) != len(tests):
        raise ValueError(f"{len(programs)} programs but {len(tests)} test sets")

    async def run_all() -> list[CodeGrade]:
        sem = asyncio.Semaphore(concurrency)

        async def one(program: str, t: Any) -> CodeGrade:
            async with sem:
                return await agrade_program(program, t, **kwargs)

        return list(await asyncio.gather(*(one(p, t) for p, t in zip(programs, tests, strict=True))))

    return run_coroutine_sync(run_all())
