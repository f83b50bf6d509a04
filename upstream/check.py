"""Check every upstream/NNNN-*.patch against the installed verl: it applies, its test fails before and passes after.

For each patch: copy the installed ``verl`` package into a temp git repo (``verl/`` + ``tests/``, verl's layout; the
wheel ships no tests), ``git apply --check`` the patch, apply only its new test files and run them (they must fail on
an assertion: the test proves the bug), then apply the fix and run them again (they must all pass). The patched copy
is first on ``sys.path``; plugins are off, CPU only, offline. One line per patch; exit 1 on any failure.

Usage: ``python upstream/check.py [--patches DIR] [--package DIR] [--jobs N]`` (``make upstream-check``).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERL_VERSION = "0.9.1"
TEST_GLOB = "tests/*"
# A test that fails with one of these fails for the wrong reason: a symbol the fix adds, not the bug's symptom.
WRONG_REASONS = ("ImportError", "ModuleNotFoundError", "SyntaxError", "NameError")
# Dropped into the temp repo's root: a test run that imports any other verl would prove nothing.
ROOT_CONFTEST = """import importlib.util, pathlib
_origin = pathlib.Path(importlib.util.find_spec("{pkg}").origin).resolve()
assert pathlib.Path(__file__).parent.resolve() in _origin.parents, f"{pkg} imported from {{_origin}}, not the copy"
"""


@dataclass
class Run:
    """One pytest run of a patch's tests."""

    returncode: int
    tests: int = 0
    failed: list[str] = field(default_factory=list)  # "test_name: first line of the failure"
    errors: list[str] = field(default_factory=list)
    output: str = ""


@dataclass
class Result:
    patch: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def make_base_repo(package: Path, root: Path) -> Path:
    """``root/base``: a git repo holding a copy of ``package`` (no bytecode) and a conftest pinning it."""
    base = root / "base"
    shutil.copytree(package, base / package.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (base / "conftest.py").write_text(ROOT_CONFTEST.format(pkg=package.name))
    for args in (
        ("init", "-q"),
        ("add", "-A"),
        ("-c", "user.name=upstream-check", "-c", "user.email=check@localhost", "commit", "-qm", "base"),
    ):
        done = git(base, *args)
        if done.returncode:
            raise RuntimeError(f"git {args[0]} failed in {base}: {done.stderr.strip()}")
    return base


def patch_test_files(patch: Path) -> list[str]:
    """Paths under tests/ that the patch adds or changes (from its diff headers)."""
    files = []
    for line in patch.read_text().splitlines():
        if line.startswith("+++ b/tests/") and line.endswith(".py"):
            files.append(line[len("+++ b/") :])
    return files


def run_tests(repo: Path, tests: list[str], timeout: int) -> Run:
    xml = repo / ".junit.xml"
    env = {
        **os.environ,
        "PYTHONPATH": str(repo),
        "VERL_USE_EXTERNAL_PLUGINS": "none",  # our own plugin must not fix the bug behind the test's back
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),  # a local test cluster needs no token auth
    }
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "addopts="]
    command += ["--rootdir", str(repo), f"--junitxml={xml}", *tests]
    try:
        done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return Run(returncode=-1, errors=[f"timed out after {timeout} s"], output=str(exc.stdout or ""))
    run = Run(returncode=done.returncode, output=done.stdout + done.stderr)
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            run.tests += 1
            for kind, into in (("failure", run.failed), ("error", run.errors)):
                for node in case.findall(kind):
                    message = (node.get("message") or node.text or "").strip().splitlines()
                    first = " ".join(message[0].split()) if message else kind
                    into.append(f"{case.get('name')}: {first[:160]}")
        xml.unlink()
    return run


def check_patch(base: Path, patch: Path, work: Path, timeout: int) -> Result:
    result = Result(patch.stem)
    repo = work / patch.stem
    done = git(work, "clone", "-q", "--shared", str(base), repo.name)
    if done.returncode:
        result.problems.append(f"cannot clone the base copy: {done.stderr.strip()}")
        return result
    if not patch.read_text().startswith("From ") or "\nSubject: [PATCH" not in patch.read_text():
        result.problems.append("not git format-patch output (no From/Subject header)")
    done = git(repo, "apply", "--check", str(patch))
    if done.returncode:
        result.problems.append(f"does not apply: {done.stderr.strip()}")
        return result
    tests = patch_test_files(patch)
    if not tests:
        result.problems.append("adds no test under tests/")
        return result
    git(repo, "apply", f"--include={TEST_GLOB}", str(patch))
    before = run_tests(repo, tests, timeout)
    wrong = [f for f in before.failed if f.split(": ", 1)[-1].startswith(WRONG_REASONS)]
    if before.errors or before.returncode not in (0, 1) or not before.tests:
        result.problems.append(f"tests do not run on unpatched verl: {before.errors or before.output[-1500:]}")
    elif not before.failed:
        result.problems.append(f"tests pass on unpatched verl ({before.tests} tests): they do not show the bug")
    elif wrong:
        result.problems.append(f"tests fail before for the wrong reason: {wrong}")
    else:
        result.notes.append(f"fails-before ({len(before.failed)}/{before.tests}: {before.failed[0]})")
    git(repo, "apply", f"--exclude={TEST_GLOB}", str(patch))
    after = run_tests(repo, tests, timeout)
    if after.returncode or after.failed or after.errors:
        result.problems.append(f"tests fail after the patch: {after.failed + after.errors or after.output[-1500:]}")
    else:
        result.notes.append(f"passes-after ({after.tests}/{after.tests})")
    return result


def check_series(base: Path, patches: list[Path], work: Path) -> Result:
    """All patches together, in order, on one copy: they must not conflict with each other."""
    result = Result("series")
    repo = work / "series"
    git(work, "clone", "-q", "--shared", str(base), repo.name)
    for patch in patches:
        done = git(repo, "apply", str(patch))
        if done.returncode:
            result.problems.append(f"{patch.name} does not apply after the ones before it: {done.stderr.strip()}")
            return result
    result.notes.append(f"all {len(patches)} apply together in order")
    return result


def installed_verl() -> Path:
    spec = importlib.util.find_spec("verl")  # finds the package without importing it (verl's import takes ~7 s)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("upstream-check: verl is not installed in this interpreter")
    package = Path(next(iter(spec.submodule_search_locations)))
    version = (package / "version" / "version").read_text().strip()
    if version != VERL_VERSION:
        raise SystemExit(f"upstream-check: the patches are against verl {VERL_VERSION}, installed is {version}")
    return package


def check_all(package: Path, patches: list[Path], jobs: int = 2, timeout: int = 600) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="upstream-check-") as tmp:
        work = Path(tmp)
        base = make_base_repo(package, work)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(lambda p: check_patch(base, p, work, timeout), patches))
        return [*results, check_series(base, patches, work)]


def report(result: Result) -> str:
    status = "ok  " if result.ok else "FAIL"
    detail = ["applies", *result.notes] if result.ok and result.patch != "series" else result.notes
    return f"{status} {result.patch}: " + " · ".join(detail + result.problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=Path, default=HERE, help="folder of NNNN-*.patch files")
    parser.add_argument("--package", type=Path, default=None, help="package to patch (default: the installed verl)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="patches checked at once")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per pytest run")
    args = parser.parse_args(argv)
    patches = sorted(args.patches.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    if not patches:
        print(f"upstream-check: no NNNN-*.patch in {args.patches}", file=sys.stderr)
        return 1
    results = check_all(args.package or installed_verl(), patches, jobs=args.jobs, timeout=args.timeout)
    for result in results:
        print(report(result), flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
