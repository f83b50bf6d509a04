"""A vLLM worker that dies mid weight sync ends the run with one clear line, in bounded time, instead of hanging it.

verl 0.9.1's ``BucketedWeightSender`` waited forever for the dead receiver's answer; verl_cpu/weight_sender_timeout.py
gives it a timeout (``AGENTRL_WEIGHT_SYNC_TIMEOUT_S``). The run is agentrl_rl_cpu through verl's vLLM server; the
fault (weight_sync_fault.py, loaded by verl in every process) kills vLLM's worker after it took the first bucket of
the sync that follows step 1's update.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from trainer_helpers import launch, tail
from weight_sync_fault import KILL_AT_SYNC_ENV, MARK_ENV

from verl_cpu.weight_sender_timeout import TIMEOUT_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

SYNC_TIMEOUT_S = 20
FIRST_SYNC_AFTER_AN_UPDATE = 2  # verl syncs once before step 1, then after each update


def test_a_dead_vllm_worker_fails_the_weight_sync_with_one_line(cpu_inputs_dir, tmp_path: Path) -> None:
    run, mark = tmp_path / "run", tmp_path / "killed_at"
    args = [
        "--model", str(cpu_inputs_dir.model), "--data", str(cpu_inputs_dir.rl_train),
        "--val-data", str(cpu_inputs_dir.rl_val), f"trainer.default_local_dir={tmp_path / 'ckpt'}",
        "trainer.total_training_steps=2", "trainer.save_freq=-1", "data.train_batch_size=2",
        "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.rollout.n=2",
    ]  # fmt: skip
    env = {
        "VERL_USE_EXTERNAL_MODULES": "weight_sync_fault",
        "PYTHONPATH": str(Path(__file__).parent),  # for every process of the run, vLLM's worker included
        KILL_AT_SYNC_ENV: str(FIRST_SYNC_AFTER_AN_UPDATE),
        MARK_ENV: str(mark),
        TIMEOUT_ENV: str(SYNC_TIMEOUT_S),
    }
    proc = launch("rl", "agentrl_rl_cpu", args, run, timeout=1200, extra_env=env)
    ended = time.time()
    assert mark.is_file(), tail(proc)  # the fault fired: vLLM's worker died mid-sync
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    message = f"weight sync to the vLLM server timed out after {SYNC_TIMEOUT_S} s ({TIMEOUT_ENV})"
    assert message in out, tail(proc)
    # bounded: the sender's timeout, then Ray tears the job down (minutes of slack for a loaded 2-core machine)
    assert ended - float(mark.read_text()) < SYNC_TIMEOUT_S + 240, ended - float(mark.read_text())
