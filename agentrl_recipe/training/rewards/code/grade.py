"""A program's code tests and the outcome of grading it: :class:`CodeTests` (LiveCodeBench's ``input_output``) and
:class:`CodeGrade`, shared by the I/O grader (:mod:`.io_tests`) and the assert grader (:mod:`.assert_tests`).

Test format (also ``reward_model.ground_truth`` of code rows, as a JSON string):
``{"inputs": [str, ...], "outputs": [str, ...], "fn_name": str | null}``. stdin tests when ``fn_name`` is null;
call tests otherwise, where each input is one JSON value per line (one per positional argument) and each output one
JSON value.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
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
        """From a JSON string (the dataset encoding) or an already-decoded mapping (e.g. a parquet struct); ValueError
        for every way it fails to parse (a value nested too deeply raises RecursionError in ``json``: a ValueError
        here too, so the row is invalid ground truth, never a grader crash)."""
        try:
            return cls._parse(ground_truth)
        except ValueError:
            raise
        except Exception as exc:  # RecursionError, MemoryError, ...: unparseable all the same
            raise ValueError(f"code ground truth cannot be parsed ({type(exc).__name__}: {exc})") from None

    @classmethod
    def _parse(cls, ground_truth: str | Mapping[str, Any] | CodeTests) -> CodeTests:
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
