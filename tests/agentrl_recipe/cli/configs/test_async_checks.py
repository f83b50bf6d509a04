"""`configs check` on verl's v1 async trainer modes: the presets pass, the combinations that cannot work fail.

Every case composes a shipped config with hydra overrides exactly as `make rl ... ARGS=...` would and runs the whole
`configs.check` (verl's schema and validate_config included), so a rule that stopped firing, or a preset that stopped
passing verl's own checks, fails here.
"""

from __future__ import annotations

import pytest

from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose
from verl_cpu import names as cpu_names

SEPARATE = "agentrl_rl_qwen3_4b_async"
COLOCATE = "agentrl_rl_qwen3_4b_colocate_async"
CPU, SEPARATE_CPU = "agentrl_rl_cpu", "+recipe/async=separate_async_cpu"
DAPO_CAP = [
    "algorithm.filter_groups.enable=true",
    "algorithm.filter_groups.metric=acc",
    "algorithm.filter_groups.max_num_gen_batches=10",
]


def _errors(name: str, overrides: list[str]) -> dict[str, str]:
    report = check(name, overrides)
    return {p.key: p.message for p in report.errors}


@pytest.mark.parametrize(
    "name", [SEPARATE, COLOCATE, "agentrl_rl_qwen2_7b_async", "agentrl_rl_qwen2_7b_colocate_async"]
)
def test_the_async_presets_select_the_async_trainer_and_pass(name: str) -> None:
    report = check(name)
    assert report.ok, report.format()
    assert not [p for p in report.warnings if p.key.startswith(("algorithm.", "trainer.v1"))], report.format()
    cfg, _ = compose(name)
    v1 = cfg.trainer.v1
    assert v1.trainer_mode == ("colocate_async" if "colocate" in name else "separate_async")
    assert v1.sampler.custom_sampler.name == "AgentRLReplayBufferAsync"
    assert v1.sampler.max_off_policy_threshold == 2
    assert cfg.algorithm.rollout_correction.rollout_is == "token"
    assert cfg.algorithm.rollout_correction.rollout_is_threshold == 2.0


def test_the_async_overlay_turns_any_rl_config_async() -> None:
    report = check("agentrl_rl_qwen3_4b", ["+recipe/async=colocate_async"])
    assert report.ok, report.format()
    cfg, _ = compose("agentrl_rl_qwen3_4b", ["+recipe/async=colocate_async"])
    assert cfg.trainer.v1.trainer_mode == "colocate_async"
    assert cfg.actor_rollout_ref.actor.clip_ratio_high == 0.315  # the paper run's own values stay


def test_the_dynamic_sampling_cap_is_rejected_in_async_and_accepted_in_sync() -> None:
    errors = _errors(COLOCATE, DAPO_CAP)
    assert "sync-only" in errors["algorithm.filter_groups.max_num_gen_batches"]
    assert "algorithm.filter_groups.max_num_gen_batches" not in _errors("agentrl_rl_qwen3_4b", DAPO_CAP)
    # without the cap, verl's async DAPO (evict + refill one prompt per group) is accepted
    assert _errors(COLOCATE, [*DAPO_CAP[:2], "algorithm.filter_groups.max_num_gen_batches=0"]) == {}


@pytest.mark.parametrize(
    ("name", "overrides", "key", "words"),
    [
        (COLOCATE, ["trainer.v1.sampler.custom_sampler.name=AgentRLReplayBuffer"], "custom_sampler.name", "needs"),
        ("agentrl_rl_qwen3_4b", ["trainer.v1.sampler.custom_sampler.name=AgentRLReplayBufferAsync"], "name", "sync"),
        (COLOCATE, ["trainer.v1.sampler.max_off_policy_threshold=null"], "max_off_policy_threshold", "unbounded"),
        (COLOCATE, ["actor_rollout_ref.rollout.calculate_log_probs=false"], "calculate_log_probs", "silently"),
        (COLOCATE, ["algorithm.rollout_correction.bypass_mode=true"], "bypass_mode", "no IS weights"),
        (COLOCATE, ["actor_rollout_ref.hybrid_engine=false"], "hybrid_engine", "shares"),
        (SEPARATE, ["trainer.v1.separate_async.parameter_sync_step=2"], "parameter_sync_step", "= parameter_sync"),
        (SEPARATE, ["actor_rollout_ref.rollout.checkpoint_engine.backend=naive"], "backend", "naive"),
        (SEPARATE, ["actor_rollout_ref.rollout.n_gpus_per_node=0"], "rollout.n_gpus_per_node", "standalone"),
        (CPU, [SEPARATE_CPU, "actor_rollout_ref.rollout.checkpoint_engine.backend=nccl"], "backend", "accelerator"),
        (CPU, [SEPARATE_CPU, "actor_rollout_ref.rollout.checkpoint_engine.backend=naive"], "backend", "naive"),
        (CPU, [SEPARATE_CPU, "ray_kwargs.ray_init.num_gpus=1"], "num_gpus", "waiting forever: set 2"),
        (CPU, [SEPARATE_CPU, "trainer.v1.separate_async.parameter_sync_step=4"], "parameter_sync_step", "= param"),
    ],
)
def test_combinations_that_cannot_work_fail(name: str, overrides: list[str], key: str, words: str) -> None:
    errors = _errors(name, overrides)
    hits = {k: m for k, m in errors.items() if k.endswith(key)}
    assert hits, errors
    assert any(words in message for message in hits.values()), hits


def test_async_without_rollout_correction_warns() -> None:
    report = check(COLOCATE, ["algorithm.rollout_correction.rollout_is=null"])
    assert report.ok, report.format()
    assert any(p.key == "algorithm.rollout_correction.rollout_is" for p in report.warnings), report.format()


def test_separate_async_on_cpu_is_one_overlay_and_passes() -> None:
    report = check(CPU, [SEPARATE_CPU])
    assert report.ok, report.format()
    # the SFT export the CPU preset points at exists only after `make sft-cpu`: a fresh clone warns about it
    async_keys = ("algorithm.", "trainer.v1", "actor_rollout_ref")
    assert not [p for p in report.warnings if p.key.startswith(async_keys) and p.key != "actor_rollout_ref.model.path"]
    cfg, _ = compose(CPU, [SEPARATE_CPU])
    assert cfg.trainer.v1.trainer_mode == "separate_async"
    assert cfg.actor_rollout_ref.rollout.checkpoint_engine.backend == cpu_names.CHECKPOINT_ENGINE
    assert cfg.actor_rollout_ref.hybrid_engine is False
    assert cfg.trainer.v1.sampler.custom_sampler.name == "AgentRLReplayBufferAsync"
    assert cfg.ray_kwargs.ray_init.num_gpus == 2
    # an existing Ray cluster (num_gpus null) has its own resources: nothing to check
    assert check(CPU, [SEPARATE_CPU, "ray_kwargs.ray_init.num_gpus=null"]).ok


def test_the_cpu_engine_on_gpus_is_accepted_with_a_warning() -> None:
    overrides = [f"actor_rollout_ref.rollout.checkpoint_engine.backend={cpu_names.CHECKPOINT_ENGINE}"]
    report = check(SEPARATE, overrides)
    assert report.ok, report.format()
    (warning,) = [p for p in report.warnings if p.key.endswith("checkpoint_engine.backend")]
    assert "CPU/debug backend" in warning.message
