"""Roll out problems through verl's own agent loop, in-process: the one rollout path of data prep, eval and the demo.

The config is composed from the recipe's RL config (``verl_configs/agentrl_rl.yaml`` on verl's ``ppo_trainer``), so
every rollout uses exactly the training run's multi-turn limits, tool and agent loop. A verl ``AgentLoopWorker`` is
built as a plain object (not a Ray actor) around any generation client from :mod:`verl_cpu`
(in-process HF model on CPU, or a vLLM server through the OpenAI-compatible client) and runs ``rows × n``
trajectories; optional scoring runs verl's ``RewardLoopWorker`` in-process (it builds the ``agentrl_reward``
manager with verl's ``load_reward_manager``) and is called by the agent-loop worker exactly as in training.

    cfg = compose_config(model_path, overrides=["data.max_response_length=2048"])
    client = HFGenerationClient.from_pretrained(model_path, limits=ContextLimits.from_rollout_config(
        cfg.actor_rollout_ref.rollout))
    result = rollout(rows, client, cfg, n=4, score=True)       # or: await arollout(...) inside an event loop
    result.records[0].response, result.records[0].score, result.metrics["agentrl_tools/calls_per_traj/mean"]

Rows are RL-parquet rows (``data_source``, ``prompt`` chat list, ``reward_model``, ``extra_info``, ``agent_name``).
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict
from tqdm.auto import tqdm
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.protocol import DataProto

import agentrl_recipe.plugin  # noqa: F401  (registers agentrl_tool_agent / agentrl_reward in this process)
from agentrl_recipe import names
from agentrl_recipe.config_paths import config_dir as shipped_config_dir
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from agentrl_recipe.training.metrics import batch_metrics

# compose_config, to_yaml and DEFAULT_CONFIG_NAME live in rollout_config; callers import them from here as well.
# ----------------------------------------------------------------------------------------------- the config
DEFAULT_CONFIG_NAME = "agentrl_rl"


@contextmanager
def _hydra(config_dir: Path) -> Iterator[None]:
    if GlobalHydra.instance().is_initialized():  # compose inside a hydra app or after a test that left it set up
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        yield


def compose_config(
    model_path: str | Path,
    *,
    overrides: Sequence[str] = (),
    config_name: str = DEFAULT_CONFIG_NAME,
    config_dir: str | Path | None = None,
    prompt_length: int | None = None,
    response_length: int | None = None,
    record_messages: bool = True,
) -> DictConfig:
    """The recipe's verl config for an in-process rollout of ``model_path``.

    ``config_dir`` defaults to the shipped ``verl_configs/`` (``$AGENTRL_CONFIG_DIR``, else the checkout of an editable
    install). ``overrides`` are hydra overrides applied last (``key=value``, ``+key=value``). ``prompt_length`` /
    ``response_length`` set ``data.max_prompt_length`` / ``data.max_response_length``, which verl's rollout config
    and the reward's ``max_resp_len`` follow. A relative ``multi_turn.tool_config_path`` is resolved against the
    current directory, then the checkout holding ``config_dir``, as verl would resolve it launched from there.
    """
    if config_dir is None:
        config_dir = shipped_config_dir()  # $AGENTRL_CONFIG_DIR, else the checkout
    config_dir = Path(config_dir)
    if not (config_dir / f"{config_name}.yaml").is_file():
        raise FileNotFoundError(f"no config {config_name}.yaml in {config_dir}")
    base = [
        f"actor_rollout_ref.model.path={Path(model_path).resolve() if Path(model_path).exists() else model_path}",
        # AgentLoopWorker needs a rollout name; nothing on the in-process path imports vLLM (the client replaces it).
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"++{names.CONFIG_NAMESPACE}.agent_loop.record_messages={str(record_messages).lower()}",  # add or override
    ]
    if prompt_length is not None:
        base.append(f"data.max_prompt_length={int(prompt_length)}")
    if response_length is not None:
        base.append(f"data.max_response_length={int(response_length)}")
    with _hydra(config_dir):
        cfg = compose(config_name=config_name, overrides=[*base, *overrides])
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    with open_dict(cfg):
        for key in ("tool_config_path", "function_tool_path"):
            multi_turn[key] = _resolve_repo_path(multi_turn.get(key), config_dir.parent)
    return cfg


def _resolve_repo_path(path: str | None, root: Path) -> str | None:
    """``path`` as verl would open it from ``root`` (the checkout holding verl_configs/), unless it exists here."""
    if not path or Path(path).is_absolute() or Path(path).exists():
        return path
    candidate = root / path
    return str(candidate) if candidate.exists() else path


def to_yaml(cfg: DictConfig) -> str:
    """The composed config as YAML (for logs and reproducibility)."""
    return OmegaConf.to_yaml(cfg, resolve=True)


# ---------------------------------------------------------------------------------------------- the rollout
ROW_INDEX = "agentrl_row_index"  # non_tensor_batch columns the rollout adds to find its records again
SAMPLE_INDEX = "agentrl_sample_index"
# Row keys forwarded to the agent loop and the reward (the columns verl's RLHFDataset provides).
_OWN_COLUMNS = (ROW_INDEX, SAMPLE_INDEX)
ROW_COLUMNS = ("data_source", "reward_model", "extra_info", "ability", "tools_kwargs")


@dataclasses.dataclass
class RolloutResult:
    records: list[Trajectory]
    batches: list[Any]  # verl's DataProto of each chunk (prompts, responses, masks, logprobs, rm_scores), if kept
    metrics: dict[str, float]  # "section/name" metrics over all trajectories (training_metrics.batch_metrics)


# ---------------------------------------------------------------------------------------------------- batch


def make_batch(rows: Sequence[Mapping[str, Any]], n: int, *, default_agent: str, first_row: int = 0) -> Any:
    """DataProto of ``rows × n`` trajectories (each row's samples adjacent, as verl's ``repeat(interleave=True)``)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    keys = ("raw_prompt", "agent_name", "index", "priority", ROW_INDEX, SAMPLE_INDEX)
    columns: dict[str, list[Any]] = {key: [] for key in keys}
    columns.update({key: [] for key in ROW_COLUMNS})
    for offset, row in enumerate(rows):
        row_index = first_row + offset
        prompt = row.get("prompt", row.get("raw_prompt"))
        if not isinstance(prompt, list | tuple | np.ndarray) or not all(isinstance(m, Mapping) for m in prompt):
            raise ValueError(f"row {row_index}: 'prompt' must be a list of chat messages, got {type(prompt).__name__}")
        messages = [dict(m) for m in prompt]
        extra_info = dict(row.get("extra_info") or {})
        for sample in range(n):
            columns["raw_prompt"].append(messages)
            columns["agent_name"].append(str(row.get("agent_name") or default_agent))
            columns["index"].append(extra_info.get("index", row_index))
            # Unique per trajectory, as AgentLoopManager assigns it; with rollout.full_determinism=true verl derives
            # the request id from it ("det-<priority>"), so seeded clients sample the same trajectory on a rerun.
            columns["priority"].append(row_index * n + sample)
            columns[ROW_INDEX].append(row_index)
            columns[SAMPLE_INDEX].append(sample)
            columns["data_source"].append(str(row.get("data_source") or ""))
            columns["reward_model"].append(dict(row.get("reward_model") or {}))
            columns["extra_info"].append(extra_info)
            columns["ability"].append(row.get("ability"))
            columns["tools_kwargs"].append(dict(row.get("tools_kwargs") or {}))
    non_tensor = {}
    for key, values in columns.items():
        array = np.empty(len(values), dtype=object)
        array[:] = values
        non_tensor[key] = array
    return DataProto(batch=None, non_tensor_batch=non_tensor, meta_info={})


# ---------------------------------------------------------------------------------------------------- run


class _LocalMethod:
    """Stands in for a Ray actor method: ``handle.method.remote(...)`` returns the awaitable directly."""

    def __init__(self, fn: Callable[..., Any]):
        self._fn = fn

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class LocalRewardWorker:
    """verl's ``RewardLoopWorker`` in this process, shaped like the actor handle ``AgentLoopWorker`` calls."""

    def __init__(self, cfg: DictConfig):
        self.worker = RewardLoopWorker(cfg)
        self.compute_score = _LocalMethod(self.worker.compute_score)


class Rollout:
    """An in-process verl ``AgentLoopWorker`` (and reward worker) around ``client``; build it inside the event loop.

    verl's loops capture the running event loop when constructed, so :meth:`create` must be awaited in the loop
    that will run them.
    """

    def __init__(self, cfg: DictConfig, client: Any, *, score: bool = False):
        # Resolved once: verl's loops read interpolated keys (rollout.prompt_length = ${oc.select:data...}) per
        # trajectory, and each read re-parses the interpolation (~1-3 ms per trajectory on this machine).
        cfg = copy.deepcopy(cfg)
        OmegaConf.resolve(cfg)
        self.cfg = cfg
        self.client = client
        self.reward = LocalRewardWorker(cfg) if score else None
        # An in-process reward worker with the actor's interface, or None (verl accepts both at run time).
        handles: Any = [self.reward] if score else None
        self.worker = AgentLoopWorker(cfg, llm_client=client, reward_loop_worker_handles=handles)
        self.tokenizer = self.worker.tokenizer
        self.default_agent = str(cfg.actor_rollout_ref.rollout.agent.default_agent_loop)

    @classmethod
    async def create(cls, cfg: DictConfig, client: Any, *, score: bool = False) -> Rollout:
        asyncio.get_running_loop()  # fail here, clearly, when called outside a running loop
        return cls(cfg, client, score=score)

    async def run(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        n: int = 1,
        validate: bool = False,
        chunk_size: int = 64,
        progress: bool = True,
        on_records: Callable[[list[Trajectory]], None] | None = None,
        first_row: int = 0,
        keep_batches: bool = True,
    ) -> RolloutResult:
        """Roll out every row ``n`` times, ``chunk_size`` trajectories per ``generate_sequences`` call.

        ``validate=True`` samples with ``rollout.val_kwargs`` (as verl's validation does). ``on_records`` is called
        after each chunk (e.g. to append to a resumable dump). ``first_row`` offsets ``row_index`` (resuming).
        ``keep_batches=False`` drops verl's padded DataProto of each chunk (long runs: it holds (chunk, prompt +
        response) tensors).
        """
        if chunk_size < 1:
            raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
        full = make_batch(rows, n, default_agent=self.default_agent, first_row=first_row)
        records: list[Trajectory] = []
        batches = []
        started = time.perf_counter()
        with tqdm(total=len(full), desc="rollout", unit="traj", disable=not progress) as bar:
            for start in range(0, len(full), chunk_size):
                chunk = full[start : start + chunk_size]
                chunk.meta_info = {"validate": validate, "global_steps": -1}
                inputs = {k: v.copy() for k, v in chunk.non_tensor_batch.items()}
                output = await self.worker.generate_sequences(chunk)
                new = self._records(inputs, output)
                records.extend(new)
                if keep_batches:
                    batches.append(output)
                if on_records is not None:
                    on_records(new)
                bar.update(len(new))
        wall_s = time.perf_counter() - started
        metrics = batch_metrics(_columns(records), wall_s=wall_s)
        metrics["agentrl_rollout/wall_s"] = wall_s
        metrics["agentrl_rollout/trajectories_per_s"] = len(records) / wall_s if wall_s > 0 else 0.0
        scores = [r.score for r in records if r.score is not None]
        if scores:
            metrics["agentrl_rollout/score_mean"] = float(np.mean(scores))
        return RolloutResult(records=records, batches=batches, metrics=metrics)

    def _records(self, inputs: dict[str, np.ndarray], output: Any) -> list[Trajectory]:
        def decode(ids: list[int]) -> str:
            return self.tokenizer.decode(ids, skip_special_tokens=True)

        return [
            Trajectory.from_batch_row(
                output,
                i,
                decode=decode,
                skip_columns=_OWN_COLUMNS,
                row_index=int(inputs[ROW_INDEX][i]),
                sample_index=int(inputs[SAMPLE_INDEX][i]),
                data_source=str(inputs["data_source"][i]),
                prompt=list(inputs["raw_prompt"][i]),
            )
            for i in range(len(output))
        ]


def _columns(records: Iterable[Trajectory]) -> dict[str, list[Any]]:
    """Records back to the fields.LOOP_FIELDS columns batch_metrics reads (num turns from verl's own count)."""
    records = list(records)
    columns: dict[str, list[Any]] = {"__num_turns__": [r.num_turns for r in records]}
    for key in {k for r in records for k in r.extra_fields}:
        columns[key] = [r.extra_fields.get(key) for r in records]
    return columns


async def arollout(
    rows: Sequence[Mapping[str, Any]],
    client: Any,
    cfg: DictConfig,
    *,
    n: int = 1,
    score: bool = False,
    validate: bool = False,
    chunk_size: int = 64,
    progress: bool = True,
    on_records: Callable[[list[Trajectory]], None] | None = None,
) -> RolloutResult:
    """Roll out ``rows × n`` with ``client`` under ``cfg`` (see :meth:`Rollout.run`); await inside an event loop."""
    runner = await Rollout.create(cfg, client, score=score)
    return await runner.run(
        rows, n=n, validate=validate, chunk_size=chunk_size, progress=progress, on_records=on_records
    )


def rollout(rows: Sequence[Mapping[str, Any]], client: Any, cfg: DictConfig, **kwargs: Any) -> RolloutResult:
    """Synchronous :func:`arollout` (runs its own event loop; use ``arollout`` where a loop is already running)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(arollout(rows, client, cfg, **kwargs))
    raise RuntimeError("rollout() called inside a running event loop; use `await arollout(...)` instead")
