"""End to end on CPU: the tiny model through the training agent loop, the real tool and sandbox, graded and reported.

The tiny model is random, so a script forces some turns (a real tool call, then a correct answer) and leaves the rest
to the model: the numbers are known where scripted and ~0 where the model writes (its text never holds the answer).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pytest

from agentrl_recipe.cli import eval as eval_cli
from agentrl_recipe.eval.dump import RolloutDump
from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.eval.runner import DUMP_FILE, run_eval
from agentrl_recipe.eval.sampling import RolloutGenerator, compose_eval_config

TOOL_CALL = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(17 * 12 + 0)"}}\n</tool_call>'
CALL_SOLUTION = (
    "```python\nclass Solution:\n    def addLists(self, a, b):\n        return [x + y for x, y in zip(a, b)]\n```"
)


def script(request):
    """AIME24 #0: a tool call, then the answer; AIME24 #1: answer at once; LCB call-based: the program; else: model."""
    text = request.prompt_text
    if "What is 17 * 12 + 0?" in text:
        return TOOL_CALL if request.turn == 0 else "The interpreter printed 204, so the answer is \\boxed{204}."
    if "2^10 is divided by 1000" in text:
        return "2^10 = 1024, remainder 24. \\boxed{24}"
    if "element-wise sum" in text:
        return f"Here is the program.\n{CALL_SOLUTION}"
    return None


def tiny_config(eval_parquet: Path, out: Path, **kw) -> EvalConfig:
    base = dict(
        model="",
        data=[str(eval_parquet)],
        out_dir=str(out),
        n_samples=2,
        max_prompt_length=1024,
        max_response_length=96,
        max_assistant_turns=3,
        max_user_turns=3,
        batch_size=3,
        lcb_timeout_s=6.0,
        bootstrap_resamples=200,
        label="tiny",
        tool_config=os.environ.get(
            "AGENTRL_TEST_TOOL_CONFIG"
        ),  # as tests/agentrl_recipe/training/agent_loop: another tool YAML
    )
    return EvalConfig(**(base | kw))


def scripted_generator(cfg: EvalConfig, model_dir: Path) -> RolloutGenerator:
    from verl_client.token_output import ContextLimits
    from verl_cpu.hf_client import HFGenerationClient

    verl_cfg = compose_eval_config(cfg)
    client = HFGenerationClient.from_pretrained(
        model_dir, limits=ContextLimits.from_rollout_config(verl_cfg.actor_rollout_ref.rollout), seed=0, script=script
    )
    return RolloutGenerator(cfg, client=client, verl_config=verl_cfg)


def test_tiny_model_eval_end_to_end(tiny_model_dir: Path, eval_parquet: Path, tmp_path: Path) -> None:
    cfg = tiny_config(eval_parquet, tmp_path, model=str(tiny_model_dir))
    gen = scripted_generator(cfg, tiny_model_dir)
    report = run_eval(cfg, generator=gen, show_progress=False)

    records = RolloutDump(tmp_path / DUMP_FILE).load()
    assert len(records) == 6 * 2
    tool_rec = records[("aime2024/0", 0)]
    assert tool_rec["tool_calls"] == 1 and tool_rec["tool_statuses"] == ["ok"]  # ran in the real sandbox
    assert any(m["role"] == "tool" and "204" in str(m["content"]) for m in tool_rec["messages"])
    assert tool_rec["correct"] is True and tool_rec["final_answer"] == "204"
    assert records[("aime2024/1", 1)]["tool_calls"] == 0 and records[("aime2024/1", 1)]["correct"] is True
    assert records[("livecodebench_v6/1", 0)]["grade"]["num_passed"] == 3

    res = report["results"]
    assert res["aime2024"]["headline"] == pytest.approx(
        {"metric": "avg@2", "value": 1.0, "ci_low": 1.0, "ci_high": 1.0}
    )
    assert res["aime2024"]["tool_stats"]["accuracy_vs_tool_calls"] == {
        "0": {"num_samples": 2, "accuracy": 1.0},
        "1": {"num_samples": 2, "accuracy": 1.0},
    }
    assert res["livecodebench_v6"]["headline"]["metric"] == "pass@1"
    assert res["livecodebench_v6"]["headline"]["value"] == pytest.approx(0.5)  # call-based scripted, stdin random
    assert res["aime2025"]["headline"]["value"] == 0.0 and res["gpqa_diamond"]["headline"]["value"] == 0.0
    assert res["aime2025"]["tool_stats"]["response_tokens"]["max"] <= 96
    assert report["overall"]["tool_stats"]["tool_status_counts"]["ok"] >= 2
    assert {"headline.png", "accuracy_vs_tool_calls.png", "tool_status.png"} <= set(report["files"]["plots"])
    assert all((tmp_path / f).is_file() for f in report["files"]["plots"])
    table = (tmp_path / "table.md").read_text()
    assert "| tiny | 100.0 [100.0, 100.0] | 0.0 [0.0, 0.0] | 0.0 [0.0, 0.0] | 50.0 [" in table
    assert json.loads((tmp_path / "report.json").read_text())["protocol"]["max_response_length"] == 96

    # rows needing different numbers of samples in one batch (a resumed problem) map back to their sample indices
    from agentrl_recipe.eval.eval_set import load_problems
    from agentrl_recipe.training.run_sync import run_coroutine_sync

    problems = load_problems([str(eval_parquet)], sources=["aime2024"])
    fresh = scripted_generator(cfg, tiny_model_dir)  # a client's locks belong to the event loop that used it
    trajs = run_coroutine_sync(fresh.generate(problems, [[3], [1, 4]]))
    got = sorted((problems[t.row_index].prompt_id, t.sample_index) for t in trajs)
    assert got == [("aime2024/0", 3), ("aime2024/1", 1), ("aime2024/1", 4)]


def test_cli_run_with_the_hf_backend_resumes(
    tiny_model_dir: Path,
    eval_parquet: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    out = tmp_path / "run"
    argv = [
        "run",
        "--model",
        str(tiny_model_dir),
        "--data",
        str(eval_parquet),
        "--out",
        str(out),
        "-k",
        "1",
        "--sources",
        "aime2024,livecodebench_v6",
        "--max-prompt-length",
        "1024",
        "--max-response-length",
        "24",
        "--batch-size",
        "2",
        "--no-progress",
        "--no-plots",
        "--backend",
        "hf",  # the tiny model's head size (16) is below vLLM's CPU minimum; the default vllm: integration tests
    ]
    if os.environ.get("AGENTRL_TEST_TOOL_CONFIG"):
        argv += ["--tool-config", os.environ["AGENTRL_TEST_TOOL_CONFIG"]]

    def cli(extra: list[str]) -> int:
        parser = argparse.ArgumentParser()
        eval_cli.add_arguments(parser)
        return eval_cli.main(parser.parse_args(argv + extra))

    # interrupted after its first batch of two problems (the dump keeps them), then resumed with one more sample
    real_append = RolloutDump.append

    def append_then_die(self: RolloutDump, records) -> int:
        real_append(self, records)
        raise KeyboardInterrupt("simulated kill after the first batch")

    with monkeypatch.context() as patch:
        patch.setattr(RolloutDump, "append", append_then_die)
        with pytest.raises(KeyboardInterrupt):
            cli([])
    assert len(RolloutDump(out / DUMP_FILE).load()) == 2
    assert cli(["-k", "2"]) == 0
    records = RolloutDump(out / DUMP_FILE).load()
    assert sorted(records) == [
        (f"{s}/{i}", k) for s in ("aime2024", "livecodebench_v6") for i in (0, 1) for k in (0, 1)
    ]
    printed = capsys.readouterr().out
    assert "| model | AIME24 | LCB-v6 |" in printed
    assert "temperature=1.0, top_p=0.6" in printed
