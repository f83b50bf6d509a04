"""Inputs of the CPU training configs (``agentrl_sft_cpu``, ``agentrl_rl_cpu``), built offline in seconds.

Under ``outputs/cpu/`` (the paths those configs name):
- ``tiny_model/``: the tiny Qwen3 model (Qwen3-2507 template; ``family`` picks Qwen2.5 instead) whose tokenizer also
  learned the demo task's conversations;
- ``sft.parquet``: real trajectories of the demo's scripted teacher (:mod:`agentrl_recipe.cpu_task.task`) — the
  teacher's calls ran in the sandbox through the ``agentrl_tool_agent`` loop and every kept trajectory was scored
  correct by ``agentrl_reward`` — in verl's multi-turn SFT schema (``messages`` with ``tool_calls``, ``tools``);
- ``rl_train.parquet`` / ``rl_val.parquet``: RL rows of the same task (val held out by (template, a, b)).

The launcher builds them before ``make sft|rl CONFIG=agentrl_*_cpu`` (a rerun reuses them); the demo and the trainer
tests call :func:`prepare` directly.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

from agentrl_recipe.cpu_task import task as demo_task
from agentrl_recipe.cpu_task import teacher as demo_teacher

DEFAULT_DIR = Path("outputs/cpu")
CPU_CONFIGS = ("agentrl_sft_cpu", "agentrl_rl_cpu")


@dataclasses.dataclass(frozen=True)
class CPUInputs:
    model: Path
    sft: Path
    rl_train: Path
    rl_val: Path


@dataclasses.dataclass(frozen=True)
class CPUInputSizes:
    seed: int = 0
    sft_problems: int = 96  # teacher trajectories attempted (the verified ones become the SFT set)
    rl_problems: int = 64
    val_problems: int = 16
    # 128 (4 heads of 32, vLLM's CPU attention minimum): after the tests' 60 SFT steps it calls the tool in 0.81 of
    # held-out trajectories; 64 (2 heads of 32, or 4 of 16) did so in 0.12-0.19, too few for the trainer tests.
    hidden_size: int = 128
    num_layers: int = 2
    initializer_range: float = 0.02  # the tiny model's init std (the demo: 0.06, see DemoSettings)
    # Fraction of SFT problems the teacher solves with the right operator; below 1 its wrong (but really executed)
    # trajectories are kept too, leaving the SFT model room that RL can close (the demo's setting; 1 = verified only).
    teacher_accuracy: float = 1.0
    # The tiny model's family: "qwen3" (Qwen3ForCausalLM + the Qwen3-2507 Instruct template, the paper's 4B run) or
    # "qwen2.5" (Qwen2ForCausalLM + the Qwen2.5 hermes template, the 7B run); cpu_task/tiny_model.py.
    family: str = "qwen3"


def _paths(out_dir: Path) -> CPUInputs:
    return CPUInputs(
        out_dir / "tiny_model", out_dir / "sft.parquet", out_dir / "rl_train.parquet", out_dir / "rl_val.parquet"
    )


def prepare(out_dir: Path = DEFAULT_DIR, sizes: CPUInputSizes = CPUInputSizes()) -> CPUInputs:
    """Build (or reuse, when ``inputs.json`` records the same sizes) every CPU input under ``out_dir``."""
    out_dir = Path(out_dir)
    paths = _paths(out_dir)
    stamp = out_dir / "inputs.json"
    wanted = json.dumps(dataclasses.asdict(sizes), sort_keys=True)
    if stamp.is_file() and stamp.read_text() == wanted and all(p.exists() for p in dataclasses.astuple(paths)):
        return paths
    out_dir.mkdir(parents=True, exist_ok=True)
    train, held_out = demo_task.make_splits(
        sizes.sft_problems + sizes.rl_problems,
        sizes.val_problems,
        seed=sizes.seed,
        teacher_accuracy=sizes.teacher_accuracy,
    )
    sft_problems, rl_problems = train[: sizes.sft_problems], train[sizes.sft_problems :]
    demo_teacher.build_task_model(
        paths.model,
        sft_problems,
        seed=sizes.seed,
        hidden_size=sizes.hidden_size,
        num_layers=sizes.num_layers,
        initializer_range=sizes.initializer_range,
        family=sizes.family,
    )
    keep_wrong = sizes.teacher_accuracy < 1.0
    teacher = asyncio.run(demo_teacher.teacher_sft_set(paths.model, sft_problems, paths.sft, keep_wrong=keep_wrong))
    (out_dir / "teacher.json").write_text(json.dumps(teacher, indent=2))  # counts: attempted, kept, kept wrong, …
    demo_task.write_parquet(demo_task.rl_rows(rl_problems, split="train"), paths.rl_train)
    demo_task.write_parquet(demo_task.rl_rows(held_out, split="heldout"), paths.rl_val)
    stamp.write_text(wanted)
    return paths
