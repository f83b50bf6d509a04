"""``make demo`` (``python -m demo.demo``): the recipe end to end on CPU with a tiny model, through verl's own trainers.

It shows the pipeline working and GRPO-TCR raising held-out accuracy on a toy task — not the paper's results.

1. **inputs** (:mod:`agentrl_recipe.cpu_task.inputs`, :mod:`agentrl_recipe.cpu_task.task`): the tiny model, the
   scripted teacher's real trajectories (its ``code_interpreter`` calls run in the sandbox through
   ``agentrl_tool_agent``; the teacher picks the right operator only ``teacher_accuracy`` of the time and its executed
   trajectories are kept, so SFT leaves room for RL), RL rows and held-out rows (disjoint by template and operands);
2. **SFT** — verl's SFT trainer under torchrun (``agentrl_sft_demo``: FSDP2 on gloo, the ``agentrl_cpu`` platform);
3. **eval before RL** — the eval harness (:mod:`agentrl_recipe.eval`) on the SFT's Hugging Face export;
4. **GRPO-TCR** — ``verl.trainer.main_ppo`` (``agentrl_rl_demo``: v1 hybrid, ``agentrl_hf`` replica, the whole
   plugin in its Ray workers); the per-step table comes from verl's file-logger metrics as the steps land;
5. **eval after RL** — same harness and protocol on the RL checkpoint's Hugging Face export.

Outputs in ``--out`` (default ``demo_out/``): ``demo.json``, ``steps.md``, ``curves.png``, ``eval_before/`` and
``eval_after/`` (report.json, table.md, plots, rollouts), ``inputs/``, ``sft/`` and ``rl/`` (checkpoints), and
``runs/{sft,rl}/`` (each trainer's log, ``metrics.jsonl`` and Hydra's record of the run in ``hydra/``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.cpu_task import inputs as cpu_inputs
from agentrl_recipe.cpu_task import teacher as demo_teacher
from agentrl_recipe.view.build import build_page
from demo import demo_report, demo_runs

SFT_CONFIG, RL_CONFIG = "agentrl_sft_demo", "agentrl_rl_demo"
# As in agentrl_rl_demo.yaml (the eval uses the same limits as the teacher and the trainer).
TURNS, PROMPT_LENGTH, RESPONSE_LENGTH = demo_teacher.MAX_TURNS, demo_teacher.PROMPT_LENGTH, demo_teacher.RESPONSE_LENGTH


@dataclasses.dataclass
class DemoSettings:
    """Sizes of one demo run; the trainers' own values are in verl_configs/agentrl_{sft,rl}_demo.yaml."""

    out: str = "demo_out"
    seed: int = 0
    # verl SFT steps of 16 sequences. The h128/L2 model at init std 0.06 learns to copy the operands by step ~60-130
    # (seeds 0-2); at HF's 0.02 it took 180-270+ steps and crossed within 270 on one seed of three.
    sft_steps: int = 180
    rl_steps: int = 16  # GRPO-TCR steps of 8 prompts × 8 samples
    sft_problems: int = 320  # teacher trajectories attempted
    rl_problems: int = 256  # RL prompts (shuffled by the dataloader)
    # Held-out problems. The training draws share demo_task's RNG with them, so changing this changes the SFT set too:
    # 32 is the count the SFT stop (sft_steps) was checked with.
    eval_problems: int = 32
    eval_samples: int = 8  # k of avg@k [paper 32]; 8 samples narrow the 95% intervals (4 overlapped on seed 0)
    teacher_accuracy: float = 0.5  # the teacher's right-operator rate; its wrong trajectories are kept (headroom)
    hidden_size: int = 128  # h64 never learned the copy in 450 steps (loss stuck at ~0.20: digits at chance)
    num_layers: int = 2
    initializer_range: float = 0.06  # init std [HF default 0.02]: the copy plateau is ~2x shorter (sft_steps)
    # The tiny model's family (agentrl_recipe/cpu_task/tiny_model.py): "qwen3" = Qwen3ForCausalLM with the Qwen3-2507
    # Instruct template (the paper's 4B run); "qwen2.5" = Qwen2ForCausalLM with the Qwen2.5 template (the 7B run).
    family: str = "qwen3"
    sft_overrides: tuple[str, ...] = ()
    rl_overrides: tuple[str, ...] = ()

    @classmethod
    def fast(cls, **values: Any) -> DemoSettings:
        """The test size: every stage runs through the real trainers; nothing is expected to learn."""
        small: dict[str, Any] = dict(
            sft_steps=2,
            rl_steps=1,
            sft_problems=16,
            rl_problems=8,
            eval_problems=4,
            eval_samples=2,
            hidden_size=32,
            num_layers=1,
            sft_overrides=("data.train_batch_size=4", "data.micro_batch_size_per_gpu=4"),
            rl_overrides=(
                "data.train_batch_size=2",
                "actor_rollout_ref.rollout.n=2",
                "actor_rollout_ref.actor.ppo_mini_batch_size=2",
            ),
        )
        return cls(**{**small, **values})


def _eval(s: DemoSettings, model: Path, heldout: Path, out: Path, label: str) -> dict[str, Any]:
    """The eval harness on the held-out rows, sampled at temperature 1 / top_p 1 (the policy RL trains)."""
    from agentrl_recipe.eval.protocol import EvalConfig
    from agentrl_recipe.eval.runner import run_eval

    shutil.rmtree(out, ignore_errors=True)  # the harness resumes a run folder; a demo run starts clean
    cfg = EvalConfig(
        model=str(model),
        data=[str(heldout)],
        out_dir=str(out),
        label=label,
        n_samples=s.eval_samples,
        temperature=1.0,
        top_p=1.0,  # [paper 0.6: near-greedy for a tiny model, hiding what RL changes in the sampled policy]
        seed=s.seed,
        max_prompt_length=PROMPT_LENGTH,
        max_response_length=RESPONSE_LENGTH,
        max_assistant_turns=TURNS,
        max_user_turns=TURNS,
        ks=sorted({1, s.eval_samples}),
        compat="agentrl",  # the tool behaviour agentrl_rl_demo trains with (the eval default is the released one)
        batch_size=max(1, s.eval_problems),
        overrides=[f"reward.reward_kwargs.overlong_buffer_cfg.len={RESPONSE_LENGTH // 4}"],
        sandbox={"pool_size": 1},
    )
    with _quiet_verl_prints():
        report = run_eval(cfg)
    return demo_report.eval_summary(report, s.eval_samples)


def _quiet_verl_prints() -> contextlib.AbstractContextManager:
    """verl prints each tool's JSON schema (and its dataset class) to stdout whenever it builds them."""
    return contextlib.redirect_stdout(io.StringIO())


class _Stages:
    def __init__(self) -> None:
        self.start = time.monotonic()
        self.seconds: dict[str, float] = {}

    def begin(self, name: str) -> float:
        print(f"\n== {name}", flush=True)
        return time.monotonic()

    def end(self, name: str, t0: float) -> None:
        self.seconds[name] = round(time.monotonic() - t0, 1)
        print(f"   done in {self.seconds[name]:.1f} s", flush=True)


def _print_errors(name: str, log: Path) -> list[str]:
    errors = demo_runs.log_errors(log)
    for line in errors[:5]:
        print(f"   {name} ERROR: {line[:300]}", flush=True)
    return errors


def run_demo(s: DemoSettings) -> dict[str, Any]:
    """Run every stage; returns what ``demo.json`` holds."""
    out = Path(s.out).resolve()
    for derived in ("sft", "rl", "runs", "eval_before", "eval_after"):
        shutil.rmtree(out / derived, ignore_errors=True)
    stages, k = _Stages(), s.eval_samples
    t0 = stages.begin("1/5 inputs: tiny model, teacher trajectories (sandboxed tool), RL and held-out rows")
    sizes = cpu_inputs.CPUInputSizes(
        seed=s.seed,
        sft_problems=s.sft_problems,
        rl_problems=s.rl_problems,
        val_problems=s.eval_problems,
        hidden_size=s.hidden_size,
        num_layers=s.num_layers,
        initializer_range=s.initializer_range,
        teacher_accuracy=s.teacher_accuracy,
        family=s.family,
    )
    with _quiet_verl_prints():
        inputs = cpu_inputs.prepare(out / "inputs", sizes)
    model = demo_report.model_summary(inputs.model)
    print(f"   model: {demo_report.describe_model(model)}", flush=True)
    teacher = json.loads((out / "inputs" / "teacher.json").read_text())
    print(f"   teacher: {teacher['kept']}/{teacher['attempted']} executed trajectories kept, "
          f"{teacher['kept_wrong']} of them with a wrong operator", flush=True)  # fmt: skip
    stages.end("inputs", t0)

    t0 = stages.begin(f"2/5 SFT: verl sft_trainer ({SFT_CONFIG}), {s.sft_steps} steps")
    sft_args = [
        "--model", str(inputs.model), "--data", str(inputs.sft), f"trainer.total_training_steps={s.sft_steps}",
        f"trainer.save_freq={s.sft_steps}", f"trainer.default_local_dir={out / 'sft'}", f"trainer.seed={s.seed}",
        *s.sft_overrides,
    ]  # fmt: skip
    sft = demo_runs.run_trainer("sft", SFT_CONFIG, sft_args, out / "runs" / "sft", total_steps=s.sft_steps, desc="sft")
    sft_model = demo_runs.hf_export(out / "sft", s.sft_steps)
    losses = [sft[i]["train/loss"] for i in sorted(sft)]
    print(f"   loss {losses[0]:.3f} -> {losses[-1]:.3f}", flush=True)
    stages.end("sft", t0)

    t0 = stages.begin("3/5 eval before RL (held-out, eval harness)")
    before = _eval(s, sft_model, inputs.rl_val, out / "eval_before", "sft")
    stages.end("eval_before", t0)

    t0 = stages.begin(f"4/5 GRPO-TCR: verl main_ppo ({RL_CONFIG}), {s.rl_steps} steps")
    rl_args = [
        "--model", str(sft_model), "--data", str(inputs.rl_train), "--val-data", str(inputs.rl_val),
        f"trainer.total_training_steps={s.rl_steps}", f"trainer.save_freq={s.rl_steps}",
        f"trainer.default_local_dir={out / 'rl'}", f"data.seed={s.seed}",
        f"actor_rollout_ref.rollout.seed={s.seed}",
        f"agentrl.trajectory_dump.dir={out / 'runs' / 'rl' / 'trajectories'}", *s.rl_overrides,
    ]  # fmt: skip
    print(demo_report.table_header(), flush=True)
    rl = demo_runs.run_trainer(
        "rl", RL_CONFIG, rl_args, out / "runs" / "rl", total_steps=s.rl_steps, desc="grpo-tcr",
        on_step=lambda step, metrics, bar: bar.write(demo_report.table_row(step, metrics)),
    )  # fmt: skip
    rl_model = demo_runs.hf_export(out / "rl", s.rl_steps)
    stages.end("grpo_tcr", t0)

    t0 = stages.begin("5/5 eval after RL (held-out, same protocol)")
    after = _eval(s, rl_model, inputs.rl_val, out / "eval_after", "sft+grpo_tcr")
    stages.end("eval_after", t0)

    errors = {name: _print_errors(name, out / "runs" / name / "log.txt") for name in ("sft", "rl")}
    result = {
        "settings": dataclasses.asdict(s),
        "machine": {"cpus": os.cpu_count()},
        "configs": {"sft": SFT_CONFIG, "rl": RL_CONFIG},
        "model": model,
        "stage_seconds": stages.seconds,
        "total_seconds": round(time.monotonic() - stages.start, 1),
        "teacher": teacher,
        "sft": {"loss_first": losses[0], "loss_last": losses[-1], "model": str(sft_model)},
        "rl": {"model": str(rl_model)},
        "rl_steps": {str(step): metrics for step, metrics in sorted(rl.items())},
        "error_lines": {name: len(lines) for name, lines in errors.items()},
        "eval_before": before,
        "eval_after": after,
    }
    atomic_write_text(out / "steps.md", demo_report.table(rl))
    demo_report.plot(sft, rl, before, after, out / "curves.png")
    atomic_write_text(out / "demo.json", json.dumps(result, indent=2, default=str))
    view_page, _ = build_page(out)  # the trajectory viewer (docs/view.md): dumps, metrics, both evals
    (lo_b, hi_b), (lo_a, hi_a) = before[f"avg@{k}_ci95"], after[f"avg@{k}_ci95"]
    print(
        f"\nheld-out avg@{k}: {before[f'avg@{k}']:.3f} [{lo_b:.3f}, {hi_b:.3f}] after SFT -> "
        f"{after[f'avg@{k}']:.3f} [{lo_a:.3f}, {hi_a:.3f}] after {s.rl_steps} GRPO-TCR steps (95% bootstrap CI); "
        f"total {result['total_seconds']:.0f} s; {demo_report.describe_model(model)}. Outputs in {out}/",
        flush=True,
    )
    print(f"trajectory viewer: {view_page}", flush=True)
    return result


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = DemoSettings()
    parser.add_argument("--out", default=d.out, help="output folder (default: %(default)s)")
    parser.add_argument("--fast", action="store_true", help="test sizes: every stage runs, nothing learns")
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument("--steps", type=int, default=None, help=f"GRPO-TCR steps (default {d.rl_steps})")
    parser.add_argument("--sft-steps", type=int, default=None, help=f"SFT steps (default {d.sft_steps})")
    parser.add_argument("--teacher-accuracy", type=float, default=None, help=f"default {d.teacher_accuracy}")
    parser.add_argument("--family", choices=["qwen3", "qwen2.5"], default=d.family, help="tiny model (%(default)s)")


def settings_from_args(args: argparse.Namespace) -> DemoSettings:
    values: dict[str, Any] = {"out": args.out, "seed": args.seed, "family": args.family}
    for name, key in (("steps", "rl_steps"), ("sft_steps", "sft_steps"), ("teacher_accuracy", "teacher_accuracy")):
        if getattr(args, name) is not None:
            values[key] = getattr(args, name)
    for key in ("rl_steps", "sft_steps"):
        if key in values and values[key] < 1:
            raise SystemExit(f"--{key.replace('rl_', '').replace('_', '-')} must be >= 1")
    if not 0.0 < values.get("teacher_accuracy", 0.5) <= 1.0:
        raise SystemExit("--teacher-accuracy must be in (0, 1]")
    return DemoSettings.fast(**values) if args.fast else DemoSettings(**values)


def main(args: argparse.Namespace) -> int:
    run_demo(settings_from_args(args))
    return 0


if __name__ == "__main__":  # `python -m demo.demo` from the clone's root (`make demo`): the demo is not installed
    cli = argparse.ArgumentParser(prog="python -m demo.demo", description="the whole recipe end to end on CPU")
    add_arguments(cli)
    sys.exit(main(cli.parse_args()))
