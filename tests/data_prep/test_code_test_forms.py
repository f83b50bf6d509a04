"""data_prep/code_test_forms.py: rows whose fn_name a prelude name shadows (issue 34, item 9) are counted."""

from __future__ import annotations

import json

from data_prep.code_test_forms import prelude_names, prelude_shadow_report


def row(ground_truth) -> dict:
    return {"data_source": "skywork_or1_code", "reward_model": {"ground_truth": ground_truth}}


def io(fn_name) -> str:
    return json.dumps({"inputs": ["1"], "outputs": ["1"], "fn_name": fn_name})


def test_prelude_names_are_the_star_imports() -> None:
    names = prelude_names()
    assert {"add", "gcd", "sqrt", "deque", "heappush", "max", "Counter", "math", "operator"} <= names
    assert not {"twoSum", "Solution", "__builtins__"} & names


def test_shadowing_rows_are_counted_by_fn_name() -> None:
    rows = [
        row(io("add")),
        row(io("gcd")),
        row(io("add")),
        row(io("twoSum")),
        row(io(None)),
        row(
            json.dumps({"import_prefix": "", "test_code": "def check(candidate): ...", "entry_point": "Solution().add"})
        ),
        row("34"),
        row("{not json"),
        {"data_source": "dapo", "reward_model": {"ground_truth": "7"}},
    ]
    assert prelude_shadow_report(rows) == {"rows": 3, "fn_names": {"add": 2, "gcd": 1}}
    assert prelude_shadow_report([]) == {"rows": 0, "fn_names": {}}
