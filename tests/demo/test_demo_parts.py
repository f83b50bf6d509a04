"""The demo's task and teacher, its step table and its trainer runner, checked against verl's own conventions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentrl_recipe import names
from agentrl_recipe.cpu_task import task as demo_task
from agentrl_recipe.cpu_task import teacher as demo_teacher
from demo import demo_report, demo_runs


def test_splits_are_deterministic_disjoint_and_correct() -> None:
    train, heldout = demo_task.make_splits(200, 30, seed=3)
    again_train, again_heldout = demo_task.make_splits(200, 30, seed=3)
    assert train == again_train and heldout == again_heldout
    assert len(train) == 200 and len(heldout) == 30
    assert not {p.key for p in train} & {p.key for p in heldout}
    for p in [*train[:50], *heldout]:
        assert str(eval(p.code.removeprefix("print(").removesuffix(")"))) == p.answer  # the program prints the answer
        assert int(p.answer) >= 0
        assert p.call_text == f"Let me compute {p.code.removeprefix('print(').removesuffix(')')}."  # states it first
    with pytest.raises(ValueError, match="distinct held-out problems"):
        demo_task.make_splits(10, 10_000)


def test_rl_rows_follow_the_row_contract() -> None:
    _, heldout = demo_task.make_splits(1, 3)
    rows = demo_task.rl_rows(heldout, split="heldout")
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    for row, p in zip(rows, heldout, strict=True):
        assert row["agent_name"] == names.AGENT_LOOP and row["data_source"] == demo_task.DATA_SOURCE
        assert row["reward_model"] == {"ground_truth": p.answer, "style": "rule"}
        assert row["prompt"] == [{"role": "user", "content": f"{p.question} {demo_task.INSTRUCTION}"}]
    from agentrl_recipe.tasks import task_kind

    assert task_kind(demo_task.DATA_SOURCE) == "math"


def _request(tokenizer, text: str, turn: int) -> SimpleNamespace:
    return SimpleNamespace(turn=turn, prompt_text=text, prompt_ids=tokenizer.encode(text), tokenizer=tokenizer)


def test_teacher_turns_render_exactly_like_the_sft_conversation(tiny_tokenizer) -> None:
    """The scripted turns are the chat template's own rendering of the SFT messages (SFT text == rollout tokens)."""
    _, (problem, *_) = demo_task.make_splits(1, 2)
    tools = [{"type": "function", "function": {"name": names.TOOL_NAME, "description": "run", "parameters": {}}}]
    script = demo_teacher.teacher_script([problem])
    prompt = tiny_tokenizer.apply_chat_template(problem.prompt, tools=tools, tokenize=False, add_generation_prompt=True)
    call = script(_request(tiny_tokenizer, prompt, 0))
    observation = f"{problem.answer}\n"
    with_tool = prompt + call.text + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + observation
    with_tool += "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    answer = script(_request(tiny_tokenizer, with_tool, 1))
    assert answer.text == f"The answer is \\boxed{{{problem.answer}}}."
    rendered = tiny_tokenizer.apply_chat_template(
        demo_teacher.teacher_messages(problem, observation), tools=tools, tokenize=False
    )
    assert rendered == with_tool + answer.text + "<|im_end|>\n"
    assert script(_request(tiny_tokenizer, with_tool, 2)) is None  # no third turn
    assert script(_request(tiny_tokenizer, prompt.replace(problem.question, "unknown"), 0)) is None


def test_sft_messages_normalise_recorded_conversations() -> None:
    recorded = [
        {"role": "user", "content": "q", "tool_calls": None},
        {
            "role": "assistant",
            "content": "Let me compute it.\n",
            "tool_calls": [
                {"type": "function", "function": {"name": "code_interpreter", "arguments": '{"code": "1"}'}}
            ],
        },
        {"role": "tool", "content": "1\n"},
        {"role": "assistant", "content": "The answer is \\boxed{1}.", "tool_calls": []},
    ]
    out = demo_teacher.sft_messages(recorded)
    assert out[0] == {"role": "user", "content": "q"}
    assert out[1]["content"] == "Let me compute it."
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"code": "1"}
    assert out[2] == {"role": "tool", "content": "1\n"} and "tool_calls" not in out[3]
    assert demo_teacher.answer_from_observation("x\n\n 42 \n") == "42"
    assert demo_teacher.answer_from_observation("") == ""


def test_write_parquet_is_atomic_and_round_trips(tmp_path: Path) -> None:
    import pandas as pd

    path = demo_task.write_parquet([{"a": 1, "m": [{"role": "user", "content": "x"}]}], tmp_path / "d" / "x.parquet")
    assert not list(path.parent.glob("*.tmp")) and pd.read_parquet(path)["a"].tolist() == [1]


def test_a_teacher_right_part_of_the_time_errs_on_training_problems_only() -> None:
    train, heldout = demo_task.make_splits(400, 30, seed=1, teacher_accuracy=0.5)
    wrong = [p for p in train if p.teacher_output != p.answer]
    assert 0.35 < len(wrong) / len(train) < 0.65  # ~half (a wrong operator can still hit the answer: 2+2 = 2*2)
    for p in train:
        assert str(eval(p.code.removeprefix("print(").removesuffix(")"))) == p.teacher_output  # what it prints
    assert all(p.teacher_output == p.answer for p in heldout)
    perfect, _ = demo_task.make_splits(400, 30, seed=1)
    assert [p.key for p in perfect] == [p.key for p in train]  # the same problems; only the teacher differs
    assert all(p.teacher_output == p.answer for p in perfect)


def test_step_table_reads_verls_metric_names(tmp_path: Path) -> None:
    records = [
        {"step": 1, "data": {"critic/score/mean": -0.25, f"reward/{demo_task.DATA_SOURCE}/acc": 0.375}},
        {"step": 1, "data": {"actor/pg_clipfrac_high": 0.0125, "agentrl_tools/calls_per_traj/mean": 1.0}},
        {"step": 2, "data": {"critic/score/mean": 0.5}},
    ]
    path = tmp_path / "metrics.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    steps = demo_runs.read_metrics(path)
    assert sorted(steps) == [1, 2] and len(steps[1]) == 4  # records of one step are merged
    row = demo_report.table_row(1, steps[1])
    assert "-0.250" in row and "0.375" in row and "0.0125" in row and "1.00" in row
    lines = demo_report.table(steps).splitlines()
    assert len(lines) == 4 and all(line.count("|") == lines[0].count("|") for line in lines)


def test_a_failing_trainer_run_raises_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(demo_runs.TrainerFailed, match="exited with 2"):
        demo_runs.run_trainer("rl", "no_such_config", [], tmp_path / "run", total_steps=1, desc="x")


def test_hf_export_is_found_or_named_missing(tmp_path: Path) -> None:
    export = tmp_path / "global_step_3" / "actor" / "huggingface"
    export.mkdir(parents=True)
    with pytest.raises(FileNotFoundError, match="hf_model"):
        demo_runs.hf_export(tmp_path, 3)
    (export / "config.json").write_text("{}")
    assert demo_runs.hf_export(tmp_path, 3) == export


def test_a_repeated_question_gets_the_same_teacher_program() -> None:
    # The scripted teacher finds a problem by its question text: two programs for one question would make it answer
    # one row with another row's program, and the executed-trajectory check would then reject the row.
    train, _ = demo_task.make_splits(600, 10, seed=2, teacher_accuracy=0.5)
    programs: dict[str, set[str]] = {}
    for p in train:
        programs.setdefault(p.question, set()).add(p.code)
    assert len(programs) < len(train)  # questions do repeat
    assert all(len(codes) == 1 for codes in programs.values())


def test_the_model_summary_names_the_family_from_the_saved_files(tiny_model_dir: Path) -> None:
    model = demo_report.model_summary(tiny_model_dir)
    assert model == {
        "family": "qwen3",
        "architecture": "Qwen3ForCausalLM",
        "chat_template": "qwen3_2507_instruct.jinja",
        "parameters": model["parameters"],
        "hidden_size": 128,
        "layers": 4,
        "vocab_size": json.loads((tiny_model_dir / "config.json").read_text())["vocab_size"],
    }
    # tied embeddings: the lm_head adds no parameters (4 layers of q/k/v/o, q/k norms, MLP, 2 norms; embeddings, norm)
    h, kv, ffn, vocab = 128, 64, 256, model["vocab_size"]
    layer = h * h * 2 + h * kv * 2 + 32 * 2 + 3 * h * ffn + 2 * h
    assert model["parameters"] == 4 * layer + vocab * h + h
    assert demo_report.describe_model(model).startswith("tiny qwen3 (Qwen3ForCausalLM, ")
