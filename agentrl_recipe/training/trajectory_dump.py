"""The per-step trajectory dump that ``agentrl-recipe view`` reads: every ``every_n_steps`` steps, ``per_step``
trained trajectories with every per-trajectory field of ours and the exact tokens the trainer saw.

verl 0.9.1's own ``trainer.rollout_data_dir`` dump cannot carry them: its v1 trainer
(``verl/trainer/ppo/v1/trainer_base.py`` ``_log_rollout_data``) reads a fixed list of fields from TransferQueue
(``uid, prompts, responses, rm_scores, reward_model``) and writes decoded text and the summed score only — no
``extra_fields`` (our ``agentrl_*`` columns), no ``reward_extra_info`` (the reward breakdown), no token ids and no loss
mask. Our replay buffer (:mod:`agentrl_recipe.training.algos.sampler`) already reads each trained batch and decides its
trajectory masks, so it writes this dump next to that decision: no trainer fork, no second pass over the batch.

Config ``agentrl.trajectory_dump`` (wired into ``trainer.v1.sampler.sampler_kwargs.trajectory_dump``)::

    dir: null           # off; a folder: <dir>/step_<N>.jsonl, one JSON line per trajectory (atomic per file)
    every_n_steps: 1    # dump steps 1, 1+N, 1+2N, ...
    per_step: 64        # trajectories per step, whole GRPO groups first (the step's first sampled groups)
    token_ids: true     # prompt/response token ids, the loss mask (response_mask) and per-token text
    tokenizer: null     # a tokenizer path (grpo_tcr.yaml: the actor's model) to decode per-token text; null: ids only

A record: ``step, key, data_source, ground_truth, score`` (the summed token-level reward), ``response_len``,
``masked`` (the trajectory masks took it) with ``mask_flags`` (every reason that flagged it), ``fields`` (the
trajectory's ``extra_fields`` merged with its ``reward_extra_info``: ``agentrl_*``, ``score``, ``acc``,
``tool_bonus``, ``overlong_reward`` …), and with ``token_ids``: ``prompt_ids``, ``response_ids``, ``response_mask``
(before any trajectory mask zeroed it) and, with a tokenizer, ``prompt_text``/``response_text`` (one string per
token).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.training.recipe_config import from_mapping

logger = logging.getLogger(__name__)

STEP_FILE = "step_{step:06d}.jsonl"
READ_FIELDS = ("extra_fields", "data_source", "rm_scores", "reward_model")
TOKEN_FIELDS = ("prompts", "responses", "response_mask")


@dataclasses.dataclass
class TrajectoryDumpConfig:
    """``agentrl.trajectory_dump`` (see the module docstring)."""

    dir: str | None = None
    every_n_steps: int = 1
    per_step: int = 64
    token_ids: bool = True
    tokenizer: str | None = None

    def __post_init__(self) -> None:
        if self.every_n_steps < 1 or self.per_step < 1:
            raise ValueError(
                f"{names.CONFIG_NAMESPACE}.trajectory_dump: every_n_steps and per_step must be >= 1, got "
                f"{self.every_n_steps} / {self.per_step}"
            )

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> TrajectoryDumpConfig:
        return from_mapping(cls, values, where=f"{names.CONFIG_NAMESPACE}.trajectory_dump")

    def wants(self, step: int) -> bool:
        """Whether training step ``step`` (1-based, verl's ``global_steps``) is dumped."""
        return bool(self.dir) and (step - 1) % self.every_n_steps == 0


def _plain(value: Any) -> Any:
    """TransferQueue's non-tensor values (NonTensorData, numpy, tensors) as JSON values."""
    value = getattr(value, "data", value)
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _rows(tensor: Any) -> list[list[Any]]:
    """A nested (jagged) or padded tensor's rows as lists."""
    return [row.tolist() for row in tensor.unbind()]


class TrajectoryDump:
    """Writes ``<dir>/step_<N>.jsonl`` for the dumped steps; a step sampled in several calls appends to its file."""

    def __init__(self, config: TrajectoryDumpConfig) -> None:
        self.config = config
        self._tokenizer: Any = None
        self._lines: dict[int, list[str]] = {}

    def _token_text(self, ids: Sequence[int]) -> list[str] | None:
        if not self.config.tokenizer:
            return None
        if self._tokenizer is None:
            from transformers import AutoTokenizer

            self._tokenizer = AutoTokenizer.from_pretrained(self.config.tokenizer)
        return [self._tokenizer.decode([i]) for i in ids]

    def write(
        self,
        batch: Any,
        records: Sequence[Mapping[str, Any]],
        masked: Sequence[bool],
        flags: Mapping[str, Sequence[bool]],
        step: int,
    ) -> None:
        """Dump the first trajectories of ``batch`` (a KVBatchMeta) for ``step``, up to ``per_step`` in the step.

        ``records`` are the batch's merged per-trajectory fields, ``masked``/``flags`` the mask decision.
        """
        lines = self._lines.setdefault(step, [])
        room = self.config.per_step - len(lines)
        if not self.config.wants(step) or room <= 0 or not batch.keys:
            return
        import transfer_queue as tq

        keys = list(batch.keys)[:room]
        fields = list(READ_FIELDS) + (list(TOKEN_FIELDS) if self.config.token_ids else [])
        data = tq.kv_batch_get(keys=keys, partition_id=batch.partition_id, select_fields=fields)
        scores = [float(sum(row)) for row in _rows(data["rm_scores"])]
        tokens = {name: _rows(data[name]) for name in TOKEN_FIELDS} if self.config.token_ids else {}
        for i, key in enumerate(keys):
            reward_model = _plain(data["reward_model"][i]) or {}
            record: dict[str, Any] = {
                "step": step,
                "key": str(key),
                "data_source": _plain(data["data_source"][i]),
                "ground_truth": reward_model.get("ground_truth") if isinstance(reward_model, dict) else None,
                "score": scores[i],
                "masked": bool(masked[i]),
                "mask_flags": sorted(reason for reason, values in flags.items() if values[i]),
                "fields": _plain(dict(records[i])),
            }
            if tokens:
                prompt, response = tokens["prompts"][i], tokens["responses"][i]
                record["response_len"] = len(response)
                record.update(prompt_ids=prompt, response_ids=response, response_mask=tokens["response_mask"][i])
                record.update(prompt_text=self._token_text(prompt), response_text=self._token_text(response))
            lines.append(json.dumps(record, ensure_ascii=False, default=str))
        path = Path(str(self.config.dir)) / STEP_FILE.format(step=step)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, "".join(line + "\n" for line in lines))
        for old in [s for s in self._lines if s < step]:
            del self._lines[old]
