"""The CPU task's inputs and one SFT run of the CPU config: its model is what the RL trainer tests start from.

Both are built once and kept under a content key (tests/shared_session.py; ``~/.cache/agentrl_recipe/tests``): the
inputs under the code that makes them (the task, its teacher's agent loop and reward, the sandbox), the SFT run under
its inputs' bytes, the trainer side's code (the recipe but its eval harness, viewer and GPU installer; verl_cpu; the
configs) and its arguments; both under this file and the installed verl, torch and transformers. A later session reuses
them while the key holds (locally the trainer tests skip the SFT run), and a change to anything they depend on builds
them again. ``AGENTRL_TEST_CACHE=off`` builds them once per session in its temp folder instead. ``make test`` runs two
pytest-xdist workers, so two trainer files may ask for them at once: the build runs under a lock, and whichever worker
comes second reuses it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from shared_session import REPO, built_once, content_key
from trainer_helpers import launch, tail

from agentrl_recipe.cpu_task import inputs as cpu_inputs

SFT_STEPS = 60  # enough for the tiny model to learn the tool-call format and to end its turns
SIZES = cpu_inputs.CPUInputSizes(sft_problems=64, rl_problems=32, val_problems=8)
# What the inputs and the SFT run depend on: every package the launcher, verl's SFT trainer and the task's teacher
# (its agent loop, reward and sandbox) load; not the eval harness, the viewer or the GPU installer.
NOT_TRAINING = ("eval", "view", "gpu_install", "__pycache__")
DISTRIBUTIONS = ("verl", "torch", "transformers", "tokenizers", "safetensors", "pyarrow", "agentrl-sandbox")


def _recipe() -> list[Path]:
    return [p for p in sorted((REPO / "agentrl_recipe").iterdir()) if p.name not in NOT_TRAINING]


def _inputs_key(sizes_: cpu_inputs.CPUInputSizes) -> str:
    """The inputs: the task, its teacher's agent loop and reward, and the sandbox that ran the teacher's calls."""
    sizes = json.dumps(dataclasses.asdict(sizes_), sort_keys=True)
    return content_key([*_recipe(), REPO / "agentrl_sandbox", Path(__file__)], DISTRIBUTIONS, [sizes])


def _sft_key(inputs: cpu_inputs.CPUInputs) -> str:
    """The SFT run: the bytes of its model and data (not where they are), the trainer side's code and the configs."""
    others = [REPO / name for name in ("verl_cpu", "verl_client", "verl_configs")]
    paths = [inputs.model, inputs.sft, *_recipe(), *(p for p in others if p.exists()), Path(__file__)]
    placeholders = cpu_inputs.CPUInputs(Path("<model>"), Path("<sft>"), Path("<rl>"), Path("<val>"))
    return content_key(paths, DISTRIBUTIONS, _sft_args(placeholders, Path("<run>")))


def _sft_args(inputs: cpu_inputs.CPUInputs, run: Path) -> list[str]:
    return [
        "--model", str(inputs.model), "--data", str(inputs.sft),
        f"trainer.total_training_steps={SFT_STEPS}", f"trainer.save_freq={SFT_STEPS}",
        f"trainer.default_local_dir={run / 'ckpt'}",
    ]  # fmt: skip


def family_inputs(tmp_path_factory: pytest.TempPathFactory, sizes: cpu_inputs.CPUInputSizes) -> cpu_inputs.CPUInputs:
    """The CPU inputs at ``sizes`` (its ``family`` picks the tiny model's), built once (cached, see the docstring)."""
    name = "cpu_inputs" if sizes.family == SIZES.family else f"cpu_inputs_{sizes.family}"
    out = built_once(tmp_path_factory, name, _inputs_key(sizes), lambda where: cpu_inputs.prepare(where, sizes))
    return cpu_inputs.prepare(out, sizes)  # the stamp matches: returns the paths without building


def family_sft_run(tmp_path_factory: pytest.TempPathFactory, inputs: cpu_inputs.CPUInputs, name: str) -> Path:
    """``SFT_STEPS`` of agentrl_sft_cpu on ``inputs`` (cached, see the docstring)."""
    return built_once(tmp_path_factory, name, _sft_key(inputs), lambda run: _train(inputs, run))


@pytest.fixture(scope="session")
def cpu_inputs_dir(tmp_path_factory: pytest.TempPathFactory, agentrl_cache: Path) -> cpu_inputs.CPUInputs:
    return family_inputs(tmp_path_factory, SIZES)


def _train(inputs: cpu_inputs.CPUInputs, run: Path) -> None:
    proc = launch("sft", "agentrl_sft_cpu", _sft_args(inputs, run), run, timeout=1200)
    assert proc.returncode == 0, tail(proc)


@pytest.fixture(scope="session")
def cpu_sft_run(cpu_inputs_dir: cpu_inputs.CPUInputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SFT run's folder: its log, verl's file-logger metrics and checkpoints (cached, see the module docstring)."""
    return family_sft_run(tmp_path_factory, cpu_inputs_dir, "sft_run")


def sft_export(run: Path) -> Path:
    export = run / "ckpt" / f"global_step_{SFT_STEPS}" / "huggingface"
    assert (export / "config.json").is_file(), sorted(p.name for p in (run / "ckpt").rglob("*"))
    return export


@pytest.fixture(scope="session")
def cpu_sft_model(cpu_sft_run: Path) -> Path:
    return sft_export(cpu_sft_run)


@pytest.fixture(scope="session")
def qwen25_inputs_and_sft_model(
    tmp_path_factory: pytest.TempPathFactory, agentrl_cache: Path
) -> tuple[cpu_inputs.CPUInputs, Path]:
    """The Qwen2.5 family's CPU inputs and SFT model (Qwen2ForCausalLM, the Qwen2.5 template; the 7B run's)."""
    inputs = family_inputs(tmp_path_factory, dataclasses.replace(SIZES, family="qwen2.5"))
    return inputs, sft_export(family_sft_run(tmp_path_factory, inputs, "sft_run_qwen2.5"))
