"""Reward throughput: strict math scores/s on one core, and code-test grading through the sandbox pool.

    .venv/bin/python benchmarks/rewards.py [--math-n 20000] [--programs 32] [--tests 10] [--backend local] [--out F]

Prints same-run ratios (numbers from one machine and one run, so they compare fairly):
- ``math strict / math_verify``: the paper's exact-match rule vs the math-verify option (isolated helper process);
- ``code one-execution / per-test``: our driver (all tests of a program in one sandbox execution, compared in the
  parent) vs one sandbox execution per test (what the original's SandboxFusion reward did).
Writes the numbers as JSON to ``--out`` (atomically) when given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import time
import warnings
from pathlib import Path

from tqdm import tqdm

from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.training.rewards import scoring
from agentrl_recipe.training.rewards.code.grade import CodeTests
from agentrl_recipe.training.rewards.code.io_tests import agrade_program
from agentrl_sandbox.config import SandboxConfig


def pin_to_one_core() -> str:
    if hasattr(os, "sched_setaffinity"):
        cpu = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cpu})
        return f"cpu {cpu}"
    return "not pinned (no sched_setaffinity)"


def math_responses(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    reasoning = "Let x be the unknown; expanding and collecting terms gives a quadratic we can solve. " * 25
    out = []
    for _ in range(n):
        gold = str(rng.randint(0, 999))
        roll = rng.random()
        if roll < 0.5:
            answer = f"Therefore the answer is \\boxed{{{gold}}}."
        elif roll < 0.8:
            answer = f"Therefore the answer is \\boxed{{\\frac{{{gold}}}{{2}}}}."
        else:
            answer = "I could not finish the computation."
        out.append((reasoning + answer, gold))
    return out


def bench_math(n: int, n_verify: int) -> dict:
    rows = math_responses(n)
    start = time.perf_counter()
    for solution, gold in tqdm(rows, desc="math strict", unit="score", mininterval=1.0):
        scoring.compute_score("math_dapo", solution, gold)
    strict_s = time.perf_counter() - start
    verify_rows = [(s.replace("\\boxed{", "\\boxed{0+"), g) for s, g in rows[:n_verify]]  # force real equivalence
    scoring.compute_score("math_dapo", *verify_rows[0], math_verifier="math_verify")  # worker start-up, not timed
    start = time.perf_counter()
    for solution, gold in tqdm(verify_rows, desc="math math_verify", unit="score", mininterval=1.0):
        scoring.compute_score("math_dapo", solution, gold, math_verifier="math_verify")
    verify_s = time.perf_counter() - start
    strict_rate, verify_rate = n / strict_s, n_verify / verify_s
    return {
        "strict_scores_per_s": strict_rate,
        "math_verify_scores_per_s": verify_rate,
        "ratio_strict_over_math_verify": strict_rate / verify_rate,
    }


PROGRAMS = [
    "n = int(input())\nprint(sum(map(int, input().split())))",  # correct
    "import sys\ndata = sys.stdin.read().split()\nprint(sum(map(int, data[1:])))",  # correct, fast IO
    "n = int(input())\nxs = list(map(int, input().split()))\nprint(sum(xs) if n % 2 else 0)",  # partially right
    "print(0)",  # wrong
]


def code_tests(n_tests: int, seed: int) -> CodeTests:
    rng = random.Random(seed)
    inputs, outputs = [], []
    for _ in range(n_tests):
        xs = [rng.randint(-1000, 1000) for _ in range(rng.randint(1, 50))]
        inputs.append(f"{len(xs)}\n{' '.join(map(str, xs))}\n")
        outputs.append(f"{sum(xs)}\n")
    return CodeTests(tuple(inputs), tuple(outputs))


async def bench_code(n_programs: int, n_tests: int, cfg: SandboxConfig, concurrency: int) -> dict:
    from agentrl_sandbox import get_sandbox

    sandbox = get_sandbox(cfg)
    jobs = [(PROGRAMS[i % len(PROGRAMS)], code_tests(n_tests, i)) for i in range(n_programs)]
    sem = asyncio.Semaphore(concurrency)
    await agrade_program(*jobs[0], sandbox=sandbox)  # warm the pool

    async def one(program: str, tests: CodeTests, bar: tqdm) -> int:
        async with sem:
            grade = await agrade_program(program, tests, sandbox=sandbox)
        bar.update(len(tests))
        return grade.passed

    def split(tests: CodeTests) -> list[CodeTests]:
        return [CodeTests((i,), (o,)) for i, o in zip(tests.inputs, tests.outputs, strict=True)]

    results = {}
    for name, units in (
        ("one_execution", [(p, t) for p, t in jobs]),
        ("per_test", [(p, single) for p, t in jobs for single in split(t)]),
    ):
        with tqdm(total=n_programs * n_tests, desc=f"code {name}", unit="test", mininterval=1.0) as bar:
            start = time.perf_counter()
            passed = await asyncio.gather(*(one(p, t, bar) for p, t in units))
            elapsed = time.perf_counter() - start
        results[name] = {"tests_per_s": n_programs * n_tests / elapsed, "passed": sum(passed), "seconds": elapsed}
    assert results["one_execution"]["passed"] == results["per_test"]["passed"], "the two ways must grade alike"
    results["ratio_one_execution_over_per_test"] = (
        results["one_execution"]["tests_per_s"] / results["per_test"]["tests_per_s"]
    )
    results["programs_per_s"] = n_programs / results["one_execution"]["seconds"]
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--math-n", type=int, default=20_000, help="strict math responses to score")
    parser.add_argument("--math-verify-n", type=int, default=200, help="responses for the math_verify comparison")
    parser.add_argument("--programs", type=int, default=32, help="code programs to grade")
    parser.add_argument("--tests", type=int, default=10, help="tests per program")
    parser.add_argument("--backend", default=None, help="sandbox backend (default: agentrl.sandbox default + env)")
    parser.add_argument("--concurrency", type=int, default=None, help="programs in flight (default: pool size)")
    parser.add_argument("--out", type=Path, default=None, help="write the numbers as JSON here")
    args = parser.parse_args(argv)

    cfg = SandboxConfig().with_env_overrides()
    if args.backend:
        cfg = SandboxConfig(backend=args.backend).with_env_overrides()
    concurrency = args.concurrency or cfg.pool_size or (os.cpu_count() or 1)

    print(f"rewards benchmark: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, sandbox={cfg.backend}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the subprocess backend's no-isolation warning
        code = asyncio.run(bench_code(args.programs, args.tests, cfg, concurrency))
    pinned = pin_to_one_core()  # after the sandbox part: its pool should use every core
    math = bench_math(args.math_n, args.math_verify_n)
    report = {"math": {**math, "pinned": pinned}, "code": {**code, "concurrency": concurrency, "backend": cfg.backend}}
    print(f"math strict:       {math['strict_scores_per_s']:,.0f} scores/s on one core ({pinned})")
    print(f"math math_verify:  {math['math_verify_scores_per_s']:,.1f} scores/s")
    print(f"  ratio strict / math_verify = {math['ratio_strict_over_math_verify']:,.0f}x")
    one, per = code["one_execution"], code["per_test"]
    print(f"code one-execution: {one['tests_per_s']:,.1f} tests/s ({code['programs_per_s']:,.2f} programs/s)")
    print(f"code per-test:      {per['tests_per_s']:,.1f} tests/s")
    print(f"  ratio one-execution / per-test = {code['ratio_one_execution_over_per_test']:,.1f}x")
    if args.out:
        atomic_write_text(args.out, json.dumps(report, indent=2))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
