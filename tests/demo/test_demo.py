"""The demo end to end at test size: every stage runs, through the components verl's registries hold.

Spies wrap (never replace) the registered objects: the policy loss and advantage estimator entries of verl's
registries, the reward manager's and the agent loop's methods, the tool's ``execute``, verl's SFT dataset — so the
test fails if a stage ran on a copy, a stub, or a different path.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from agentrl_recipe import names


class Spy:
    """Counts calls to ``fn`` and calls it; installed on a class it binds like the original method."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.calls = 0
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.fn(*args, **kwargs)

    def __get__(self, obj: Any, owner: Any) -> Any:
        return self if obj is None else functools.partial(self, obj)


class AsyncMethodSpy:
    """Counts calls to an async method (installed on the class, so it binds like the original)."""

    def __init__(self, fn: Any):
        self.fn = fn
        self.calls = 0

    def __get__(self, obj: Any, owner: Any) -> Any:
        async def bound(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            return await self.fn(obj, *args, **kwargs)

        return bound


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, agentrl_cache: Path) -> dict[str, Any]:
    import verl  # noqa: F401  (loads the plugin)
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.reward_loop.reward_manager.registry import get_reward_manager_cls
    from verl.trainer.ppo import core_algos
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset
    from verl.workers.utils import losses as verl_losses

    from agentrl_recipe import demo, demo_trainer
    from agentrl_recipe.agent_loop import AgentRLToolAgentLoop
    from agentrl_recipe.algos.advantages import compute_grpo_masked_outcome_advantage
    from agentrl_recipe.algos.losses import compute_policy_loss_tcr
    from agentrl_recipe.rewards.manager import AgentRLRewardManager
    from agentrl_recipe.tools.code_interpreter import CodeInterpreterTool

    # The registries hold the project's objects, and the demo's trainer holds verl's losses (not copies).
    assert core_algos.get_policy_loss_fn(names.POLICY_LOSS) is compute_policy_loss_tcr
    assert core_algos.get_adv_estimator_fn(names.ADV_ESTIMATOR) is compute_grpo_masked_outcome_advantage
    assert get_reward_manager_cls(names.REWARD_MANAGER) is AgentRLRewardManager
    target = _agent_loop_registry[names.AGENT_LOOP]["_target_"]
    assert target == f"{AgentRLToolAgentLoop.__module__}.{AgentRLToolAgentLoop.__qualname__}"
    assert demo_trainer.ppo_loss is verl_losses.ppo_loss
    assert demo_trainer.sft_loss is verl_losses.sft_loss

    spies: dict[str, Any] = {
        "policy_loss": Spy(compute_policy_loss_tcr),
        "adv_estimator": Spy(compute_grpo_masked_outcome_advantage),
        "ppo_loss": Spy(verl_losses.ppo_loss),
        "sft_loss": Spy(verl_losses.sft_loss),
        "sft_getitem": Spy(MultiTurnSFTDataset.__getitem__),
        "agent_loop_run": AsyncMethodSpy(AgentRLToolAgentLoop.run),
        "reward_run_single": AsyncMethodSpy(AgentRLRewardManager.run_single),
        "tool_execute": AsyncMethodSpy(CodeInterpreterTool.execute),
    }
    mp = pytest.MonkeyPatch()
    try:
        mp.setitem(core_algos.POLICY_LOSS_REGISTRY, names.POLICY_LOSS, spies["policy_loss"])
        mp.setitem(core_algos.ADV_ESTIMATOR_REGISTRY, names.ADV_ESTIMATOR, spies["adv_estimator"])
        mp.setattr(demo_trainer, "ppo_loss", spies["ppo_loss"])
        mp.setattr(demo_trainer, "sft_loss", spies["sft_loss"])
        mp.setattr(MultiTurnSFTDataset, "__getitem__", spies["sft_getitem"])
        mp.setattr(AgentRLToolAgentLoop, "run", spies["agent_loop_run"])
        mp.setattr(AgentRLRewardManager, "run_single", spies["reward_run_single"])
        mp.setattr(CodeInterpreterTool, "execute", spies["tool_execute"])
        out = tmp_path_factory.mktemp("demo_out")
        settings = demo.DemoSettings.fast(out=str(out))
        result = demo.run_demo(settings)
    finally:
        mp.undo()
    return {"out": out, "result": result, "spies": spies, "settings": settings}


def test_every_stage_ran_through_the_registered_components(demo_run: dict[str, Any]) -> None:
    s, spies = demo_run["settings"], demo_run["spies"]
    rl_trajectories = s.steps * s.prompts_per_step * s.group_size
    eval_trajectories = 2 * s.eval_problems * s.eval_samples
    # agent loop: teacher + RL + both evals; reward manager: teacher + RL (the eval grades with compute_score)
    assert spies["agent_loop_run"].calls == s.sft_problems + rl_trajectories + eval_trajectories
    assert spies["reward_run_single"].calls == s.sft_problems + rl_trajectories
    assert spies["tool_execute"].calls >= s.sft_problems  # every teacher trajectory calls the tool once
    assert spies["sft_getitem"].calls >= 1 and spies["sft_loss"].calls == s.sft_steps
    # ppo_loss once per mini-batch, and it resolved the registered agentrl_tcr through get_policy_loss_fn
    assert spies["ppo_loss"].calls == s.steps * s.ppo_mini_batches
    assert spies["policy_loss"].calls == spies["ppo_loss"].calls
    assert spies["adv_estimator"].calls == s.steps  # verl's compute_advantage → get_adv_estimator_fn


def test_outputs_written(demo_run: dict[str, Any]) -> None:
    out: Path = demo_run["out"]
    s = demo_run["settings"]
    report = json.loads((out / "demo.json").read_text())
    assert report == json.loads(json.dumps(demo_run["result"], default=str))
    assert report["components"] == {
        "agent_loop": "agentrl_recipe.agent_loop.AgentRLToolAgentLoop",
        "reward_manager": "agentrl_recipe.rewards.manager.AgentRLRewardManager",
        "adv_estimator": "agentrl_recipe.algos.advantages.compute_grpo_masked_outcome_advantage",
        "policy_loss": "agentrl_recipe.algos.losses.compute_policy_loss_tcr",
    }
    assert list(report["stage_seconds"]) == [
        "1/6 tiny model",
        "2/6 real-trajectory SFT set (scripted teacher, sandboxed tool, verified)",
        "3/6 SFT (verl MultiTurnSFTDataset + sft_loss)",
        "4/6 eval before RL (held-out)",
        "5/6 GRPO-TCR",
        "6/6 eval after RL (held-out)",
    ]
    # the teacher's trajectories really ran the tool and were verified
    teacher = report["teacher"]
    assert teacher["kept"] == teacher["attempted"] == s.sft_problems and teacher["tool_failures"] == 0
    rollouts = [json.loads(line) for line in (out / "data" / "teacher_rollouts.jsonl").read_text().splitlines()]
    assert all(r["tool_calls"] == 1 and r["tool_statuses"] == ["ok"] and r["score"] > 0 for r in rollouts)
    # per-step metrics with the table's columns
    assert [m["step"] for m in report["rl_steps"]] == list(range(1, s.steps + 1))
    for key in ("reward/mean", "reward/acc", "tools/calls_per_traj", "actor/pg_clipfrac_low", "actor/entropy"):
        assert key in report["rl_steps"][0], key
    table = (out / "steps.md").read_text().splitlines()
    assert table[0].startswith("| step | reward | acc |") and len(table) == 2 + s.steps
    for phase in ("eval_before", "eval_after"):
        summary = report[phase]
        assert summary["problems"] == s.eval_problems and 0.0 <= summary[f"avg@{s.eval_samples}"] <= 1.0
        assert (out / phase / "report.json").is_file() and (out / phase / "table.md").is_file()
        lines = (out / phase / "rollouts.jsonl").read_text().splitlines()
        assert len(lines) == s.eval_problems * s.eval_samples
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for model_dir in ("model_sft", "model_rl"):
        assert (out / model_dir / "config.json").is_file()


def test_cli_parses_and_validates() -> None:
    import argparse

    from agentrl_recipe import demo

    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    s = demo.settings_from_args(parser.parse_args(["--fast", "--steps", "3", "--out", "x"]))
    assert (s.steps, s.out, s.sft_problems) == (3, "x", demo.DemoSettings.fast().sft_problems)
    assert demo.settings_from_args(parser.parse_args([])) == demo.DemoSettings()
    with pytest.raises(SystemExit, match="--steps must be >= 1"):
        demo.settings_from_args(parser.parse_args(["--steps", "0"]))
