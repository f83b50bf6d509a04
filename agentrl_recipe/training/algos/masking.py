"""Trajectory masks: drop a whole trajectory from the policy update, and from its group's GRPO statistics.

Each mask is a switch in ``agentrl.masks`` (:class:`MaskConfig`), **off by default** so the paper run is unchanged.
A masked trajectory keeps its tokens and reward for logging, but its ``response_mask`` and ``loss_mask`` are zeroed
by the replay buffer (:class:`agentrl_recipe.training.algos.sampler.AgentRLReplayBuffer`) before old-log-prob, advantage
and actor update, so ``agentrl_grpo`` leaves it out of mean/std and gives it zero advantage, the loss gives it zero
weight, and verl's engines leave it out of ``batch_num_tokens`` (the token-mean denominator).

Keys (``agentrl.masks.*``; all default false, the paper uses none of them):

- ``infra_failure`` — the sandbox failed (``infra_error``) during rollout (``agentrl_tool_infra_failure``) or
  grading (``agentrl_grader_infra_failure``): the reward says nothing about the policy (open-instruct
  ``--mask_infra_failed_completions``).
- ``void_turn`` — an assistant turn ended with neither a complete tool call nor a final answer
  (``agentrl_void_turn``; SimpleTIR ``mask_void_turns``).
- ``overlong_filter`` — the response was truncated at ``data.max_response_length`` tokens, or the agent loop ended it
  because the next tool response would not fit (``agentrl_termination``) (DAPO overlong
  *filtering*, SimpleTIR ``remove_clip``). The paper uses the reward's soft overlong penalty instead; the two can be
  combined.
- ``malformed_tool_call`` — a turn's tool call could not be parsed (``agentrl_malformed_tool_call`` > 0).

**A batch the masks take whole** (``max_fully_masked_batches``, int, default 5; not in [paper]/[code], which mask
nothing). A sampled batch (sync: the step's batch; async: each of the step's ``parameter_sync_step`` mini-batches)
whose every trajectory is masked — by the masks and RoC together — has no loss token. verl cannot train on it: its
rollout correction raises ("response_mask must contain at least one valid token", ``rollout_corr_helper.py``, in every
mode once rollout log-probs are on), and without it the token-mean loss is 0/0, the grad norm NaN, and the engine
skips the optimizer step with a warning (``engine/fsdp/transformer_impl.py``) — verl has no deliberate path. The
replay buffer treats such a batch as verl's async DAPO treats a zero-variance group: it drops it (clears its
trajectories from TransferQueue), submits as many fresh prompts, and samples again, so every trained batch carries
loss tokens and a step still has its full size. Each drop is a WARNING and is counted in
``training/masks/fully_masked_batches`` / ``training/masks/fully_masked_trajectories`` (the dropped trajectories are in
no other ``training/masks/*`` metric, nor in verl's rollout dump). More than ``max_fully_masked_batches`` in a row
stop the run with one line naming the masks and their counts: the masks then take everything the policy makes
(0: stop at the first).

Every reason is counted in the step metrics whether or not its switch is on (``masks/<reason>_ratio``: fraction
of the batch's trajectories flagged), and ``masks/masked_ratio`` / ``masks/masked_trajectories`` count what was
actually masked. A switch that is on but whose field no trajectory carries (e.g. verl's stock ``tool_agent``
instead of ``agentrl_tool_agent``) raises instead of silently masking nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from agentrl_recipe import fields, names
from agentrl_recipe.training.recipe_config import from_mapping, resolve  # it names this module by string only

# agent_loop.Termination values that mean the response was cut by the length budget (a tool response that would not
# fit ends the trajectory before max_response_length is reached)
TRUNCATED_TERMINATIONS = frozenset({"response_length", "tool_response_overflow"})

REASONS = ("infra_failure", "void_turn", "overlong_filter", "malformed_tool_call")

# reason -> the per-trajectory fields that flag it (any one true flags the trajectory)
_REASON_FIELDS: dict[str, tuple[str, ...]] = {
    "infra_failure": (fields.TOOL_INFRA_FAILURE.column, fields.GRADER_INFRA_FAILURE.column),
    "void_turn": (fields.VOID_TURN.column,),
    "malformed_tool_call": (fields.MALFORMED_TOOL_CALLS.column,),
}


@dataclasses.dataclass
class MaskConfig:
    """``agentrl.masks``: which trajectories are masked out of the policy update (all off = the paper)."""

    infra_failure: bool = False  # sandbox infra_error in the rollout or its grading (open-instruct)
    void_turn: bool = False  # assistant turn with neither tool call nor answer (SimpleTIR)
    overlong_filter: bool = False  # response truncated at max_response_length (DAPO overlong filtering)
    malformed_tool_call: bool = False  # unparseable tool call in some turn
    # fully masked batches dropped and resampled in a row before the run stops (module docstring; 0: stop at once)
    max_fully_masked_batches: int = 5

    def __post_init__(self) -> None:
        for reason in REASONS:
            if not isinstance(getattr(self, reason), bool):
                raise TypeError(f"agentrl.masks.{reason} must be true/false, got {getattr(self, reason)!r}")
        limit = self.max_fully_masked_batches
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise ValueError(f"agentrl.masks.max_fully_masked_batches must be an integer ≥ 0, got {limit!r}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> MaskConfig:
        return from_mapping(cls, values, where=f"{names.CONFIG_NAMESPACE}.masks")

    @classmethod
    def from_trainer_config(cls, trainer_config: Any) -> MaskConfig:
        return resolve(trainer_config).settings("masks")

    @property
    def enabled(self) -> tuple[str, ...]:
        return tuple(reason for reason in REASONS if getattr(self, reason))


def _flag(value: Any) -> bool | None:
    """A field value as a flag: None when absent; counts (malformed calls) are true when > 0."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    return bool(value)


def trajectory_fields(extra_fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """One trajectory's mask-relevant fields from verl's ``extra_fields`` (agent loop) and its
    ``reward_extra_info`` (reward manager) — the two places verl 0.9.1 carries them."""
    extra = dict(extra_fields or {})
    merged = dict(extra.get("reward_extra_info") or {})
    merged.update({k: v for k, v in extra.items() if k != "reward_extra_info"})
    return merged


@dataclasses.dataclass
class MaskResult:
    masked: list[bool]  # per trajectory: masked out of the update
    flagged: dict[str, list[bool]]  # per reason, per trajectory: the condition holds (whether or not enabled)

    def metrics(self, prefix: str = "masks") -> dict[str, float]:
        n = max(len(self.masked), 1)
        out = {f"{prefix}/{reason}_ratio": sum(flags) / n for reason, flags in self.flagged.items()}
        out[f"{prefix}/masked_trajectories"] = float(sum(self.masked))
        out[f"{prefix}/masked_ratio"] = sum(self.masked) / n
        return out


def compute_trajectory_masks(
    records: Sequence[Mapping[str, Any]],
    response_lengths: Sequence[int],
    max_response_length: int | None,
    config: MaskConfig,
) -> MaskResult:
    """Decide, per trajectory, which reasons flag it and whether it is masked.

    ``records``: per-trajectory field dicts (see :func:`trajectory_fields`); ``response_lengths``: response tokens
    per trajectory (tool output included, as verl's ``response_length`` counts them); ``max_response_length``:
    ``data.max_response_length`` (needed only for ``overlong_filter``).
    """
    if len(records) != len(response_lengths):
        raise ValueError(f"{len(records)} records but {len(response_lengths)} response lengths")
    flagged: dict[str, list[bool]] = {}
    for reason, columns in _REASON_FIELDS.items():
        values = [[_flag(record.get(column)) for column in columns] for record in records]
        present = any(v is not None for row in values for v in row)
        if getattr(config, reason) and records and not present:
            raise ValueError(
                f"agentrl.masks.{reason} is on but no trajectory carries {' or '.join(columns)}; these fields are "
                f"written by agent loop {names.AGENT_LOOP!r} and reward manager {names.REWARD_MANAGER!r}"
            )
        if present:
            flagged[reason] = [any(bool(v) for v in row) for row in values]
    if max_response_length is not None:
        flagged["overlong_filter"] = [
            int(length) >= int(max_response_length) or record.get(fields.TERMINATION.column) in TRUNCATED_TERMINATIONS
            for record, length in zip(records, response_lengths, strict=True)
        ]
    elif config.overlong_filter:
        raise ValueError("agentrl.masks.overlong_filter is on but max_response_length is unknown")
    masked = [any(flagged[reason][i] for reason in config.enabled if reason in flagged) for i in range(len(records))]
    return MaskResult(masked=masked, flagged=flagged)
