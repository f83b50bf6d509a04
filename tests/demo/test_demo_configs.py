"""The demo configs are the CPU configs plus the demo's declared deltas (hydra cannot include a primary config)."""

from __future__ import annotations

from typing import Any

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose

SFT_DELTAS = {
    "data.train_files", "data.micro_batch_size_per_gpu", "model.path", "trainer.default_local_dir",
    "trainer.experiment_name", "trainer.save_freq", "trainer.total_epochs", "trainer.total_training_steps",
}  # fmt: skip
RL_DELTAS = {
    "data.train_files", "data.val_files", "data.train_batch_size", "actor_rollout_ref.model.path",
    "actor_rollout_ref.actor.optim.lr", "actor_rollout_ref.actor.ppo_mini_batch_size",
    "actor_rollout_ref.actor.checkpoint.save_contents", "actor_rollout_ref.rollout.n",
    "reward.reward_kwargs.tool_bonus",
    # the demo keeps the agentrl_hf rollout (no vLLM start-ups in its 10 minutes): vLLM's CPU settings do not apply
    "actor_rollout_ref.rollout.name", "actor_rollout_ref.rollout.enable_sleep_mode",
    "actor_rollout_ref.rollout.enforce_eager", "actor_rollout_ref.rollout.gpu_memory_utilization",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes",
    "actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend",
    "trainer.default_local_dir", "trainer.experiment_name", "trainer.save_freq", "trainer.total_epochs",
    "trainer.total_training_steps",
}  # fmt: skip


def _flat(node: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(node, dict):
        return {prefix[:-1]: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(_flat(value, f"{prefix}{key}."))
    return out


def _differences(a: str, b: str) -> set[str]:
    fa, fb = (_flat(OmegaConf.to_container(compose(n)[0], resolve=False)) for n in (a, b))
    return {k for k in fa.keys() | fb.keys() if fa.get(k, "<absent>") != fb.get(k, "<absent>")}


@pytest.mark.parametrize(
    ("cpu", "demo", "deltas"),
    [("agentrl_sft_cpu", "agentrl_sft_demo", SFT_DELTAS), ("agentrl_rl_cpu", "agentrl_rl_demo", RL_DELTAS)],
)
def test_demo_config_differs_from_the_cpu_config_only_where_declared(cpu: str, demo: str, deltas: set[str]) -> None:
    assert _differences(cpu, demo) <= deltas, sorted(_differences(cpu, demo) - deltas)


@pytest.mark.parametrize("name", ["agentrl_sft_demo", "agentrl_rl_demo"])
def test_demo_configs_pass_the_check(name: str) -> None:
    report = check(name, [], strict_paths=False)
    assert report.ok, report.format()
