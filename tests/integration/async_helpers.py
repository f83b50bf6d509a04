"""What the two asynchronous trainer files share (test_async_colocate.py, test_async_separate.py): the run through
the launcher, `make rl CONFIG=agentrl_rl_cpu ARGS=+recipe/async=...`, with the benchmark's long-tail tool, and the
checks both modes' runs must pass. Each mode is a file of its own, so the two runs can go to the two xdist workers.

Every tool call goes through the benchmark's long-tail tool (benchmarks/long_tail_tool.py), which records each
execution and makes a call wait for the next weights (``AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS``): a call on the
initial weights returns at once (the warm-up batch, trained off-policy), a later one returns when verl has logged the
next step, whose weights it synced first, at most ``TOOL_WAIT_S`` (``SEPARATE_TOOL_WAIT_S``) later. So weight
updates land while trajectories are between turns, without a fixed sleep that idles the run. Everything is asserted
from the runs' own outputs: verl's file-logger metrics, its rollout dump, the tool's execution records and the
component markers of agentrl_recipe/training/trace.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from trainer_helpers import REPO, launch, metrics, tail

from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.training import trace
from agentrl_recipe.training.algos.losses import LOSS_TOKENS_PER_UPDATE

STEPS = 3
# colocate_async: the longest a tool call waits for the next weights. verl's colocated mode submits the next batch
# only after the update (the replicas sleep while the actor trains), so a call on later weights waits for the step that
# needs its own trajectory and always runs out this time: spans 1 in every run, the partial rollout is asserted on
# separate_async. Fixed 10 s sleeps gave the same and idled the run ~20 s; 2 s keeps each call slower than the
# sandbox alone.
TOOL_WAIT_S = 2.0
TOOL_YAML = REPO / "verl_configs/tools/code_interpreter.yaml"
# colocate_async: RoC (keep 2 of rollout.n 4) and the void-turn and infra masks, all through AgentRLReplayBufferAsync.
# A batch they take whole is dropped and replaced (training/masks/fully_masked_batches; verl's rollout correction raised
# on it before). Not the overlong mask too: with it the tiny model's batches were ~94 % masked and 6 batches in a row
# were taken whole (past agentrl.masks.max_fully_masked_batches=5, the run stopped); its ratio is logged either way.
ROC_AND_MASKS = ("agentrl.roc.enable=true", "agentrl.roc.keep_per_group=2", "agentrl.masks.void_turn=true",
                 "agentrl.masks.infra_failure=true")  # fmt: skip
KEEP_PER_GROUP = 2
# colocate_async: the 1st, 17th, 33rd... tool call of the agent-loop worker prints a flood (long_tail_tool.py)
# that does not fit in the response budget, so the run has trajectories its budget cut by construction, not only when
# the tiny model rambles to 160 tokens (0-2 of 48 trajectories; none in one CI run).
FLOOD_EVERY = 16
COLOCATE_MASKS = ("void_turn", "infra_failure")


def _slow_tool_yaml(run: Path) -> Path:
    """The shipped code_interpreter YAML with the long-tail subclass (every call slow, each execution recorded)."""
    text, n = re.subn(r"class_name: \S+", "class_name: long_tail_tool.LongTailCodeInterpreter", TOOL_YAML.read_text())
    assert n == 1, TOOL_YAML
    path = run / "code_interpreter_slow.yaml"
    path.write_text(text)
    return path


def _async_run(
    mode: str,
    steps: int,
    model: Path,
    inputs,
    tmp_path_factory: pytest.TempPathFactory,
    *extra: str,
    tool_wait_s: float = TOOL_WAIT_S,
    flood_every: int = 0,
) -> Path:
    """`make rl CONFIG=agentrl_rl_cpu ARGS=+recipe/async=<mode>` for ``steps`` steps (``extra``: more overrides;
    ``flood_every``: AGENTRL_BENCH_FLOOD_EVERY, 0 for none)."""
    run = tmp_path_factory.mktemp(f"rl_{mode}")
    args = [
        "--model", str(model), "--data", str(inputs.rl_train), "--val-data", str(inputs.rl_val),
        f"+recipe/async={mode}", f"trainer.total_training_steps={steps}", "trainer.save_freq=-1",
        f"trainer.default_local_dir={run / 'ckpt'}",
        f"trainer.rollout_data_dir={run / 'rollouts'}", "data.shuffle=false",
        f"actor_rollout_ref.rollout.multi_turn.tool_config_path={_slow_tool_yaml(run)}", *extra,
    ]  # fmt: skip
    env = {
        "PYTHONPATH": str(REPO / "benchmarks"),
        "AGENTRL_BENCH_TAIL_EVERY": "1",
        "AGENTRL_BENCH_TAIL_S": str(tool_wait_s),
        "AGENTRL_BENCH_TAIL_UNTIL_NEXT_WEIGHTS": "1",
        "AGENTRL_BENCH_EXEC_DIR": str(run / "tool_executions"),
        "AGENTRL_BENCH_FLOOD_EVERY": str(flood_every),
    }
    proc = launch("rl", "agentrl_rl_cpu", args, run, timeout=900, extra_env=env)
    assert proc.returncode == 0, tail(proc)
    return run


def _dumped_trajectories(run: Path) -> dict[int, int]:
    """Trajectories trained per step, counted from verl's rollout dump (trainer.rollout_data_dir)."""
    return {int(p.stem): len(p.read_text().splitlines()) for p in (run / "rollouts").glob("*.jsonl")}


def _updates_per_step(mode: str) -> int:
    """Actor updates per step: train_batch_size / ppo_mini_batch_size × ppo_epochs (separate_async: one per sample
    call, parameter_sync_step of them, the same count)."""
    cfg, _ = compose("agentrl_rl_cpu")
    actor = cfg.actor_rollout_ref.actor
    return cfg.data.train_batch_size // actor.ppo_mini_batch_size * actor.ppo_epochs


def _assert_step_counts_are_the_steps(run: Path, mode: str) -> None:
    """The step's counts are its totals: the masked trajectories are the masked ratio of the trajectories verl dumped
    for the step, and the loss tokens the buffer kept are verl's own token-mean denominator of the step's updates."""
    steps, dumped = metrics(run), _dumped_trajectories(run)
    assert sorted(dumped) == sorted(steps), (sorted(dumped), sorted(steps))
    cfg, _ = compose("agentrl_rl_cpu")
    assert set(dumped.values()) == {cfg.data.train_batch_size * cfg.actor_rollout_ref.rollout.n}, dumped
    for number, step in steps.items():
        n = dumped[number]
        masked = step["training/masks/masked_trajectories"]
        assert masked == round(step["training/masks/masked_ratio"] * n), (number, masked, n)
        if mode == "colocate_async":  # the run with the masks on (their reasons' ratios are logged either way)
            # masked = the trajectories any mask on flags: at least each one's count, at most their sum
            flagged = [round(step[f"training/masks/{reason}_ratio"] * n) for reason in COLOCATE_MASKS]
            assert max(flagged) <= masked <= sum(flagged), (number, masked, flagged)
        dropped = step.get("training/roc/dropped_trajectories", 0.0)
        assert masked + dropped <= n
        assert step[LOSS_TOKENS_PER_UPDATE] * _updates_per_step(mode) == step["training/masks/loss_tokens_kept"], step
        assert (step["training/masks/loss_tokens_kept"] < step["training/masks/loss_tokens"]) == (masked + dropped > 0)


def _assert_each_tool_call_ran_once(run: Path, steps: dict[int, dict]) -> None:
    """Counted at the tool: one execution record per call (tool instance), none twice; the trained trajectories'
    calls (the steps' summed agentrl_tools/status/* counts) are among them."""
    records = [json.loads(p.read_text()) for p in (run / "tool_executions").glob("*.json")]
    per_call = Counter(r["instance_id"] for r in records)
    assert records and max(per_call.values()) == 1, per_call.most_common(3)
    trained = sum(v for s in steps.values() for k, v in s.items() if k.startswith("agentrl_tools/status/"))
    assert 0 < trained <= len(records), (trained, len(records))


def _trained_every_step_with_the_async_buffer(run: Path, n_steps: int) -> dict[int, dict]:
    """Every step's verl metrics; asserts all ``n_steps`` steps logged and only the async replay buffer ran."""
    steps = metrics(run)
    assert sorted(steps) == list(range(1, n_steps + 1)), sorted(steps)
    ran = {m["component"] for m in trace.read(run / "trace")}
    assert "AgentRLReplayBufferAsync" in ran and "AgentRLReplayBuffer" not in ran, ran
    return steps


def _assert_a_gradient_exactly_where_an_advantage_is_nonzero(step: dict) -> None:
    """verl's critic/advantages/* are over the trained tokens: a step whose groups all had one reward (GRPO advantage 0
    everywhere, which the tiny model's sampling sometimes gives) has loss 0 and no gradient; any other step has both."""
    signal = step["critic/advantages/max"] != 0 or step["critic/advantages/min"] != 0
    assert (step["actor/grad_norm"] > 0) == signal, step
    assert step["actor/pg_loss"] == step["actor/pg_loss"], step  # never NaN


def _dumped_groups(run: Path) -> dict[int, int]:
    """Prompt groups trained per step: the distinct uids of the keys ({uid}_{session}_{index}) verl dumped."""
    groups = {}
    for path in (run / "rollouts").glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        groups[int(path.stem)] = len({row["uid"].split("_")[0] for row in rows})
    return groups


# 3 steps, each call waiting up to 20 s for the next weights: the standalone vLLM replica generates a batch ahead
# (staleness 1), so with 2 steps every trajectory was done before the only sync (trajectory_spans/max 1 in a quiet CI
# run). Batch 3 starts after sync 1; a call of its turns generated under step 1's weights waits while step 2 trains
# and returns once sync 2 has landed (step 2 logged): its next turn runs under the new weights.
SEPARATE_STEPS = 3
# A call of batch 3 on step 1's weights returns once step 2 is logged (~2 s after sync 1 here); this is the most
# a loaded machine may need (fixed 2 s sleeps gave no trajectory spanning two versions: trajectory_spans/max 1).
SEPARATE_TOOL_WAIT_S = 20.0
