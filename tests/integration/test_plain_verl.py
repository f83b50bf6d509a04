"""A copied config trains under plain verl, on the Qwen2.5 family: one run that carries two claims.

- Plain verl (issue 42): `agentrl-recipe configs cp`, then `python -m verl.trainer.main_ppo` from another directory,
  no launcher, no VERL_PLATFORM, no VERL_USE_EXTERNAL_MODULES. The plugin comes in through verl's entry points, the
  tool config through the plugin's ${agentrl_config_path:...} resolver, the CPU platform through verl's own platform
  probe (verl_cpu answers where nothing else can run).
- The Qwen2.5 family (the 7B config's architecture and template): verl's SFT trainer, then 2 RL steps rolling out
  through verl's vLLM server, on a tiny Qwen2ForCausalLM with the Qwen2.5 hermes template. The other trainer tests run
  the Qwen3 family (the default tiny model); this one keeps the 7B run's path trained.

Each verl start-up costs ~1.5 minutes of the suite's CPU on 2 cores, so both claims share one: the session's 60-step
SFT recipe on the Qwen2.5 family, then 2 RL steps of 2 prompts × 2 under plain verl.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_python import run_python
from trainer_helpers import launch_env, metrics

from agentrl_recipe import names
from agentrl_recipe.cpu_task.tiny_model import QWEN25, chat_template
from agentrl_recipe.training import trace

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]  # the first test pays for the runs (fixtures)


@pytest.fixture(scope="module")
def plain_verl_run(qwen25_inputs_and_sft_model, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`configs cp agentrl_rl_cpu`, then 2 steps of `python -m verl.trainer.main_ppo` on the Qwen2.5 SFT model; the
    run's folder (verl's metrics, the component markers and ``log.txt``)."""
    inputs, model = qwen25_inputs_and_sft_model
    base = tmp_path_factory.mktemp("plain_verl")
    elsewhere = base / "my_project"
    elsewhere.mkdir()
    copy = run_python(["-m", "agentrl_recipe.cli", "configs", "cp", "agentrl_rl_cpu", str(elsewhere / "my_rl.yaml")],
                      cwd=elsewhere)  # fmt: skip
    assert copy.returncode == 0, copy.stderr[-3000:]
    overrides = [
        f"data.train_files={inputs.rl_train}", f"data.val_files={inputs.rl_val}",
        f"actor_rollout_ref.model.path={model}", f"trainer.default_local_dir={elsewhere / 'ckpt'}",
        "trainer.total_training_steps=2", "trainer.save_freq=-1", "trainer.val_before_train=false",
        "trainer.test_freq=-1",
        "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.rollout.n=2",
        # An entropy term makes step 1 update the weights whatever the rewards: GRPO's advantages are all 0 when each
        # group's trajectories score alike (the tiny model is never right; well-formed calls all score -0.9), and
        # step 2's weight-sync check below needs weights that moved.
        "actor_rollout_ref.actor.entropy_coeff=0.01",
    ]  # fmt: skip
    run = base / "run"
    run.mkdir()  # verl's file logger writes metrics.jsonl there, the markers go to run/trace
    env = launch_env(run)
    for launcher_only in ("VERL_PLATFORM", "VERL_USE_EXTERNAL_MODULES", "PYTHONPATH"):
        env.pop(launcher_only, None)
    command = [sys.executable, "-m", "verl.trainer.main_ppo", "--config-path", str(elsewhere), "--config-name", "my_rl"]
    proc = subprocess.run([*command, *overrides], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=1500)
    log = proc.stdout + proc.stderr
    (run / "log.txt").write_text(log)
    assert proc.returncode == 0, log[-6000:]
    return run


def test_a_copied_cpu_config_trains_under_plain_verl(plain_verl_run: Path) -> None:
    log = (plain_verl_run / "log.txt").read_text()
    assert "Falling back to 'nvidia'" not in log
    # the copied config's ray_init: a local Ray instance without its dashboard (agentrl_rl_cpu.yaml)
    assert "Started a local Ray instance." in log and "View the dashboard" not in log
    steps = metrics(plain_verl_run)
    assert sorted(steps) == [1, 2], sorted(steps)
    assert [steps[n]["training/global_step"] for n in (1, 2)] == [1, 2]
    ran = {marker["component"] for marker in trace.read(plain_verl_run / "trace")}
    assert {names.TOOL_NAME, names.REWARD_MANAGER, names.POLICY_LOSS} <= ran  # the tool config resolved; by path


def test_the_sft_model_is_qwen2_with_the_qwen25_template(qwen25_inputs_and_sft_model) -> None:
    inputs, model = qwen25_inputs_and_sft_model
    for folder in (inputs.model, model):  # the tiny model and verl's HF export of the SFT checkpoint
        config = json.loads((folder / "config.json").read_text())
        assert (config["architectures"], config["model_type"]) == (["Qwen2ForCausalLM"], "qwen2"), folder
        assert (folder / "chat_template.jinja").read_text() == chat_template(QWEN25), folder


def test_two_rl_steps_through_verls_vllm_server(plain_verl_run: Path) -> None:
    steps = metrics(plain_verl_run)
    assert sorted(steps) == [1, 2]
    log = (plain_verl_run / "log.txt").read_text()
    assert "vLLMHttpServer" in log  # verl's vLLM server actor rolled out
    # its worker ran inside the engine core (agentrl_rl_cpu's uniproc executor): no process of its own logged
    assert "(EngineCore pid=" in log and "(Worker pid=" not in log
    # Step 2 rolled out after step 1's update (the entropy term's gradient, at least) and weight sync: vLLM's
    # probabilities equal the actor's recomputation only if it serves the updated weights (the floor: a few 1e-6,
    # test_rl_trainer.py).
    assert steps[2]["training/rollout_probs_diff_max"] < 1e-5, steps[2]["training/rollout_probs_diff_max"]
    assert steps[1]["actor/entropy_loss"] > 0 and steps[1]["actor/grad_norm"] > 0, steps[1]  # step 1 moved them
    for number, step in steps.items():
        assert step["agentrl_tools/calls_per_traj/mean"] > 0, number  # the Qwen2.5-templated model called the tool
