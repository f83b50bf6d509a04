"""``sft generate`` and ``model-aware`` end to end on CPU: the tiny model through the recipe's agent loop, the real
code_interpreter tool and sandbox, and the agentrl reward. The tiny model is random, so a script forces some turns
(a tool call, then a right or wrong answer, per sample) and leaves one problem to the model; the tests check the
pipeline, the counts and the files, not accuracy."""

from __future__ import annotations

import json
import os
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_parquet
from data_prep.jobs import model_aware, sft_generate
from data_prep.rows import rl_row

# question -> (answer, how many of the 4 samples answer correctly)
PROBLEMS = {
    "What is 17 * 12?": ("204", 4),  # always solved: dropped by model-aware
    "What is 13 * 11?": ("143", 3),  # 0.75: easy
    "What is 25 * 4?": ("100", 2),  # 0.5: medium
    "What is 19 * 3?": ("57", 1),  # 0.25: hard
}
MODEL_ONLY = "What is the 1000th prime number?"  # left to the tiny model: never solved


def tool_call(code: str) -> str:
    return '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "' + code + '"}}\n</tool_call>'


def make_script():
    samples: dict[str, dict[str, int]] = defaultdict(dict)  # question -> request_id -> sample ordinal

    def script(request):
        question = next((q for q in PROBLEMS if q in request.prompt_text), None)
        if question is None:
            return None
        answer, n_right = PROBLEMS[question]
        ordinal = samples[question].setdefault(request.request_id, len(samples[question]))
        if request.turn == 0:
            return "Let me compute it.\n" + tool_call(f"print({question[8:-1]})")
        boxed = answer if ordinal < n_right else str(int(answer) + 1)
        return f"The interpreter printed the product, so the answer is \\boxed{{{boxed}}}."

    return script


@pytest.fixture
def problems_file(tmp_path: Path) -> Path:
    rows = [rl_row(names.DS_DAPO, q, "MATH", a, {"question": q}) for q, (a, _) in PROBLEMS.items()]
    rows.append(rl_row(names.DS_DAPO, MODEL_ONLY, "MATH", "7919", {"question": MODEL_ONLY}))
    for i, row in enumerate(rows):
        row["extra_info"]["index"] = i
    path = tmp_path / "problems.parquet"
    atomic_write_parquet(path, rows)
    return path


def rollout_argv(problems: Path, model: Path, out: Path) -> list[str]:
    overrides = [
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=3",
        "actor_rollout_ref.rollout.multi_turn.max_user_turns=3",
    ]
    tool_config = os.environ.get("AGENTRL_TEST_TOOL_CONFIG")
    if tool_config:
        overrides.append(f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config}")
    argv = [str(problems), "--model", str(model), "--out", str(out), "--n", "4", "--concurrency", "8"]
    argv += ["--prompt-length", "1024", "--response-length", "96"]
    for o in overrides:
        argv += ["--override", o]
    return argv


def tiny_client(args, script=None):
    from data_prep.rollouts import compose
    from verl_client.token_output import ContextLimits
    from verl_cpu.hf_client import HFGenerationClient

    cfg = compose(args)
    limits = ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    return HFGenerationClient.from_pretrained(args.model, limits=limits, seed=0, script=script or make_script())


class NoCalls:
    """A client that fails the test if a resumed run generates anything."""

    async def generate(self, *args, **kwargs):
        raise AssertionError("a resumed run rolled out a problem that was already done")


def test_generate_end_to_end_and_resume(problems_file: Path, tiny_model_dir: Path, tmp_path: Path, parse_args) -> None:
    out = tmp_path / "sft" / "generated.parquet"
    argv = [*rollout_argv(problems_file, tiny_model_dir, out), "--tokenizer", str(tiny_model_dir)]
    args = parse_args(sft_generate, argv)
    report = sft_generate.build_sft_generated(args, client=tiny_client(args))

    assert report["problems"] == 5 and report["trajectories"] == 20
    assert report["problems_solved"] == 4  # the scripted problems; the tiny model alone solves nothing
    assert report["trajectory_outcomes"]["kept"] == 4  # one per solved problem (--keep-per-problem 1)
    assert report["trajectory_outcomes"]["wrong_answer"] >= 6
    assert report["verl_check"]["failed"] == 0
    assert report["agentrl_tools/status_ok_frac"] == 1.0 and report["agentrl_tools/latency_p99_s"] > 0
    rows = pq.read_table(out).to_pylist()
    assert len(rows) == 4
    for row in rows:
        msgs = [{k: v for k, v in m.items() if v is not None} for m in row["messages"]]
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "assistant"]
        assert msgs[1]["tool_calls"][0]["function"]["name"] == names.TOOL_NAME
        assert msgs[3]["content"].rstrip().endswith("}.")
        assert row["tools"][0]["function"]["name"] == names.TOOL_NAME
    tool_outputs = sorted(m["content"].strip() for r in rows for m in r["messages"] if m["role"] == "tool")
    assert tool_outputs == ["100", "143", "204", "57"]  # real sandbox output
    progress = [json.loads(line) for line in (tmp_path / "sft" / "generated.progress.jsonl").read_text().splitlines()]
    assert len(progress) == 5

    mtime = out.stat().st_mtime_ns
    again = sft_generate.build_sft_generated(args, client=NoCalls())  # finished: nothing rolled out, nothing rewritten
    assert again["rows_written"] == 4 and out.stat().st_mtime_ns == mtime
    args.force, args.keep_per_problem = True, 2
    rebuilt = sft_generate.build_sft_generated(args, client=NoCalls())  # new filters reuse the logged trajectories
    assert rebuilt["rows_written"] == 4


def test_model_aware_end_to_end(problems_file: Path, tiny_model_dir: Path, tmp_path: Path, parse_args) -> None:
    out = tmp_path / "ma" / "model_aware.parquet"
    args = parse_args(
        model_aware, [*rollout_argv(problems_file, tiny_model_dir, out), "--target", "easy=1,medium=1,hard=1"]
    )
    report = model_aware.cmd_model_aware(args, client=tiny_client(args))

    assert report["problems"] == 5 and report["dropped"] == {"always_solved": 1, "never_solved": 1}
    assert report["pool_before"] == {"easy": 1, "medium": 1, "hard": 1}
    assert report["written"] == {"easy": 1, "medium": 1, "hard": 1}
    rows = pq.read_table(out).to_pylist()
    by_diff = {r["extra_info"]["difficulty"]: r["extra_info"]["pass_rate"] for r in rows}
    assert by_diff == {"easy": 0.75, "medium": 0.5, "hard": 0.25}
    assert sorted(r["extra_info"]["index"] for r in rows) == [0, 1, 2]
    assert out.with_suffix(".difficulty.png").read_bytes()[:4] == b"\x89PNG"
    rates = tmp_path / "ma" / "model_aware.pass_rates.jsonl"
    assert sorted(json.loads(line)["pass_rate"] for line in rates.read_text().splitlines()) == [0, 0.25, 0.5, 0.75, 1]

    # match another model's histogram (here: a pass-rate file with only medium problems), resuming from the log
    other = tmp_path / "other.pass_rates.jsonl"
    other.write_text("".join(json.dumps({"key": str(i), "pass_rate": p}) + "\n" for i, p in enumerate([0.5, 0.6, 1.0])))
    args2 = parse_args(
        model_aware, [*rollout_argv(problems_file, tiny_model_dir, out), "--target-pass-rates", str(other)]
    )
    report2 = model_aware.cmd_model_aware(args2, client=NoCalls())
    assert report2["target_fractions"] == {"easy": 0.0, "medium": 1.0, "hard": 0.0}
    assert report2["written"] == {"easy": 0, "medium": 1, "hard": 0}


def test_resample_counts() -> None:
    import numpy as np

    pool = {"easy": [{"i": i} for i in range(10)], "medium": [{"i": i} for i in range(4)], "hard": [{"i": 0}]}
    target = {"easy": 0.5, "medium": 0.3, "hard": 0.2}
    picked, counts = model_aware.resample(pool, target, None, np.random.default_rng(0))
    assert counts == {"easy": 3, "medium": 1, "hard": 1} and len(picked) == 5  # limited by the single hard problem
    _, counts = model_aware.resample(pool, target, 10, np.random.default_rng(0))
    assert counts == {"easy": 5, "medium": 3, "hard": 2}  # hard repeats, with a warning
    assert [model_aware.difficulty_bin(p) for p in (0.0, 0.125, 0.25, 0.5, 0.75, 0.875, 1.0)] == [
        None, "hard", "hard", "medium", "easy", "easy", None,
    ]  # fmt: skip


def test_openai_backend_builds_the_token_in_token_out_client(
    problems_file: Path, tiny_model_dir: Path, tmp_path: Path, parse_args
) -> None:
    from agentrl_recipe.offline.openai_client import OpenAICompletionsClient
    from data_prep.rollouts import build_client, compose

    argv = [*rollout_argv(problems_file, tiny_model_dir, tmp_path / "x.parquet"), "--target", "easy=1"]
    args = parse_args(
        model_aware,
        [*argv, "--backend", "openai", "--base-url", "http://node:8000/v1", "--served-model-name", "policy"],
    )
    client = build_client(args, compose(args))  # no request is sent
    assert isinstance(client, OpenAICompletionsClient) and client.model == "policy"
    args.base_url = None
    with pytest.raises(SystemExit, match="--base-url"):
        build_client(args, compose(args))
