"""The test suite's wall time, tracked: runs `make test` (or `make test-fast`), prints pytest's wall time, the test
count, the machine's load and the 15 slowest tests; ``--record`` writes what each test file took to
tests/durations.json, which orders the files on the xdist workers (tests/conftest.py); ``--fast --record`` adds the
tests that are slow only in `make test-fast` (:func:`record_fast`).

Usage: ``python benchmarks/test_suite.py [--fast] [--record] [--cache] [--log FILE] [--timeline]``. The SFT model the
trainer tests start from is trained in the run, as on a fresh clone, unless ``--cache``
(tests/integration/conftest.py).
Goals (issue 44, 2 cores): `make test` ≤ 720 s of pytest wall, `make test-fast` ≤ 180 s. The host's speed before and
after the run (benchmarks/host_probe.py: memory copy, page fault, a Python loop, `import torch`) is printed beside the
load: on this VM the same code's figure moved by 40 % with it, at the same load.

``--timeline`` also records when each test ran on which worker (tests/suite_timeline.py) and samples the CPUs every
second, then prints the idle CPU and the test files it fell in: a test that waits (a sleep, a timeout, the network)
on a worker whose neighbour cannot use the freed core shows there.

``--assertions [REV]`` runs nothing: it lists the trainer tests' assertions (the files that start a trainer, and the
helpers they call), or compares them with git revision REV's and prints any that went missing (docs/testing.md).
"""

from __future__ import annotations

import argparse
import ast
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__:  # imported (tests/benchmarks), or run as `python -m benchmarks.test_suite`
    from benchmarks import host_probe
else:  # run as `python benchmarks/test_suite.py`: this folder is sys.path[0]
    import host_probe

REPO = Path(__file__).resolve().parents[1]
DURATIONS = REPO / "tests" / "durations.json"
GOALS_S = {"test": 720.0, "test-fast": 180.0}
SLOWEST = 15
RECORD_MAX_LOAD = 1.5  # per CPU: above it, the durations say more about the other work than about the suite
SLOW_TEST_S = 3.0  # tests/suite_order.py marks a test measured over this slow (out of `make test-fast`)
_DURATION = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S+)")
_SUMMARY = re.compile(r"^=+ (.*) in ([0-9.]+)s(?: \([0-9:]+\))? =+$")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")
# The trainer tests: every file that starts a trainer (their helpers too: their assertions count).
TRAINER_FILES = ("tests/integration/*.py", "tests/demo/test_demo.py")


TIMELINE_ENV = "AGENTRL_TEST_TIMELINE"  # tests/suite_timeline.py
IDLE_FILES = 10  # --timeline prints the files this many idle core-seconds fell in most


def run_suite(
    target: str, log: Path, basetemp: Path, cache: bool, timeline: Path | None = None
) -> tuple[int, float, str]:
    """`make <target>` with every test's durations and a known basetemp: (exit status, make's wall seconds, output).
    Without ``cache`` the SFT model is trained in the session, as on a fresh clone (CI); ``timeline``: where the
    tests' start and end go (tests/suite_timeline.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    if not cache:
        env["AGENTRL_TEST_CACHE"] = "off"
    if timeline is not None:
        env[TIMELINE_ENV] = str(timeline)
    command = ["make", "--no-print-directory", target, "PYTEST_DURATIONS=0", f"PYTEST_ARGS=--basetemp={basetemp}"]
    started = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run(command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc.returncode, time.monotonic() - started, log.read_text(errors="replace")


def parse(output: str) -> tuple[list[tuple[float, str, str]], float | None, dict[str, int]]:
    """pytest's durations (seconds, phase, test id), its wall time and its outcome counts."""
    durations = [(float(m[1]), m[2], m[3]) for m in map(_DURATION.match, output.splitlines()) if m]
    wall, counts = None, {}
    for line in output.splitlines():
        summary = _SUMMARY.match(line.strip())
        if summary:
            wall = float(summary[2])
            counts = {("error" if kind.startswith("error") else kind): int(n) for n, kind in _COUNT.findall(line)}
    return sorted(durations, reverse=True), wall, counts


def per_test(durations: list[tuple[float, str, str]]) -> dict[str, float]:
    """Seconds per test, its setup, call and teardown together (a module fixture counts for the test that set it up)."""
    tests: dict[str, float] = collections.defaultdict(float)
    for seconds, _, test in durations:
        tests[test] += seconds
    return dict(tests)


def per_file(tests: dict[str, float]) -> dict[str, float]:
    files: dict[str, float] = collections.defaultdict(float)
    for test, seconds in tests.items():
        files[test.split("::", 1)[0]] += seconds
    return dict(files)


def shared_builds(basetemp: Path) -> dict[str, dict]:
    """The session's built-once folders (tests/shared_session.py): their build seconds and the test that paid."""
    records = {}
    for name in ("cpu_inputs", "sft_run"):
        done = basetemp / name / ".done"
        if done.is_file():
            records[name] = json.loads(done.read_text())
    return records


def record(tests: dict[str, float], builds: dict[str, dict], machine: str) -> None:
    """Merge this run's seconds into tests/durations.json: per file (the order), and the tests over SLOW_TEST_S (marked
    slow). A shared build is taken out of the test that paid for it and kept apart (tests/suite_order.py charges it to
    the first worker that needs it)."""
    old = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    merged, build_s, slow = dict(old.get("files", {})), dict(old.get("builds_s", {})), dict(old.get("slow_tests", {}))
    tests = dict(tests)
    for name, build in builds.items():
        paid_by = build["test"].rsplit(" (", 1)[0]  # PYTEST_CURRENT_TEST: "<nodeid> (setup)"
        if paid_by in tests:
            tests[paid_by] = max(0.0, tests[paid_by] - build["seconds"])
        build_s[name] = round(build["seconds"], 1)
    for test, seconds in tests.items():
        slow.pop(test, None)
        if seconds >= SLOW_TEST_S:
            slow[test] = round(seconds, 1)
    files = per_file(tests)
    merged.update({path: round(seconds, 1) for path, seconds in files.items()})
    result = {
        "about": "seconds per test file on the 2-core machine (python benchmarks/test_suite.py --record)",
        "machine": machine,
        "builds_s": build_s,
        "files": dict(sorted(merged.items(), key=lambda item: -item[1])),
        "slow_tests": dict(sorted(slow.items(), key=lambda item: -item[1])),
        "slow_in_fast": old.get("slow_in_fast", {}),  # record_fast's: kept
    }
    DURATIONS.write_text(json.dumps(result, indent=1) + "\n")


def record_fast(tests: dict[str, float]) -> None:
    """After a `make test-fast` run: the tests it measured over SLOW_TEST_S become ``slow_in_fast`` (marked slow too).

    A test that shares a warm-up with a slow test of its file (a module fixture, a library's first import) is fast in
    `make test` and pays that warm-up in `make test-fast`, where the slow one is left out. The file durations and the
    full run's marks stay as they are; the previous ``slow_in_fast`` entries this run left out are kept (not measured).
    """
    old = json.loads(DURATIONS.read_text()) if DURATIONS.is_file() else {}
    kept = {test: s for test, s in old.get("slow_in_fast", {}).items() if test not in tests}
    found = {test: round(s, 1) for test, s in tests.items() if s >= SLOW_TEST_S}
    old["slow_in_fast"] = dict(sorted({**kept, **found}.items(), key=lambda item: -item[1]))
    DURATIONS.write_text(json.dumps(old, indent=1) + "\n")


class CpuSampler(threading.Thread):
    """Idle core-seconds of the whole machine per interval, from /proc/stat: [(end time, idle core-seconds), ...]."""

    def __init__(self, interval_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.interval_s, self.samples, self.stopped = interval_s, [], threading.Event()

    @staticmethod
    def _idle_ticks() -> int:
        fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
        return fields[3] + fields[4]  # idle + iowait, all CPUs

    def run(self) -> None:
        ticks_per_s = os.sysconf("SC_CLK_TCK")
        idle = self._idle_ticks()
        while not self.stopped.wait(self.interval_s):
            now_idle = self._idle_ticks()
            self.samples.append((time.time(), (now_idle - idle) / ticks_per_s))
            idle = now_idle


def idle_by_file(timeline: list[dict], samples: list[tuple[float, float]], interval_s: float) -> dict[str, float]:
    """Idle core-seconds per test file: each interval's idle is shared by the tests running then (one per worker,
    equally), and falls to "(between tests)" when none was. Intervals before the first test or after the last don't
    count (collection, start-up, the summary)."""
    if not timeline:
        return {}
    first, last = min(r["start"] for r in timeline), max(r["end"] for r in timeline)
    idle: dict[str, float] = collections.defaultdict(float)
    for end, seconds in samples:
        start = end - interval_s
        if end <= first or start >= last:
            continue
        running = {r["test"].split("::", 1)[0] for r in timeline if r["start"] < end and r["end"] > start}
        for path in running or {"(between tests)"}:
            idle[path] += seconds / max(1, len(running))
    return dict(sorted(idle.items(), key=lambda item: -item[1]))


def print_idle(timeline_path: Path, sampler: CpuSampler) -> None:
    records = [json.loads(line) for line in timeline_path.read_text().splitlines()] if timeline_path.is_file() else []
    if not records:
        print("timeline: no test recorded one")
        return
    by_file = idle_by_file(records, sampler.samples, sampler.interval_s)
    first = min(r["start"] for r in records)
    cpus = os.cpu_count() or 1
    capacity = (max(r["end"] for r in records) - first) * cpus
    total = sum(by_file.values())
    busy = capacity - total  # bounds the wall time from below whatever the order: busy core-seconds over the CPUs
    print(f"CPU work while tests ran: {busy:.0f} core-s, {busy / cpus:.0f} s of wall on {cpus} CPUs with none idle")
    print(f"idle CPU while tests ran: {total:.0f} core-s of {capacity:.0f} ({100 * total / max(1e-9, capacity):.1f} %);"
          " the files it fell in:")  # fmt: skip
    for path, seconds in list(by_file.items())[:IDLE_FILES]:
        print(f"  {seconds:8.1f} core-s  {path}")
    last: dict[str, dict] = {}  # each worker's test that ended last
    for record in records:
        if record["worker"] not in last or record["end"] > last[record["worker"]]["end"]:
            last[record["worker"]] = record
    print("each worker's last test ended (s after the first test started): " + "; ".join(
        f"{w} {r['end'] - first:.0f} ({r['test']})" for w, r in sorted(last.items())))  # fmt: skip


def _asserts(tree: ast.AST) -> list[str]:
    return [ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Assert)]


def assertions(rev: str | None) -> dict[str, list[str]]:
    """Every assert statement of the trainer test files (and their helper modules), by file, at ``rev`` or now."""
    listing = subprocess.run(
        ["git", "ls-tree", "-r", "--name-only", rev, "--", "tests/integration", "tests/demo/test_demo.py"]
        if rev
        else ["git", "ls-files", "--cached", "--others", "--exclude-standard", "tests/integration", "tests/demo"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    found = {}
    for path in sorted(p for p in listing if p.endswith(".py") and any(Path(p).match(g) for g in TRAINER_FILES)):
        if rev:
            text = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=REPO, capture_output=True, text=True).stdout
        elif (REPO / path).is_file():
            text = (REPO / path).read_text()
        else:
            continue
        found[path] = _asserts(ast.parse(text))
    return found


def compare_assertions(rev: str) -> int:
    """Each assert of ``rev``'s trainer tests must still be there, word for word (in whichever file)."""
    before = collections.Counter(a for asserts in assertions(rev).values() for a in asserts)
    now = collections.Counter(a for asserts in assertions(None).values() for a in asserts)
    missing, added = before - now, now - before
    print(f"trainer assertions: {sum(before.values())} at {rev}, {sum(now.values())} now")
    for text in missing.elements():
        print(f"  missing: {text}")
    for text in added.elements():
        print(f"  added:   {text}")
    return 1 if missing else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="make test-fast instead of make test")
    parser.add_argument("--record", action="store_true", help="write the per-file seconds to tests/durations.json")
    parser.add_argument("--cache", action="store_true", help="reuse the cached SFT model (default: train it, as CI)")
    parser.add_argument("--log", type=Path, default=None, help="keep the suite's whole output here")
    parser.add_argument("--timeline", action="store_true", help="also print the idle CPU and the files it fell in")
    parser.add_argument("--assertions", nargs="?", const="", default=None, metavar="REV",
                        help="list the trainer tests' assertions, or compare them with git revision REV")  # fmt: skip
    args = parser.parse_args(argv)
    if args.assertions is not None:
        if args.assertions:
            return compare_assertions(args.assertions)
        for path, asserts in assertions(None).items():
            print(f"{path}: {len(asserts)}")
            for text in asserts:
                print(f"  {text}")
        return 0
    target = "test-fast" if args.fast else "test"
    speed_before = host_probe.measure()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="agentrl-suite-") as tmp:
        log = args.log or Path(tmp) / "suite.log"
        basetemp = Path(tmp) / "basetemp"
        timeline = Path(tmp) / "timeline.jsonl" if args.timeline else None
        sampler = CpuSampler()
        if timeline is not None:
            sampler.start()
        returncode, make_s, output = run_suite(target, log, basetemp, args.cache, timeline)
        sampler.stopped.set()
        builds = shared_builds(basetemp)
        if timeline is not None:
            print_idle(timeline, sampler)
    durations, wall, counts = parse(output)
    load_after = os.getloadavg()
    speed_after = host_probe.measure()
    tests = sum(counts.values())
    goal = GOALS_S[target]
    verdict = "unknown" if wall is None else ("met" if wall <= goal else "not met")
    print(
        f"make {target}: exit {returncode}; pytest wall {wall} s (make {make_s:.0f} s), goal ≤ {goal:.0f} s: {verdict}"
    )
    print(f"tests: {tests} ({', '.join(f'{n} {kind}' for kind, n in counts.items())})")
    print(f"load (1/5/15 min) before {load_before[0]:.2f}/{load_before[1]:.2f}/{load_before[2]:.2f}, "
          f"after {load_after[0]:.2f}/{load_after[1]:.2f}/{load_after[2]:.2f}; {os.cpu_count()} CPUs")  # fmt: skip
    print(f"host speed before: {speed_before.line()}\nhost speed after:  {speed_after.line()}")
    for name, build in builds.items():
        print(f"built once this session: {name} in {build['seconds']:.0f} s (paid by {build['test']})")
    print(f"the {SLOWEST} slowest:")
    for seconds, phase, test in durations[:SLOWEST]:
        print(f"  {seconds:8.2f}s {phase:<8} {test}")
    # The load before the run is other work's; after it, it is mostly the suite's own two workers and their trainers.
    busy = load_before[0] > RECORD_MAX_LOAD * (os.cpu_count() or 1)
    if args.record and busy:
        print(f"not recorded: the load before the run was over {RECORD_MAX_LOAD} per CPU (other work skews durations)")
    elif args.record and returncode == 0 and durations and args.fast:
        record_fast(per_test(durations))
        print(f"recorded the tests slow in make test-fast in {DURATIONS.relative_to(REPO)}")
    elif args.record and returncode == 0 and durations:
        machine = f"{os.cpu_count()} CPUs, load before {load_before[0]:.1f}, host speed before: {speed_before.line()}"
        record(per_test(durations), builds, machine)
        print(f"recorded {DURATIONS.relative_to(REPO)}")
    return returncode


if __name__ == "__main__":
    sys.exit(main())
