"""Ground truth graded as published (compat open_agentrl) or normalized (agentrl): the released 30K's quirks and the
rebuilt mix's LeetCode rows, graded end to end on the shipped fixture (tests/data/open_agentrl_30k.jsonl)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from agentrl_recipe import names
from agentrl_recipe.problems import read_local_file
from agentrl_recipe.training.recipe_config import RecipeConfig
from agentrl_recipe.training.rewards import scoring
from agentrl_recipe.training.rewards.ground_truth import decoded_list_answer, graded_ground_truth, without_null_keys
from agentrl_recipe.training.rewards.reward_kwargs import RewardKwargs
from data_prep import rl_sources
from data_prep.jobs import rl_released

FIXTURE = Path(__file__).resolve().parents[3] / "data" / "open_agentrl_30k.jsonl"
STDIN_NULL = json.dumps({"inputs": ["3\n"], "outputs": ["9\n"], "fn_name": None})


def mode_options(mode: str) -> dict:
    """The scoring options a config with ``agentrl.compat: <mode>`` and no explicit keys resolves to."""
    kw = RewardKwargs.from_dict({}, recipe=RecipeConfig(compat=mode))
    return {
        "code_rules": kw.code_rules,
        "ground_truth_form": kw.ground_truth_form,
        "leetcode_tests": kw.leetcode_tests,
        "code_timeout_s_per_test": 10.0,
    }


async def grade(sandbox, row: dict, response: str, mode: str) -> float:
    result = await scoring.acompute_score(
        row["data_source"],
        response,
        row["reward_model"]["ground_truth"],
        row["extra_info"],
        sandbox=sandbox,
        **mode_options(mode),
    )
    return result["score"]


def block(code: str) -> str:
    return f"done\n```python\n{code}\n```"


@pytest.fixture(scope="module")
def released_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict]:
    """The fixture through the loader (`make data-rl-released`), keyed by the published extra_info.index."""
    tmp = tmp_path_factory.mktemp("released")
    source = tmp / "Open-AgentRL-30K.parquet"
    pq.write_table(pa.Table.from_pylist(read_local_file(FIXTURE)), source)
    parser = argparse.ArgumentParser()
    rl_released.add_arguments(parser)
    rl_released.build_released(parser.parse_args([str(source), "--out", str(tmp / "out.parquet")]))
    rows = pq.read_table(tmp / "out.parquet").to_pylist()
    return {int(r["extra_info"]["source_id"]): r for r in rows}


def test_compat_resolves_the_two_keys() -> None:
    released, ours = RewardKwargs.from_dict({}, recipe=RecipeConfig(compat="open_agentrl")), RewardKwargs.from_dict({})
    assert (released.ground_truth_form, released.leetcode_tests) == ("published", "asserts")
    assert (ours.ground_truth_form, ours.leetcode_tests) == ("normalized", "call")
    assert RewardKwargs.from_dict({"leetcode_tests": "asserts"}).leetcode_tests == "asserts"
    with pytest.raises(ValueError, match="ground_truth_form must be one of"):
        RewardKwargs.from_dict({"ground_truth_form": "decoded"})


def test_graded_ground_truth_by_form() -> None:
    kw = {"form": "normalized", "leetcode_tests": "call"}
    assert graded_ground_truth("code", STDIN_NULL, None, **kw) == json.dumps({"inputs": ["3\n"], "outputs": ["9\n"]})
    assert graded_ground_truth("code", STDIN_NULL, None, form="published", leetcode_tests="asserts") == STDIN_NULL
    assert graded_ground_truth("math", '["15625"]', None, **kw) == "15625"
    assert graded_ground_truth("math", '["15625"]', None, form="published", leetcode_tests="call") == '["15625"]'
    assert graded_ground_truth("gpqa", "C", None, **kw) == "C"
    call = json.dumps({"inputs": ["1"], "outputs": ["2"], "fn_name": "f"})
    assert graded_ground_truth("code", "<asserts>", {"call_tests": call}, **kw) == call
    assert (
        graded_ground_truth("code", "<asserts>", {"call_tests": call}, form="normalized", leetcode_tests="asserts")
        == "<asserts>"
    )
    assert graded_ground_truth("code", "<asserts>", {"call_tests": None}, **kw) == "<asserts>"  # Arrow's fill: asserts
    # only a one-element list of one string is an answer list; intervals and other lists stay text
    assert [decoded_list_answer(a) for a in ('["7"]', "[0, 1]", '["1", "2"]', "[7]", '[""]', "[", 7)] == [
        "7",
        *[None] * 6,
    ]
    assert without_null_keys({"a": None, "b": 1}) == {"b": 1} and without_null_keys("not json") == "not json"
    with pytest.raises(ValueError, match="leetcode_tests must be one of"):
        graded_ground_truth("code", "x", None, form="published", leetcode_tests="both")


async def test_fn_name_null_scores_minus_one_as_released(sandbox, released_rows) -> None:
    """code_math.py:281-284: "fn_name" in the decoded tests, no function named None: −1, whatever the program."""
    row = released_rows[11]
    assert json.loads(row["reward_model"]["ground_truth"])["fn_name"] is None  # kept as published
    good = block("n = int(input())\nprint(n * n)")
    assert (await grade(sandbox, row, good, "open_agentrl"), await grade(sandbox, row, good, "agentrl")) == (-1.0, 1.0)
    with_class = block("class Solution:\n    pass\nn = int(input())\nprint(n * n)")  # literal_eval of `null` raises
    assert await grade(sandbox, row, with_class, "open_agentrl") == -1.0


async def test_list_answer_is_compared_as_published_text(sandbox, released_rows) -> None:
    """math_dapo.py:217: the boxed text == '["7"]'; normalized grades the element."""
    row = released_rows[2]
    assert row["reward_model"]["ground_truth"] == '["7"]'
    plain, as_list = "so \\boxed{7}", 'so \\boxed{["7"]}'
    assert (await grade(sandbox, row, plain, "open_agentrl"), await grade(sandbox, row, plain, "agentrl")) == (-1, 1)
    assert (await grade(sandbox, row, as_list, "open_agentrl"), await grade(sandbox, row, as_list, "agentrl")) == (
        1,
        -1,
    )


async def test_released_leetcode_asserts_score_as_the_released_grader(sandbox, released_rows) -> None:
    """A method returning a string and an int result against `== 2.0`: 1.0 released (asserts run), 1.0 ours."""
    rev = block("class Solution:\n    def reverseString(self, s: str) -> str:\n        return s[::-1]")
    avg = block("class Solution:\n    def average(self, nums):\n        return sum(nums) // len(nums)")
    for row, program in ((released_rows[13], rev), (released_rows[14], avg)):
        assert "call_tests" not in row["extra_info"]  # the published row has only its asserts
        assert (await grade(sandbox, row, program, "open_agentrl"), await grade(sandbox, row, program, "agentrl")) == (
            1.0,
            1.0,
        )


def leetcode_source(fn: str, params: str, asserts: list[str]) -> dict:
    """A Skywork-OR1 LeetCode row as published (the rebuilt mix's input)."""
    test_code = "def check(candidate):\n" + "".join(f"    {a}\n" for a in asserts)
    gt = {"import_prefix": "from typing import *\n", "test_code": test_code, "entry_point": f"Solution().{fn}"}
    content = f"Question: q\n\nclass Solution:\n    def {fn}(self, {params}):\n        "
    return {
        "data_source": "train-code-leetcode-Easy",
        "prompt": [{"role": "user", "content": content}],
        "reward_model": {"ground_truth": json.dumps(gt), "style": "rule"},
        "extra_info": {"index": 1},
    }


@pytest.mark.parametrize(
    ("asserts", "program", "released", "ours", "conversion_released"),
    [
        # a string result: the released call wrapper prints str() (ba), the converted expected is JSON ("ba")
        (['assert candidate(s = "ab") == "ba"'], "return s[::-1]", 1.0, 1.0, 0.0),
        # an int against 2.0: the assert holds; the conversion's printed "2" is not "2.0"
        (["assert candidate(s = [1, 3]) == 2.0"], "return sum(s) // len(s)", 1.0, 1.0, 0.0),
        # a tuple against a list: the assert fails; json.dumps prints the tuple as a list, LCB takes it for one
        (["assert candidate(s = [1, 2]) == [2, 1]"], "return tuple(s[::-1])", 0.0, 1.0, 1.0),
    ],
    ids=["str_result", "int_vs_float", "tuple_vs_list"],
)
async def test_rebuilt_mix_leetcode_rows_keep_their_asserts(
    sandbox, asserts, program, released, ours, conversion_released
) -> None:
    """compat open_agentrl grades the asserts as released; agentrl grades our call-based conversion. The conversion
    under the released grader (what the rebuilt mix's rows got before) is not what the released asserts score."""
    row = rl_sources.convert_skywork_code(leetcode_source("f", "s", asserts))
    assert row["reward_model"]["ground_truth"] == leetcode_source("f", "s", asserts)["reward_model"]["ground_truth"]
    response = block(f"class Solution:\n    def f(self, s):\n        {program}")
    assert (await grade(sandbox, row, response, "open_agentrl"), await grade(sandbox, row, response, "agentrl")) == (
        released,
        ours,
    )
    conversion = await scoring.acompute_score(
        names.DS_SKYWORK_CODE,
        response,
        row["extra_info"]["call_tests"],
        sandbox=sandbox,
        code_rules="open_agentrl",
    )
    assert conversion["score"] == conversion_released
