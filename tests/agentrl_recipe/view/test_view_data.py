"""The viewer's data side: records, flags, the reasoning-mode table, the escaping and the size budget (no browser)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from view_fixtures import XSS_SCRIPT, eval_record, eval_tokens, training_record, word_tokenizer, write_jsonl

from agentrl_recipe.view import aggregate, page, records
from agentrl_recipe.view.build import build_page
from agentrl_recipe.view.serve import Index
from agentrl_recipe.view.sources import discover


def test_flags_name_every_condition() -> None:
    fields = {
        "agentrl_reward_hack_patterns": "exit_zero,print_expected",
        "agentrl_void_turn": True,
        "agentrl_malformed_tool_calls": 2,
        "agentrl_tool_infra_failure": True,
        "overlong": True,
        "agentrl_termination": "max_response_length",
        "agentrl_grader_error": True,
    }
    assert records.flags(fields) == [
        "hack:exit_zero", "hack:print_expected", "void_turn", "malformed", "infra_error", "overlong", "truncated",
        "grader_error",
    ]  # fmt: skip
    assert records.flags({}) == []


def test_training_record_turns_follow_the_loss_mask() -> None:
    t = records.from_training(training_record(3, 0, calls=1, acc=False), "rl")
    assert t["tokens"]["text"] == ["Q", ":", " a", " tool", " b"]
    assert t["tokens"]["mask"] == [0, 0, 1, 0, 1]
    assert [(x["role"], x["content"]) for x in t["turns"]] == [
        ("prompt", "Q:"), ("assistant", " a"), ("tool", " tool"), ("assistant", " b"),
    ]  # fmt: skip
    assert t["breakdown"] == {"score": -1.0, "tool_bonus": 0.1, "overlong_penalty": 0.0, "final": -0.9}
    assert (t["correct"], t["step"], t["response_tokens"]) == (False, "3", 2)


def test_reasoning_mode_counts_calls_and_accuracy_by_calls() -> None:
    rows = [
        records.from_training(training_record(1, i, calls=c, acc=a), "rl")
        for i, (c, a) in enumerate([(0, False), (1, True), (1, False), (2, True)])
    ]
    rows[2]["tool_failures"] = 1
    (step,) = aggregate.reasoning_mode(rows)
    assert step["by_calls"] == {
        "0": {"trajectories": 1, "accuracy": 0.0},
        "1": {"trajectories": 2, "accuracy": 0.5},
        "2": {"trajectories": 1, "accuracy": 1.0},
    }
    assert (step["trajectories"], step["accuracy"], step["calls_mean"]) == (4, 0.5, 1.0)
    assert step["tool_success_rate"] == 3 / 4


def test_overview_reads_file_logger_metrics() -> None:
    metrics = {1: {"critic/score/mean": -0.5, "reward/toy/acc": 0.25, "agentrl_tools/failure_rate": 0.2},
               2: {"critic/score/mean": 0.1, "reward/toy/acc": 0.5}}  # fmt: skip
    metrics[1]["reward/hack_pattern/exit_in_call/acc"] = 0.0  # the hack counters are not a data source
    charts = {c["title"]: c for c in aggregate.overview(metrics)}
    assert charts["reward"]["series"] == [{"label": "reward", "key": "critic/score/mean", "values": [-0.5, 0.1]}]
    assert [s["label"] for s in charts["accuracy per source"]["series"]] == ["toy"]
    assert charts["tool success rate"]["series"][0]["values"] == [0.8, None]
    assert charts["entropy"]["series"] == []
    assert "SFT loss" not in charts


def test_an_sft_run_gets_its_own_charts() -> None:
    charts = aggregate.overview({1: {"train/loss": 8.0, "train/lr": 0.003}, 2: {"train/loss": 7.5, "train/lr": 0.003}})
    assert [c["title"] for c in charts] == ["SFT loss", "grad norm", "learning rate"]
    assert charts[0]["series"] == [{"label": "train", "key": "train/loss", "values": [8.0, 7.5]}]
    assert charts[1]["series"] == []
    neither = aggregate.overview({1: {"perf/x": 1.0}})  # the RL charts, empty
    assert [c["title"] for c in neither] == [t for t, _ in aggregate.OVERVIEW_CHARTS]


def test_script_json_cannot_close_the_script_element() -> None:
    text = page.script_json({"s": XSS_SCRIPT + "</script><!--"})
    assert "<" not in text and ">" not in text
    assert json.loads(text) == {"s": XSS_SCRIPT + "</script><!--"}


def test_missing_pieces_are_one_line_each(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "eval_a" / "rollouts.jsonl", [eval_record("p0", 0, correct=True)])
    notes = discover(tmp_path).notes
    assert len(notes) == 3
    assert notes[0] == "eval_a: no rollouts.tokens.jsonl (an eval older than it): no token mode"
    assert notes[1].startswith("no metrics.jsonl") and notes[2].startswith("no training trajectory dump")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"no metrics\.jsonl"):
        discover(tmp_path / "empty")


def test_static_page_stays_under_its_budget(tmp_path: Path) -> None:
    big = "x" * 20_000
    rows = [training_record(1, i, calls=1, acc=i % 2 == 0, pad=big) for i in range(200)]
    write_jsonl(tmp_path / "run" / "trajectories" / "step_000001.jsonl", rows)
    budget = 1_000_000
    path, data = build_page(tmp_path / "run", tmp_path / "page.html", budget)
    assert path.stat().st_size <= budget
    assert len(data["trajectories"]) == 200  # every summary listed, details sampled
    assert 0 < len(data["details"]) < 200
    assert any(re.match(r"turns and tokens embedded for \d+ of 200", n) for n in data["notes"])


def test_an_eval_report_shows_its_headline_figures() -> None:
    report = json.loads((Path(__file__).parent / "fixtures/demo_fast/eval_after/report.json").read_text())
    shown = page.headline(report)
    assert shown["records"] == 8
    assert {k for k in shown["metrics"] if k.startswith("eval/")} == {
        "eval/agentrl_demo_arith/avg@2", "eval/agentrl_demo_arith/pass@1", "eval/agentrl_demo_arith/pass@2",
        "eval/agentrl_demo_arith/maj@2",
    }  # fmt: skip


def test_eval_token_mode_decodes_the_sidecar_with_the_eval_model(tmp_path: Path) -> None:
    tokenizer = word_tokenizer(tmp_path / "model")
    ev = tmp_path / "ev"
    write_jsonl(ev / "rollouts.jsonl", [eval_record("p0", 0, correct=True), eval_record("p0", 1, correct=False)])
    write_jsonl(ev / "rollouts.tokens.jsonl", [eval_tokens("p0", 0)])  # sample 1: no tokens
    (ev / "report.json").write_text(json.dumps({"protocol": {"model": str(tokenizer)}}))
    _, data = build_page(ev, tmp_path / "page.html")
    tokens = data["details"]["ev/p0/0"]["tokens"]
    assert tokens == {
        "text": ["What", "is", "2", "+", "2", "?", "<tool_call>", "print", "4", "4"],
        "mask": [0, 0, 0, 0, 0, 0, 1, 1, 0, 1],
        "prompt_len": 6,
        "decoded": True,
    }
    assert data["details"]["ev/p0/1"]["tokens"] is None
    # model tokens: the mask's ones where the tokens are known (the record's response_tokens counts tool output too)
    assert [t["response_tokens"] for t in data["trajectories"]] == [3, 12]
    assert not any("rollouts.tokens.jsonl" in n for n in data["notes"])


def test_eval_tokens_without_their_tokenizer_show_ids(tmp_path: Path) -> None:
    ev = tmp_path / "ev"
    write_jsonl(ev / "rollouts.jsonl", [eval_record("p0", 0, correct=True)])
    write_jsonl(ev / "rollouts.tokens.jsonl", [eval_tokens("p0", 0)])
    (ev / "report.json").write_text(json.dumps({"protocol": {"model": str(tmp_path / "moved")}}))
    _, data = build_page(ev, tmp_path / "page.html")
    tokens = data["details"]["ev/p0/0"]["tokens"]
    assert tokens["text"][:2] == ["⟨1⟩", "⟨2⟩"] and tokens["decoded"] is False
    assert tokens["note"] == f"tokenizer {tmp_path / 'moved'} did not load (OSError): ids shown"
    # --tokenizer names one that is here
    _, data = build_page(ev, tmp_path / "page.html", tokenizer=str(word_tokenizer(tmp_path / "model")))
    assert data["details"]["ev/p0/0"]["tokens"]["text"][:2] == ["What", "is"]


def test_an_eval_without_a_sidecar_says_so(tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ev" / "rollouts.jsonl", [eval_record("p0", 0, correct=True)])
    _, data = build_page(tmp_path / "ev", tmp_path / "page.html")
    assert "ev: no rollouts.tokens.jsonl (an eval older than it): no token mode" in data["notes"]
    assert data["details"]["ev/p0/0"]["tokens"] is None


def test_a_torn_last_line_of_a_dump_being_written_is_skipped(tmp_path: Path) -> None:
    dump = write_jsonl(tmp_path / "ev" / "rollouts.jsonl", [eval_record("p0", 0, correct=True)])
    with open(dump, "a", encoding="utf-8") as f:
        f.write('{"prompt_id": "p0", "sample": 1, "da')
    before = dump.read_bytes()
    _, data = build_page(tmp_path / "ev", tmp_path / "page.html")
    assert [t["id"] for t in data["trajectories"]] == ["ev/p0/0"]
    assert dump.read_bytes() == before  # the viewer writes nothing to a dump


def test_serve_reads_one_eval_sample_at_its_offset(tmp_path: Path) -> None:
    ev = tmp_path / "ev"
    first = eval_record("aime/0", 0, correct=False)
    again = eval_record("aime/0", 0, correct=True) | {"messages": [{"role": "assistant", "content": "re-graded"}]}
    write_jsonl(ev / "rollouts.jsonl", [first, eval_record("aime/0", 1, correct=False), again])
    write_jsonl(ev / "rollouts.tokens.jsonl", [eval_tokens("aime/0", 0), eval_tokens("aime/0", 1)])
    (ev / "rollouts.tokens.jsonl").write_text(
        (ev / "rollouts.tokens.jsonl").read_text().replace('"sample": 1,', '"sample":1,')  # the writer's separators
    )
    index = Index(discover(ev))
    (step_file,) = index.inputs.steps
    assert step_file._offsets is None  # the summaries did not read the sidecar
    assert [(t["id"], t["correct"]) for t in index.data["trajectories"]] == [
        ("ev/aime/0/0", True), ("ev/aime/0/1", False),
    ]  # fmt: skip
    shown = index.detail("ev/aime/0/0")
    assert shown is not None and shown["turns"] == [{"role": "assistant", "content": "re-graded"}]  # the later line
    assert shown["tokens"]["mask"] == [0, 0, 0, 0, 0, 0, 1, 1, 0, 1]
    assert index.detail("ev/aime/0/1")["tokens"]["prompt_len"] == 6
    assert index.detail("ev/aime/0/7") is None and index.detail("ev/aime/x") is None
