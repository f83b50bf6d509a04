"""EvalConfig: one eval run's protocol and plumbing. Defaults are the paper's protocol.

Paper protocol (demyagent-paper-and-code.md §1.2, §5.4; Open-AgentRL ``recipe/demystify/eval/*.sh``):
32 samples per problem (``rollout.val_kwargs.n=32``), temperature 1.0, top_p 0.6, max prompt 4096 tokens (eval
scripts; training uses 2560), max response 20480 tokens including tool output, ≤16 assistant / 16 user turns, one tool
call executed per turn, tool output cut to 256 characters, 30 s per tool call. AIME/GPQA report avg@32; LiveCodeBench
v6 reports pass@1 with the official harness rules (6 s per test, all tests must pass). The paper's appendix says
16,384 for the response length (second-hand); the released scripts use 20480, which we follow.

``compat`` is the tool and agent-loop behaviour the rollouts run (``agentrl.compat``,
agentrl_recipe/training/compat.py). Default ``open_agentrl``: the released code's (the last-line print, "no stdout
here", a malformed call ending the trajectory, no newline before a tool turn, its error texts, large output as a
timeout), which the published checkpoints were trained and evaluated with ([code] recipe/demystify/eval/*.sh run verl's
validation on the training stack).
``agentrl`` (``--compat agentrl``) evaluates with this recipe's fixes, e.g. a model trained by a ``*_fixed`` config.
``compat`` picks the grader too (:mod:`agentrl_recipe.eval.grading`): open_agentrl the released eval's (AIME/GPQA by
its reward's ``acc``, the ground truth as published; LCB by LiveCodeBench's official rules, as its README says the
paper's LCB numbers were graded), agentrl ours (the ground truth normalized). The released protocol ran on the
Open-AgentRL-Eval files (``agentrl-recipe data eval-sets --released``, ``make data-eval-released``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentrl_recipe.training import compat as compat_modes
from agentrl_sandbox.config import redacted

# key -> paper value; protocol_deviations() reports every key of a run that differs.
PAPER_PROTOCOL: dict[str, Any] = {
    "n_samples": 32,
    "temperature": 1.0,
    "top_p": 0.6,
    "top_k": -1,
    "max_prompt_length": 4096,
    "max_response_length": 20480,
    "max_assistant_turns": 16,
    "max_user_turns": 16,
    "max_parallel_calls": 1,
    "max_tool_response_length": 256,
    "tool_timeout_s": 30.0,
    "lcb_timeout_s": 6.0,
    "compat": "open_agentrl",
}

BACKENDS = ("hf", "openai")
COMPAT_KEY = "agentrl.compat"  # the RL config key EvalConfig.compat sets
DEFAULT_BATCH_SIZE = 8  # problems per rollout call: 8 x 32 samples = 256 trajectories, one engine's load
# Trajectories in flight per vLLM engine: vLLM 0.30's API-server max_num_seqs below 70 GB (1,024 on H100). At eval's
# lengths a 4B model's KV cache holds fewer sequences than that, so each engine's queue stays full; a batch ends with
# its slowest trajectory, so a data-parallel server's 8 engines get 8 x 256 (one engine's 256 left 7 of 8 GPUs idle).
TRAJECTORIES_PER_ENGINE = 256


def batch_size_for(engines: int, n_samples: int) -> int:
    """Problems per rollout call that keep ``engines`` vLLM engines busy: :data:`TRAJECTORIES_PER_ENGINE` trajectories
    per engine, never fewer than :data:`DEFAULT_BATCH_SIZE` problems."""
    return max(DEFAULT_BATCH_SIZE, -(-TRAJECTORIES_PER_ENGINE * max(1, engines) // n_samples))


@dataclasses.dataclass
class EvalConfig:
    """Everything one eval run needs. ``run_eval(EvalConfig(...))`` is the Python API; the CLI fills the same fields."""

    model: str  # HF model dir or hub id: tokenizer (and weights for backend=hf)
    data: list[str]  # eval parquet files, or folders of them (the rows data prep writes)
    out_dir: str  # run folder: rollouts.jsonl, report.json, table.md, *.png
    backend: str = "hf"  # hf: in-process HF model (CPU tests, small GPUs) | openai: OpenAI-compatible vLLM server
    server_url: str | None = None  # backend=openai: e.g. http://localhost:8000/v1
    served_model_name: str | None = None  # backend=openai: model name on the server (default: model)
    label: str | None = None  # row name in tables (default: model)
    # --- sampling (paper values; see PAPER_PROTOCOL) ---
    n_samples: int = 32
    temperature: float = 1.0
    top_p: float = 0.6
    top_k: int = -1
    seed: int = 0  # seeds sampling (where the backend supports it) and the bootstrap
    # --- lengths and tool budget ---
    max_prompt_length: int = 4096
    max_response_length: int = 20480
    max_assistant_turns: int = 16
    max_user_turns: int = 16
    max_parallel_calls: int = 1
    max_tool_response_length: int = 256
    tool_timeout_s: float = 30.0
    # the tool / agent-loop behaviour: open_agentrl (released, the paper checkpoints') | agentrl (our fixes)
    compat: str = "open_agentrl"
    tool_config: str | None = None  # tool YAML (None = the recipe's verl_configs/tools/code_interpreter.yaml)
    overrides: list[str] | None = None  # extra hydra overrides on the recipe's RL config (recorded in the protocol)
    # --- scoring ---
    lcb_timeout_s: float = 6.0  # LiveCodeBench harness default, per test
    ks: list[int] | None = None  # pass@k/maj@k values; None = 1, 2, 4, ..., n
    bootstrap_resamples: int = 1000
    confidence: float = 0.95
    # --- selection and plumbing ---
    sources: list[str] | None = None  # keep only these data_source values
    limit: int | None = None  # first N problems per data_source (smoke runs)
    batch_size: int = DEFAULT_BATCH_SIZE  # problems per rollout call (× n_samples); CLI: batch_size_for(engines)
    sandbox: dict[str, Any] | None = None  # agentrl.sandbox overrides (SandboxConfig fields)
    plots: bool = True  # write the PNG plots next to report.json

    def __post_init__(self) -> None:
        if isinstance(self.data, str):
            self.data = [self.data]
        if not self.data:
            raise ValueError("EvalConfig.data: give at least one eval parquet file or folder")
        if self.backend not in BACKENDS:
            raise ValueError(f"EvalConfig.backend must be one of {BACKENDS}, got {self.backend!r}")
        if self.backend == "openai" and not self.server_url:
            raise ValueError("EvalConfig.backend='openai' needs server_url (e.g. http://localhost:8000/v1)")
        for name in ("n_samples", "max_prompt_length", "max_response_length", "max_assistant_turns", "batch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"EvalConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 0.0 < self.top_p <= 1.0:
            raise ValueError(f"EvalConfig.top_p must be in (0, 1], got {self.top_p}")
        if self.temperature < 0.0:
            raise ValueError(f"EvalConfig.temperature must be >= 0, got {self.temperature}")
        if self.ks is not None:
            bad = [k for k in self.ks if not 1 <= int(k) <= self.n_samples]
            if bad:
                raise ValueError(f"EvalConfig.ks {bad} must be within [1, n_samples={self.n_samples}]")
        compat_modes.check_mode(self.compat, where="EvalConfig.compat")
        pinned = [o for o in self.overrides or [] if o.lstrip("+~").startswith(COMPAT_KEY + "=")]
        if pinned:
            raise ValueError(
                f"EvalConfig.overrides {pinned}: set the behaviour with compat (--compat), not {COMPAT_KEY}"
            )
        if self.limit is not None and self.limit < 1:
            raise ValueError(f"EvalConfig.limit must be >= 1, got {self.limit}")

    def protocol(self) -> dict[str, Any]:
        """The fields that define the protocol, stored in the report and checked on resume."""
        d = dataclasses.asdict(self)
        d["served_model_name"] = self.served_model_name or self.model
        d["sandbox"] = redacted(d["sandbox"])  # the report is shared: a --sandbox token shows as '***'
        return d


# Fields that may change between a run and its resumption without invalidating the dumped samples.
RESUMABLE_CHANGES = frozenset(
    {
        "out_dir",
        "data",
        "label",
        "server_url",
        "batch_size",
        "ks",
        "bootstrap_resamples",
        "confidence",
        "limit",
        "sources",
        "sandbox",
        "plots",
        "n_samples",  # more samples extend a run; the dumped ones stay valid
    }
)


def protocol_deviations(protocol: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{key: {"run": value, "paper": value}}`` for every protocol key that differs from the paper's."""
    return {k: {"run": protocol.get(k), "paper": v} for k, v in PAPER_PROTOCOL.items() if protocol.get(k) != v}
