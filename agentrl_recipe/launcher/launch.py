"""``make sft`` / ``make rl`` / ``make rl-smoke``: turn a shipped config plus a few knobs into verl's own command line.

Every launch first runs :func:`agentrl_recipe.cli.configs.checks.check` on the config with the exact overrides it
will pass, so a typo'd or legacy key stops the run before a GPU is touched. ``--dry-run`` (``DRY_RUN=1``) prints the
composed config, the check report and the command, and exits — on any machine, no GPU needed.

- **SFT** runs verl's SFT trainer under torchrun: ``python -m torch.distributed.run --nnodes N --nproc-per-node G
  [--rdzv-* for N > 1] -m verl.trainer.sft_trainer --config-path=<abs verl_configs> --config-name=<name> ...``. For
  several nodes run the same command on each node with ``MASTER_ADDR`` (and ``MASTER_PORT``) set; anything in
  ``TORCHRUN_ARGS`` is passed to torchrun as is. torchrun's log folders go to ``<trainer.default_local_dir>/torchrun``,
  next to ``launch.log`` (``--log-dir``, unless ``TORCHRUN_ARGS`` names one): torch's default is a new
  ``/tmp/torchelastic_*`` per launch, never removed.
- **RL** runs ``python -m verl.trainer.main_ppo --config-path=<abs verl_configs> --config-name=<name> ...``. The
  plugin reaches every Ray worker through the ``verl.plugins`` entry point (the package must be installed on every
  node); the launcher also sets ``VERL_USE_EXTERNAL_MODULES=agentrl_recipe.plugin`` so a worker that cannot import
  the plugin fails loudly instead of training without it. With ``RAY_ADDRESS`` set (an existing cluster) the same
  variable, and the sandbox's url / backend / pool size / token FILE path when given (never a token: a literal
  ``agentrl.sandbox.token`` stops the launch), go into ``ray_kwargs.ray_init.runtime_env.env_vars``: remote
  workers do not inherit the driver's environment. Relative paths are made absolute, because Ray workers do not run
  in the driver's working directory (on a cluster they must lie on a filesystem every node sees).
- **rl-smoke** builds the tiny offline model and a 16-row RL parquet under ``outputs/rl_smoke/`` (CPU, seconds:
  :func:`prepare_smoke`), then runs two GRPO-TCR steps of ``agentrl_rl_smoke`` on one GPU (vLLM + FSDP, the real
  plugin, sandbox and reward).
- **rl-smoke-paper-layout** runs ``agentrl_rl_smoke_paper_layout`` (the paper's TP 4 / SP 4 / offload /
  remove-padding / 8-GPU layout, same tiny inputs) twice: step 1 with a checkpoint, then a launch that resumes from
  it, trains step 2 and validates — the first thing to run on a new cluster.
- Before anything starts (not with ``--dry-run``), the cheap part of :mod:`agentrl_recipe.cli.preflight` runs on the
  sandbox the workers will use (``SANDBOX_URL=`` / ``agentrl.sandbox.*``); a failure stops the launch with one line
  per problem (``--skip-preflight`` / ``SKIP_PREFLIGHT=1`` overrides it).
- An RL launch without ``nvcc`` sets ``VLLM_USE_FLASHINFER_SAMPLER=0`` for verl's vLLM rollout (FlashInfer's sampler
  JIT-compiles with nvcc at engine start: :func:`agentrl_recipe.offline.vllm_server.flashinfer_env`).
- ``MODEL=`` of an RL launch may name the SFT run's checkpoint folder: the HF export of the step verl's
  ``latest_checkpointed_iteration.txt`` names is used (:func:`agentrl_recipe.launcher.resume.sft_export`).
- Checkpoint directories (``trainer.default_local_dir``, ``trainer.resume_from_path``) are made absolute for SFT and
  RL alike, so a resumed run, every node and the RL stage reading the SFT export agree on them.
- An RL launch that resumes passes ``trainer.val_before_train=false`` (:mod:`agentrl_recipe.launcher.resume`);
  ``VAL_ON_RESUME=1`` (``--val-on-resume``) keeps verl's validation on resume.
- An async variant (``+recipe/async=<variant>``) writes to ``<trainer.default_local_dir>_<variant>`` unless the user
  names the dir: it must not resume the sync run's checkpoints and train nothing.
- A launch whose checkpoint dir already holds ``trainer.total_training_steps`` refuses in one line (exit 3); after a
  run the last line states the steps it added and its wall time, and a run that added none exits 3.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_parquet
from agentrl_recipe.cli import preflight
from agentrl_recipe.cli.configs.checks import check, resolved
from agentrl_recipe.cli.configs.files import compose, find_file, locate
from agentrl_recipe.cpu_task import inputs as cpu_inputs
from agentrl_recipe.cpu_task.tiny_model import TinyModelSpec, build_tiny_model
from agentrl_recipe.launcher import log_stream, resume
from agentrl_recipe.launcher.env import file_logger_env, platform_env, rl_env
from agentrl_recipe.launcher.resume import resume_overrides, sft_export
from agentrl_recipe.offline import vllm_server
from agentrl_recipe.training import recipe_config as agentrl_config
from agentrl_sandbox.config import ENV_SANDBOX_URL
from agentrl_sandbox.runtime_env import ENV_SANDBOX_PYTHON
from verl_cpu import names as cpu_names
from verl_cpu import quiet

SMOKE_CONFIG = "agentrl_rl_smoke"
# The paper's layout on the tiny model (8 GPUs): step 1 with a checkpoint, then a second launch resuming from it.
PAPER_LAYOUT_SMOKE_CONFIG = "agentrl_rl_smoke_paper_layout"
SMOKE_STAGES = {"rl-smoke": SMOKE_CONFIG, "rl-smoke-paper-layout": PAPER_LAYOUT_SMOKE_CONFIG}
SMOKE_DIR = Path("outputs/rl_smoke")
NOTHING_TRAINED = 3  # exit status of a launch asked to train that trained no step (resumed at its target)

# Keys holding file paths that Ray workers open; made absolute when they exist relative to the cwd or repo root.
RL_PATH_KEYS = (
    "data.train_files",
    "data.val_files",
    "actor_rollout_ref.model.path",
    "actor_rollout_ref.rollout.multi_turn.tool_config_path",
    "actor_rollout_ref.rollout.agent.agent_loop_config_path",
    "trainer.default_local_dir",
    "trainer.resume_from_path",
)
# Checkpoint paths: absolute even before they exist, so every node and a resumed run use the same directory.
CHECKPOINT_KEYS = ("trainer.default_local_dir", "trainer.resume_from_path")
SFT_PATH_KEYS = CHECKPOINT_KEYS  # torchrun's ranks share the launcher's cwd: only the checkpoint dirs matter
TORCHRUN_LOG_DIR = "torchrun"  # in trainer.default_local_dir: torchrun's per-rank log folders (its --log-dir)
TORCHRUN_LOG_FLAGS = ("--log-dir", "--log_dir", "--logs-specs", "--logs_specs")  # TORCHRUN_ARGS that place them


def _override_value(value: object) -> str:
    if isinstance(value, list | tuple):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def _absolute(value: object) -> object:
    """``value`` (a path or list of paths) with every path that exists made absolute; others unchanged."""
    if isinstance(value, list | tuple):
        return [_absolute(v) for v in value]
    if not isinstance(value, str) or not value or "://" in value or os.path.isabs(value):
        return value
    found = find_file(value)
    return str(found.resolve()) if found is not None else value


def build_overrides(args: argparse.Namespace, stage: str) -> list[str]:
    """The hydra overrides the make variables stand for, followed by the user's own (ARGS=...)."""
    model_key = preflight.MODEL_KEYS[stage]
    out = []
    if args.model:  # an SFT checkpoint folder stands for its newest step's HF export (the RL hand-off)
        out.append(f"{model_key}={sft_export(args.model) if stage == 'rl' else args.model}")
    if args.data:
        out.append(f"data.train_files={args.data}")
    if args.val_data:
        out.append(f"data.val_files={args.val_data}")
    if args.nnodes:
        out.append(f"trainer.nnodes={args.nnodes}")
    if args.gpus_per_node:
        out.append(f"trainer.n_gpus_per_node={args.gpus_per_node}")
    return out + list(args.overrides)


def _absolute_path_overrides(name: str, overrides: list[str], keys: Sequence[str] = RL_PATH_KEYS) -> list[str]:
    cfg, _ = compose(name, overrides)
    extra = []
    for key in keys:
        try:
            value = resolved(cfg, key)
        except Exception:
            continue
        absolute = os.path.abspath(value) if key in CHECKPOINT_KEYS and isinstance(value, str) else _absolute(value)
        if absolute != value:
            extra.append(f"{key}={_override_value(absolute)}")
    return extra


def sft_command(name: str, overrides: list[str], args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    directory, config_name, _ = locate(name)
    cfg, _ = compose(name, overrides)
    nnodes = int(cfg.trainer.nnodes)
    nproc = int(cfg.trainer.n_gpus_per_node)
    torchrun = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc}"]
    if nnodes > 1:
        master = args.master_addr or os.environ.get("MASTER_ADDR")
        if not master and "rdzv" not in args.torchrun_args:
            raise SystemExit("multi-node SFT needs MASTER_ADDR=<host of node 0> (or rendezvous flags in TORCHRUN_ARGS)")
        if master:
            port = args.master_port or os.environ.get("MASTER_PORT", "29500")
            torchrun += [
                "--rdzv-backend=c10d",
                f"--rdzv-endpoint={master}:{port}",
                f"--rdzv-id={cfg.trainer.experiment_name}",
            ]
    passed = shlex.split(args.torchrun_args)
    if not any(arg.split("=", 1)[0] in TORCHRUN_LOG_FLAGS for arg in passed):
        torchrun.append(f"--log-dir={resume.checkpoint_dir(cfg) / TORCHRUN_LOG_DIR}")
    torchrun += passed
    command = [
        *torchrun,
        "-m",
        "verl.trainer.sft_trainer",
        f"--config-path={directory}",
        f"--config-name={config_name}",
    ]
    extra = _absolute_path_overrides(name, overrides, SFT_PATH_KEYS)
    return command + overrides + extra, {**platform_env(cfg), **file_logger_env(cfg)}


def rl_command(name: str, overrides: list[str], args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    directory, config_name, _ = locate(name)
    cfg, _ = compose(name, overrides)
    env = rl_env(cfg, args.sandbox_url)
    # verl's vLLM rollout: no FlashInfer sampler JIT without nvcc (vllm_server.flashinfer_env); and the sandbox
    # interpreter every worker's local pool runs (runtime_env.ENV_SANDBOX_PYTHON), which remote workers do not inherit.
    env.update(vllm_server.flashinfer_env())
    if os.environ.get(ENV_SANDBOX_PYTHON):
        env[ENV_SANDBOX_PYTHON] = os.environ[ENV_SANDBOX_PYTHON]
    extra = _absolute_path_overrides(name, overrides)
    no_val, note = resume_overrides(cfg, overrides, val_on_resume=getattr(args, "val_on_resume", False))
    if note:
        print(note)
    extra += no_val
    if os.environ.get("RAY_ADDRESS"):
        # Workers of an existing cluster do not inherit this environment: ship the variables in the runtime_env.
        for key, value in env.items():
            # Quoted: Ray wants str values, and hydra would turn "2" into an int (and split an unquoted a,b list).
            quoted = value.replace("\\", "\\\\").replace("'", "\\'")
            extra.append(f"++ray_kwargs.ray_init.runtime_env.env_vars.{key}='{quoted}'")
    command = [
        sys.executable,
        "-m",
        "verl.trainer.main_ppo",
        f"--config-path={directory}",
        f"--config-name={config_name}",
    ]
    return command + overrides + extra, env


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("stage", choices=("sft", "rl", *SMOKE_STAGES))
    parser.add_argument("--config", help="shipped config name or YAML path (default: agentrl_sft / agentrl_rl)")
    parser.add_argument("--model", help="model.path (SFT: HF id or path) / actor_rollout_ref.model.path (RL)")
    parser.add_argument("--data", help="data.train_files (a parquet path, or [a,b])")
    parser.add_argument("--val-data", help="data.val_files")
    parser.add_argument("--nnodes", type=int, help="trainer.nnodes (and torchrun --nnodes)")
    parser.add_argument("--gpus-per-node", type=int, help="trainer.n_gpus_per_node (and torchrun --nproc-per-node)")
    parser.add_argument("--master-addr", help="SFT on several nodes: rendezvous host (default $MASTER_ADDR)")
    parser.add_argument("--master-port", help="SFT on several nodes: rendezvous port (default $MASTER_PORT or 29500)")
    parser.add_argument("--torchrun-args", default="", help="extra torchrun arguments, passed through")
    parser.add_argument(
        "--sandbox-url",
        default=os.environ.get(ENV_SANDBOX_URL),
        help=f"RL: the sandbox server every worker uses (sets {ENV_SANDBOX_URL})",
    )
    parser.add_argument(
        "--val-on-resume",
        action="store_true",
        help="RL: keep trainer.val_before_train when the run resumes (VAL_ON_RESUME=1; default: skip it on resume)",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="show the trainer's whole output: verl's config dump and every repeated warning (VERBOSE=1; "
        "otherwise they are in <checkpoint dir>/launch.log)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print config, check report and command; run nothing")
    parser.add_argument(
        "--skip-preflight",
        action="store_true",
        help="launch even when the cheap preflight checks fail (SKIP_PREFLIGHT=1)",
    )
    parser.add_argument("overrides", nargs="*", help="hydra overrides key=value, applied last")


def main(args: argparse.Namespace) -> int:
    stage = "rl" if args.stage in SMOKE_STAGES else args.stage
    name = _prepare_inputs(args, stage)
    try:
        overrides = build_overrides(args, stage)
    except ValueError as exc:  # resume.sft_export: MODEL= names a checkpoint folder without a usable export
        print(f"not launching: {exc}", file=sys.stderr)
        return 2
    overrides += _variant_dir(name, overrides)
    report = check(name, overrides, strict_paths=not args.dry_run or args.stage in SMOKE_STAGES)
    if args.dry_run and report.kind != "?":
        _print_composed(name, overrides)
    print(report.format())
    if report.kind not in ("?", stage):
        print(f"{name} is an {report.kind} config; use `make {report.kind}`", file=sys.stderr)
        return 2
    runs = []
    if report.kind == stage:  # it composed: show the commands even when the check failed
        try:
            runs = _build_runs(args, stage, name, overrides)
        except ValueError as exc:  # launch_env.sandbox_token_env: a literal token in the config
            print(f"not launching: {exc}", file=sys.stderr)
            return 2
        if runs and runs[0][1].get(cpu_names.PLATFORM_ENV) == cpu_names.PLATFORM:
            print(f"platform: {cpu_names.PLATFORM} in every process (trainer.device: cpu; verl on CPU: docs/cpu.md)")
        for command, env in runs:
            env_prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            print("command:", (env_prefix + " " if env_prefix else "") + shlex.join(command))
    if not report.ok:
        print(f"not launching: fix the errors above (agentrl-recipe configs check {name})", file=sys.stderr)
        return 2
    if args.dry_run:
        return 0
    if not args.skip_preflight and not _preflight_passes(name, overrides, args.sandbox_url):
        return 2
    cfg, _ = compose(name, overrides)
    refusal = resume.nothing_to_train(cfg) if len(runs) == 1 else None
    if refusal:
        print(refusal, file=sys.stderr)
        return NOTHING_TRAINED
    before = resume.saved_step(cfg)
    started = time.time()
    run_dir = resume.checkpoint_dir(cfg)
    try:
        for command, env in runs:
            code = log_stream.run(command, {**os.environ, **env}, run_dir, raw=args.verbose)
            if code:
                return code
    finally:
        if stage == "rl":
            _remove_vllm_leftovers(started)
    line, trained = resume.trained_line(cfg, before, time.time() - started)
    print(line, file=sys.stdout if trained else sys.stderr)
    return 0 if trained else NOTHING_TRAINED


def _variant_dir(name: str, overrides: list[str]) -> list[str]:
    """An async variant's own checkpoint dir (resume.variant_dir_overrides), announced in one line."""
    if resume.async_variant(overrides) is None:
        return []
    cfg, _ = compose(name, overrides)
    extra, note = resume.variant_dir_overrides(cfg, overrides)
    if note:
        print(note)
    return extra


def _remove_vllm_leftovers(since: float) -> None:
    """vLLM's shared-memory rings and rendezvous files, which Ray's SIGKILL of the rollout servers leaves behind."""
    from verl_cpu import vllm_leftovers  # verl_cpu imports verl (seconds): only once a run has ended

    removed = vllm_leftovers.remove_orphans(since)
    if removed:
        print(f"removed {len(removed)} leftover vLLM file(s): {', '.join(sorted(p.name for p in removed))}")


def _prepare_inputs(args: argparse.Namespace, stage: str) -> str:
    """The config to launch, after building the offline inputs of the smoke stages and the CPU configs."""
    if args.stage in SMOKE_STAGES:
        name = args.config or SMOKE_STAGES[args.stage]
        made = prepare_smoke()
        print(f"smoke inputs: {made['model']} {made['train']}")
    else:
        name = args.config or f"agentrl_{stage}"
    if name in cpu_inputs.CPU_CONFIGS and not args.data:  # the CPU configs' default inputs, built offline
        inputs = cpu_inputs.prepare()
        print(f"CPU inputs: {inputs.model} {inputs.sft} {inputs.rl_train} {inputs.rl_val}")
    return name


def prepare_smoke(out_dir: Path = SMOKE_DIR) -> dict[str, Path]:
    """The tiny model and a 16-row math/code RL parquet (train = val) for the GPU smoke run; CPU only, seconds."""
    model_dir = out_dir / "tiny_model"
    if not (model_dir / "config.json").is_file():
        # head_dim 64 (256 / 4): every vLLM attention backend supports it; the default tiny model's 32 is not universal.
        build_tiny_model(model_dir, TinyModelSpec(hidden_size=256, intermediate_size=512))
    train = out_dir / "train.parquet"
    atomic_write_parquet(train, _smoke_rows())
    return {"model": model_dir, "train": train}


def _smoke_rows() -> list[dict]:
    """12 math rows (a product to compute with the code tool) and 4 stdin/stdout code rows, indexed in order."""
    # rows imports verl (~7 s): only the smoke stages pay it, not every `make sft|rl` launch.
    from data_prep.rows import rl_row

    prompt = "Compute {a} * {b} with the code tool. Put the answer in \\boxed{{}}."
    rows = [
        rl_row(names.DS_DAPO, prompt.format(a=a, b=b), "math", str(a * b), {"source_id": f"smoke-math-{i}"})
        for i, (a, b) in enumerate((17 + 3 * i, 5 + i) for i in range(12))
    ]
    for i in range(4):
        tests = {"inputs": [f"{i}\n"], "outputs": [f"{i + 1}\n"], "fn_name": None}
        code_prompt = "Read an integer n and print n + 1. Answer in ```python```."
        rows.append(
            rl_row(names.DS_SKYWORK_CODE, code_prompt, "code", json.dumps(tests), {"source_id": f"smoke-code-{i}"})
        )
    for index, row in enumerate(rows):
        row["extra_info"]["index"] = index
    return rows


def _print_composed(name: str, overrides: list[str]) -> None:
    cfg, _ = compose(name, overrides)
    try:
        print(OmegaConf.to_yaml(agentrl_config.redacted(cfg, resolve=True)), end="")
    except Exception:  # a mandatory ??? value or a bad interpolation: the report below names it
        print(OmegaConf.to_yaml(agentrl_config.redacted(cfg, resolve=False)), end="")


def _build_runs(
    args: argparse.Namespace, stage: str, name: str, overrides: list[str]
) -> list[tuple[list[str], dict[str, str]]]:
    """(command, environment) of each trainer run the launch makes, in order."""
    build = sft_command if stage == "sft" else rl_command
    runs = []
    if args.stage == "rl-smoke-paper-layout":  # step 1 and its checkpoint, then resume (resume_mode: auto)
        runs.append(build(name, [*overrides, "trainer.total_training_steps=1"], args))
    runs.append(build(name, overrides, args))
    return runs


def _preflight_passes(name: str, overrides: list[str], sandbox_url: str | None = None) -> bool:
    """The cheap preflight checks (agentrl_recipe/cli/preflight.py): a broken sandbox (the one the workers will use:
    ``SANDBOX_URL=`` or ``agentrl.sandbox.*``), too old a driver, too few Ray CPUs or too little disk stops the launch
    here, not an hour into the run."""
    results = preflight.run(name, overrides, cheap=True, sandbox_url=sandbox_url)
    for result in results:
        print(result.line())
    failed = [r.check for r in results if not r.ok]
    if failed:
        print(f"not launching: preflight failed ({', '.join(failed)}); {preflight.SKIP_HINT}", file=sys.stderr)
    return not failed


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m agentrl_recipe.launcher.launch", description=__doc__.splitlines()[0]
    )
    add_arguments(parser)
    args = parser.parse_intermixed_args(argv)
    quiet.prefer_cpu_platform()  # this process only reads configs: no "falling back to nvidia" on a CPU host
    return main(args)  # options may follow the hydra overrides


if __name__ == "__main__":
    sys.exit(cli())
