"""Does an RL launch resume, and then: skip the validation before training (``make rl`` / ``make rl-smoke*``).

verl validates before the first step whenever ``trainer.val_before_train`` is true, resumed or not (its
``RayPPOTrainer.fit`` and the v1 trainer alike), so with the paper config (``val_before_train: true``) every restart
re-runs the 1,920-trajectory validation, whose numbers the run already logged at that step. The launcher knows before
verl does whether the run resumes — verl's own rule, read here without starting anything: ``resume_mode: auto`` with
``<default_local_dir>/latest_checkpointed_iteration.txt`` naming an existing ``global_step_<N>`` directory, or
``resume_mode: resume_path`` with ``resume_from_path`` set — and then passes ``trainer.val_before_train=false``.

The switch: ``VAL_ON_RESUME=1`` (``--val-on-resume``) keeps the validation on resume (verl's and the released code's
behaviour), and so does an explicit ``trainer.val_before_train=…`` among the user's overrides (the user's value
stands). A fresh start is untouched.

The SFT -> RL hand-off reads the same tracker: ``MODEL=<SFT checkpoint folder>`` is the newest step's HF export
(:func:`sft_export`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

TRACKER = (
    "latest_checkpointed_iteration.txt"  # verl.utils.checkpoint.checkpoint_manager.get_checkpoint_tracker_filename
)
VAL_KEY = "trainer.val_before_train"


def checkpoint_dir(cfg: Any) -> Path:
    """``trainer.default_local_dir``, absolute (from the launcher's working directory, as the trainers get it)."""
    return Path(str(cfg.trainer.default_local_dir)).absolute()


def resume_checkpoint(cfg: Any) -> str | None:
    """The checkpoint directory verl will resume from with this composed config, or None for a fresh start."""
    trainer = cfg.trainer
    mode = str(trainer.get("resume_mode", "auto"))
    if mode == "disable":
        return None
    if mode == "resume_path":
        path = trainer.get("resume_from_path")
        return str(Path(str(path)).absolute()) if path else None
    step = saved_step(cfg)
    return None if step is None else str(checkpoint_dir(cfg) / f"global_step_{step}")


def _sets(overrides: list[str], key: str) -> bool:
    return any(o.lstrip("+~").split("=", 1)[0] == key for o in overrides)


def resume_overrides(cfg: Any, user_overrides: list[str], *, val_on_resume: bool) -> tuple[list[str], str | None]:
    """(overrides to add, a line saying why) for a launch of ``cfg``: ``trainer.val_before_train=false`` when the
    run resumes, validates before training, and neither ``val_on_resume`` nor the user's overrides ask otherwise."""
    if val_on_resume or not cfg.trainer.get("val_before_train", True) or _sets(user_overrides, VAL_KEY):
        return [], None
    checkpoint = resume_checkpoint(cfg)
    if checkpoint is None:
        return [], None
    note = (
        f"resuming from {checkpoint}: {VAL_KEY}=false (that step's validation is already logged; "
        "VAL_ON_RESUME=1 validates again)"
    )
    return [f"{VAL_KEY}=false"], note


HF_EXPORT = "huggingface"  # verl's HF export inside a checkpoint step (checkpoint.save_contents: hf_model)


def sft_export(model: str) -> str:
    """The model an RL launch starts from: ``model`` itself, or — when it is a checkpoint folder holding verl's tracker
    file (an SFT run's ``trainer.default_local_dir``) — the HF export of the step the tracker names. So the hand-off
    does not hard-code the step (465 = 5 epochs only if 2,976 rows survive the data prep). ValueError when the
    tracker is unreadable or its step has no HF export."""
    root = Path(model)
    tracker = root / TRACKER
    if not tracker.is_file():
        return model
    try:
        step = int(tracker.read_text().strip())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{tracker} does not name a step ({exc}): pass MODEL=<a global_step_N/huggingface>") from None
    export = root / f"global_step_{step}" / HF_EXPORT
    if not (export / "config.json").is_file():
        raise ValueError(
            f"{tracker} names step {step} but {export} holds no HF export (config.json): save it with "
            "checkpoint.save_contents including hf_model, or pass MODEL=<a global_step_N/huggingface>"
        )
    return str(export)


# --- where a launch writes, and whether it trained: an async variant's own checkpoint dir, zero-step resumes ---

ASYNC_GROUP = "recipe/async"  # verl_configs/recipe/async/<variant>.yaml, added with ARGS="+recipe/async=<variant>"
DIR_KEY = "trainer.default_local_dir"


def async_variant(overrides: list[str]) -> str | None:
    """The ``recipe/async`` preset among the user's overrides (``+recipe/async=separate_async_cpu``), else None."""
    for override in overrides:
        key, _, value = override.lstrip("+~").partition("=")
        if key == ASYNC_GROUP and value:
            return value
    return None


def variant_dir_overrides(cfg: Any, user_overrides: list[str]) -> tuple[list[str], str | None]:
    """(overrides, a line saying why): an async variant writes to ``<default_local_dir>_<variant>``, so it never
    resumes the sync run's checkpoints (verl's ``resume_mode: auto`` would, and train nothing). The user's own
    ``trainer.default_local_dir`` stands."""
    variant = async_variant(user_overrides)
    if variant is None or _sets(user_overrides, DIR_KEY):
        return [], None
    directory = f"{str(cfg.trainer.default_local_dir).rstrip('/')}_{variant}"
    note = f"{variant}: checkpoints in {directory} (its own; {DIR_KEY}=<dir> to choose another)"
    return [f"{DIR_KEY}={directory}"], note


def checkpoint_step(cfg: Any) -> int | None:
    """The step verl would resume from with this config (:func:`resume_checkpoint`), or None for a fresh start."""
    checkpoint = resume_checkpoint(cfg)
    if checkpoint is None:
        return None
    try:
        return int(Path(checkpoint).name.removeprefix("global_step_"))
    except ValueError:
        return None


def nothing_to_train(cfg: Any) -> str | None:
    """One line when the run would resume at or past ``trainer.total_training_steps`` (verl then trains zero steps
    and exits 0), else None."""
    step = checkpoint_step(cfg)
    total = cfg.trainer.get("total_training_steps")
    if step is None or total is None or step < int(total):
        return None
    return (
        f"nothing to train: {resume_checkpoint(cfg)} is step {step} and trainer.total_training_steps={total}; "
        f"raise trainer.total_training_steps, or {DIR_KEY}=<a new dir> for a fresh run"
    )


def saved_step(cfg: Any) -> int | None:
    """The newest step saved in ``trainer.default_local_dir`` (verl's tracker file), whatever ``resume_mode`` says."""
    root = checkpoint_dir(cfg)
    try:
        step = int((root / TRACKER).read_text().strip())
    except (OSError, ValueError):
        return None
    return step if (root / f"global_step_{step}").is_dir() else None


def trained_line(cfg: Any, before: int | None, elapsed_s: float) -> tuple[str, bool]:
    """(the launch's last line, whether it trained): the steps this run added to its checkpoint dir (``before`` =
    :func:`saved_step` at launch) and its wall time; a run that started from a checkpoint and added none did not do
    what it was asked."""
    after = saved_step(cfg)
    took = f"{int(elapsed_s // 60)}m{int(elapsed_s % 60):02d}s"
    if after is None:
        return f"finished in {took} (no checkpoint saved: trainer.save_freq, {DIR_KEY})", True
    if before is not None and after <= before:
        return f"trained 0 steps: resumed at step {before} of {cfg.trainer.default_local_dir} and saved none", False
    start = (before or 0) + 1
    where = checkpoint_dir(cfg) / f"global_step_{after}"
    count = after - start + 1
    return f"trained steps {start}-{after} ({count} steps) in {took} (wall, start-up included): {where}", True
