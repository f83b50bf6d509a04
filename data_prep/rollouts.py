"""Rolling out data-prep problems through the shared rollout path (:mod:`agentrl_recipe.offline.rollout`), resumably.

``generate`` (teacher trajectories) and ``model_aware`` (policy pass rates) both roll each problem out ``n`` times
through the recipe's own agent loop, tool, sandbox and reward, and record one line per finished problem in a JSONL
log; a rerun skips the problems already in the log. Concurrency is bounded by ``--concurrency`` trajectories in
flight (verl's agent-loop worker runs one ``generate_sequences`` chunk concurrently).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from agentrl_recipe.problems import read_problem_rows
from data_prep.files import JsonlLog
from data_prep.schema import drop_arrow_nulls, validate_rl_row
from data_prep.text import exact_key


def load_problems(paths: Sequence[str], limit: int = 0) -> list[tuple[str, dict]]:
    """(problem key, RL row) for every row of the given RL parquet files, validated; a repeated key appears once."""
    out: dict[str, dict] = {}
    for file, i, raw in read_problem_rows(paths):
        row = drop_arrow_nulls(raw)
        errors = validate_rl_row(row)
        if errors:
            raise SystemExit(f"{file}: row {i}: field {errors[0].field!r}: {errors[0].message}")
        out.setdefault(problem_key(row), row)
    items = list(out.items())
    return items[:limit] if limit else items


def add_rollout_arguments(parser: argparse.ArgumentParser, *, default_n: int) -> None:
    parser.add_argument(
        "problems", nargs="+", help="verl RL parquet file(s) (from `data rl-mix`, `data rl-released`, `data eval-sets`)"
    )
    parser.add_argument("--model", required=True, help="HF model path/id (also the tokenizer of the agent loop)")
    parser.add_argument(
        "--backend",
        choices=("hf", "openai", "vllm"),
        default="hf",
        help="hf: in-process transformers (CPU/tests); openai: a running vLLM OpenAI-compatible server (--base-url); "
        "vllm: a vLLM server for --model started for the run and stopped after it (agentrl_recipe.offline.vllm_server)",
    )
    parser.add_argument("--base-url", help="OpenAI-compatible endpoint for --backend openai, e.g. http://node:8000/v1")
    parser.add_argument("--vllm-args", default="", help="--backend vllm: extra server arguments (they win)")
    parser.add_argument("--served-model-name", help="model name the server expects (default: --model)")
    parser.add_argument("--n", type=int, default=default_n, help=f"rollouts per problem (default {default_n})")
    parser.add_argument("--concurrency", type=int, default=64, help="trajectories in flight at once (default 64)")
    parser.add_argument("--prompt-length", type=int, help="data.max_prompt_length (default: the RL config's)")
    parser.add_argument("--response-length", type=int, help="data.max_response_length (default: the RL config's)")
    parser.add_argument(
        "--config-name", default="agentrl_rl", help="recipe config in verl_configs/ (default agentrl_rl)"
    )
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="hydra override")
    parser.add_argument(
        "--validate-sampling",
        action="store_true",
        help="sample with rollout.val_kwargs (eval sampling) instead of the training sampling",
    )
    parser.add_argument("--limit", type=int, default=0, help="first N problems only (0 = all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True)


def build_client(args: argparse.Namespace, cfg: Any, base_url: str | None = None) -> Any:
    """The ``--backend`` client; ``base_url`` (the started server's, backend vllm) replaces ``--base-url``."""
    # The generation clients and the rollout stack import torch and verl: only a rollout run pays for them, not the
    # `agentrl-recipe data` parser, which imports this module.
    from verl_client.token_output import ContextLimits

    limits = ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    if args.backend == "hf":
        from verl_cpu.hf_client import HFGenerationClient

        return HFGenerationClient.from_pretrained(args.model, limits=limits, seed=args.seed)
    base_url = base_url or args.base_url
    if not base_url:
        raise SystemExit("--backend openai needs --base-url")
    from agentrl_recipe.offline.openai_client import OpenAICompletionsClient

    return OpenAICompletionsClient(
        base_url=base_url,
        model=args.served_model_name or args.model,
        limits=limits,
        max_concurrency=args.concurrency,
    )


@contextlib.contextmanager
def served(args: argparse.Namespace, cfg: Any) -> Iterator[str | None]:
    """``--backend vllm``: a vLLM server for ``--model`` with the rollout's max length, for the block (its URL);
    other backends: None. Its log: ``<out>.vllm_server.log``."""
    if args.backend != "vllm":
        yield None
        return
    from agentrl_recipe.offline.vllm_server import VllmServer, VllmServerSpec, stop_on_sigterm
    from verl_client.token_output import ContextLimits

    out = Path(args.out)
    spec = VllmServerSpec(
        model=args.model,
        max_model_len=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout).context_len,
        served_model_name=args.served_model_name,
        seed=args.seed,
        extra_args=tuple(shlex.split(args.vllm_args)),
        log_path=out.with_name(out.name + ".vllm_server.log"),
    )
    with stop_on_sigterm(), VllmServer(spec) as server:
        yield server.url


def compose(args: argparse.Namespace) -> Any:
    from agentrl_recipe.offline.rollout import compose_config  # torch/verl; see build_client

    # Data prep reads only the scorer's verdict (acc), never the shaped reward: overlong shaping off, so a short
    # --response-length cannot clash with the training buffer (4096). User overrides still come last.
    overrides = ["reward.reward_kwargs.overlong_buffer_cfg.enable=false", *args.override]
    return compose_config(
        args.model,
        overrides=overrides,
        config_name=args.config_name,
        prompt_length=args.prompt_length,
        response_length=args.response_length,
    )


def run_problems(
    args: argparse.Namespace,
    problems: list[tuple[str, dict]],
    log: JsonlLog,
    summarize: Callable[[str, dict, list[Any]], dict],
    *,
    desc: str,
    client: Any = None,
) -> None:
    """Roll out each problem not yet in ``log`` ``args.n`` times; log ``summarize(key, row, records)`` per problem.

    ``client`` replaces the one ``--backend`` would build (library use, tests with a scripted tiny model).
    """
    todo = [(k, r) for k, r in problems if k not in log]
    if not todo:
        return
    cfg = compose(args)
    per_chunk = max(1, args.concurrency // args.n)

    async def go() -> None:
        from agentrl_recipe.offline.rollout import Rollout  # torch/verl; see build_client

        runner = await Rollout.create(cfg, client, score=True)
        with tqdm(total=len(problems), initial=len(problems) - len(todo), desc=desc, unit="problem") as bar:
            for start in range(0, len(todo), per_chunk):
                chunk = todo[start : start + per_chunk]
                result = await runner.run(
                    [r for _, r in chunk],
                    n=args.n,
                    validate=args.validate_sampling,
                    chunk_size=len(chunk) * args.n,
                    progress=False,
                )
                by_row: dict[int, list[Any]] = {}
                for rec in result.records:
                    by_row.setdefault(rec.row_index, []).append(rec)
                for i, (key, row) in enumerate(chunk):
                    log.append(summarize(key, row, by_row.get(i, [])))
                bar.update(len(chunk))

    with served(args, cfg) if client is None else contextlib.nullcontext(None) as url:  # a given client: no server
        if client is None:
            client = build_client(args, cfg, url)
        asyncio.run(go())


def progress_log(out: Path, suffix: str) -> JsonlLog:
    return JsonlLog(out.with_name(out.name.removesuffix(".parquet") + suffix), key_field="key")


def problem_key(row: dict) -> str:
    """Stable id of a problem across runs and files: its data_source and a hash of its prompt."""
    text = "\n".join(m["content"] for m in row["prompt"])
    return f"{row['data_source']}:{exact_key(text)[:16]}"
