"""`make sft CONFIG=agentrl_sft_cpu`: verl's own SFT trainer under torchrun (FSDP2 on gloo) with the plugin's platform.

The session's SFT model (``cpu_sft_model``, tests/integration/conftest.py) is this run; here its outputs are checked,
plus a two-rank run on what `agentrl-recipe data sft-released` writes from the released SFT-3K's schema.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fresh_python import run_python
from trainer_helpers import REPO, launch, metrics, tail

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]  # the first test pays for the runs (fixtures)


def test_sft_trains_checkpoints_and_exports(cpu_sft_model: Path, cpu_sft_run: Path) -> None:
    log = (cpu_sft_run / "log.txt").read_text()
    assert "step:1 - " in log  # verl's own console step log
    steps = metrics(cpu_sft_run)
    first, last = steps[min(steps)], steps[max(steps)]
    assert first["train/grad_norm"] > 0
    assert last["train/loss"] < 0.5 * first["train/loss"], (first["train/loss"], last["train/loss"])
    checkpoint = cpu_sft_model.parent
    assert (checkpoint / "model_world_size_1_rank_0.pt").is_file() and (checkpoint / "data_0.pt").is_file()


def test_the_export_loads_in_the_eval_harness(cpu_sft_model: Path, cpu_inputs_dir, tmp_path: Path) -> None:
    out = tmp_path / "eval"
    command = [
        "-m", "agentrl_recipe.cli", "eval", "run", "--model", str(cpu_sft_model),
        "--data", str(cpu_inputs_dir.rl_val), "--out", str(out), "-k", "1", "--limit", "4",
        "--max-prompt-length", "384", "--max-response-length", "160", "--max-assistant-turns", "3",
        "--backend", "hf",  # in-process; through vLLM (the default): test_vllm_serve_on_cpu.py
    ]  # fmt: skip
    proc = run_python(command, cwd=REPO)
    assert proc.returncode == 0, tail(proc)
    assert (out / "report.json").is_file()


def test_two_ranks_on_converted_released_trajectories(cpu_inputs_dir, tmp_path: Path) -> None:
    parquet = tmp_path / "sft3k.parquet"
    convert = ["-m", "agentrl_recipe.cli", "data", "sft-released"]
    proc = run_python([*convert, str(REPO / "tests/data/open_agentrl_sft_3k.jsonl"), "--out", str(parquet)], cwd=REPO)
    assert proc.returncode == 0, tail(proc)
    run = tmp_path / "run"
    args = [
        "--model", str(cpu_inputs_dir.model), "--data", str(parquet), "--gpus-per-node", "2",
        "data.train_batch_size=2", "data.micro_batch_size_per_gpu=1", "data.max_length=1024",
        "trainer.total_training_steps=2", "trainer.save_freq=2", f"trainer.default_local_dir={run / 'ckpt'}",
    ]  # fmt: skip
    proc = launch("sft", "agentrl_sft_cpu", args, run, timeout=400)
    assert proc.returncode == 0, tail(proc)
    assert sorted(metrics(run)) == [1, 2]
    assert {p.name for p in (run / "ckpt/global_step_2").glob("model_world_size_2_rank_*.pt")} == {
        "model_world_size_2_rank_0.pt",
        "model_world_size_2_rank_1.pt",
    }
    # torchrun's log folders (one per rank) next to launch.log, not a new /tmp/torchelastic_* per launch
    assert sorted(p.name for p in (run / "ckpt/torchrun").glob("*/attempt_0/*")) == ["0", "1"]
