"""Fail closed on a broken sandbox: stop the run when too many trajectories hit sandbox infra failures.

A trajectory is an *infra failure* when the sandbox failed (``infra_error``) during its rollout
(``agentrl_tool_infra_failure``) or while grading it (``agentrl_grader_infra_failure``): its tool outputs and its
reward say nothing about the policy. A few are noise (a worker restarting); many mean the sandbox is down and the
run is training on error text. With ``agentrl.masks.infra_failure`` off (the paper's setting) nothing else stops it.

The replay buffer (:mod:`agentrl_recipe.algos.sampler`) calls :meth:`InfraGuard.observe` on every training batch;
over the last ``window_steps`` steps, once at least ``min_trajectories`` trajectories were seen, a failure rate above
``max_rate`` raises :class:`InfraFailureRateExceeded`, which stops verl's trainer with one line naming the fix.

:class:`GraderErrorGuard` does the same for *grader errors* (``agentrl_grader_error``: grading a row raised, and the
reward manager scored it as a wrong answer so the step could go on): above ``max_grader_error_rate`` it raises
:class:`GraderErrorRateExceeded`. A few such rows cost a few rewards; many mean the grader is broken and the run is
learning from failure scores.

Config ``agentrl.infra_guard`` (wired into ``trainer.v1.sampler.sampler_kwargs.infra_guard``; both guards share its
window and ``enable``). Not in the paper or the released code (which trained on whatever the sandbox returned); a
guard, not a change to the objective: a healthy run never trips it.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.config import from_mapping

FIELDS = (names.FIELD_TOOL_INFRA_FAILURE, names.FIELD_GRADER_INFRA_FAILURE)
METRIC_PREFIX = "training/infra_guard"
GRADER_ERROR_PREFIX = "training/grader_error_guard"


class InfraFailureRateExceeded(RuntimeError):
    """The sandbox failed for too many trajectories: the run stops instead of training on error text."""


class GraderErrorRateExceeded(RuntimeError):
    """Grading raised for too many trajectories: the run stops instead of training on failure scores."""


@dataclasses.dataclass
class InfraGuardConfig:
    """``agentrl.infra_guard``."""

    enable: bool = True  # false: only the metrics (training/infra_guard/*), never a stop
    max_rate: float = 0.2  # stop when more than this fraction of the window's trajectories are infra failures
    window_steps: int = 5  # training steps the rate is computed over
    min_trajectories: int = 64  # no verdict before the window holds this many trajectories
    max_grader_error_rate: float = 0.02  # stop when grading raised for more than this fraction (GraderErrorGuard)

    def __post_init__(self) -> None:
        for key in ("max_rate", "max_grader_error_rate"):
            if not 0.0 <= getattr(self, key) <= 1.0:
                raise ValueError(f"agentrl.infra_guard.{key} must be in [0, 1], got {getattr(self, key)}")
        if self.window_steps < 1 or self.min_trajectories < 1:
            raise ValueError("agentrl.infra_guard.window_steps and min_trajectories must be >= 1")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> InfraGuardConfig:
        return from_mapping(cls, values, where=f"{names.CONFIG_NAMESPACE}.infra_guard")


def is_infra_failure(record: Mapping[str, Any]) -> bool:
    return any(bool(record.get(field)) for field in FIELDS)


class RateWindow:
    """(trajectories, flagged) per training step over the last ``steps`` steps."""

    def __init__(self, steps: int) -> None:
        self._window: collections.deque[tuple[int, int]] = collections.deque(maxlen=steps)

    def add(self, trajectories: int, flagged: int) -> tuple[int, int, float]:
        """Add one step; (trajectories, flagged, rate) over the window."""
        self._window.append((trajectories, flagged))
        total = sum(n for n, _ in self._window)
        total_flagged = sum(f for _, f in self._window)
        return total, total_flagged, total_flagged / total if total else 0.0

    def __len__(self) -> int:
        return len(self._window)


class InfraGuard:
    """A sliding window of (trajectories, infra failures) per training step."""

    def __init__(self, config: InfraGuardConfig) -> None:
        self.config = config
        self._window = RateWindow(config.window_steps)

    def observe(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Add one step's trajectories; return its metrics, or raise when the window's rate is over the limit."""
        failed = sum(is_infra_failure(r) for r in records)
        total, total_failed, rate = self._window.add(len(records), failed)
        metrics = {
            f"{METRIC_PREFIX}/step_rate": failed / len(records) if records else 0.0,
            f"{METRIC_PREFIX}/window_rate": rate,
        }
        cfg = self.config
        if cfg.enable and total >= cfg.min_trajectories and rate > cfg.max_rate:
            raise InfraFailureRateExceeded(
                f"sandbox infra failures in {total_failed} of the last {total} trajectories ({rate:.0%} over "
                f"{len(self._window)} steps) exceed agentrl.infra_guard.max_rate={cfg.max_rate}: the sandbox is "
                "broken, stopping instead of training on its errors (run `agentrl-recipe doctor`; "
                "agentrl.infra_guard.enable=false to train anyway)"
            )
        return metrics


class GraderErrorGuard:
    """A sliding window of (trajectories, grader errors) per training step; same window as :class:`InfraGuard`."""

    def __init__(self, config: InfraGuardConfig) -> None:
        self.config = config
        self._window = RateWindow(config.window_steps)

    def observe(self, records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
        """Add one step's trajectories; return its metrics, or raise when the window's rate is over the limit."""
        errors = sum(bool(r.get(names.FIELD_GRADER_ERROR)) for r in records)
        total, total_errors, rate = self._window.add(len(records), errors)
        metrics = {
            f"{GRADER_ERROR_PREFIX}/step_rate": errors / len(records) if records else 0.0,
            f"{GRADER_ERROR_PREFIX}/window_rate": rate,
        }
        cfg = self.config
        if cfg.enable and total >= cfg.min_trajectories and rate > cfg.max_grader_error_rate:
            raise GraderErrorRateExceeded(
                f"grading raised for {total_errors} of the last {total} trajectories ({rate:.0%} over "
                f"{len(self._window)} steps), above agentrl.infra_guard.max_grader_error_rate="
                f"{cfg.max_grader_error_rate}: the grader is broken, stopping instead of training on failure scores "
                "(the reward workers log each error as 'agentrl_reward: grading a ... row raised'; "
                "agentrl.infra_guard.enable=false to train anyway)"
            )
        return metrics
