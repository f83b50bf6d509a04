"""Eval rollouts through the shared rollout path (:mod:`agentrl_recipe.offline.rollout`): the training agent loop,
tool and sandbox, sampled with ``rollout.val_kwargs`` as verl's validation does.

The verl config is the recipe's RL config with the eval protocol laid over it (:func:`verl_overrides`), so a run
differs from training only where the protocol says so (sampling, lengths, turn and tool budgets).
Backends: ``hf`` — the in-process HF client (CPU; a GPU when one is visible); ``openai`` — a vLLM server behind its
OpenAI-compatible API (token ids in and out, so the agent loop's token accounting stays exact).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from omegaconf import OmegaConf, open_dict
from verl.utils.import_utils import resolve_config_path

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.eval.eval_set import EvalProblem
from agentrl_recipe.eval.protocol import COMPAT_KEY, EvalConfig
from agentrl_recipe.training.agent_loop.trajectory import Trajectory
from verl_client.token_output import ContextLimits

TOOL_CONFIG_FILE = "tool_config.yaml"


class Generator(Protocol):
    """Rolls out problems: ``samples[i]`` are the sample indices wanted for ``problems[i]``.

    Returns one :class:`~agentrl_recipe.training.agent_loop.trajectory.Trajectory` per wanted sample, its ``row_index``
    the index
    into ``problems`` and its ``sample_index`` the sample. Async, and called from one event loop for the whole run:
    verl's agent loop and the sandbox pool bind to the loop they first run in, and grading shares that loop with
    generation.
    """

    async def generate(self, problems: Sequence[EvalProblem], samples: Sequence[Sequence[int]]) -> list[Trajectory]: ...

    async def aclose(self) -> None: ...


def verl_overrides(cfg: EvalConfig) -> list[str]:
    """Hydra overrides that put the eval protocol on the recipe's RL config."""
    rollout = "actor_rollout_ref.rollout"
    return [
        f"{rollout}.val_kwargs.n={cfg.n_samples}",
        f"{rollout}.val_kwargs.do_sample={str(cfg.temperature > 0).lower()}",
        f"{rollout}.val_kwargs.temperature={cfg.temperature}",
        f"{rollout}.val_kwargs.top_p={cfg.top_p}",
        f"{rollout}.val_kwargs.top_k={cfg.top_k}",
        f"{rollout}.multi_turn.max_assistant_turns={cfg.max_assistant_turns}",
        f"{rollout}.multi_turn.max_user_turns={cfg.max_user_turns}",
        f"{rollout}.multi_turn.max_parallel_calls={cfg.max_parallel_calls}",
        f"{rollout}.multi_turn.max_tool_response_length={cfg.max_tool_response_length}",
        *([f"{rollout}.multi_turn.tool_config_path={cfg.tool_config}"] if cfg.tool_config else []),
        f"{COMPAT_KEY}={cfg.compat}",  # the agent loop hands it to the tool (whose YAML leaves compat null)
        *(cfg.overrides or []),
    ]


def write_tool_config(source: str | Path, cfg: EvalConfig, dest: Path) -> Path:
    """The tool YAML the run uses: ``source`` with the protocol's tool timeout applied to the ``code_interpreter``
    entry (written into the run folder, so the run records the exact tool settings)."""
    tools = OmegaConf.to_container(OmegaConf.load(source), resolve=True)
    entries = tools.get("tools") if isinstance(tools, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{source}: not a verl tool config (expected a top-level 'tools:' list)")
    found = False
    for entry in entries:
        if ((entry.get("tool_schema") or {}).get("function") or {}).get("name") != names.TOOL_NAME:
            continue
        found = True
        tool_cfg = entry.setdefault("config", {})
        tool_cfg["timeout_s"] = cfg.tool_timeout_s  # the sandbox reaches the tool from agentrl.sandbox (use_recipe)
    if not found:
        raise ValueError(f"{source}: no tool named {names.TOOL_NAME!r}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(dest, OmegaConf.to_yaml(OmegaConf.create(tools)))
    return dest


def compose_eval_config(cfg: EvalConfig) -> Any:
    """The recipe's RL config with the eval protocol on it; its tool YAML goes to ``<out_dir>/tool_config.yaml``."""
    # verl's agent-loop worker (harness.rollout) loads only when a run generates: report/compare never need it
    from agentrl_recipe.offline.rollout import compose_config

    verl_cfg = compose_config(
        cfg.model,
        overrides=verl_overrides(cfg),
        prompt_length=cfg.max_prompt_length,
        response_length=cfg.max_response_length,
    )
    if cfg.sandbox:  # the tool takes agentrl.sandbox from this config (a token never goes into the tool YAML file)
        with open_dict(verl_cfg):
            key = f"{names.CONFIG_NAMESPACE}.sandbox"
            OmegaConf.update(verl_cfg, key, dict(cfg.sandbox), merge=True, force_add=True)
    multi_turn = verl_cfg.actor_rollout_ref.rollout.multi_turn
    if multi_turn.get("tool_config_path"):
        source = resolve_config_path(multi_turn.tool_config_path)
        with open_dict(verl_cfg):
            multi_turn.tool_config_path = str(write_tool_config(source, cfg, Path(cfg.out_dir) / TOOL_CONFIG_FILE))
    return verl_cfg


def make_client(cfg: EvalConfig, verl_cfg: Any) -> Any:
    """The generation client ``cfg.backend`` names, with the rollout's token limits (each backend's client, and torch,
    load only when chosen)."""
    limits = ContextLimits.from_rollout_config(verl_cfg.actor_rollout_ref.rollout)
    if cfg.backend == "openai":
        from agentrl_recipe.offline.openai_client import OpenAICompletionsClient

        assert cfg.server_url is not None  # EvalConfig validates it
        # one request per trajectory of a batch in flight: none waits in the client while the engines have room
        concurrency = cfg.batch_size * cfg.n_samples
        return OpenAICompletionsClient(
            cfg.server_url, cfg.served_model_name or cfg.model, limits=limits, max_concurrency=concurrency
        )
    import torch

    from verl_cpu.hf_client import HFGenerationClient

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    return HFGenerationClient.from_pretrained(cfg.model, limits=limits, seed=cfg.seed, device=device, dtype=dtype)


class RolloutGenerator:
    """:class:`Generator` over :class:`agentrl_recipe.offline.rollout.Rollout`.

    ``client`` overrides the backend's client (tests pass a scripted HF client; the demo its trained model). The
    verl worker is built on the first call, inside the run's event loop.
    """

    def __init__(self, cfg: EvalConfig, *, client: Any = None, verl_config: Any = None) -> None:
        self.cfg = cfg
        self.verl_config = verl_config if verl_config is not None else compose_eval_config(cfg)
        self.client = client
        self._rollout: Any = None

    async def _runner(self) -> Any:
        if self._rollout is None:
            from agentrl_recipe.offline.rollout import Rollout  # see compose_eval_config

            if self.client is None:
                self.client = make_client(self.cfg, self.verl_config)
            self._rollout = await Rollout.create(self.verl_config, self.client, score=False)
        return self._rollout

    async def generate(self, problems: Sequence[EvalProblem], samples: Sequence[Sequence[int]]) -> list[Trajectory]:
        runner = await self._runner()
        # The rollout draws samples 0..n-1 for every row of a call; problems resumed mid-way need fewer, so rows go
        # in groups by how many samples they still need, and sample j of a group maps to the j-th missing index.
        groups: dict[int, list[int]] = {}
        for i, wanted in enumerate(samples):
            if wanted:
                groups.setdefault(len(wanted), []).append(i)
        out: list[Trajectory] = []
        for n, members in groups.items():
            result = await runner.run(
                [problems[i].row for i in members],
                n=n,
                validate=True,  # sample with val_kwargs, as verl's validation
                chunk_size=n * len(members),
                progress=False,
            )
            for rec in result.records:
                i = members[rec.row_index]
                out.append(dataclasses.replace(rec, row_index=i, sample_index=samples[i][rec.sample_index]))
        return out

    async def aclose(self) -> None:
        close = getattr(self.client, "aclose", None)
        if close is not None:
            await close()
