"""rStar2 Resample-on-Correct: which trajectories of an oversampled group are kept."""

from __future__ import annotations

import pytest

from agentrl_recipe import fields
from agentrl_recipe.training import recipe_config as config
from agentrl_recipe.training.algos.roc import RoCConfig, penalty, select, select_group


def clean() -> dict:
    return {fields.TOOL_CALLS.column: 2, fields.TOOL_FAILURES.column: 0}


def failing(failures: int) -> dict:
    return {fields.TOOL_CALLS.column: 4, fields.TOOL_FAILURES.column: failures}


def test_penalty_counts_tool_errors_and_format() -> None:
    assert penalty(clean()) == 0
    assert penalty(failing(1)) == pytest.approx(0.25)
    assert penalty({fields.MALFORMED_TOOL_CALLS.column: 1, fields.VOID_TURN.column: True}) == 2
    assert penalty({}) == 0  # no tool call, nothing malformed


def test_group_of_8_down_to_4_keeps_the_cleanest_correct_ones() -> None:
    # 4 correct (penalties 0.75, 0, 0.5, 0.25) and 4 incorrect; G = 4 → 2 correct + 2 incorrect (proportion kept)
    correct = [True, True, True, True, False, False, False, False]
    records = [failing(3), clean(), failing(2), failing(1), failing(4), clean(), failing(0), failing(2)]
    keep = select_group("u", correct, records, RoCConfig(enable=True, keep_per_group=4))
    assert sum(keep) == 4
    assert [i for i in range(4) if keep[i]] == [1, 3]  # penalties 0 and 0.25
    assert sum(keep[4:]) == 2
    # the incorrect ones are chosen uniformly: over many uids every one of them is sometimes kept
    kept_neg = set()
    for uid in range(50):
        kept_neg |= {
            i for i, k in enumerate(select_group(str(uid), correct, records, RoCConfig(True, 4))) if i >= 4 and k
        }
    assert kept_neg == {4, 5, 6, 7}


def test_min_negatives_and_small_groups() -> None:
    # 7 correct, 1 incorrect: proportion would keep 0 incorrect, min_negatives keeps the one there is
    correct = [True] * 7 + [False]
    keep = select_group("u", correct, [clean()] * 8, RoCConfig(enable=True, keep_per_group=4, min_negatives=2))
    assert sum(keep) == 4 and keep[7]
    # min_negatives never removes the last correct trajectory
    keep = select_group("u", [True, True, False, False], [failing(1), clean(), {}, {}], RoCConfig(True, 2))
    assert keep[:2] == [False, True] and sum(keep) == 2
    # all incorrect: uniform down-sampling still yields G
    assert sum(select_group("u", [False] * 8, [{}] * 8, RoCConfig(enable=True, keep_per_group=4))) == 4
    # a group no larger than G is kept whole
    assert select_group("u", [True, False], [{}, {}], RoCConfig(enable=True, keep_per_group=4)) == [True, True]


def test_select_over_a_batch_is_per_uid_and_deterministic() -> None:
    uids = ["a"] * 6 + ["b"] * 6
    correct = [True, False] * 6
    records = [failing(i % 4) for i in range(12)]
    cfg = RoCConfig(enable=True, keep_per_group=3, seed=7)
    first, second = select(uids, correct, records, cfg), select(uids, correct, records, cfg)
    assert first == second and sum(first[:6]) == 3 and sum(first[6:]) == 3


def test_roc_config_is_a_validated_agentrl_section() -> None:
    assert config.SECTIONS["roc"] is RoCConfig
    with pytest.raises(ValueError, match="keep_per_group"):
        RoCConfig.from_dict({"enable": True})
    with pytest.raises(ValueError, match="unknown key"):
        RoCConfig.from_dict({"keep": 4})
