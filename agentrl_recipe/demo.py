"""``agentrl-recipe demo`` (``make demo``): the whole recipe, end to end, on a CPU with a tiny model, in minutes.

It shows the pipeline working — it does not reproduce the paper's results. Stages, each through the project's
real components (nothing stubbed):

1. **tiny model** — :func:`agentrl_recipe.tiny_model.build_tiny_model`, the BPE also trained on the task's text;
2. **real-trajectory SFT set** — a scripted teacher (:class:`~agentrl_recipe.generation.scripted.ScriptedClient`)
   answers synthetic word problems (:mod:`agentrl_recipe.demo_task`) through verl's ``AgentLoopWorker`` running
   ``agentrl_tool_agent``: its ``code_interpreter`` calls really run in the sandbox, and only trajectories the
   ``agentrl_reward`` manager scores correct (and ``compute_score`` verifies) are kept;
3. **SFT** — verl's ``MultiTurnSFTDataset`` (assistant-only loss mask) and verl's ``sft_loss``, plain torch on CPU;
4. **eval before RL** — the eval harness (:func:`agentrl_recipe.eval.runner.arun_eval`: avg@k, pass@k, tool stats)
   on held-out problems;
5. **GRPO-TCR** — per step: rollouts through ``AgentLoopWorker`` + ``agentrl_tool_agent`` with the in-process HF
   client on the live model, rewards by ``agentrl_reward``, advantages by ``agentrl_grpo`` through verl's
   ``compute_advantage``, updates through verl's ``ppo_loss`` → ``get_policy_loss_fn("agentrl_tcr")`` / ``agg_loss``
   (:mod:`agentrl_recipe.demo_trainer` plays verl's FSDP engine, which has no CPU path in verl 0.9.1);
6. **eval after RL** — same harness, same problems and protocol.

Outputs in ``--out`` (default ``demo_out/``): ``demo.json`` (settings, stage timings, per-step metrics, eval
summaries, the components that ran), ``steps.md`` (the per-step table), ``curves.png``, ``eval_before/`` and
``eval_after/`` (the eval harness's report.json, table.md, plots, rollouts), ``data/`` and the model checkpoints.
The recipe's RL config (``verl_configs/agentrl_rl.yaml``) is the base; :func:`demo_overrides` lists every value the
demo changes for a 2-core machine, each with the paper's value.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import io
import json
import os
import random
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe import names

STEP_COLUMNS = (  # (metrics key, table header, format)
    ("step", "step", "{:d}"),
    ("reward/mean", "reward", "{:+.3f}"),
    ("reward/acc", "acc", "{:.3f}"),
    ("tools/calls_per_traj", "calls/traj", "{:.2f}"),
    ("tools/failures", "tool fail", "{:d}"),
    ("actor/pg_clipfrac_low", "clip low", "{:.4f}"),
    ("actor/pg_clipfrac_high", "clip high", "{:.4f}"),
    ("actor/pg_clipfrac_dual", "clip dual", "{:.4f}"),
    ("actor/entropy", "entropy", "{:.3f}"),
    ("time/step_s", "s/step", "{:.1f}"),
)


@dataclasses.dataclass
class DemoSettings:
    """Sizes of one demo run. Defaults fit ``make demo`` on 2 CPU cores in well under 10 minutes."""

    out: str = "demo_out"
    seed: int = 0
    steps: int = 10  # GRPO-TCR iterations
    # task and data
    sft_problems: int = 320  # teacher trajectories attempted (the SFT set is the verified ones)
    eval_problems: int = 32  # held-out problems, disjoint from training by (template, a, b)
    eval_samples: int = 4  # k in avg@k / pass@k [paper 32]
    # Eval samples the policy RL trains (temperature 1, top_p 1). [paper: top_p 0.6, near-greedy for a tiny model,
    # which hides what RL changes in the sampled policy]; the eval report lists every deviation from the paper.
    eval_top_p: float = 1.0
    prompts_per_step: int = 8
    group_size: int = 8  # rollout.n [paper 16]
    # tiny model
    hidden_size: int = 64
    num_layers: int = 2
    # SFT
    sft_steps: int = 600  # the copy skill appears around step 350-450 (loss 0.17 -> 0.01); see README
    sft_batch_size: int = 16
    sft_lr: float = 3e-3
    # RL
    # [paper 1e-6 for a 4B model]. Measured here: 1e-3 collapses the tiny policy within 10 steps (held-out avg@4
    # 0.38 -> 0.17, tool calls 0.9 -> 0.4 per trajectory); 1e-4 and 3e-4 keep it stable.
    rl_lr: float = 1e-4
    ppo_mini_batches: int = 2  # optimizer steps per rollout batch [paper: 64 prompts / 16 per mini-batch = 4]
    prompt_length: int = 384
    response_length: int = 160
    max_turns: int = 3  # assistant turns [paper 16]; the task needs 2
    # Torch threads. One is faster here: the matrices are tiny, and a second OpenMP thread competes with the sandbox
    # workers for the same 2 cores (measured under load: 2.2 SFT steps/s with 1 thread vs 0.2-0.4 with 2).
    threads: int = 1
    tool_config: str | None = None  # tool YAML (default: the recipe's verl_configs/tools/code_interpreter.yaml)

    @classmethod
    def fast(cls, **overrides: Any) -> DemoSettings:
        """The test-suite size: every stage runs, nothing is expected to learn."""
        values: dict[str, Any] = dict(
            steps=1,
            sft_problems=16,
            eval_problems=4,
            eval_samples=2,
            prompts_per_step=2,
            group_size=4,
            hidden_size=32,
            num_layers=1,
            sft_steps=4,
            sft_batch_size=4,
            response_length=64,
            max_turns=2,
        )
        values.update(overrides)
        return cls(**values)


def demo_overrides(s: DemoSettings) -> list[str]:
    """Hydra overrides the demo lays on the recipe's RL config (paper values in the comments)."""
    rollout = "actor_rollout_ref.rollout"
    actor = "actor_rollout_ref.actor"
    overrides = [
        f"{rollout}.n={s.group_size}",  # [paper 16]
        f"{rollout}.multi_turn.max_assistant_turns={s.max_turns}",  # [paper 16]
        f"{rollout}.multi_turn.max_user_turns={s.max_turns}",  # [paper 16]
        f"{actor}.ppo_mini_batch_size={max(1, s.prompts_per_step // s.ppo_mini_batches)}",  # [paper 16 prompts]
        f"{actor}.optim.lr={s.rl_lr}",  # [paper 1e-6]
        # DAPO overlong shaping over the last quarter of the (tiny) response budget [paper: 4096 of 20480 tokens]
        f"reward.reward_kwargs.overlong_buffer_cfg.len={max(1, s.response_length // 4)}",
        # one sandbox worker per core
        f"++{names.CONFIG_NAMESPACE}.sandbox.pool_size={max(1, s.threads)}",
    ]
    if s.tool_config:
        overrides.append(f"{rollout}.multi_turn.tool_config_path={Path(s.tool_config).resolve()}")
    return overrides


# ---------------------------------------------------------------------------------------------------- helpers


class _Stages:
    """Wall time per stage, printed as the demo goes."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.seconds: dict[str, float] = {}

    def run(self, name: str):
        stages = self

        class _Timer:
            def __enter__(self) -> None:
                print(f"\n== {name}", flush=True)
                self.t0 = time.monotonic()

            def __exit__(self, *exc: Any) -> None:
                stages.seconds[name] = round(time.monotonic() - self.t0, 2)
                if exc[0] is None:
                    print(f"   done in {stages.seconds[name]:.1f} s", flush=True)

        return _Timer()


def _quiet_verl_prints():
    """verl's BaseTool prints its JSON schema to stdout whenever a worker builds its tools; keep the demo readable."""
    return contextlib.redirect_stdout(io.StringIO())


def registered_components() -> dict[str, Any]:
    """The objects verl's registries resolve our names to (what every stage below goes through)."""
    import verl  # noqa: F401  (loads the plugin through the verl.plugins entry point)
    from verl.experimental.agent_loop.agent_loop import _agent_loop_registry
    from verl.experimental.reward_loop.reward_manager.registry import get_reward_manager_cls
    from verl.trainer.ppo import core_algos

    import agentrl_recipe.plugin  # noqa: F401  (idempotent; makes the registration explicit here)

    return {
        "agent_loop": _agent_loop_registry[names.AGENT_LOOP]["_target_"],
        "reward_manager": get_reward_manager_cls(names.REWARD_MANAGER),
        "adv_estimator": core_algos.get_adv_estimator_fn(names.ADV_ESTIMATOR),
        "policy_loss": core_algos.get_policy_loss_fn(names.POLICY_LOSS),
    }


def _qualname(obj: Any) -> str:
    return obj if isinstance(obj, str) else f"{obj.__module__}.{obj.__qualname__}"


def _render_corpus(problems: Sequence[Any], tool_schemas: list[dict[str, Any]]) -> tuple[str, ...]:
    """The task's conversations as text, so the tiny BPE learns them (a short system prompt helps a tiny model)."""
    from agentrl_recipe.demo_task import teacher_messages
    from agentrl_recipe.tiny_model import TinyModelSpec, build_tokenizer

    renderer = build_tokenizer(TinyModelSpec(corpus_lines=50))  # only its chat template is used here
    return tuple(
        renderer.apply_chat_template(teacher_messages(p, f"{p.answer}\n"), tools=tool_schemas, tokenize=False)
        for p in problems
    )


def _tool_schemas(cfg: Any) -> list[dict[str, Any]]:
    from verl.tools.tool_registry import initialize_tools_from_config

    with _quiet_verl_prints():
        tools = initialize_tools_from_config(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path)
    return [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools]


def _set_seed(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# ---------------------------------------------------------------------------------------------------- stages


async def _teacher_sft_set(s: DemoSettings, cfg: Any, tokenizer: Any, problems: Sequence[Any], data_dir: Path) -> dict:
    """Stage 2: real trajectories from the scripted teacher through the agent loop, verified, as an SFT parquet."""
    from agentrl_recipe import demo_task
    from agentrl_recipe.generation.common import ContextLimits
    from agentrl_recipe.generation.scripted import ScriptedClient
    from agentrl_recipe.rewards.scoring import compute_score
    from agentrl_recipe.rollout import arollout

    client = ScriptedClient(
        tokenizer,
        demo_task.teacher_script(problems),
        limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout),
    )
    client.record_calls = False
    rows = demo_task.rl_rows(problems, split="teacher")
    with _quiet_verl_prints():
        result = await arollout(rows, client, cfg, n=1, score=True, progress=True)
    tool_schemas = _tool_schemas(cfg)
    sft_rows, rejected = [], 0
    for rec in sorted(result.records, key=lambda r: r.row_index):  # completion order varies; the SFT set must not
        problem = problems[rec.row_index]
        verified = compute_score(demo_task.DATA_SOURCE, rec.response, problem.answer)
        if rec.messages is None or (rec.score or 0.0) <= 0.0 or not verified.get("acc"):
            rejected += 1
            continue
        sft_rows.append(
            {
                "messages": demo_task.sft_messages(rec.messages),
                "tools": tool_schemas,
                "data_source": demo_task.DATA_SOURCE,
            }
        )
    if not sft_rows:
        raise RuntimeError(
            "the teacher produced no verified trajectory; is the sandbox working? (agentrl-recipe doctor)"
        )
    demo_task.write_parquet(sft_rows, data_dir / "sft.parquet")
    demo_task.dump_jsonl([r.to_dict() for r in result.records], data_dir / "teacher_rollouts.jsonl")
    stats = {
        "attempted": len(result.records),
        "kept": len(sft_rows),
        "rejected": rejected,
        "tool_calls": sum(r.tool_calls for r in result.records),
        "tool_failures": sum(r.tool_failures for r in result.records),
        "tool_latency_p50_s": result.metrics.get("agentrl_tools/latency_s/p50"),
    }
    print(
        f"   teacher: {stats['kept']}/{stats['attempted']} trajectories verified and kept, "
        f"{stats['tool_calls']} sandbox calls ({stats['tool_failures']} failed)",
        flush=True,
    )
    return stats


def _sft(s: DemoSettings, model: Any, tokenizer: Any, parquet: Path) -> dict:
    """Stage 3: SFT with verl's MultiTurnSFTDataset and sft_loss."""
    import torch
    from tqdm.auto import tqdm
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    from agentrl_recipe.demo_trainer import collate_sft, cosine_lr, sft_step

    dataset = MultiTurnSFTDataset(
        str(parquet),
        tokenizer,
        config={
            "pad_mode": "no_padding",
            "max_length": s.prompt_length + s.response_length,
            "truncation": "error",
            "messages_key": "messages",
            "tools_key": "tools",
        },
    )
    items = [dataset[i] for i in range(len(dataset))]  # tokenized once; verl's sanity check runs per item
    loss_tokens = [int(it["loss_mask"].sum()) for it in items]
    rng = random.Random(s.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.sft_lr, weight_decay=0.0)
    losses = []
    warmup = max(1, s.sft_steps // 20)
    with tqdm(range(s.sft_steps), desc="sft", unit="step") as bar:
        for step in bar:
            for group in optimizer.param_groups:
                group["lr"] = cosine_lr(step, s.sft_steps, base_lr=s.sft_lr, warmup=warmup)
            batch = collate_sft(rng.sample(items, min(s.sft_batch_size, len(items))))
            loss = sft_step(model, optimizer, batch, grad_clip=1.0, pad_token_id=tokenizer.pad_token_id)
            losses.append(loss)
            bar.set_postfix(loss=f"{loss:.3f}")
    model.eval()
    return {
        "examples": len(items),
        "mean_tokens": sum(len(it["input_ids"]) for it in items) / len(items),
        "mean_loss_tokens": sum(loss_tokens) / len(items),
        "loss_first": losses[0],
        "loss_last": sum(losses[-10:]) / len(losses[-10:]),
        "losses": losses,
    }


async def _evaluate(
    s: DemoSettings, label: str, model: Any, tokenizer: Any, model_dir: Path, heldout: Path, out: Path
) -> dict:
    """Stages 4 and 6: the eval harness on the held-out problems, with the live model as its generator."""
    from agentrl_recipe.eval.config import EvalConfig
    from agentrl_recipe.eval.generate import RolloutGenerator, verl_overrides
    from agentrl_recipe.eval.runner import arun_eval
    from agentrl_recipe.generation.common import ContextLimits
    from agentrl_recipe.generation.hf_client import HFGenerationClient
    from agentrl_recipe.rollout import compose_config

    ecfg = EvalConfig(
        model=str(model_dir),
        data=[str(heldout)],
        out_dir=str(out),
        label=label,
        n_samples=s.eval_samples,
        temperature=1.0,
        top_p=s.eval_top_p,
        max_prompt_length=s.prompt_length,
        max_response_length=s.response_length,
        max_assistant_turns=s.max_turns,
        max_user_turns=s.max_turns,
        ks=sorted({1, s.eval_samples}),
        bootstrap_resamples=200,
        batch_size=max(1, s.eval_problems),
        seed=s.seed,
    )
    verl_cfg = compose_config(
        model_dir,
        overrides=[*demo_overrides(s), *verl_overrides(ecfg)],
        prompt_length=s.prompt_length,
        response_length=s.response_length,
    )
    client = HFGenerationClient(
        model, tokenizer, limits=ContextLimits.from_rollout_config(verl_cfg.actor_rollout_ref.rollout), seed=s.seed
    )
    with _quiet_verl_prints():
        report = await arun_eval(ecfg, generator=RolloutGenerator(ecfg, client=client, verl_config=verl_cfg))
    return report


def _eval_summary(report: dict, k: int) -> dict[str, Any]:
    """The headline numbers of an eval report (its one data source is the demo's task)."""
    from agentrl_recipe.demo_task import DATA_SOURCE

    result = report["results"][DATA_SOURCE]
    metrics, tools = result["metrics"], result["tool_stats"]
    avg = metrics["avg@n"]
    return {
        "k": k,
        "problems": metrics["num_problems"],
        f"avg@{k}": avg["value"],
        f"avg@{k}_ci95": [avg["ci_low"], avg["ci_high"]],
        "pass@1": metrics["pass@k"]["1"]["value"],
        f"pass@{k}": metrics["pass@k"][str(k)]["value"],
        "tool_calls_per_traj": tools["tool_calls_per_trajectory"]["mean"],
        "traj_with_tool_calls": tools["trajectories_with_tool_calls"],
        "tool_call_success_rate": tools["tool_call_success_rate"],
        "malformed_tool_calls": tools["malformed_tool_calls"],
    }


def _step_metrics(batch: Any, result: Any, update: dict[str, float], seconds: float, step: int) -> dict[str, Any]:
    import numpy as np

    scores = batch.batch["rm_scores"].sum(dim=-1)
    accs = [r.reward_extra_info.get("acc") for r in result.records]
    accs = [float(a) for a in accs if a is not None]
    metrics: dict[str, Any] = {
        "step": step,
        "reward/mean": float(scores.mean()),
        "reward/acc": float(np.mean(accs)) if accs else float("nan"),
        "tools/calls_per_traj": float(np.mean([r.tool_calls for r in result.records])),
        "tools/failures": int(sum(r.tool_failures for r in result.records)),
        "actor/entropy": update.get("actor/entropy_loss", float("nan")),
        "time/step_s": seconds,
        "response_length/mean": float(np.mean([r.response_tokens for r in result.records])),
    }
    metrics.update({k: v for k, v in update.items() if k.startswith("actor/")})
    metrics.update({k: v for k, v in result.metrics.items() if k.startswith("agentrl_tools/")})
    return metrics


def _format_row(metrics: dict[str, Any]) -> str:
    cells = []
    for key, header, fmt in STEP_COLUMNS:
        value = metrics.get(key)
        text = "-" if value is None else fmt.format(value)
        cells.append(text.rjust(len(header)))
    return "| " + " | ".join(cells) + " |"


def _table_header() -> str:
    headers = [h for _, h, _ in STEP_COLUMNS]
    return "| " + " | ".join(headers) + " |\n|" + "|".join("-" * (len(h) + 2) for h in headers) + "|"


async def _grpo_tcr(s: DemoSettings, cfg: Any, model: Any, tokenizer: Any, problems: Sequence[Any]) -> list[dict]:
    """Stage 5: GRPO-TCR iterations on the live model."""
    import numpy as np
    import torch
    from tqdm.auto import tqdm
    from verl.protocol import DataProto
    from verl.trainer.ppo.ray_trainer import compute_advantage
    from verl.utils.config import omega_conf_to_dataclass

    from agentrl_recipe import demo_task
    from agentrl_recipe.demo_trainer import ppo_update
    from agentrl_recipe.generation.common import ContextLimits
    from agentrl_recipe.generation.hf_client import HFGenerationClient
    from agentrl_recipe.rollout import Rollout

    actor_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    optim = cfg.actor_rollout_ref.actor.optim
    optimizer = torch.optim.AdamW(model.parameters(), lr=float(optim.lr), weight_decay=float(optim.weight_decay))
    client = HFGenerationClient(
        model, tokenizer, limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout), seed=s.seed
    )
    with _quiet_verl_prints():
        runner = await Rollout.create(cfg, client, score=True)
    rows = demo_task.rl_rows(problems, split="rl")
    rng = random.Random(s.seed + 1)
    trajectories = s.prompts_per_step * s.group_size
    mini_batch = max(1, trajectories // s.ppo_mini_batches)
    history: list[dict] = []
    print(_table_header(), flush=True)
    with tqdm(range(1, s.steps + 1), desc="grpo-tcr", unit="step") as bar:
        for step in bar:
            t0 = time.monotonic()
            picked = rng.sample(rows, s.prompts_per_step)
            client.global_steps = step
            result = await runner.run(picked, n=s.group_size, chunk_size=trajectories, progress=False)
            batch = DataProto.concat(result.batches)
            # One uid per prompt (verl's trainer draws a uuid per dataset row); records are in batch order.
            batch.non_tensor_batch["uid"] = np.array([f"{step}-{r.row_index}" for r in result.records], dtype=object)
            batch.batch["token_level_rewards"] = batch.batch["rm_scores"]  # no KL in the reward [paper]
            batch = compute_advantage(
                batch,
                adv_estimator=cfg.algorithm.adv_estimator,
                norm_adv_by_std_in_grpo=cfg.algorithm.norm_adv_by_std_in_grpo,
                config=cfg.algorithm,
            )
            update = ppo_update(
                model,
                optimizer,
                batch,
                actor_config,
                mini_batch_size=mini_batch,
                epochs=int(cfg.actor_rollout_ref.actor.ppo_epochs),
                temperature=float(cfg.actor_rollout_ref.rollout.temperature),
                seed=s.seed + step,
                pad_token_id=tokenizer.pad_token_id,
            )
            model.eval()
            metrics = _step_metrics(batch, result, update, time.monotonic() - t0, step)
            history.append(metrics)
            bar.write(_format_row(metrics))
            bar.set_postfix(reward=f"{metrics['reward/mean']:+.2f}", acc=f"{metrics['reward/acc']:.2f}")
    return history


def _plot(history: list[dict], sft: dict, before: dict, after: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    steps = [m["step"] for m in history]
    axes[0][0].plot(range(1, len(sft["losses"]) + 1), sft["losses"])
    axes[0][0].set(title="SFT loss (assistant tokens)", xlabel="SFT step", yscale="log")
    panels = [
        (axes[0][1], [("reward/mean", "reward mean"), ("reward/acc", "accuracy")], "GRPO-TCR reward"),
        (axes[0][2], [("tools/calls_per_traj", "tool calls / traj")], "tool use"),
        (
            axes[1][0],
            [
                (k, k.split("/")[-1])
                for k in ("actor/pg_clipfrac_low", "actor/pg_clipfrac_high", "actor/pg_clipfrac_dual")
            ],
            "clip fractions",
        ),
        (axes[1][1], [("actor/entropy", "entropy")], "policy entropy (response tokens)"),
    ]
    for ax, series, title in panels:
        for key, label in series:
            ax.plot(steps, [m.get(key, float("nan")) for m in history], marker="o", label=label)
        ax.set(title=title, xlabel="RL step")
        ax.legend()
    ax = axes[1][2]
    labels = [f"avg@{before['k']}", f"pass@{before['k']}"]
    for offset, (name, summ) in enumerate((("before RL", before), ("after RL", after))):
        values = [summ[f"avg@{summ['k']}"], summ[f"pass@{summ['k']}"]]
        ax.bar([i + offset * 0.4 for i in range(2)], values, width=0.4, label=name)
    ax.set_xticks([0.2, 1.2], labels)
    ax.set(title="held-out eval", ylim=(0, 1))
    ax.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=100)
    plt.close(fig)
    tmp.replace(path)
    return path


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


# ---------------------------------------------------------------------------------------------------- run


async def arun_demo(s: DemoSettings) -> dict[str, Any]:
    """Run every stage; returns what ``demo.json`` holds."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agentrl_recipe import demo_task
    from agentrl_recipe.rollout import compose_config
    from agentrl_recipe.tiny_model import TinyModelSpec, build_tiny_model

    torch.set_num_threads(max(1, s.threads))
    _set_seed(s.seed)
    out = Path(s.out)
    for derived in ("eval_before", "eval_after", "model_init", "model_sft", "model_rl", "data"):
        shutil.rmtree(out / derived, ignore_errors=True)  # the eval harness would otherwise resume an old run
    data_dir = out / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    stages = _Stages()
    components = registered_components()
    train, heldout = demo_task.make_splits(s.sft_problems + s.steps * s.prompts_per_step, s.eval_problems, seed=s.seed)
    sft_problems, rl_problems = train[: s.sft_problems], train[s.sft_problems :]
    heldout_path = demo_task.write_parquet(demo_task.rl_rows(heldout, split="heldout"), data_dir / "heldout.parquet")

    with stages.run("1/6 tiny model"):
        probe_cfg = compose_config("unused", overrides=demo_overrides(s))
        tool_schemas = _tool_schemas(probe_cfg)
        spec = TinyModelSpec(
            hidden_size=s.hidden_size,
            num_hidden_layers=s.num_layers,
            intermediate_size=4 * s.hidden_size,
            max_position_embeddings=2 * (s.prompt_length + s.response_length),
            seed=s.seed,
            extra_corpus=_render_corpus(sft_problems, tool_schemas),
        )
        init_dir = build_tiny_model(out / "model_init", spec)
        tokenizer = AutoTokenizer.from_pretrained(init_dir)
        model = AutoModelForCausalLM.from_pretrained(init_dir, dtype=torch.float32)
        print(f"   {sum(p.numel() for p in model.parameters()):,} parameters, vocab {len(tokenizer)}", flush=True)
    cfg = compose_config(
        init_dir, overrides=demo_overrides(s), prompt_length=s.prompt_length, response_length=s.response_length
    )
    with stages.run("2/6 real-trajectory SFT set (scripted teacher, sandboxed tool, verified)"):
        teacher = await _teacher_sft_set(s, cfg, tokenizer, sft_problems, data_dir)
    with stages.run("3/6 SFT (verl MultiTurnSFTDataset + sft_loss)"):
        sft = _sft(s, model, tokenizer, data_dir / "sft.parquet")
        sft_dir = out / "model_sft"
        model.save_pretrained(sft_dir)
        tokenizer.save_pretrained(sft_dir)
        print(
            f"   loss {sft['loss_first']:.3f} -> {sft['loss_last']:.3f} on {sft['examples']} trajectories", flush=True
        )
    with stages.run("4/6 eval before RL (held-out)"):
        report = await _evaluate(s, "sft", model, tokenizer, sft_dir, heldout_path, out / "eval_before")
        before = _eval_summary(report, s.eval_samples)
    with stages.run("5/6 GRPO-TCR"):
        history = await _grpo_tcr(s, cfg, model, tokenizer, rl_problems)
        rl_dir = out / "model_rl"
        model.save_pretrained(rl_dir)
        tokenizer.save_pretrained(rl_dir)
    with stages.run("6/6 eval after RL (held-out)"):
        report = await _evaluate(s, "sft+rl", model, tokenizer, rl_dir, heldout_path, out / "eval_after")
        after = _eval_summary(report, s.eval_samples)

    total_s = round(time.monotonic() - stages.start, 1)
    result = {
        "settings": dataclasses.asdict(s),
        "machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads()},
        "components": {k: _qualname(v) for k, v in components.items()},
        "stage_seconds": stages.seconds,
        "total_seconds": total_s,
        "teacher": teacher,
        "sft": {k: v for k, v in sft.items() if k != "losses"} | {"losses": [round(x, 5) for x in sft["losses"]]},
        "rl_steps": history,
        "eval_before": before,
        "eval_after": after,
    }
    _atomic_write(out / "steps.md", _table_header() + "\n" + "\n".join(_format_row(m) for m in history) + "\n")
    _plot(history, sft, before, after, out / "curves.png")
    _atomic_write(out / "demo.json", json.dumps(result, indent=2, default=str))
    avg = f"avg@{s.eval_samples}"
    print(
        f"\nheld-out {avg}: {before[avg]:.3f} before RL -> {after[avg]:.3f} after {s.steps} GRPO-TCR steps; "
        f"total {total_s:.0f} s. Outputs in {out}/",
        flush=True,
    )
    return result


def run_demo(s: DemoSettings) -> dict[str, Any]:
    return asyncio.run(arun_demo(s))


# ---------------------------------------------------------------------------------------------------- CLI


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoSettings()
    parser.add_argument("--out", default=d.out, help="output folder (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=None, help=f"GRPO-TCR steps (default {d.steps}; --fast: 1)")
    parser.add_argument("--fast", action="store_true", help="tiny sizes: every stage runs in about a minute (tests)")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--threads", type=int, default=d.threads, help="torch threads (default: %(default)s)")
    parser.add_argument("--sft-steps", type=int, default=None, help=f"SFT steps (default {d.sft_steps})")
    parser.add_argument(
        "--tool-config", default=None, help="tool YAML (default: verl_configs/tools/code_interpreter.yaml)"
    )


def settings_from_args(args: argparse.Namespace) -> DemoSettings:
    values: dict[str, Any] = {
        "out": args.out,
        "seed": args.seed,
        "threads": args.threads,
        "tool_config": args.tool_config,
    }
    if args.steps is not None:
        values["steps"] = args.steps
    if args.sft_steps is not None:
        values["sft_steps"] = args.sft_steps
    for key in ("steps", "sft_steps"):
        if key in values and values[key] < 1:
            raise SystemExit(f"--{key.replace('_', '-')} must be >= 1")
    return DemoSettings.fast(**values) if args.fast else DemoSettings(**values)


def main(args: argparse.Namespace) -> int:
    run_demo(settings_from_args(args))
    return 0
