"""A code ground truth nested too deeply for ``json`` (RecursionError, not ValueError) is invalid ground truth: the
grader flags it (``infra_failure``, no tests), never raises (which the reward manager would count as a
``grader_error``), and data validation refuses its row by number (issue 40, item 8)."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_parquet
from agentrl_recipe.training.rewards.code.assert_form import parse_code_tests
from agentrl_recipe.training.rewards.code.scorer import ascore_code
from agentrl_recipe.training.rewards.ground_truth import decoded_list_answer, without_null_keys
from data_prep.rows import rl_row
from data_prep.schema import validate_file

DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it
SOLUTION = "```python\nprint(input())\n```"
FORMS = {
    "whole ground truth": DEEP,
    "call-based input line": json.dumps({"inputs": [DEEP], "outputs": ["1"], "fn_name": "f"}),
    "call-based output": json.dumps({"inputs": ["1"], "outputs": [DEEP], "fn_name": "f"}),
}


@pytest.mark.parametrize("ground_truth", FORMS.values(), ids=FORMS.keys())
def test_the_grader_scores_it_as_invalid_ground_truth(ground_truth: str) -> None:
    with pytest.raises(ValueError, match="cannot be parsed \\(RecursionError"):
        parse_code_tests(ground_truth)
    result = asyncio.run(ascore_code(SOLUTION, ground_truth, sandbox=None))
    assert result == {
        "score": 0.0, "acc": None, "pred": None, "tests_passed": 0, "tests_total": 0, "infra_failure": True,
    }  # fmt: skip


def test_ground_truth_helpers_leave_it_unchanged() -> None:
    assert without_null_keys(DEEP) == DEEP and decoded_list_answer(DEEP) is None


@pytest.mark.parametrize("ground_truth", FORMS.values(), ids=FORMS.keys())
def test_validation_refuses_its_row_by_number(tmp_path, ground_truth: str) -> None:
    good = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"], "fn_name": None})
    rows = [rl_row(names.DS_SKYWORK_CODE, f"Echo {i}.", "code", gt, {"question": "Echo."}) for i, gt in
            enumerate([good, ground_truth, good])]  # fmt: skip
    path = tmp_path / "rl.parquet"
    atomic_write_parquet(path, rows)
    errors = validate_file(path, "rl")
    assert [(e.row, e.field) for e in errors] == [(1, "reward_model.ground_truth")]
    assert "RecursionError" in errors[0].message and f"{path}: row 1:" in str(errors[0])
