"""One trajectory, one shape: :class:`Trajectory`, from the agent loop to the eval report.

- The agent loop (:mod:`agentrl_recipe.training.agent_loop.loop`) keeps one per trajectory, counts its tool calls into
it
  (:meth:`Trajectory.record_call`) and writes it to ``AgentLoopOutput.extra_fields`` with :meth:`to_extra_fields`.
  Those keys (``names.FIELD_*``) are contracts: verl turns them into ``non_tensor_batch`` columns for the reward
  manager, the trajectory masks and the tracker metrics.
- The in-process rollout (:mod:`agentrl_recipe.offline.rollout`) reads each row of verl's output batch back with
  :meth:`from_batch_row` (tokens, decoded response, reward) — the records of data prep, eval and the demo.
- Training metrics read the ``extra_fields`` of a batch with :meth:`from_extra_fields`, the eval report its dumped
  records with :meth:`from_record`; both hand trajectories to
  :func:`agentrl_recipe.training.agent_loop.tool_use.tool_use_stats`.

The JSON written for a trajectory keeps its historical keys: :data:`RECORD_KEYS` (:meth:`to_dict`, the demo's and
data prep's ``*.rollouts.jsonl``); the eval dump writes :data:`EVAL_KEYS` next to its grade fields.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Collection, Mapping
from typing import Any

import numpy as np

from agentrl_recipe import fields
from agentrl_recipe.training import sandbox_routes

# What to_dict() writes, in this order (TrajectoryRecord.to_dict before issue 19).
RECORD_KEYS = (
    "row_index",
    "sample_index",
    "data_source",
    "prompt",
    "response",
    "messages",
    "num_turns",
    "tool_calls",
    "tool_failures",
    "tool_statuses",
    "tool_latency_s",
    "malformed_tool_calls",
    "void_turn",
    "tool_infra_failure",
    "termination",
    "prompt_tokens",
    "response_tokens",
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "score",
    "reward_extra_info",
    "extra_fields",
)
TOKEN_KEYS = ("prompt_ids", "response_ids", "response_mask", "response_logprobs")
# The trajectory part of an eval dump record (agentrl_recipe.eval.records), in this order.
EVAL_KEYS = (
    "num_turns",
    "tool_calls",
    "tool_failures",
    "tool_statuses",
    "tool_latency_s",
    "malformed_tool_calls",
    "void_turn",
    "tool_infra_failure",
    "prompt_tokens",
    "response_tokens",
    "termination",
)


@dataclasses.dataclass
class Trajectory:
    """A trajectory's fields. Every part is optional: the agent loop fills the tool part, the rollout the rest."""

    # where it came from: the rollout's row (or, in eval, the index into the generator's problems) and sample
    row_index: int = 0
    sample_index: int = 0
    data_source: str = ""
    prompt: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    response: str = ""  # decoded response (assistant and tool tokens), special tokens skipped — what the reward reads
    messages: list[dict[str, Any]] | None = None  # the conversation (agentrl_tool_agent rows with record_messages)
    # the agent loop's per-trajectory fields (extra_fields: agentrl_recipe.fields.LOOP_FIELDS)
    num_turns: int = 0  # == verl's __num_turns__: prompt + assistant + tool turns
    assistant_turns: int = 0
    model_tokens: int = 0  # response tokens the model generated (response_mask == 1) within response_length
    final_turn_start: int = 0  # response index where the last assistant turn (generation) starts
    tool_calls: int = 0
    tool_failures: int = 0
    tool_statuses: list[str] = dataclasses.field(default_factory=list)
    tool_latency_s: list[float] = dataclasses.field(default_factory=list)
    malformed_tool_calls: int = 0
    malformed_kinds: list[str] = dataclasses.field(default_factory=list)
    void_turn: bool = False
    num_void_turns: int = 0
    tool_infra_failure: bool = False
    termination: str | None = None
    sandbox_servers: list[str] = dataclasses.field(default_factory=list)  # per routed sandbox_fusion call
    sandbox_latency_s: list[float] = dataclasses.field(default_factory=list)
    sandbox_failed: list[str] = dataclasses.field(default_factory=list)  # servers that failed a call
    # tokens (the rollout)
    prompt_tokens: int = 0
    response_tokens: int = 0
    prompt_ids: list[int] = dataclasses.field(default_factory=list)
    response_ids: list[int] = dataclasses.field(default_factory=list)
    response_mask: list[int] = dataclasses.field(default_factory=list)  # 1 = model, 0 = tool output / scaffolding
    response_logprobs: list[float] | None = None
    # the reward (rollout with scoring)
    score: float | None = None  # as placed on the last response token
    reward_extra_info: dict[str, Any] = dataclasses.field(default_factory=dict)
    extra_fields: dict[str, Any] = dataclasses.field(default_factory=dict)  # every agentrl_* column as verl batched it

    # ------------------------------------------------------------------------------------------------ agent loop

    def record_call(self, status: str, latency_s: float, metrics: Mapping[str, Any]) -> None:
        """One executed tool call, from the tool's status, latency and metrics."""
        self.tool_statuses.append(status)
        self.tool_latency_s.append(latency_s)
        self.tool_calls = len(self.tool_statuses)
        self.tool_failures = sum(s != "ok" for s in self.tool_statuses)
        self.tool_infra_failure = fields.INFRA_STATUS in self.tool_statuses
        if sandbox_routes.SERVER in metrics:  # a sandbox_fusion call: per-server training metrics
            routed = sandbox_routes.trajectory_fields([metrics])
            self.sandbox_servers += routed[fields.SANDBOX_SERVERS.column]
            self.sandbox_latency_s += routed[fields.SANDBOX_LATENCY_S.column]
            self.sandbox_failed += routed[fields.SANDBOX_FAILED.column]

    def record_malformed(self, kind: str) -> None:
        self.malformed_kinds.append(kind)
        self.malformed_tool_calls = len(self.malformed_kinds)

    def record_void_turn(self) -> None:
        self.num_void_turns += 1
        self.void_turn = True

    def to_extra_fields(self) -> dict[str, Any]:
        """The agent loop's ``extra_fields``: every :data:`agentrl_recipe.fields.LOOP_FIELDS` under its column."""
        out = {f.column: copy.copy(getattr(self, f.name)) for f in fields.LOOP_FIELDS if f is not fields.MESSAGES}
        out[fields.TERMINATION.column] = self.termination or fields.TERMINATION.default()
        if self.messages is not None:
            out[fields.MESSAGES.column] = self.messages
        return out

    # ------------------------------------------------------------------------------------------------ readers
    @classmethod
    def from_extra_fields(cls, columns: Mapping[str, Any], **kwargs: Any) -> Trajectory:
        """The inverse of :meth:`to_extra_fields`; a missing or None field keeps its default. ``kwargs`` set the
        other attributes."""
        values = {f.name: f.read(columns[f.column]) for f in fields.LOOP_FIELDS if columns.get(f.column) is not None}
        values.setdefault(fields.TERMINATION.name, None)  # a loop that never said why: None, not the default
        kinds = values.get(fields.MALFORMED_KINDS.name, [])
        values.setdefault(fields.MALFORMED_TOOL_CALLS.name, len(kinds))  # a writer that listed the kinds only
        return cls(**values, **kwargs)

    @classmethod
    def from_batch_row(
        cls,
        output: Any,
        i: int,
        *,
        decode: Callable[[list[int]], str],
        skip_columns: Collection[str] = (),
        **kwargs: Any,
    ) -> Trajectory:
        """Row ``i`` of the ``DataProto`` verl's ``AgentLoopWorker.generate_sequences`` returns.

        ``decode`` turns response ids into the response text; ``agentrl_*`` columns in ``skip_columns`` (the
        caller's own) are not trajectory fields; ``kwargs`` set the rest (``row_index``, ``data_source``, ...).
        """
        batch, non_tensor = output.batch, output.non_tensor_batch
        keys = set(batch.keys())  # TensorDict has no `in`
        attention = batch["attention_mask"][i]
        prompt_width = batch["prompts"].shape[1]
        prompt_ids = batch["prompts"][i][attention[:prompt_width].bool()].tolist()
        n_response = int(attention[prompt_width:].sum())
        response_ids = batch["responses"][i][:n_response].tolist()
        logprobs = batch["rollout_log_probs"][i][:n_response].tolist() if "rollout_log_probs" in keys else None
        reward_keys = [key for key in output.meta_info.get("reward_extra_keys", []) if key in non_tensor]
        columns = {
            key: plain(non_tensor[key][i])
            for key in non_tensor
            if key.startswith("agentrl_") and key not in skip_columns and non_tensor[key][i] is not None
        }
        traj = cls.from_extra_fields(
            columns,
            response=decode(response_ids),
            prompt_tokens=len(prompt_ids),
            response_tokens=n_response,
            prompt_ids=prompt_ids,
            response_ids=response_ids,
            response_mask=batch["response_mask"][i][:n_response].tolist(),
            response_logprobs=logprobs,
            score=float(batch["rm_scores"][i].sum()) if "rm_scores" in keys else None,
            reward_extra_info={key: plain(non_tensor[key][i]) for key in reward_keys},
            extra_fields={k: v for k, v in columns.items() if k != fields.MESSAGES.column},
            **kwargs,
        )
        traj.num_turns = int(non_tensor["__num_turns__"][i])  # verl's own count: also for other agent loops
        return traj

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Trajectory:
        """A dumped record (:meth:`to_dict`, or an eval record): the keys that are attributes, the rest ignored."""
        return cls(**{f.name: record[f.name] for f in dataclasses.fields(cls) if f.name in record})

    # ------------------------------------------------------------------------------------------------ writers

    def to_dict(self, *, tokens: bool = False) -> dict[str, Any]:
        """JSON-friendly dict of :data:`RECORD_KEYS`; token lists only with ``tokens=True``."""
        return {key: copy.deepcopy(getattr(self, key)) for key in RECORD_KEYS if tokens or key not in TOKEN_KEYS}

    def eval_fields(self) -> dict[str, Any]:
        """The trajectory part of an eval dump record (:data:`EVAL_KEYS`)."""
        return {key: copy.deepcopy(getattr(self, key)) for key in EVAL_KEYS}


def plain(value: Any) -> Any:
    """numpy/torch scalars and arrays → Python values, so records serialize as JSON."""
    if isinstance(value, np.generic):
        return value.item()
    if hasattr(value, "tolist") and not isinstance(value, list | tuple | str | bytes):  # np.ndarray, torch.Tensor
        return value.tolist()
    return value
