"""A resumed RL launch skips the validation before training unless asked (VAL_ON_RESUME=1 or the user's own
trainer.val_before_train); verl's resume rule read without starting anything; checkpoint dirs made absolute."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.launcher import launch
from agentrl_recipe.launcher.resume import resume_checkpoint, resume_overrides

SKIP = "trainer.val_before_train=false"


def trainer(root: Path, **values) -> object:
    return OmegaConf.create(
        {"trainer": {"default_local_dir": str(root), "resume_mode": "auto", "val_before_train": True, **values}}
    )


def save(root: Path, step: int, *, tracked: int | None = None) -> None:
    """A checkpoint directory and verl's tracker file naming ``tracked`` (default: that step)."""
    (root / f"global_step_{step}").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text(str(step if tracked is None else tracked))


def test_verls_resume_rule(tmp_path: Path) -> None:
    assert resume_checkpoint(trainer(tmp_path / "none")) is None  # fresh: no directory
    save(tmp_path, 30)
    assert resume_checkpoint(trainer(tmp_path)) == str(tmp_path / "global_step_30")
    assert resume_checkpoint(trainer(tmp_path, resume_mode="disable")) is None
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("60")  # the tracker names a deleted step
    assert resume_checkpoint(trainer(tmp_path)) is None
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("garbage")
    assert resume_checkpoint(trainer(tmp_path)) is None
    explicit = trainer(tmp_path / "none", resume_mode="resume_path", resume_from_path="ck/global_step_7")
    assert resume_checkpoint(explicit) == str(Path("ck/global_step_7").absolute())
    assert resume_checkpoint(trainer(tmp_path, resume_mode="resume_path", resume_from_path=None)) is None


def test_a_resume_skips_validation_unless_asked(tmp_path: Path) -> None:
    save(tmp_path, 30)
    added, note = resume_overrides(trainer(tmp_path), [], val_on_resume=False)
    assert added == [SKIP]
    assert note == (
        f"resuming from {tmp_path}/global_step_30: trainer.val_before_train=false (that step's validation is "
        "already logged; VAL_ON_RESUME=1 validates again)"
    )
    assert resume_overrides(trainer(tmp_path), [], val_on_resume=True) == ([], None)  # VAL_ON_RESUME=1
    for own in ("trainer.val_before_train=true", "++trainer.val_before_train=true"):  # the user's value stands
        assert resume_overrides(trainer(tmp_path), ["a=1", own], val_on_resume=False) == ([], None)
    assert resume_overrides(trainer(tmp_path, val_before_train=False), [], val_on_resume=False) == ([], None)
    assert resume_overrides(trainer(tmp_path / "fresh"), [], val_on_resume=False) == ([], None)


def _args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    return parser.parse_intermixed_args(list(argv))


@pytest.mark.parametrize(("flag", "skipped"), [((), True), (("--val-on-resume",), False)])
def test_make_rl_on_a_resumed_run(tmp_path: Path, capsys, flag: tuple, skipped: bool) -> None:
    save(tmp_path, 30)
    overrides = [f"trainer.default_local_dir={tmp_path}"]
    command, _ = launch.rl_command("agentrl_rl_qwen3_4b", overrides, _args("rl", *flag))
    assert (SKIP in command) is skipped
    assert ("resuming from" in capsys.readouterr().out) is skipped


def test_every_checkpoint_dir_is_absolute(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sft, _ = launch.sft_command("agentrl_sft_qwen3_4b", ["trainer.resume_from_path=ck/global_step_62"], _args("sft"))
    assert f"trainer.default_local_dir={tmp_path}/checkpoints/agentrl_sft/qwen3_4b" in sft
    assert f"trainer.resume_from_path={tmp_path}/ck/global_step_62" in sft
    rl, _ = launch.rl_command("agentrl_rl_qwen3_4b", ["trainer.resume_from_path=ck/global_step_30"], _args("rl"))
    assert f"trainer.default_local_dir={tmp_path}/checkpoints/agentrl_recipe/demyagent_4b" in rl
    assert f"trainer.resume_from_path={tmp_path}/ck/global_step_30" in rl


# --- issue 46: the README's async line after the sync line; a resume that trains nothing ---

ASYNC = "+recipe/async=separate_async_cpu"


def _launch_inputs(tmp_path: Path) -> list[str]:
    """--model/--data/--val-data files that exist (the strict check), so a real launch gets past the config check."""
    model, data = tmp_path / "model", tmp_path / "train.parquet"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data.write_bytes(b"")
    return ["--model", str(model), "--data", str(data), "--val-data", str(data), "--skip-preflight"]


def _command_of(out: str) -> list[str]:
    import shlex

    return shlex.split(next(x for x in out.splitlines() if x.startswith("command: ")).removeprefix("command: "))


def test_an_async_variant_does_not_resume_the_sync_runs_checkpoints(tmp_path: Path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # agentrl_rl_cpu's own trainer.default_local_dir, outputs/cpu/rl_checkpoints, here
    sync_dir = tmp_path / "outputs/cpu/rl_checkpoints"
    save(sync_dir, 4)  # the README's sync line, finished
    argv = ["rl", "--config", "agentrl_rl_cpu", "--dry-run", *_launch_inputs(tmp_path)]
    assert launch.main(_args(*argv, ASYNC)) == 0
    out = capsys.readouterr().out
    own = f"{sync_dir}_separate_async_cpu"
    assert "separate_async_cpu: checkpoints in outputs/cpu/rl_checkpoints_separate_async_cpu" in out
    assert f"trainer.default_local_dir={own}" in _command_of(out)  # made absolute, as every checkpoint dir
    assert "resuming from" not in out  # a fresh start: nothing of the sync run is resumed
    mine = f"trainer.default_local_dir={tmp_path / 'mine'}"
    assert launch.main(_args(*argv, ASYNC, mine)) == 0  # the user's own dir stands
    assert "_separate_async_cpu" not in " ".join(_command_of(capsys.readouterr().out))


def test_a_launch_resuming_at_its_target_refuses_in_one_line(tmp_path: Path, capsys, monkeypatch) -> None:
    done = tmp_path / "rl_checkpoints"
    save(done, 4)  # agentrl_rl_cpu: total_training_steps 4
    started = []
    monkeypatch.setattr(launch.log_stream, "run", lambda *a, **k: started.append(a) or 0)
    argv = ["rl", "--config", "agentrl_rl_cpu", *_launch_inputs(tmp_path), f"trainer.default_local_dir={done}"]
    assert launch.main(_args(*argv)) == launch.NOTHING_TRAINED
    assert started == []  # nothing started: minutes of Ray and vLLM for zero steps
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"nothing to train: {done}/global_step_4 is step 4 and trainer.total_training_steps=4; raise "
        "trainer.total_training_steps, or trainer.default_local_dir=<a new dir> for a fresh run"
    )


def test_the_last_line_states_the_steps_trained_or_fails(tmp_path: Path, capsys, monkeypatch) -> None:
    ckpt = tmp_path / "rl_checkpoints"
    save(ckpt, 2)
    argv = ["rl", "--config", "agentrl_rl_cpu", *_launch_inputs(tmp_path), f"trainer.default_local_dir={ckpt}"]
    monkeypatch.setattr(launch.log_stream, "run", lambda *a, **k: 0)  # verl exits 0 having saved nothing
    assert launch.main(_args(*argv)) == launch.NOTHING_TRAINED
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"trained 0 steps: resumed at step 2 of {ckpt} and saved none"
    )

    def trains_to_4(*args, **kwargs) -> int:
        (ckpt / "global_step_4").mkdir()
        (ckpt / "latest_checkpointed_iteration.txt").write_text("4")
        return 0

    monkeypatch.setattr(launch.log_stream, "run", trains_to_4)
    assert launch.main(_args(*argv)) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("trained steps 3-4 (2 steps) in 0m0") and last.endswith(f"{ckpt}/global_step_4")
