"""``agentrl-recipe preflight CONFIG [k=v ...]`` / ``make preflight``: will this config run on this node?

A GPU node's first hour should not go to a run that hangs or dies at its first CUDA call. Each check prints one line
(``ok`` / ``FAIL``), and any failure exits non-zero. In order:

- **config**: ``agentrl-recipe configs check`` on the composed config (with the same overrides);
- **nvcc** (RL on GPUs, a warning): without it vLLM's FlashInfer sampler cannot JIT-compile, so the launcher sets
  ``VLLM_USE_FLASHINFER_SAMPLER=0``;
- **model**: the model path is a local directory or a hub id (``owner/name``); a missing local path fails here;
- **driver**: the NVIDIA driver is new enough for the CUDA that torch (and vLLM, which pins this torch) was built
  for — vLLM 0.30 / torch 2.13 from PyPI are CUDA 13 builds and need an R580+ driver;
- **gpus**: ``trainer.n_gpus_per_node`` GPUs are visible; the bf16 weights per tensor-parallel shard fit the
  rollout's share of one GPU's memory;
- **flash_attn**: imports (in a child process, its CUDA extension included: a build against another torch fails
  only there) when the config uses verl's default ``flash_attention_2``;
- **vllm**: vLLM installed and verl's vLLM async server imports (skipped by ``--cheap``: tens of seconds);
- **checkpoint_engine**: an async trainer mode's ``actor_rollout_ref.rollout.checkpoint_engine.backend`` is
  registered in verl's ``CheckpointEngineRegistry`` on this node (``nccl`` only when cupy imports:
  ``pip install .[gpu]``) — verl would fail at the first weight sync;
- **sandbox**: the sandbox the run's workers will use imports the sandbox runtime's packages (numpy, scipy, sympy,
  pandas, …) inside it, with the config's own time and memory limits: ``agentrl.sandbox.*`` with ``SANDBOX_URL=``
  (``--sandbox-url``, default ``$AGENTRL_SANDBOX_URL``) winning over its url, as the launcher passes them on — a url
  means the remote server (``sandbox_fusion``, with the configured token file), not this node's local pool;
- **ray_cpus**: Ray's logical CPUs cover what the run reserves: 3 per GPU (verl's resource-pool bundles) plus
  ``num_data_storage_units`` + 1 for TransferQueue — with fewer, ``tq.init`` waits forever without a word;
- **disk**: free space under ``trainer.default_local_dir`` holds the checkpoints the config will keep. Per
  parameter (counted from the model's safetensors headers, whatever dtype its config.json names): the weights and
  two Adam moments in the actor's ``model_dtype`` (verl's default fp32: 12 bytes), plus the HF export, which verl
  writes from the same full state dict (fp32 weights under a ``bfloat16`` label: 4 more bytes).

``make preflight CONFIG=… [MODEL=…] [SANDBOX_URL=…]``: ``MODEL`` sets the config's model path (``model.path`` for
SFT, ``actor_rollout_ref.model.path`` for RL), as ``make sft|rl MODEL=…`` does.

The launcher runs the ``--cheap`` subset before ``make sft`` / ``make rl`` and refuses to start on a failure;
``SKIP_PREFLIGHT=1`` (``--skip-preflight``) launches anyway.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import re
import sys
from typing import Any

from omegaconf import OmegaConf

from agentrl_recipe.cli.configs.async_checks import ASYNC_MODES, ENGINE_KEY, checkpoint_engine_problem
from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose, kind_of_file, locate
from agentrl_recipe.cli.preflight_facts import FLASH_ATTN_MISSING, NodeFacts, gather, model_parameters
from agentrl_recipe.launcher.env import worker_sandbox_config
from agentrl_recipe.launcher.resume import sft_export
from agentrl_recipe.offline import vllm_server
from agentrl_recipe.training.recipe_config import to_plain
from agentrl_sandbox import SandboxError, runtime_env
from agentrl_sandbox.config import ENV_SANDBOX_URL, SandboxConfig

# Minimum Linux driver per CUDA major version (NVIDIA's CUDA compatibility table, minor-version compatibility).
MIN_DRIVER = {11: "450.80.02", 12: "525.60.13", 13: "580.65.06"}
# Bytes per element of verl's engine model_dtype (FSDP weights, and Adam's m and v, which follow the parameters).
DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
CHECKPOINT_COPIES = 3  # weights + Adam m + Adam v (FSDP model + optimizer shards)
# The config key holding the model path, per config kind (what MODEL= sets for make sft / rl / preflight).
MODEL_KEYS = {"rl": "actor_rollout_ref.model.path", "sft": "model.path"}
CPUS_PER_GPU = 3  # verl ResourcePoolManager.max_colocate_count: each GPU bundle reserves 3 CPUs
SKIP_HINT = "SKIP_PREFLIGHT=1 (--skip-preflight) launches anyway"


@dataclasses.dataclass
class Result:
    check: str
    ok: bool
    message: str
    warn: bool = False  # ok, but worth reading (the run starts)

    def line(self) -> str:
        label = "warn" if self.ok and self.warn else ("ok  " if self.ok else "FAIL")
        return f"{label} {self.check}: {self.message}"


# ---------------------------------------------------------------------------------------- what the checks read
@dataclasses.dataclass
class Layout:
    """The config keys the checks read, for one config kind (rl or sft)."""

    kind: str
    device: str
    nnodes: int
    gpus_per_node: int
    tensor_parallel: int
    gpu_memory_utilization: float
    attn_implementation: str
    model_path: str
    model_dtype: str  # verl's engine model_dtype: the dtype of the trained (and saved) weights
    checkpoint_dir: str
    save_freq: int
    total_steps: int | None
    keep: int | None
    hf_export: bool
    storage_units: int
    ray_init_num_cpus: int | None

    @property
    def gpu(self) -> bool:
        return self.device != "cpu"


def _get(cfg: Any, key: str, default: Any = None) -> Any:
    return to_plain(OmegaConf.select(cfg, key, default=default))


def layout(cfg: Any, kind: str) -> Layout:
    """The keys of a composed ``kind`` (rl / sft) config that the preflight checks read."""
    rl = kind == "rl"
    model = "actor_rollout_ref.model" if rl else "model"
    contents = _get(cfg, "actor_rollout_ref.actor.checkpoint.save_contents" if rl else "checkpoint.save_contents")
    uses_tq = bool(_get(cfg, "trainer.use_v1", False) or _get(cfg, "transfer_queue.enable", False))
    return Layout(
        kind=kind,
        device=str(_get(cfg, "trainer.device", "cuda")),
        nnodes=int(_get(cfg, "trainer.nnodes", 1)),
        gpus_per_node=int(_get(cfg, "trainer.n_gpus_per_node", 1)),
        tensor_parallel=int(_get(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1) or 1) if rl else 1,
        gpu_memory_utilization=float(_get(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5) or 0.5),
        attn_implementation=str(_get(cfg, f"{model}.override_config.attn_implementation", None) or "flash_attention_2"),
        model_path=str(_get(cfg, f"{model}.path", "")),
        model_dtype=str(
            _get(cfg, "actor_rollout_ref.actor.fsdp_config.model_dtype" if rl else "engine.model_dtype", "fp32")
        ),
        checkpoint_dir=str(_get(cfg, "trainer.default_local_dir", "checkpoints")),
        save_freq=int(_get(cfg, "trainer.save_freq", -1) or -1),
        total_steps=_get(cfg, "trainer.total_training_steps", None),
        keep=_get(cfg, "trainer.max_actor_ckpt_to_keep" if rl else "trainer.max_ckpt_to_keep", None),
        hf_export="hf_model" in (contents or []),
        storage_units=int(_get(cfg, "transfer_queue.backend.SimpleStorage.num_data_storage_units", 8))
        if uses_tq
        else 0,
        ray_init_num_cpus=_get(cfg, "ray_kwargs.ray_init.num_cpus", None),
    )


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


# ---------------------------------------------------------------------------------------------------- the checks
def check_driver(facts: NodeFacts) -> Result:
    if facts.torch_cuda is None:
        return Result("driver", False, "torch is a CPU build (torch.version.cuda is None): run `make install-gpu`")
    if facts.driver_version is None:
        return Result("driver", False, "no NVIDIA driver found (nvidia-smi is missing or fails)")
    major = int(facts.torch_cuda.split(".")[0])
    needed = MIN_DRIVER.get(major)
    if needed is None or _version(facts.driver_version) >= _version(needed):
        return Result("driver", True, f"driver {facts.driver_version} runs CUDA {facts.torch_cuda} builds")
    return Result(
        "driver",
        False,
        f"driver {facts.driver_version} is too old for torch/vLLM built for CUDA {facts.torch_cuda} "
        f"(needs >= {needed}): upgrade the driver or install a torch/vLLM built for an older CUDA",
    )


def check_gpus(lay: Layout, facts: NodeFacts, params: int | None) -> Result:
    visible = len(facts.gpu_memory_gib)
    if visible < lay.gpus_per_node:
        return Result("gpus", False, f"trainer.n_gpus_per_node={lay.gpus_per_node} but {visible} GPUs are visible")
    if lay.gpus_per_node % lay.tensor_parallel:
        return Result("gpus", False, f"TP {lay.tensor_parallel} does not divide {lay.gpus_per_node} GPUs per node")
    smallest = min(facts.gpu_memory_gib)
    if params is not None and lay.kind == "rl":
        shard_gib = params * 2 / lay.tensor_parallel / 2**30
        budget = smallest * lay.gpu_memory_utilization
        if shard_gib > 0.8 * budget:
            return Result(
                "gpus",
                False,
                f"bf16 weights per TP shard {shard_gib:.1f} GiB do not fit the rollout's {budget:.1f} GiB "
                f"(gpu_memory_utilization {lay.gpu_memory_utilization} × {smallest:.0f} GiB): raise TP or the share",
            )
    return Result("gpus", True, f"{visible} GPUs, {smallest:.0f} GiB each, TP {lay.tensor_parallel}")


def check_flash_attn(lay: Layout, facts: NodeFacts) -> Result:
    if lay.attn_implementation != "flash_attention_2":
        return Result("flash_attn", True, f"not needed (attn_implementation {lay.attn_implementation})")
    if facts.flash_attn_error is None:
        return Result("flash_attn", True, "imports")
    needed = (
        "the config uses attn_implementation flash_attention_2 (verl's default; Ulysses SP and remove-padding need it)"
    )
    if facts.flash_attn_error == FLASH_ATTN_MISSING:
        return Result(
            "flash_attn",
            False,
            f"{needed} but flash_attn is not installed: `make install-gpu` builds it (with the nvcc of torch's CUDA "
            "major: `module load cuda`), or installs a prebuilt one (FLASH_ATTN_WHEEL=<wheel>)",
        )
    return Result(
        "flash_attn",
        False,
        f"{needed} but flash_attn does not import ({facts.flash_attn_error}): it was built against another "
        "torch/CUDA; rebuild it (`pip uninstall -y flash-attn`, then `make install-gpu`)",
    )


def check_vllm(facts: NodeFacts, cheap: bool) -> Result:
    if facts.vllm_version is None:
        return Result("vllm", False, "vLLM is not installed: run `make install-gpu`")
    if cheap:
        return Result("vllm", True, f"vLLM {facts.vllm_version} (async server import not checked: --cheap)")
    if facts.vllm_async_error:
        return Result("vllm", False, f"verl's vLLM async server does not import: {facts.vllm_async_error}")
    return Result("vllm", True, f"vLLM {facts.vllm_version}, verl's async server imports")


def check_sandbox(facts: NodeFacts) -> Result:
    report = facts.sandbox or {}
    where = f"{report.get('backend')} at {report['url']}" if report.get("url") else f"{report.get('backend')}"
    if report.get("ok"):
        imports = ", ".join(report.get("imports", []))
        return Result("sandbox", True, f"{where} imports {imports} ({report.get('latency_s', 0):.1f} s)")
    return Result("sandbox", False, f"{where} backend unusable: {report.get('error')}")


def check_runtime(sandbox: SandboxConfig, python_version: str | None) -> Result:
    """The local sandbox's Python runtime against SandboxFusion's (Python 3.10 with its pins): a warning, never a
    failure — the run works, but the tool output the policy sees may differ from the paper's (numpy 2's reprs)."""
    if python_version is None:
        why = f"{runtime_env.interpreter()} is not usable (the sandbox line says why)"
        return Result("runtime", True, f"{sandbox.runtime}: not compared with SandboxFusion's: {why}", warn=True)
    where = f"{sandbox.runtime} runtime on Python {python_version}"
    gaps = runtime_env.sandboxfusion_gaps(sandbox.runtime, python_version)
    if not gaps:
        return Result("runtime", True, f"{where}: SandboxFusion's versions")
    return Result("runtime", True, f"{where} cannot match SandboxFusion's versions: {'; '.join(gaps)}", warn=True)


def _runtime_result(sandbox: SandboxConfig) -> Result:
    try:
        version: str | None = runtime_env.interpreter_version()
    except SandboxError:  # the sandbox check fails with the same reason
        version = None
    return check_runtime(sandbox, version)


def check_ray_cpus(lay: Layout, facts: NodeFacts) -> Result:
    gpus = lay.nnodes * lay.gpus_per_node
    needed = CPUS_PER_GPU * gpus + (lay.storage_units + 1 if lay.storage_units else 0)
    have = facts.ray_cpus or 0
    detail = f"{CPUS_PER_GPU} × {gpus} GPUs + TransferQueue {lay.storage_units} storage units + 1"
    if have < needed:
        return Result(
            "ray_cpus",
            False,
            f"Ray offers {have:g} logical CPUs but the run reserves {needed} ({detail}); it would hang in tq.init: "
            "raise ray_kwargs.ray_init.num_cpus (logical CPUs may exceed cores) or lower "
            "transfer_queue.backend.SimpleStorage.num_data_storage_units",
        )
    return Result("ray_cpus", True, f"{have:g} logical CPUs >= {needed} reserved ({detail})")


def checkpoints_kept(lay: Layout) -> int | None:
    """How many checkpoints the run will hold at once (None = unbounded and unknown)."""
    if lay.save_freq <= 0:
        return 0
    saves = math.ceil(lay.total_steps / lay.save_freq) if lay.total_steps else None
    if lay.keep:
        return min(lay.keep, saves) if saves else lay.keep
    return saves


def bytes_per_parameter(lay: Layout) -> int:
    """Checkpoint bytes per model parameter: weights + Adam m and v in ``model_dtype``, and the HF export, which verl
    saves from the same full state dict (its ``bfloat16`` config label notwithstanding) when ``hf_model`` is saved."""
    width = DTYPE_BYTES.get(lay.model_dtype.lower(), 4)
    return width * (CHECKPOINT_COPIES + (1 if lay.hf_export else 0))


def check_disk(lay: Layout, facts: NodeFacts, params: int | None) -> Result:
    kept = checkpoints_kept(lay)
    if kept == 0:
        return Result("disk", True, "no checkpoints (save_freq <= 0)")
    if params is None:
        return Result(
            "disk",
            True,
            f"checkpoint size unknown ({lay.model_path} is not a local directory with readable safetensors weights); "
            "not checked",
        )
    per_gib = params * bytes_per_parameter(lay) / 2**30
    count = kept or 1
    need_gib = per_gib * count
    free_gib = (facts.free_disk_bytes or 0) / 2**30
    unbounded = " (no retention limit: set the keep key)" if kept is None else ""
    if free_gib < need_gib:
        return Result(
            "disk",
            False,
            f"{free_gib:.0f} GiB free under {lay.checkpoint_dir} < {need_gib:.0f} GiB for {count} checkpoint(s) of "
            f"{per_gib:.0f} GiB{unbounded}: free space, move trainer.default_local_dir, or keep fewer",
        )
    return Result(
        "disk", True, f"{free_gib:.0f} GiB free >= {need_gib:.0f} GiB ({count} × {per_gib:.0f} GiB){unbounded}"
    )


def check_nvcc(nvcc: str | None) -> Result:
    """Whether vLLM's FlashInfer sampler can JIT-compile here; without nvcc the launcher turns it off (a warning)."""
    if nvcc:
        return Result("nvcc", True, f"{nvcc}: vLLM's FlashInfer sampler can JIT-compile its kernels")
    return Result(
        "nvcc",
        True,
        f"no nvcc (CUDA_HOME, PATH, /usr/local/cuda): the rollout runs with {vllm_server.FLASHINFER_SAMPLER_ENV}=0 "
        "(vLLM's PyTorch sampler); `module load cuda` keeps FlashInfer's",
        warn=True,
    )


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name: what transformers fetches from the hub


def check_model(lay: Layout) -> Result:
    """The model path is a local directory, or looks like a hub id (fetched by the run); anything else stops here
    rather than after Ray, vLLM and the sandbox have started."""
    path = lay.model_path
    if os.path.isdir(path):
        return Result("model", True, f"{path} (local directory)")
    if HUB_ID.match(path):
        return Result("model", True, f"{path}: a hub id, or a local path that does not exist (fetched by the run)")
    hand_off = " (the SFT run's checkpoint folder: its newest step's export)" if lay.kind == "rl" else ""
    return Result("model", False, f"{path} does not exist: MODEL=<a local model directory{hand_off}, or a hub id>")


def judge(lay: Layout, facts: NodeFacts, params: int | None, cheap: bool, sandbox: bool) -> list[Result]:
    """Every check that applies to this layout, against ``facts``."""
    results = []
    if lay.gpu:
        results += [check_driver(facts), check_gpus(lay, facts, params), check_flash_attn(lay, facts)]
        if lay.kind == "rl":
            results += [check_vllm(facts, cheap), check_ray_cpus(lay, facts)]
    if sandbox:
        results.append(check_sandbox(facts))
    results.append(check_disk(lay, facts, params))
    return results


def check_checkpoint_engine(cfg: Any) -> Result | None:
    """An async mode's weight transport is registered on this node (None: sync mode, nothing to send)."""
    mode = str(_get(cfg, "trainer.v1.trainer_mode", "sync"))
    if mode not in ASYNC_MODES:
        return None
    backend = str(_get(cfg, ENGINE_KEY, "naive"))
    problem = checkpoint_engine_problem(backend)
    if problem:
        return Result("checkpoint_engine", False, f"trainer_mode={mode}: {problem}")
    return Result("checkpoint_engine", True, f"{backend} registered (trainer_mode={mode})")


def model_overrides(name: str, model: str | None) -> list[str]:
    """``MODEL=`` as the override of the config kind's model path key ([] without a model or a locatable config)."""
    if not model:
        return []
    try:
        kind = kind_of_file(locate(name)[2])
    except Exception:  # not a config: the check reports it
        return []
    if kind == "rl":  # as make rl: an SFT checkpoint folder stands for its newest step's HF export
        model = sft_export(model)
    return [f"{MODEL_KEYS[kind]}={model}"] if kind in MODEL_KEYS else []


def run(name: str, overrides: list[str], *, cheap: bool = False, sandbox_url: str | None = None) -> list[Result]:
    """Compose ``name`` with ``overrides``, gather this node's facts, and judge them. ``sandbox_url`` is the launch's
    ``SANDBOX_URL=``: the sandbox checked is the one the workers will use (:func:`launch_env.worker_sandbox_config`)."""
    report = check(name, overrides)
    results = [Result("config", report.ok, "configs check passed" if report.ok else report.format())]
    if report.kind not in ("rl", "sft"):
        return results
    cfg, _ = compose(name, overrides)
    lay = layout(cfg, report.kind)
    results.append(check_model(lay))
    engine = check_checkpoint_engine(cfg) if report.kind == "rl" else None
    if engine is not None:
        results.append(engine)
    sandbox_cfg = None
    if lay.kind == "rl":
        try:
            sandbox_cfg = worker_sandbox_config(cfg, sandbox_url)
        except ValueError as exc:  # a literal agentrl.sandbox.token: the launcher refuses it too
            results.append(Result("sandbox", False, str(exc)))
    facts = gather(
        gpu=lay.gpu,
        rollout=lay.kind == "rl" and lay.gpu,
        checkpoint_dir=lay.checkpoint_dir,
        ray_init_num_cpus=lay.ray_init_num_cpus,
        sandbox_config=sandbox_cfg,
        cheap=cheap,
    )
    results += judge(lay, facts, model_parameters(lay.model_path), cheap, sandbox_cfg is not None)
    if lay.kind == "rl" and lay.gpu:
        results.append(check_nvcc(vllm_server.find_nvcc()))
    if sandbox_cfg is not None and sandbox_cfg.backend == "local":
        results.append(_runtime_result(sandbox_cfg))
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="shipped config name or YAML path")
    parser.add_argument("overrides", nargs="*", help="hydra overrides key=value (as given to make rl / make sft)")
    parser.add_argument("--model", help="MODEL=: the model path (model.path for SFT, actor_rollout_ref.model.path RL)")
    parser.add_argument(
        "--sandbox-url",
        default=os.environ.get(ENV_SANDBOX_URL),
        help=f"SANDBOX_URL=: the sandbox server the run's workers use (default ${ENV_SANDBOX_URL}); health-checked",
    )
    parser.add_argument("--cheap", action="store_true", help="skip the slow checks (the vLLM import)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def main(args: argparse.Namespace) -> int:
    try:
        overrides = model_overrides(args.config, args.model) + list(args.overrides)
    except ValueError as exc:  # resume.sft_export: a checkpoint folder without a usable export
        print(f"FAIL model: {exc}\npreflight FAILED (model)", file=sys.stderr)
        return 1
    results = run(args.config, overrides, cheap=args.cheap, sandbox_url=args.sandbox_url)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in results], indent=2))
    else:
        for result in results:
            print(result.line())
    failed = [r.check for r in results if not r.ok]
    if failed:
        print(f"preflight FAILED ({', '.join(failed)})", file=sys.stderr)
        return 1
    print("preflight passed")
    return 0
