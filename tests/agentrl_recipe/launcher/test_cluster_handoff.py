"""Issue 38's items outside the node matrix: the SFT -> RL hand-off from verl's tracker file, preflight's model
check, the targets that need no root, and the paper configs' rollout max_model_len."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentrl_recipe.cli import preflight
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.launcher.resume import sft_export

REPO = Path(__file__).resolve().parents[3]
PAPER_CONFIGS = sorted(p.stem for p in (REPO / "verl_configs").glob("agentrl_rl_qwen*.yaml"))


def test_an_sft_checkpoint_folder_hands_over_the_step_its_tracker_names(tmp_path: Path) -> None:
    (tmp_path / "global_step_372" / "huggingface").mkdir(parents=True)
    (tmp_path / "global_step_372" / "huggingface" / "config.json").write_text("{}")
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("372\n")
    assert sft_export(str(tmp_path)) == str(tmp_path / "global_step_372" / "huggingface")
    assert sft_export("Qwen/Qwen3-4B-Instruct-2507") == "Qwen/Qwen3-4B-Instruct-2507"
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("465\n")
    with pytest.raises(ValueError, match=r"names step 465 but .*global_step_465/huggingface holds no HF export"):
        sft_export(str(tmp_path))


def test_preflight_fails_on_a_local_model_path_that_does_not_exist(tmp_path: Path) -> None:
    cfg, _ = compose("agentrl_rl_qwen3_4b", [])
    lay = preflight.layout(cfg, "rl")
    missing = preflight.check_model(lay)
    assert not missing.ok
    assert missing.message.startswith("checkpoints/agentrl_sft/qwen3_4b/global_step_465/huggingface does not exist")
    lay.model_path = "Qwen/Qwen3-4B-Instruct-2507"
    assert preflight.check_model(lay).ok
    lay.model_path = str(tmp_path)
    assert preflight.check_model(lay).ok


@pytest.mark.parametrize("target", ["data-eval-sets", "data-rl-released", "data-sft-released", "configs", "eval",
                                    "rl-smoke", "sandbox-env"])  # fmt: skip
def test_targets_that_need_no_root_never_run_apt_get(target: str) -> None:
    done = subprocess.run(
        ["make", "-n", "-C", str(REPO), target, "MODEL=m", "DATA=d"], capture_output=True, text=True, timeout=60
    )
    assert "apt-get update" not in done.stdout, done.stdout  # system-deps' recipe (the venv's names a fix, not runs it)


@pytest.mark.parametrize("name", PAPER_CONFIGS)
def test_the_paper_configs_give_vllm_the_prompt_plus_response_budget(name: str) -> None:
    cfg, _ = compose(name, [])
    budget = cfg.data.max_prompt_length + cfg.data.max_response_length
    assert cfg.actor_rollout_ref.rollout.max_model_len == budget == 23040
