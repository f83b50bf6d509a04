"""Trajectory masks: each switch, its metric, and loud failure on a switch whose field never arrives."""

from __future__ import annotations

import pytest

from agentrl_recipe import fields
from agentrl_recipe.training import recipe_config as config
from agentrl_recipe.training.algos.masking import MaskConfig, compute_trajectory_masks, trajectory_fields

RECORDS = [
    {},  # clean
    {fields.TOOL_INFRA_FAILURE.column: True},
    {fields.GRADER_INFRA_FAILURE.column: True},
    {fields.VOID_TURN.column: True},
    {fields.MALFORMED_TOOL_CALLS.column: 2},
    {fields.MALFORMED_TOOL_CALLS.column: 0, fields.VOID_TURN.column: False},
]
LENGTHS = [10, 10, 10, 10, 10, 64]  # the last one hit max_response_length


@pytest.mark.parametrize(
    ("switches", "masked"),
    [
        ({}, []),
        ({"infra_failure": True}, [1, 2]),
        ({"void_turn": True}, [3]),
        ({"malformed_tool_call": True}, [4]),
        ({"overlong_filter": True}, [5]),
        (
            {"infra_failure": True, "void_turn": True, "overlong_filter": True, "malformed_tool_call": True},
            [1, 2, 3, 4, 5],
        ),
    ],
)
def test_each_switch_masks_its_trajectories(switches: dict, masked: list[int]) -> None:
    result = compute_trajectory_masks(RECORDS, LENGTHS, 64, MaskConfig(**switches))
    assert [i for i, m in enumerate(result.masked) if m] == masked
    metrics = result.metrics()
    # every reason is counted whether or not its switch is on
    assert metrics["masks/infra_failure_ratio"] == pytest.approx(2 / 6)
    assert metrics["masks/void_turn_ratio"] == pytest.approx(1 / 6)
    assert metrics["masks/malformed_tool_call_ratio"] == pytest.approx(1 / 6)
    assert metrics["masks/overlong_filter_ratio"] == pytest.approx(1 / 6)
    assert metrics["masks/masked_trajectories"] == len(masked)
    assert metrics["masks/masked_ratio"] == pytest.approx(len(masked) / 6)


def test_switch_without_its_field_raises() -> None:
    with pytest.raises(ValueError, match=fields.VOID_TURN.column):
        compute_trajectory_masks([{}, {}], [1, 2], 10, MaskConfig(void_turn=True))
    with pytest.raises(ValueError, match="max_response_length"):
        compute_trajectory_masks([{}], [1], None, MaskConfig(overlong_filter=True))
    # off switches never require their fields
    assert compute_trajectory_masks([{}, {}], [1, 2], None, MaskConfig()).masked == [False, False]


def test_fields_from_extra_fields_and_reward_extra_info() -> None:
    extra = {fields.VOID_TURN.column: True, "reward_extra_info": {fields.GRADER_INFRA_FAILURE.column: True, "acc": 0.0}}
    columns = trajectory_fields(extra)
    assert columns[fields.VOID_TURN.column] and columns[fields.GRADER_INFRA_FAILURE.column]
    assert "reward_extra_info" not in columns


def test_mask_config_is_a_validated_agentrl_section() -> None:
    assert config.SECTIONS["masks"] is MaskConfig
    cfg = {"agentrl": {"masks": {"void_turn": True}}}
    assert MaskConfig.from_trainer_config(cfg).enabled == ("void_turn",)
    assert MaskConfig.from_trainer_config({}).enabled == ()
    with pytest.raises(ValueError, match="void_turns"):
        MaskConfig.from_dict({"void_turns": True})
    with pytest.raises(TypeError, match="true/false"):
        MaskConfig.from_dict({"infra_failure": "yes"})


def test_overlong_filter_also_catches_a_tool_response_that_did_not_fit() -> None:
    records = [{fields.TERMINATION.column: "tool_response_overflow"}, {fields.TERMINATION.column: "no_tool_call"}]
    result = compute_trajectory_masks(records, [40, 40], 64, MaskConfig(overlong_filter=True))
    assert result.masked == [True, False]
