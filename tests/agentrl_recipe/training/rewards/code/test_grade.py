"""CodeTests: the dataset encodings it accepts and the ground truths it rejects, naming the problem."""

from __future__ import annotations

import json

import pytest

from agentrl_recipe.training.rewards.code.grade import CodeTests


def test_code_tests_parse_accepts_the_dataset_encodings() -> None:
    gt = {"inputs": ["1\n"], "outputs": ["2\n"], "fn_name": None}
    assert CodeTests.parse(json.dumps(gt)) == CodeTests(("1\n",), ("2\n",), None)
    assert CodeTests.parse(gt).mode == "stdin"  # a decoded parquet struct works too
    assert CodeTests.parse({**gt, "fn_name": ""}).fn_name is None


@pytest.mark.parametrize(
    ("ground_truth", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"inputs": ["1"]}), "must be"),
        (json.dumps({"inputs": ["1", "2"], "outputs": ["1"], "fn_name": None}), "2 inputs but 1 outputs"),
        (json.dumps({"inputs": [], "outputs": [], "fn_name": None}), "empty"),
        (json.dumps({"inputs": [1], "outputs": ["1"], "fn_name": None}), "must be a string"),
        (json.dumps({"inputs": ["[1"], "outputs": ["1"], "fn_name": "f"}), "one JSON value per line"),
        (json.dumps({"inputs": ["1"], "outputs": ["1"], "fn_name": "not a name"}), "identifier"),
    ],
)
def test_code_tests_parse_rejects_bad_ground_truth(ground_truth: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CodeTests.parse(ground_truth)
