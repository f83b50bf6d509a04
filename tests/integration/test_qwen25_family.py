"""The Qwen2.5 family's one CPU run (the 7B config's architecture and template): verl's SFT trainer, then 2 steps of
`make rl CONFIG=agentrl_rl_cpu` rolling out through verl's vLLM server, on a tiny Qwen2ForCausalLM with the Qwen2.5
hermes template. The other trainer tests run the Qwen3 family (the default tiny model); this one keeps the 7B run's
path trained. As small as the claim allows: the session's 60-step SFT recipe, then 2 RL steps of 2 prompts × 2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from trainer_helpers import launch, metrics, tail

from agentrl_recipe.cpu_task.tiny_model import QWEN25, chat_template

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def qwen25_rl_run(qwen25_inputs_and_sft_model, tmp_path_factory) -> Path:
    inputs, model = qwen25_inputs_and_sft_model
    base = tmp_path_factory.mktemp("qwen25_rl")
    args = [
        "--model", str(model), "--data", str(inputs.rl_train), "--val-data", str(inputs.rl_val),
        f"trainer.default_local_dir={base / 'ckpt'}", "trainer.total_training_steps=2", "trainer.save_freq=-1",
        "data.train_batch_size=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.rollout.n=2",
    ]  # fmt: skip
    proc = launch("rl", "agentrl_rl_cpu", args, base / "run", timeout=1500)
    assert proc.returncode == 0, tail(proc)
    return base / "run"


def test_the_sft_model_is_qwen2_with_the_qwen25_template(qwen25_inputs_and_sft_model) -> None:
    inputs, model = qwen25_inputs_and_sft_model
    for folder in (inputs.model, model):  # the tiny model and verl's HF export of the SFT checkpoint
        config = json.loads((folder / "config.json").read_text())
        assert (config["architectures"], config["model_type"]) == (["Qwen2ForCausalLM"], "qwen2"), folder
        assert (folder / "chat_template.jinja").read_text() == chat_template(QWEN25), folder


def test_two_rl_steps_through_verls_vllm_server(qwen25_rl_run: Path) -> None:
    steps = metrics(qwen25_rl_run)
    assert sorted(steps) == [1, 2]
    assert "vLLMHttpServer" in (qwen25_rl_run / "log.txt").read_text()  # verl's vLLM server actor rolled out
    # Step 2 rolled out after step 1's update and weight sync: vLLM's probabilities equal the actor's recomputation
    # only if it serves the updated weights (the floor: a few 1e-6, test_rl_trainer.py).
    assert steps[2]["training/rollout_probs_diff_max"] < 1e-5, steps[2]["training/rollout_probs_diff_max"]
    assert any(s["actor/grad_norm"] > 0 for s in steps.values()), steps
    for number, step in steps.items():
        assert step["agentrl_tools/calls_per_traj/mean"] > 0, number  # the Qwen2.5-templated model called the tool
