"""LeetCode assert harnesses (raw Skywork-OR1 code ground truth) graded: run in the sandbox, judged here."""

from __future__ import annotations

import json

import pytest
from assert_gt_helpers import REVERSE_GT, TWO_SUM_GT

from agentrl_recipe import names
from agentrl_recipe.training.rewards.code.assert_form import AssertTests
from agentrl_recipe.training.rewards.code.assert_tests import agrade_asserts
from agentrl_recipe.training.rewards.scoring import acompute_score, compute_score

FAST = 2.0

TWO_SUM = """
class Solution:
    def twoSum(self, nums: List[int], target: int) -> List[int]:
        seen = {}
        for i, x in enumerate(nums):
            if target - x in seen:
                return [seen[target - x], i]
            seen[x] = i
"""
TWO_SUM_FIRST_PAIR_ONLY = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
REVERSE = """
class Solution:
    def reverseList(self, head: Optional[ListNode]) -> Optional[ListNode]:
        prev = None
        while head:
            head.next, prev, head = prev, head, head.next
        return prev
"""


def block(code: str) -> str:
    return f"I will submit this.\n```python\n{code}\n```"


async def grade(program: str, ground_truth: str, sandbox):
    return await agrade_asserts(program, AssertTests.parse(ground_truth), sandbox=sandbox, timeout_s_per_test=FAST)


async def test_correct_and_wrong_two_sum(sandbox) -> None:
    assert (await grade(TWO_SUM, TWO_SUM_GT, sandbox)).statuses == ["passed"] * 3
    wrong = await grade(TWO_SUM_FIRST_PAIR_ONLY, TWO_SUM_GT, sandbox)
    assert wrong.statuses == ["passed", "wrong_answer", "passed"]


async def test_helper_object_rows_are_graded(sandbox) -> None:
    assert (await grade(REVERSE, REVERSE_GT, sandbox)).statuses == ["passed", "passed"]
    identity = "class Solution:\n    def reverseList(self, head):\n        return head\n"
    assert (await grade(identity, REVERSE_GT, sandbox)).statuses == ["wrong_answer", "passed"]


@pytest.mark.parametrize(
    "cheat",
    [
        # an answer that equals everything: the comparison is not made where the program runs
        "class _Any:\n    def __eq__(self, other): return True\n"
        "class Solution:\n    def twoSum(self, nums, target): return _Any()",
        # exit code 0 before any assert ran (what the released grader counted as a pass)
        "import os\nclass Solution:\n    def twoSum(self, nums, target): os._exit(0)",
        "import sys\nclass Solution:\n    def twoSum(self, nums, target): sys.exit(0)",
        # claims of success on stdout, on fd 1, and as a dict posing as the expected list
        "import os\nprint('passed')\nos.write(1, b'ok\\n')\nclass Solution:\n    def twoSum(self, n, t): return None",
    ],
)
async def test_a_program_cannot_fake_passing(cheat: str, sandbox) -> None:
    assert (await grade(cheat, TWO_SUM_GT, sandbox)).passed == 0


async def test_a_crash_fails_its_test_and_grading_resumes(sandbox) -> None:
    crash_on_3_2_4 = "import os\nclass Solution:\n    def twoSum(self, nums, target):\n"
    crash_on_3_2_4 += "        if nums == [3, 2, 4]: os.kill(os.getpid(), 9)\n        return [0, 1]\n"
    result = await grade(crash_on_3_2_4, TWO_SUM_GT, sandbox)
    assert result.statuses == ["passed", "runtime_error", "passed"] and result.executions == 2


async def test_a_broken_program_is_a_compile_error_for_every_assert(sandbox) -> None:
    result = await grade(
        "class Solution:\n    def twoSum(self, nums, target):\n        return undefined_name", TWO_SUM_GT, sandbox
    )
    assert result.statuses == ["runtime_error"] * 3 and "NameError" in (result.first_error or "")
    result = await grade("class Solution(:\n    pass", TWO_SUM_GT, sandbox)
    assert result.statuses == ["compile_error"] * 3


# --- through the code reward, both rule sets ---


@pytest.mark.parametrize(
    ("program", "score", "acc"),
    [(TWO_SUM, 1.0, True), (TWO_SUM_FIRST_PAIR_ONLY, 2 / 3, False)],
)
@pytest.mark.parametrize("code_rules", ["lcb", "open_agentrl"])
async def test_raw_skywork_leetcode_ground_truth_is_scored(program, score, acc, code_rules, sandbox) -> None:
    result = await acompute_score(
        names.DS_SKYWORK_CODE, block(program), TWO_SUM_GT, sandbox=sandbox, code_rules=code_rules
    )
    assert (result["score"], result["acc"], result["tests_total"]) == (pytest.approx(score), acc, 3)
    assert result["infra_failure"] is False


def test_unknown_ground_truth_form_is_a_flagged_failure_not_an_exception(sandbox) -> None:
    result = compute_score(names.DS_SKYWORK_CODE, block(TWO_SUM), json.dumps({"cases": [1]}), sandbox=sandbox)
    assert (result["score"], result["acc"], result["infra_failure"]) == (0.0, None, True)


INVERT_GT = json.dumps(  # the released fixture's TreeNode row: its prefix defines no helpers
    {
        "import_prefix": "from typing import *\n",
        "test_code": "def check(candidate):\n"
        "    assert is_same_tree(candidate(root = tree_node([4, 2, 7, 1, 3, 6, 9])),"
        " tree_node([4, 7, 2, 9, 6, 3, 1]))\n"
        "    assert is_same_tree(candidate(root = tree_node([2, 1, None])), tree_node([2, None, 1]))\n",
        "entry_point": "Solution().invertTree",
    }
)
INVERT = """
class Solution:
    def invertTree(self, root: Optional[TreeNode]) -> Optional[TreeNode]:
        if root:
            root.left, root.right = self.invertTree(root.right), self.invertTree(root.left)
        return root
"""


@pytest.mark.parametrize(("code_rules", "score"), [("lcb", 1.0), ("open_agentrl", 0.0)])
async def test_a_tree_row_whose_prefix_lacks_the_helpers(code_rules: str, score: float, sandbox) -> None:
    """Ours provides LeetCode's helpers; the released grader ran the prefix as is (NameError: TreeNode)."""
    result = await acompute_score(
        names.DS_SKYWORK_CODE, block(INVERT), INVERT_GT, sandbox=sandbox, code_rules=code_rules
    )
    assert (result["score"], result["tests_total"]) == (score, 2)
