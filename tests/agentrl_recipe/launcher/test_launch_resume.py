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
