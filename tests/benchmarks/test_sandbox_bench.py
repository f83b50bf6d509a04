"""benchmarks/sandbox.py's verdict: judged on the wall-clock calls/s only, ``NOT MET`` with the figure and its share."""

from __future__ import annotations

from benchmarks.sandbox import GOALS, judge, verdict


def _run(concurrency: int, calls_per_s: float, p50_ms: float = 3.0, spaced_ms: float | None = None) -> dict:
    run = {"concurrency": concurrency, "calls_per_s": calls_per_s, "errors": 0, "p50_ms": p50_ms}
    return run if spaced_ms is None else {**run, "spaced_ms": spaced_ms}


def test_verdict_met_at_and_above_the_goal() -> None:
    assert verdict(500.0, 500.0) == "met"
    assert verdict(731.2, 400.0) == "met"


def test_verdict_not_met_names_the_figure_and_its_share() -> None:
    assert verdict(204.7, 500.0) == "NOT MET (204.7 calls/s, 41% of the goal)"
    assert verdict(399.96, 400.0) == "NOT MET (400.0 calls/s, 100% of the goal)"


def test_verdict_a_failed_call_is_never_met() -> None:
    assert verdict(600.0, 500.0, errors=3) == "NOT MET (600.0 calls/s, 120% of the goal, 3 calls failed)"


def test_judge_takes_the_best_concurrent_run_never_the_cpu_bound() -> None:
    # the 1-in-flight and spaced runs are not throughput runs; the CPU-derived upper bound is never read
    bound = {"upper_bound_calls_per_s_2_idle_cores": 900.0}
    pool = {"runs": [_run(1, 999.0), _run(1, 999.0, spaced_ms=50.0), {**_run(4, 250.0), **bound}, _run(8, 310.0)]}
    http = {"runs": [_run(1, 999.0), {**_run(8, 420.0), **bound}]}
    cold = {"runs": [_run(1, 12.0, p50_ms=80.0), _run(4, 20.0)]}
    report = {"workload": "trivial", "pool": pool, "http": http, "cold_bwrap": cold}
    assert GOALS == {"pool": 500.0, "http": 400.0}
    assert judge(report) == {
        "pool": "NOT MET (310.0 calls/s, 62% of the goal)",
        "http": "met",
        "issue4": "met (pool / cold 15.5x calls/s, pool p50 3.0 ms)",
    }


def test_judge_only_the_trivial_workload_has_goals() -> None:
    report = {"workload": "numpy_sympy", "pool": {"runs": [_run(4, 1.0)]}, "http": {"runs": [_run(8, 1.0)]}}
    assert judge(report) == {}
