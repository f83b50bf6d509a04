"""LiveCodeBench's comparison rules (``lcb_runner/evaluation/testing_util.py``), applied in the trusted parent to what
the sandboxed driver reported."""

from __future__ import annotations

import decimal
import hashlib
import json

# What parsing or comparing an output the program controls can raise: the test fails, the grade goes on.
UNCOMPARABLE = (ValueError, ArithmeticError, RecursionError, MemoryError, TypeError)


def stripped_lines(text: str) -> list[str]:
    """LCB ``get_stripped_lines``: strip the whole output, split on newlines, strip each line."""
    return [line.strip() for line in text.strip().split("\n")]


def _decimals(line: str) -> list[decimal.Decimal] | None:
    """The line as Decimals; None when a token is not one, or is a signalling NaN (``sNaN``: comparing it traps
    ``InvalidOperation``, where LCB's harness raised and failed the test)."""
    try:
        values = [decimal.Decimal(token) for token in line.split()]
    except (decimal.InvalidOperation, ValueError):
        return None
    return None if any(value.is_snan() for value in values) else values


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
    """LCB call rule: ``prediction == json.loads(expected)`` with plain Python equality (a returned tuple is a list).

    A result that cannot be parsed or compared (deeper than the parser's recursion limit, a number past the digit
    limit) fails."""
    try:
        return json.loads(result_json) == json.loads(expected_json)
    except UNCOMPARABLE:
        return False
