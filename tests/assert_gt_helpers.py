"""Assert-harness ground truths shared by the parsing and the grading tests (a uniquely named module, not conftest)."""

from __future__ import annotations

import json

TWO_SUM_GT = json.dumps(
    {
        "import_prefix": "from typing import *\nfrom collections import *\nimport heapq\n",
        "test_code": "def check(candidate):\n    assert candidate(nums = [2,7,11,15], target = 9) == [0, 1]\n"
        "    assert candidate(nums = [3,2,4], target = 6) == [1, 2]\n"
        "    assert candidate(nums = [3,3], target = 6) == [0, 1]\n",
        "entry_point": "Solution().twoSum",
    }
)
REVERSE_GT = json.dumps(  # the prefix has no ListNode: the helpers LeetCode provides are there anyway
    {
        "import_prefix": "from typing import *\n",
        "test_code": "def check(candidate):\n"
        "    assert is_same_list(candidate(head = list_node([1, 2, 3])), list_node([3, 2, 1]))\n"
        "    assert candidate(head = list_node([])) is None\n",
        "entry_point": "Solution().reverseList",
    }
)
