"""One SFT run of the CPU config per session: its model is what the RL trainer tests start from.

``make test`` runs the suite on two pytest-xdist workers, one test file each at a time (``--dist loadfile``), so two
trainer files may ask for these fixtures at once: they are built once, under a lock, in a folder the session's
workers share, and reused by whichever worker comes second.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from filelock import FileLock
from shared_session import shared_dir
from trainer_helpers import launch, tail

from agentrl_recipe.cpu_task import inputs as cpu_inputs

SFT_STEPS = 60  # enough for the tiny model to learn the tool-call format and to end its turns


@pytest.fixture(scope="session")
def cpu_inputs_dir(tmp_path_factory: pytest.TempPathFactory, agentrl_cache: Path) -> cpu_inputs.CPUInputs:
    sizes = cpu_inputs.CPUInputSizes(sft_problems=64, rl_problems=32, val_problems=8)
    out = shared_dir(tmp_path_factory, "cpu_inputs")
    with FileLock(f"{out}.lock"):
        return cpu_inputs.prepare(out, sizes)  # reuses what another worker built (its inputs.json stamp)


@pytest.fixture(scope="session")
def cpu_sft_run(cpu_inputs_dir: cpu_inputs.CPUInputs, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = shared_dir(tmp_path_factory, "sft_run")
    with FileLock(f"{run}.lock"):
        if not (run / "done").is_file():
            args = [
                "--model", str(cpu_inputs_dir.model), "--data", str(cpu_inputs_dir.sft),
                f"trainer.total_training_steps={SFT_STEPS}", f"trainer.save_freq={SFT_STEPS}",
                f"trainer.default_local_dir={run / 'ckpt'}",
            ]  # fmt: skip
            proc = launch("sft", "agentrl_sft_cpu", args, run, timeout=1200)
            assert proc.returncode == 0, tail(proc)
            (run / "done").touch()
    return run


@pytest.fixture(scope="session")
def cpu_sft_model(cpu_sft_run: Path) -> Path:
    export = cpu_sft_run / "ckpt" / f"global_step_{SFT_STEPS}" / "huggingface"
    assert (export / "config.json").is_file(), sorted(p.name for p in (cpu_sft_run / "ckpt").rglob("*"))
    return export
