"""LeetCode assert harnesses read in the parent: each assert split into its call and expected value, pure."""

from __future__ import annotations

import json

import pytest
from assert_gt_helpers import REVERSE_GT, TWO_SUM_GT

from agentrl_recipe.training.rewards.code.assert_form import (
    AssertCase,
    AssertFormError,
    AssertTests,
    parse_assert,
    parse_code_tests,
)
from agentrl_recipe.training.rewards.code.grade import CodeTests


@pytest.mark.parametrize(
    ("line", "case"),
    [
        ("assert candidate(a = [1,2]) == [2, 1]", AssertCase("candidate(a=[1, 2])", [2, 1])),
        ("assert 3 == candidate(1, 2)", AssertCase("candidate(1, 2)", 3)),
        ("assert sorted(candidate(x = 1)) == (1, 2)", AssertCase("sorted(candidate(x=1))", [1, 2])),
        ("assert candidate(n = 2) == -inf", AssertCase("candidate(n=2)", float("-inf"))),
        (
            "assert is_same_tree(candidate(root = tree_node([2,1,3])), tree_node([2,3,1,None,None]))",
            AssertCase("candidate(root=tree_node([2, 1, 3]))", {"TreeNode": [2, 3, 1]}),
        ),
        ("assert candidate(head = list_node([1])) is None", AssertCase("candidate(head=list_node([1]))", None, True)),
        ("assert candidate(d = 1) == {'a': 1}", AssertCase("candidate(d=1)", {"dict": {"a": 1}})),
    ],
)
def test_an_assert_splits_into_the_call_and_the_expected_value(line: str, case: AssertCase) -> None:
    assert parse_assert(line) == case


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("assert candidate(1) != 2", "unsupported assert shape"),
        ("assert abs(candidate(1) - 2.5) < 1e-6", "unsupported assert shape"),
        ("assert candidate(1) == candidate(2)", "exactly one side"),
        ("assert candidate(1) == expected", "not a literal"),
        ("assert candidate(1) == {1, 2}", "not JSON-comparable"),
        ("assert candidate(1) is 3", "only with None/True/False"),
        ("print(candidate(1))", "not a plain assert"),
    ],
)
def test_unsupported_asserts_are_form_errors(line: str, message: str) -> None:
    with pytest.raises(AssertFormError, match=message):
        parse_assert(line)


def test_parse_code_tests_knows_both_forms_and_names_the_rest() -> None:
    tests = parse_code_tests(TWO_SUM_GT)
    assert isinstance(tests, AssertTests) and len(tests) == 3 and tests.entry_point == "Solution().twoSum"
    assert parse_code_tests(json.loads(REVERSE_GT)).cases[1] == AssertCase("candidate(head=list_node([]))", None, True)
    assert isinstance(parse_code_tests(json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]})), CodeTests)
    with pytest.raises(AssertFormError, match="needs keys"):
        parse_code_tests(json.dumps({"import_prefix": "", "test_code": "def check(candidate):\n    assert 1"}))
    with pytest.raises(ValueError, match="must be"):
        parse_code_tests(json.dumps({"cases": [[1, 2]]}))
