"""agentrl.infra_guard: a run whose sandbox fails for too many trajectories stops instead of training on it."""

from __future__ import annotations

import itertools

import pytest
from replay_helpers import B, N, ScriptedRollout, make_buffer  # the scripted rollout on a real TransferQueue

from agentrl_recipe import fields
from agentrl_recipe.training.algos.infra_guard import (
    GraderErrorGuard,
    GraderErrorRateExceeded,
    InfraFailureRateExceeded,
    InfraGuard,
    InfraGuardConfig,
    RateGuard,
)
from agentrl_recipe.training.algos.sampler import AgentRLReplayBuffer

FAILED = {fields.TOOL_INFRA_FAILURE.column: True}
GRADER_FAILED = {fields.GRADER_INFRA_FAILURE.column: True}


def test_window_rate_golden_and_the_stop() -> None:
    guard = InfraGuard(InfraGuardConfig(max_rate=0.2, window_steps=2, min_trajectories=10))
    step1 = guard.observe([FAILED] * 1 + [{}] * 9)  # 10%
    assert step1 == {"training/infra_guard/step_rate": 0.1, "training/infra_guard/window_rate": 0.1}
    step2 = guard.observe([GRADER_FAILED] * 3 + [{}] * 7)  # window 4/20 = 20%: not above the limit
    assert step2["training/infra_guard/window_rate"] == pytest.approx(0.2)
    with pytest.raises(InfraFailureRateExceeded) as stop:
        guard.observe([FAILED] * 2 + [{}] * 8)  # window = steps 2-3: 5/20 = 25%
    assert str(stop.value) == (
        "sandbox infra failures in 5 of the last 20 trajectories (25% over 2 steps), above "
        "agentrl.infra_guard.max_rate=0.2: the sandbox is broken, stopping instead of training on its errors (run "
        "`agentrl-recipe doctor`; agentrl.infra_guard.enable=false to train anyway)"
    )


def test_the_default_rate_stops_above_one_in_five() -> None:
    """Issue 45 (a): the default limit is 0.2 (also agentrl.infra_guard.max_rate in verl_configs/recipe/grpo_tcr.yaml,
    pinned by the fidelity table): 20 of 100 trajectories go on, 21 of 100 stop. 0.3 (or 0.1) fails here."""
    assert InfraGuardConfig().max_rate == 0.2
    at_limit = InfraGuard(InfraGuardConfig(min_trajectories=100))
    assert at_limit.observe([FAILED] * 20 + [{}] * 80)["training/infra_guard/window_rate"] == 0.2
    with pytest.raises(InfraFailureRateExceeded, match=r"max_rate=0\.2:"):
        InfraGuard(InfraGuardConfig(min_trajectories=100)).observe([FAILED] * 21 + [{}] * 79)


@pytest.mark.parametrize("guard_class", [InfraGuard, GraderErrorGuard])
def test_one_guard_serves_both_and_a_steps_calls_share_its_slot(guard_class: type[RateGuard]) -> None:
    """separate_async samples a step in parameter_sync_step calls: they fill one slot of the window, so window_steps
    counts steps, not calls."""
    flagged = {InfraGuard: FAILED, GraderErrorGuard: {fields.GRADER_ERROR.column: True}}[guard_class]
    guard = guard_class(InfraGuardConfig(window_steps=2, min_trajectories=1000))
    prefix = guard.spec.prefix
    assert isinstance(guard, RateGuard) and prefix.startswith("training/")
    for _call in range(2):  # step 1: 2 calls, 1 of 4 flagged each
        assert guard.observe([flagged] + [{}] * 3, step=1)[f"{prefix}/step_rate"] == 0.25
    guard.observe([{}] * 4, step=2)
    assert guard.observe([{}] * 4, step=2)[f"{prefix}/window_rate"] == pytest.approx(2 / 16)  # both steps whole
    assert guard.observe([{}] * 8, step=3)[f"{prefix}/window_rate"] == 0.0  # step 1 left the window


def test_no_verdict_before_min_trajectories_and_none_when_disabled() -> None:
    early = InfraGuard(InfraGuardConfig(max_rate=0.1, min_trajectories=8))
    assert early.observe([FAILED] * 4)["training/infra_guard/window_rate"] == 1.0  # 4 < 8: metrics only
    off = InfraGuard(InfraGuardConfig(enable=False, min_trajectories=1))
    assert off.observe([FAILED] * 100)["training/infra_guard/step_rate"] == 1.0


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="max_rate"):
        InfraGuardConfig(max_rate=1.5)
    with pytest.raises(ValueError, match="unknown key"):
        InfraGuardConfig.from_dict({"max_ratio": 0.1})


def test_replay_buffer_stops_the_run_on_a_broken_sandbox(tq) -> None:
    """verl's v1 trainer calls our buffer's sample() every step: an all-infra-failure batch raises there."""
    extra = {(p, s): FAILED for p in range(B) for s in range(N)}
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, infra_guard={"max_rate": 0.5, "min_trajectories": B * N})
    rollout.submit(B)
    with pytest.raises(InfraFailureRateExceeded, match=f"{B * N} of the last {B * N} trajectories"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)


# --- grader errors (issue 34): a row whose grading raised is scored as wrong; too many stop the run ---

GRADER_ERROR = {fields.GRADER_ERROR.column: True}


def test_grader_error_rate_golden_and_the_stop() -> None:
    guard = GraderErrorGuard(InfraGuardConfig(max_grader_error_rate=0.02, window_steps=2, min_trajectories=100))
    step1 = guard.observe([GRADER_ERROR] * 2 + [{}] * 98)  # 2%: not above the limit
    assert step1 == {"training/grader_error_guard/step_rate": 0.02, "training/grader_error_guard/window_rate": 0.02}
    with pytest.raises(GraderErrorRateExceeded) as stop:
        guard.observe([GRADER_ERROR] * 3 + [{}] * 97)  # window 5/200 = 2.5%
    assert "\n" not in str(stop.value)
    assert str(stop.value).startswith("grading raised for 5 of the last 200 trajectories (2% over 2 steps)")
    assert "agentrl.infra_guard.max_grader_error_rate=0.02" in str(stop.value)


def test_grader_errors_are_not_infra_failures_and_the_default_threshold() -> None:
    assert InfraGuardConfig().max_grader_error_rate == 0.02
    infra = InfraGuard(InfraGuardConfig(min_trajectories=1))
    assert infra.observe([GRADER_ERROR] * 10)["training/infra_guard/step_rate"] == 0.0
    off = GraderErrorGuard(InfraGuardConfig(enable=False, min_trajectories=1))
    assert off.observe([GRADER_ERROR] * 10)["training/grader_error_guard/step_rate"] == 1.0
    with pytest.raises(ValueError, match="max_grader_error_rate"):
        InfraGuardConfig(max_grader_error_rate=-0.1)


def test_replay_buffer_stops_the_run_on_a_broken_grader(tq) -> None:
    extra = {(p, s): GRADER_ERROR for p in range(B) for s in range(N)}
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    guard = {"max_grader_error_rate": 0.5, "min_trajectories": B * N}
    buffer = make_buffer(AgentRLReplayBuffer, rollout, infra_guard=guard)
    rollout.submit(B)
    with pytest.raises(GraderErrorRateExceeded, match=f"grading raised for {B * N} of the last {B * N} trajectories"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)
