"""LiveCodeBench's comparison rules, pure."""

from __future__ import annotations

import pytest

from agentrl_recipe.training.rewards.code.lcb_rules import call_result_matches, stdout_matches, stripped_digest


@pytest.mark.parametrize(
    ("actual", "expected", "match"),
    [
        ("6\n", "6", True),  # the whole output is stripped
        ("  1 2 \n3\n\n", "1 2\n3", True),  # and every line
        ("1.0", "1", True),  # every token numeric → compared as Decimals
        ("1e3 2", "1000 2.00", True),
        ("0.3333", "0.33333", False),  # no tolerance
        ("Yes", "YES", False),  # case matters
        ("1  2", "1 2", True),  # inner whitespace only normalised when all tokens are numbers
        ("a  b", "a b", False),
        ("1\n\n2", "1\n2", False),  # line counts differ
        ("NaN", "NaN", True),  # equal strings match before any Decimal parsing
        ("nan", "NaN", False),  # Decimal NaN never equals anything
        ("", "", True),
    ],
)
def test_stdout_matches_lcb_rules(actual: str, expected: str, match: bool) -> None:
    assert stdout_matches(actual, expected) is match


@pytest.mark.parametrize(
    ("result", "expected", "match"),
    [
        ("[3, 4]", "[3, 4]", True),
        ("[3,4]", "[3, 4]", True),  # compared as values, not text
        ("1", "1.0", True),  # Python equality
        ('"abc"', '"abc"', True),
        ("[[1, 2]]", "[[1, 2]]", True),
        ("[4, 3]", "[3, 4]", False),
        ("null", "[]", False),
    ],
)
def test_call_result_matches(result: str, expected: str, match: bool) -> None:
    assert call_result_matches(result, expected) is match


def test_the_digest_is_of_the_stripped_lines() -> None:
    assert stripped_digest("  1 2 \n3\n\n") == stripped_digest("1 2\n3")
    assert stripped_digest("1\n2") != stripped_digest("1\n3")
