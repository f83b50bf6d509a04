"""Fail closed on a broken sandbox: stop the run when too many trajectories hit sandbox infra failures.

A trajectory is an *infra failure* when the sandbox failed (``infra_error``) during its rollout
(``agentrl_tool_infra_failure``) or while grading it (``agentrl_grader_infra_failure``): its tool outputs and its
reward say nothing about the policy. A few are noise (a worker restarting); many mean the sandbox is down and the
run is training on error text. With ``agentrl.masks.infra_failure`` off (the paper's setting) nothing else stops it.

The replay buffer (:mod:`agentrl_recipe.training.algos.sampler`) calls :meth:`InfraGuard.observe` on every training
batch it samples (each of a step's ``parameter_sync_step`` calls adds to that step's slot of the window); over the last
``window_steps`` steps, once at least ``min_trajectories`` trajectories were seen, a failure rate above ``max_rate``
raises :class:`InfraFailureRateExceeded`, which stops verl's trainer with one line naming the fix.

:class:`GraderErrorGuard` does the same for *grader errors* (``agentrl_grader_error``: grading a row raised, and the
reward manager scored it as a wrong answer so the step could go on): above ``max_grader_error_rate`` it raises
:class:`GraderErrorRateExceeded`. A few such rows cost a few rewards; many mean the grader is broken and the run is
learning from failure scores. Both are one :class:`RateGuard`, each with its own :class:`GuardSpec`.

Config ``agentrl.infra_guard`` (wired into ``trainer.v1.sampler.sampler_kwargs.infra_guard``; both guards share its
window and ``enable``). Not in the paper or the released code (which trained on whatever the sandbox returned); a
guard, not a change to the objective: a healthy run never trips it.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from agentrl_recipe import fields, names
from agentrl_recipe.training.recipe_config import from_mapping

FIELDS = (fields.TOOL_INFRA_FAILURE.column, fields.GRADER_INFRA_FAILURE.column)
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


def is_grader_error(record: Mapping[str, Any]) -> bool:
    return bool(record.get(fields.GRADER_ERROR.column))


class RateWindow:
    """(trajectories, flagged) per training step over the last ``steps`` steps.

    verl samples a step in ``parameter_sync_step`` calls (separate_async): calls that name the same step add to one
    slot, so the window always spans steps, not sample calls.
    """

    def __init__(self, steps: int) -> None:
        self._window: collections.deque[list[int]] = collections.deque(maxlen=steps)
        self._last_step: int | None = None

    def add(self, trajectories: int, flagged: int, step: int | None = None) -> tuple[int, int, float]:
        """Add one step's (or one more call of the last step's) counts; (trajectories, flagged, rate) over the
        window. ``step`` None: a step of its own."""
        if step is not None and step == self._last_step and self._window:
            self._window[-1][0] += trajectories
            self._window[-1][1] += flagged
        else:
            self._window.append([trajectories, flagged])
        self._last_step = step
        total = sum(n for n, _ in self._window)
        total_flagged = sum(f for _, f in self._window)
        return total, total_flagged, total_flagged / total if total else 0.0

    def __len__(self) -> int:
        return len(self._window)


@dataclasses.dataclass(frozen=True)
class GuardSpec:
    """What one guard watches: its trajectory flag, metric prefix, limit key, and the line it stops the run with."""

    prefix: str  # metric prefix: <prefix>/step_rate, <prefix>/window_rate
    flagged: Callable[[Mapping[str, Any]], bool]  # per trajectory record
    limit_key: str  # the InfraGuardConfig field holding the maximum window rate
    error: type[RuntimeError]
    subject: str  # "<subject> 5 of the last 200 trajectories"
    diagnosis: str  # why the run stops
    hint: str  # where to look


class RateGuard:
    """A sliding window of (trajectories, flagged) per training step that stops the run above ``spec.limit_key``.

    Both guards share ``agentrl.infra_guard``'s ``enable``, ``window_steps`` and ``min_trajectories``.
    """

    spec: ClassVar[GuardSpec]

    def __init__(self, config: InfraGuardConfig) -> None:
        self.config = config
        self._window = RateWindow(config.window_steps)

    @property
    def limit(self) -> float:
        return float(getattr(self.config, self.spec.limit_key))

    def observe(self, records: Sequence[Mapping[str, Any]], step: int | None = None) -> dict[str, float]:
        """Add one sample call's trajectories (of training step ``step``); return the metrics, or raise when the
        window's rate is over the limit."""
        spec, cfg = self.spec, self.config
        flagged = sum(spec.flagged(r) for r in records)
        total, total_flagged, rate = self._window.add(len(records), flagged, step)
        metrics = {
            f"{spec.prefix}/step_rate": flagged / len(records) if records else 0.0,
            f"{spec.prefix}/window_rate": rate,
        }
        if cfg.enable and total >= cfg.min_trajectories and rate > self.limit:
            raise spec.error(
                f"{spec.subject} {total_flagged} of the last {total} trajectories ({rate:.0%} over "
                f"{len(self._window)} steps), above agentrl.infra_guard.{spec.limit_key}={self.limit}: "
                f"{spec.diagnosis} ({spec.hint}; agentrl.infra_guard.enable=false to train anyway)"
            )
        return metrics


class InfraGuard(RateGuard):
    """Sandbox infra failures (``agentrl_tool_infra_failure`` / ``agentrl_grader_infra_failure``) over ``max_rate``."""

    spec = GuardSpec(
        prefix=METRIC_PREFIX,
        flagged=is_infra_failure,
        limit_key="max_rate",
        error=InfraFailureRateExceeded,
        subject="sandbox infra failures in",
        diagnosis="the sandbox is broken, stopping instead of training on its errors",
        hint="run `agentrl-recipe doctor`",
    )


class GraderErrorGuard(RateGuard):
    """Grader errors (``agentrl_grader_error``) over ``max_grader_error_rate``."""

    spec = GuardSpec(
        prefix=GRADER_ERROR_PREFIX,
        flagged=is_grader_error,
        limit_key="max_grader_error_rate",
        error=GraderErrorRateExceeded,
        subject="grading raised for",
        diagnosis="the grader is broken, stopping instead of training on failure scores",
        hint="the reward workers log each error as 'agentrl_reward: grading a ... row raised'",
    )
