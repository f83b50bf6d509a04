"""The demo end to end at test size (``--fast``): every stage runs through verl's own trainers and the eval harness.

Asserted from the run's own outputs only: the trainers' file-logger metrics and logs, the component markers the
plugin writes in the processes it runs in (``AGENTRL_TRACE_DIR``), the checkpoints' Hugging Face exports and the
eval harness's reports. tests/integration checks the trainers in depth; this checks the demo's wiring and outputs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentrl_recipe import names
from agentrl_recipe.training import trace
from demo import demo

pytestmark = [pytest.mark.slow, pytest.mark.timeout(3000)]  # the first test pays for the runs (fixtures)

# The tool is not among them: the 2-step SFT model of --fast makes no tool calls (tests/integration checks it in Ray).
IN_RAY_WORKERS = {
    names.AGENT_LOOP,
    names.REWARD_MANAGER,
    names.POLICY_LOSS,
    names.ADV_ESTIMATOR,
    "AgentRLReplayBuffer",
}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory, agentrl_cache: Path) -> tuple[Path, dict[str, Any]]:
    out = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(names.ENV_TRACE_DIR, str(out / "trace"))
        result = demo.run_demo(demo.DemoSettings.fast(out=str(out)))
    return out, result


def test_every_stage_ran_and_wrote_its_outputs(demo_run: tuple[Path, dict[str, Any]]) -> None:
    out, result = demo_run
    assert list(result["stage_seconds"]) == ["inputs", "sft", "eval_before", "grpo_tcr", "eval_after"]
    model = result["model"]  # the family the demo trained, read from the model's own files
    assert (model["family"], model["architecture"]) == ("qwen3", "Qwen3ForCausalLM")
    assert (model["chat_template"], model["hidden_size"], model["layers"]) == ("qwen3_2507_instruct.jinja", 32, 1)
    assert json.loads((out / "demo.json").read_text())["eval_after"] == result["eval_after"]
    assert (out / "curves.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "steps.md").read_text().count("\n") == 2 + len(result["rl_steps"])
    for stage in ("eval_before", "eval_after"):
        assert (out / stage / "report.json").is_file()
        assert result[stage]["problems"] == 4 and 0.0 <= result[stage]["avg@2"] <= 1.0


def test_rl_step_metrics_come_from_verls_tracker(demo_run: tuple[Path, dict[str, Any]]) -> None:
    out, result = demo_run
    step = result["rl_steps"]["1"]
    for key in ("actor/pg_clipfrac_low", "actor/pg_clipfrac_high", "actor/pg_clipfrac_dual", "actor/entropy"):
        assert key in step, key
    assert any(k.startswith("agentrl_tools/") for k in step) and "critic/score/mean" in step
    assert "step:1 - " in (out / "runs" / "rl" / "log.txt").read_text()  # verl's own console step log


def test_the_plugin_ran_inside_verls_ray_workers(demo_run: tuple[Path, dict[str, Any]]) -> None:
    out, _ = demo_run
    markers = trace.read(out / "trace")
    ran = {m["component"] for m in markers if m.get("ray_node")}
    assert ran >= IN_RAY_WORKERS, IN_RAY_WORKERS - ran
    assert any(m["component"] == names.TOOL_NAME for m in markers)  # the teacher's calls, in the sandbox


def test_the_after_eval_loaded_the_rl_checkpoints_export(demo_run: tuple[Path, dict[str, Any]]) -> None:
    out, result = demo_run
    rl_model = Path(result["rl"]["model"])
    assert rl_model.is_relative_to(out / "rl") and (rl_model / "config.json").is_file()
    report = json.loads((out / "eval_after" / "report.json").read_text())
    assert json.dumps(str(rl_model)) in json.dumps(report)  # the harness records the model it evaluated


def test_handled_parser_errors_are_not_logged_as_errors(demo_run: tuple[Path, dict[str, Any]]) -> None:
    out, _ = demo_run
    for stage in ("sft", "rl"):
        assert "Failed to decode tool call" not in (out / "runs" / stage / "log.txt").read_text()


def test_each_trainers_hydra_record_is_in_the_demos_folder(demo_run: tuple[Path, dict[str, Any]]) -> None:
    """verl's trainers are Hydra apps; the demo points their run dir into its ``--out`` (not ``outputs/<date>/`` in
    the directory `make demo` runs in)."""
    out, _ = demo_run
    for stage in ("sft", "rl"):
        assert (out / "runs" / stage / "hydra" / ".hydra" / "overrides.yaml").is_file(), stage
