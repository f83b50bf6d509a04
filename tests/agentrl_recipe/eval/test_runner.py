"""run_eval with a scripted generator: records, report, plots, table, resume, protocol guard, compare CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from eval_helpers import ScriptedGenerator

from agentrl_recipe.cli import eval as eval_cli
from agentrl_recipe.eval.dump import RolloutDump
from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.eval.runner import DUMP_FILE, run_eval

N = 4
PLOTS = {
    "headline.png",
    "pass_at_k.png",
    "tool_calls_hist.png",
    "turns_hist.png",
    "response_length_hist.png",
    "accuracy_vs_tool_calls.png",
    "tool_status.png",
}


def config(eval_parquet: Path, out: Path, **kw) -> EvalConfig:
    kw.setdefault("plots", False)  # drawing costs ~0.5 s per PNG; one test checks the plots
    return EvalConfig(
        model="scripted",
        data=[str(eval_parquet)],
        out_dir=str(out),
        n_samples=N,
        batch_size=2,
        bootstrap_resamples=200,
        **kw,
    )


def test_full_run_writes_records_report_plots_and_table(eval_parquet: Path, tmp_path: Path) -> None:
    gen = ScriptedGenerator()
    report = run_eval(config(eval_parquet, tmp_path, plots=True), generator=gen, show_progress=False)
    assert len(gen.calls) == 6 * N  # 6 problems × 4 samples
    records = RolloutDump(tmp_path / DUMP_FILE).load()
    assert len(records) == 6 * N
    rec = records[("livecodebench_v6/1", 0)]
    assert rec["correct"] is True and rec["task"] == "code" and "class Solution" in rec["final_answer"]
    assert records[("aime2024/0", 1)]["final_answer"] == "999999" and records[("aime2024/0", 1)]["correct"] is False

    # half of the samples are correct everywhere -> avg@4 = 0.5, pass@2 = 1 - C(2,2)/C(4,2) = 5/6, pass@4 = 1
    for source in ("aime2024", "aime2025", "gpqa_diamond", "livecodebench_v6"):
        r = report["results"][source]
        m = r["metrics"]
        assert m["avg@n"]["value"] == pytest.approx(0.5)
        assert m["pass@k"]["2"]["value"] == pytest.approx(5 / 6)
        assert m["pass@k"]["4"]["value"] == pytest.approx(1.0)
        assert r["headline"]["metric"] == ("pass@1" if source == "livecodebench_v6" else "avg@4")
        assert r["headline"]["value"] == pytest.approx(0.5)
    assert "maj@k" not in report["results"]["livecodebench_v6"]["metrics"]  # no voting over programs
    assert report["results"]["aime2024"]["metrics"]["maj@k"]["1"]["value"] == pytest.approx(1.0)

    ts = report["results"]["aime2024"]["tool_stats"]
    # samples 0..3 make 0, 1, 2, 0 calls; sample 2 has one failing call
    assert ts["tool_calls_histogram"] == {"0": 4, "1": 2, "2": 2}
    assert ts["tool_status_counts"] == {"ok": 4, "runtime_error": 2}
    assert ts["tool_call_success_rate"] == pytest.approx(4 / 6)
    assert ts["accuracy_vs_tool_calls"]["0"] == {"num_samples": 4, "accuracy": 0.5}  # samples 0 (right), 3 (wrong)
    assert ts["accuracy_vs_tool_calls"]["1"]["accuracy"] == 0.0 and ts["accuracy_vs_tool_calls"]["2"]["accuracy"] == 1
    assert ts["turns_histogram"] == {"2": 4, "4": 2, "6": 2}

    flat = report["flat_metrics"]  # tracker-style keys, verl's validation name included
    assert flat["val-core/aime2024/acc/mean@4"] == pytest.approx(0.5)
    assert flat["eval/livecodebench_v6/pass@1"] == pytest.approx(0.5)
    assert flat["eval_tools/aime2024/status_runtime_error"] == 2.0

    p = report["protocol"]
    assert (p["n_samples"], p["temperature"], p["top_p"], p["max_response_length"]) == (N, 1.0, 0.6, 20480)
    assert report["deviations_from_paper"]["n_samples"] == {"run": N, "paper": 32}
    assert p["compat"] == "open_agentrl" and "compat" not in report["deviations_from_paper"]  # the released tool
    assert report["data"]["problems_per_source"] == {
        "aime2024": 2,
        "aime2025": 1,
        "gpqa_diamond": 1,
        "livecodebench_v6": 2,
    }
    on_disk = json.loads((tmp_path / "report.json").read_text())
    assert on_disk["results"]["aime2024"]["headline"] == report["results"]["aime2024"]["headline"]
    assert {f.name for f in tmp_path.glob("*.png")} >= PLOTS
    assert all((tmp_path / f).stat().st_size > 1000 for f in PLOTS)
    table = (tmp_path / "table.md").read_text()
    assert "| model | AIME24 | AIME25 | GPQA-D | LCB-v6 |" in table
    assert "protocol open_agentrl (the released eval: its tool behaviour; AIME/GPQA by its reward's acc" in table
    assert "| scripted | 50.0 [" in table and "DemyAgent-4B (paper Table 2) | 72.6 | 70.0 | 58.5 | 26.8 |" in table
    assert gen.closed is False  # a generator passed in belongs to the caller


def test_resume_after_interruption(eval_parquet: Path, tmp_path: Path) -> None:
    cfg = config(eval_parquet, tmp_path)
    with pytest.raises(KeyboardInterrupt):
        run_eval(cfg, generator=ScriptedGenerator(fail_after_batches=1), show_progress=False)
    dump_path = tmp_path / DUMP_FILE
    first = RolloutDump(dump_path).load()
    assert len(first) == 2 * N  # one batch of 2 problems was written before the kill
    # a crash mid-write leaves a torn last line: it is cut off and that pair is generated again
    with open(dump_path, "a", encoding="utf-8") as f:
        f.write('{"prompt_id": "aime2025/0", "sample": 0, "data_so')

    gen = ScriptedGenerator()
    report = run_eval(cfg, generator=gen, show_progress=False)
    assert len(gen.calls) == 4 * N and not set(gen.calls) & set(first)  # only the missing pairs
    assert len(RolloutDump(dump_path).load()) == 6 * N
    assert report["results"]["aime2025"]["metrics"]["num_samples"] == N

    # nothing left to do: a third run generates nothing and reproduces the report
    gen3 = ScriptedGenerator()
    again = run_eval(cfg, generator=gen3, show_progress=False)
    assert gen3.calls == []
    assert again["results"] == report["results"]

    # more samples extend the run; a different sampling protocol is refused
    gen4 = ScriptedGenerator()
    bigger = run_eval(
        config(eval_parquet, tmp_path).__class__(**{**cfg.__dict__, "n_samples": 6}),
        generator=gen4,
        show_progress=False,
    )
    assert sorted({s for _, s in gen4.calls}) == [4, 5]
    assert bigger["results"]["aime2024"]["metrics"]["samples_per_problem"] == {"min": 6, "max": 6}
    with pytest.raises(ValueError, match=r"another protocol \(temperature: 1.0 -> 0.7\)"):
        run_eval(config(eval_parquet, tmp_path, temperature=0.7), generator=ScriptedGenerator(), show_progress=False)


def test_infra_failed_grades_are_regraded_not_scored(eval_parquet: Path, tmp_path: Path) -> None:
    cfg = config(eval_parquet, tmp_path)
    run_eval(cfg, generator=ScriptedGenerator(), show_progress=False)
    dump = RolloutDump(tmp_path / DUMP_FILE)
    rec = dump.load()[("livecodebench_v6/0", 0)]
    dump.append([rec | {"correct": None, "infra_failure": True, "grade": {"infra_failure": True}}])
    stale = run_eval(cfg, generator=ScriptedGenerator(), sandbox=_BrokenSandbox(), show_progress=False)
    lcb = stale["results"]["livecodebench_v6"]
    assert lcb["excluded_infra_samples"] == 1  # still broken: excluded and counted, not scored wrong
    assert lcb["metrics"]["num_samples"] == 2 * N - 1
    fixed = run_eval(cfg, generator=ScriptedGenerator(), show_progress=False)
    assert fixed["timing"]["regraded_infra_samples"] == 1
    assert fixed["results"]["livecodebench_v6"]["excluded_infra_samples"] == 0
    assert dump.load()[("livecodebench_v6/0", 0)]["correct"] is True


class _BrokenSandbox:
    async def arun(self, *args, **kwargs):
        from agentrl_sandbox import ExecResult

        return ExecResult(status="infra_error", message="sandbox down")


def test_cli_report_and_compare(eval_parquet: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_a, run_b = tmp_path / "a", tmp_path / "b"
    run_eval(config(eval_parquet, run_a, label="model-A"), generator=ScriptedGenerator(), show_progress=False)
    run_eval(
        config(eval_parquet, run_b, label="model-B", top_p=1.0), generator=ScriptedGenerator(), show_progress=False
    )
    (run_a / "report.json").unlink()

    def cli(*argv: str) -> int:
        import argparse

        parser = argparse.ArgumentParser()
        eval_cli.add_arguments(parser)
        return eval_cli.main(parser.parse_args(list(argv)))

    assert cli("report", str(run_a), "--no-plots") == 0  # rebuilt from the dump
    assert (run_a / "report.json").exists()
    capsys.readouterr()
    assert cli("compare", str(run_a), str(run_b / "report.json")) == 0
    out = capsys.readouterr().out
    assert "| run | AIME24 | AIME25 | GPQA-D | LCB-v6 |" in out
    assert "| model-A | 50.0 [" in out and "| model-B | 50.0 [" in out
    assert "| Δ (B − A) | +0.0 | +0.0 | +0.0 | +0.0 |" in out
    assert "- top_p: 0.6 vs 1.0" in out
    assert cli("compare", str(run_a), str(tmp_path / "missing")) == 2
    assert "no eval report" in capsys.readouterr().err


def test_fixture_parquet_matches_its_readable_source() -> None:
    import pyarrow.parquet as pq
    from eval_helpers import EVAL_PARQUET, FIXTURES

    rows = [json.loads(line) for line in (FIXTURES / "eval_small.jsonl").read_text().splitlines() if line.strip()]
    assert (
        pq.read_table(EVAL_PARQUET).to_pylist() == rows
    )  # rebuild with tests/agentrl_recipe/eval/fixtures/make_fixtures.py


def test_bad_eval_rows_fail_with_the_file_and_row(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from agentrl_recipe.eval.eval_set import load_problems

    bad = tmp_path / "bad.parquet"
    pq.write_table(
        pa.Table.from_pylist([{"data_source": "aime2024", "prompt": [{"role": "user", "content": "q"}]}]), bad
    )
    with pytest.raises(ValueError, match=r"bad\.parquet row 0: missing required field 'reward_model'"):
        load_problems([str(bad)])
    dup = tmp_path / "dup.parquet"
    row = {
        "data_source": "aime2024",
        "prompt": [{"role": "user", "content": "q"}],
        "reward_model": {"ground_truth": "1"},
        "extra_info": {"index": 0},
    }
    pq.write_table(pa.Table.from_pylist([row, row]), dup)
    with pytest.raises(ValueError, match="duplicate prompt ids"):
        load_problems([str(dup)])
    with pytest.raises(FileNotFoundError):
        load_problems([str(tmp_path / "missing.parquet")])
