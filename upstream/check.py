"""Check every upstream/NNNN-*.patch as the verl PR it is meant to be.

For each patch (a ``git format-patch`` file) and its PR description (``NNNN-*.md`` beside it):

1. **Title**: the patch's subject passes the rules of verl's PR title check
   (``tests/special_sanity/check_pr_title.py``, reimplemented here).
2. **Body**: the description is verl's PR template filled in (``.github/PULL_REQUEST_TEMPLATE.md``: every section,
   no placeholder left, the first lines changed as verl's description check requires) plus what verl's ``AGENTS.md``
   asks of AI-assisted work: the duplicate search, the PR that introduced the bug, the test command with its
   result, an AI-assistance section with the submitter's sign-off.
3. **Tests**: the patch applies to a copy of verl; its tests are applied alone and must fail on an assertion (they
   show the bug), then the fix is applied and they must pass. The counts the body states are compared with the runs.

The copy is the installed verl 0.9.1 (the default; CI) or a verl source tree (``--verl-src``: a checkout, or a bare
git repository exported at ``--verl-ref``). The wheel ships no tests: a verl test file that a patch extends but the
copy lacks is replaced by the lines the patch adds to it, after the imports listed in ``NNNN-*.imports.py`` (the names
those lines take from the file's import block), so such additions are written to run on their own. Where 0.9.1's code
differs from the PR's base, ``verl-0.9.1/NNNN-*.patch`` is applied to the wheel instead. On a source tree the touched
test files run whole (unpatched, tests only, fixed) and verl's CI steps run on the patched tree (``verl_ci.py``); on
``TARGET_COMMIT`` the counts each body states are compared with those runs.

``evidence/*.py`` are tests kept for upstream PRs that already cover one of our fixes: they must fail on verl 0.9.1
for the bug's reason; on a newer source, passing means the fix has landed there.

Each pytest run is a fork of a zygote that has imported verl's heavy dependencies (not verl), which spares each run
their import; ``--no-preload`` runs each in a fresh interpreter.

Usage: ``python upstream/check.py [--verl-src DIR] [--jobs N] [--no-preload]`` (``make upstream-check [VERL_SRC=DIR]``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERL_VERSION = "0.9.1"
# The verl commit the patches are written against (verl main as the ``fetch`` tool has it); a check on that tree
# compares the counts each body states with the runs.
TARGET_COMMIT = "1dda039b9c6311889a9c9a26040677e1254814f9"
# A test that fails with one of these fails for the wrong reason: a symbol the fix adds, not the bug's symptom.
WRONG_REASONS = ("ImportError", "ModuleNotFoundError", "SyntaxError", "NameError")
# Ray's logical CPUs in the test runs (scheduling tokens, not cores): at least what verl's TransferQueue tests need.
RAY_TEST_CPUS = max(8, os.cpu_count() or 1)
# Dropped into the temp repo's root: a test run that imports any other verl would prove nothing.
ROOT_CONFTEST = """import importlib.util, pathlib
_origin = pathlib.Path(importlib.util.find_spec("{pkg}").origin).resolve()
assert pathlib.Path(__file__).parent.resolve() in _origin.parents, f"{pkg} imported from {{_origin}}, not the copy"
"""

# --- verl's PR title rules (tests/special_sanity/check_pr_title.py on main, restated) ---
TITLE_MODULES = frozenset(
    "fsdp megatron veomni sglang vllm trtllm rollout trainer tests training_utils recipe hardware deployment ray "
    "worker single_controller misc docker ci perf model algo env tool ckpt doc data cfg reward fully_async "
    "one_step_off".split()
)
TITLE_TYPES = ("feat", "fix", "refactor", "chore", "test")

# --- verl's PR template (.github/PULL_REQUEST_TEMPLATE.md on main): its sections, in order, and its placeholders ---
TEMPLATE_SECTIONS = (
    "What does this PR do?",
    "Checklist Before Starting",
    "Test",
    "API and Usage Example",
    "Design & Code Changes",
    "Checklist Before Submitting",
)
# verl's description check compares the body's first 5 lines with the template's (stripped).
TEMPLATE_HEAD = (
    "### What does this PR do?",
    "",
    "> Add **concise** overview of what this PR aims to achieve or accomplish. Reference related GitHub issues and "
    "PRs that help with the review.",
    "",
    "### Checklist Before Starting",
)
TEMPLATE_PLACEHOLDERS = (
    "Add **concise** overview of what this PR aims to achieve",
    "Paste at least one query link here: ...",
    "For changes that can not be tested by CI",
    "Demonstrate how the API changes if any",
    "# Add code snippet or script demonstrating how to use this",
    "Demonstrate the high-level design if this PR is complex",
    "If not feasible, explain why: ...",
)
AI_SECTION = "AI assistance"  # AGENTS.md: a clear statement that AI assistance was used, and a human who signs off
SIGN_OFF_PLACEHOLDER = "<submitter>"
COPYRIGHT = "# Copyright 2026 "


@dataclass
class FileDiff:
    """One file of a patch: its path, whether the patch creates it, and the lines its hunks add."""

    path: str
    new: bool = False
    added: list[str] = field(default_factory=list)
    removed: int = 0


@dataclass
class Patch:
    path: Path
    subject: str
    message: str
    files: list[FileDiff]

    @property
    def test_files(self) -> list[FileDiff]:
        return [f for f in self.files if f.path.startswith("tests/") and Path(f.path).name.startswith("test_")]


@dataclass
class Run:
    """One pytest run."""

    returncode: int
    tests: int = 0
    failed: list[str] = field(default_factory=list)  # "test_name: first line of the failure"
    errors: list[str] = field(default_factory=list)
    output: str = ""
    outcomes: dict[str, str] = field(default_factory=dict)  # "file::Class::test" -> passed|failed|error|skipped

    @property
    def passed(self) -> int:
        return self.tests - len(self.failed) - len(self.errors) - self.skipped

    @property
    def skipped(self) -> int:
        return sum(1 for outcome in self.outcomes.values() if outcome == "skipped")

    def ids(self, *outcomes: str) -> set[str]:
        return {test for test, outcome in self.outcomes.items() if outcome in outcomes}

    def counts(self) -> str:
        return f"{len(self.failed) + len(self.errors)} failed, {self.passed} passed, {self.skipped} skipped"


@dataclass
class Result:
    patch: str
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class Source:
    """The verl to patch: its package folder, its tests folder (a source tree has one, the wheel none); for a
    source tree, its root (copied whole: verl's CI steps read its configs and scripts) and commit."""

    package: Path
    tests: Path | None
    version: str
    root: Path | None = None
    commit: str = ""

    @property
    def pinned(self) -> bool:
        """The version the patches and their bodies are written against."""
        return self.version == VERL_VERSION


def git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True)


def read_patch(path: Path) -> Patch:
    """Parse a ``git format-patch`` file: its subject (unfolded), commit message and per-file diff."""
    text = path.read_text()
    header, _, rest = text.partition("\n\n")
    subject_lines, in_subject = [], False
    for line in header.splitlines():
        if line.startswith("Subject:"):
            in_subject = True
            subject_lines.append(line[len("Subject:") :].strip())
        elif in_subject and line.startswith((" ", "\t")):
            subject_lines.append(line.strip())
        else:
            in_subject = False
    subject = re.sub(r"^\[PATCH[^\]]*\]\s*", "", " ".join(subject_lines))
    message = rest.split("\n---\n", 1)[0]
    files: list[FileDiff] = []
    for line in text.splitlines():
        if line.startswith("diff --git "):
            files.append(FileDiff(path=line.split(" b/", 1)[1]))
        elif not files or line.startswith(("+++ ", "--- ", "index ", "@@ ")):
            continue
        elif line.startswith("new file mode"):
            files[-1].new = True
        elif line.startswith("+"):
            files[-1].added.append(line[1:])
        elif line.startswith("-"):
            files[-1].removed += 1
    return Patch(path=path, subject=subject, message=message, files=files)


def title_problems(title: str) -> list[str]:
    """verl's PR title rules: ``[1/N]`` and ``[BREAKING]`` prefixes allowed, ``[modules] type: description``."""
    core = re.sub(r"^\[\d/[\dNn]\]\s*", "", title.strip())
    core = re.sub(r"^\[BREAKING\]\s*", "", core, flags=re.IGNORECASE)
    modules = re.match(r"^\[([a-z_,\s]+)\]", core, re.IGNORECASE)
    if not modules:
        return [f"title {title!r}: no [modules] prefix"]
    unknown = [m for m in re.findall(r"[a-z_]+", modules.group(1).lower()) if m not in TITLE_MODULES]
    if unknown:
        return [f"title {title!r}: modules verl does not allow: {', '.join(unknown)}"]
    types = "|".join(TITLE_TYPES)
    if not re.match(rf"^\[[a-z_,\s]+\]\s+({types}):\s+.+$", core, re.IGNORECASE):
        return [f"title {title!r}: the type after [modules] must be one of {', '.join(TITLE_TYPES)}"]
    return []


def body_sections(body: str) -> dict[str, str]:
    """``### Heading`` -> the text under it."""
    sections: dict[str, str] = {}
    current = None
    for line in body.splitlines():
        heading = re.match(r"^###\s+(.+?)\s*$", line)
        if heading:
            current = heading.group(1)
            sections[current] = ""
        elif current is not None:
            sections[current] += line + "\n"
    return sections


def stated_counts(test_section: str) -> tuple[tuple[int, int] | None, int | None]:
    """``Before the fix: F failed, P passed`` and ``With the fix: N passed`` from the Test section."""
    before = re.search(r"before the fix\W+(\d+) failed(?:, (\d+) passed)?", test_section, re.IGNORECASE)
    after = re.search(r"with the fix\W+(\d+) passed", test_section, re.IGNORECASE)
    return (
        (int(before.group(1)), int(before.group(2) or 0)) if before else None,
        int(after.group(1)) if after else None,
    )


def body_problems(body: str, patch: Patch) -> list[str]:
    """The description against verl's template and AGENTS.md (what is checked is listed in the module docstring)."""
    problems = []
    lines = [line.strip() for line in body.splitlines()[: len(TEMPLATE_HEAD)]]
    if tuple(lines) == TEMPLATE_HEAD:
        problems.append("body: the 'What does this PR do?' placeholder is unchanged (verl's description check)")
    sections = body_sections(body)
    order = [name for name in sections if name in TEMPLATE_SECTIONS]
    missing = [name for name in TEMPLATE_SECTIONS if name not in sections]
    if missing:
        problems.append(f"body: template sections missing: {missing}")
    elif order != list(TEMPLATE_SECTIONS):
        problems.append(f"body: template sections out of order: {order}")
    left = [p for p in TEMPLATE_PLACEHOLDERS if p in body]
    if left:
        problems.append(f"body: template placeholders left: {left}")
    what = sections.get("What does this PR do?", "")
    if not re.search(r"introduced[^\n]*#\d{3,}", what, re.IGNORECASE):
        problems.append("body: 'What does this PR do?' does not name the PR that introduced the bug (#N)")
    if "github.com/verl-project/verl/pulls?q=" not in sections.get("Checklist Before Starting", ""):
        problems.append("body: no duplicate-search link (github.com/verl-project/verl/pulls?q=...)")
    test = sections.get("Test", "")
    commands = "\n".join(re.findall(r"```(?:bash|shell)?\n(.*?)```", test, re.DOTALL))
    if "pytest" not in commands:
        problems.append("body: the Test section has no pytest command in a code block")
    unnamed = [f.path for f in patch.test_files if f.path not in commands]
    if unnamed:
        problems.append(f"body: the test command does not name {unnamed}")
    before, after = stated_counts(test)
    if before is None or after is None:
        problems.append("body: the Test section lacks 'Before the fix: F failed, P passed' / 'With the fix: N passed'")
    ai = sections.get(AI_SECTION, "")
    if not ai:
        problems.append(f"body: no '### {AI_SECTION}' section")
    elif "AI" not in ai or "Signed-off-by:" not in ai:
        problems.append(f"body: the {AI_SECTION} section must say AI was used and carry a Signed-off-by line")
    return problems


def patch_problems(patch: Patch) -> list[str]:
    problems = title_problems(patch.subject)
    text = patch.path.read_text()
    if not text.startswith("From ") or "\nSubject: [PATCH" not in text:
        problems.append("not git format-patch output (no From/Subject header)")
    if "volcengine/verl" in text:
        problems.append("names volcengine/verl: verl lives at verl-project/verl")
    if not patch.test_files:
        problems.append("adds no test under tests/")
    for diff in patch.test_files:
        if diff.new and not (diff.added and diff.added[0].startswith(COPYRIGHT)):
            problems.append(f"{diff.path}: a new file starts with '{COPYRIGHT}...' (verl's license check)")
    return problems


def added_test_names(diff: FileDiff) -> list[str]:
    """Top-level ``test_*`` functions and ``Test*`` classes the patch adds to a file."""
    names = []
    for line in diff.added:
        found = re.match(r"^(?:async\s+)?def\s+(test\w*)\s*\(|^class\s+(Test\w*)\b", line)
        if found:
            names.append(found.group(1) or found.group(2))
    return names


# verl's heavy dependencies (not verl: each run must import the copy's). A run is pytest in a fork of a process that
# has imported them already (a "zygote"), which spares each run their import (most of verl's import time).
PRELOAD = ("numpy", "torch", "transformers", "tensordict", "omegaconf", "hydra", "pydantic", "ray", "pytest")
ZYGOTE = r"""
import importlib, json, os, signal, sys, time
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception:
        pass
print("ready", flush=True)
for line in sys.stdin:
    job = json.loads(line)
    with open(job["output"], "wb") as out:
        pid = os.fork()
        if pid == 0:
            os.setsid()
            os.dup2(out.fileno(), 1)
            os.dup2(out.fileno(), 2)
            os.chdir(job["cwd"])
            os.environ.clear()
            os.environ.update(job["env"])
            sys.path.insert(0, job["cwd"])
            sys.argv = ["pytest", *job["args"]]
            code = 1
            try:
                import pytest
                code = int(pytest.main(job["args"]))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
    deadline, status = time.monotonic() + job["timeout"], None
    while status is None:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
        elif time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.05)
    print(json.dumps({"returncode": status}), flush=True)
"""


class Zygote:
    """A Python process with ``PRELOAD`` imported that runs each pytest call in a fork of itself (one at a time)."""

    def __init__(self, env: dict[str, str], preload: tuple[str, ...] = PRELOAD):
        self.env = env
        self.process = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, *preload],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the test zygote did not start")

    def run(self, cwd: Path, env: dict[str, str], args: list[str], timeout: int) -> tuple[int | str, str]:
        """pytest ``args`` in ``cwd`` with ``env``: its exit status ("timeout" when killed) and output."""
        output = cwd / ".pytest-output.txt"
        job = {"cwd": str(cwd), "env": env, "args": args, "timeout": timeout, "output": str(output)}
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError("the test zygote exited")
        text = output.read_text(errors="replace") if output.exists() else ""
        output.unlink(missing_ok=True)
        return json.loads(answer)["returncode"], text

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


class Zygotes:
    """Idle zygotes for the check's threads: one per concurrent run, made on first use; ``None`` runs plain pytest."""

    def __init__(self):
        self.idle: list[Zygote] = []
        self.all: list[Zygote] = []
        self.lock = threading.Lock()

    @contextlib.contextmanager
    def take(self, env: dict[str, str]):
        with self.lock:
            zygote = next((z for z in self.idle if z.env == env), None)
            if zygote is not None:
                self.idle.remove(zygote)
        if zygote is None:
            zygote = Zygote(env)
            with self.lock:
                self.all.append(zygote)
        try:
            yield zygote
        finally:
            with self.lock:
                self.idle.append(zygote)

    def close(self) -> None:
        for zygote in self.all:
            zygote.close()


ZYGOTES: Zygotes | None = None  # set by check_all for its runs


def run_env(repo: Path) -> dict[str, str]:
    """The environment of a test run, and of its zygote (whose imports read some of it, e.g. HF_HUB_OFFLINE)."""
    return {
        **os.environ,
        "PYTHONPATH": str(repo),
        "VERL_USE_EXTERNAL_PLUGINS": "none",  # our own plugin must not fix the bug behind the test's back
        "CUDA_VISIBLE_DEVICES": "",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "RAY_AUTH_MODE": os.environ.get("RAY_AUTH_MODE", "disabled"),  # a local test cluster needs no token auth
        # Ray's logical CPUs for a local test cluster: verl's TransferQueue fixture (a controller and two storage
        # units, one CPU each) waits forever where Ray counts two CPUs; verl's CI runners have more.
        "RAY_OVERRIDE_RESOURCES": os.environ.get("RAY_OVERRIDE_RESOURCES", json.dumps({"CPU": RAY_TEST_CPUS})),
    }


def run_tests(repo: Path, targets: list[str], timeout: int) -> Run:
    xml = repo / ".junit.xml"
    env = run_env(repo)
    args = ["-q", "-p", "no:cacheprovider", "-o", "addopts="]
    if importlib.util.find_spec("pytest_asyncio"):
        args += ["--asyncio-mode=auto"]  # as verl's cpu_unit_tests job runs them
    args += ["--rootdir", str(repo), f"--junitxml={xml}", *targets]
    if ZYGOTES is not None:
        zygote_env = {**env, "PYTHONPATH": ""}
        with ZYGOTES.take(zygote_env) as zygote:
            returncode, output = zygote.run(repo, env, args, timeout)
        if returncode == "timeout":
            return Run(returncode=-1, errors=[f"timed out after {timeout} s"], output=output)
        run = Run(returncode=int(returncode), output=output)
    else:
        command = [sys.executable, "-m", "pytest", *args]
        try:
            done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return Run(returncode=-1, errors=[f"timed out after {timeout} s"], output=str(exc.stdout or ""))
        run = Run(returncode=done.returncode, output=done.stdout + done.stderr)
    if xml.exists():
        for case in ET.parse(xml).iter("testcase"):
            run.tests += 1
            test_id = f"{case.get('classname')}::{case.get('name')}"
            run.outcomes[test_id] = next(
                (kind for kind in ("failure", "error", "skipped") if case.find(kind) is not None), "passed"
            ).replace("failure", "failed")
            for kind, into in (("failure", run.failed), ("error", run.errors)):
                for node in case.findall(kind):
                    message = (node.get("message") or node.text or "").strip().splitlines()
                    first = " ".join(message[0].split()) if message else kind
                    into.append(f"{case.get('name')}: {first[:160]}")
        xml.unlink()
    return run


def make_base_repo(source: Source, root: Path) -> Path:
    """``root/base``: a git repo holding a copy of the package (and its tests, if any) and a conftest pinning it."""
    base = root / "base"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".git")
    if source.root is not None:
        shutil.copytree(source.root, base, ignore=ignore, symlinks=True)
    else:
        shutil.copytree(source.package, base / source.package.name, ignore=ignore)
    if source.tests is not None and source.root is None:
        shutil.copytree(source.tests, base / "tests", ignore=ignore)
    (base / "conftest.py").write_text(ROOT_CONFTEST.format(pkg=source.package.name))
    for args in (
        ("init", "-q"),
        ("add", "-A"),
        ("-c", "user.name=upstream-check", "-c", "user.email=check@localhost", "commit", "-qm", "base"),
    ):
        if args[0] == "add" and source.root is not None:  # verl's checks read git's files: ours stay untracked
            (base / ".git" / "info").mkdir(parents=True, exist_ok=True)
            (base / ".git" / "info" / "exclude").write_text("/conftest.py\n/.junit.xml\n/.pytest-output.txt\n")
        done = git(base, *args)
        if done.returncode:
            raise RuntimeError(f"git {args[0]} failed in {base}: {done.stderr.strip()}")
    return base


def clone(base: Path, work: Path, name: str) -> Path:
    done = git(work, "clone", "-q", "--shared", str(base), name)
    if done.returncode:
        raise RuntimeError(f"cannot clone the base copy: {done.stderr.strip()}")
    exclude = base / ".git" / "info" / "exclude"
    if exclude.exists():
        shutil.copy(exclude, work / name / ".git" / "info" / "exclude")
    return work / name


def standalone_files(repo: Path, patch: Patch) -> list[FileDiff]:
    """Test files the patch extends but the copy lacks (the wheel ships no tests)."""
    return [f for f in patch.test_files if not f.new and not (repo / f.path).exists()]


def standalone_imports(patch: Path) -> tuple[str, list[str]]:
    """``NNNN-*.imports.py``: the imports that the tests a patch adds to an existing verl file take from its top."""
    path = patch.with_name(f"{patch.stem}.imports.py")
    if not path.exists():
        return "", []
    text = path.read_text()
    other = [n.lineno for n in ast.parse(text).body if not isinstance(n, ast.Import | ast.ImportFrom)]
    return text, [f"{path.name}: line {line} is not an import" for line in other]


@dataclass
class Context:
    """What a check of one patch needs besides the patch: the base copy, a work folder, and how to judge."""

    base: Path
    work: Path
    timeout: int = 600
    verify_counts: bool = True  # the body's stated counts are compared with the runs
    source: Source | None = None  # a verl source tree: whole test files and verl's CI steps (verl_ci.py)
    base_hooks: dict = field(default_factory=dict)


def wheel_variant(patch: Path) -> Path:
    """``verl-0.9.1/<name>.patch``: the same change on 0.9.1's code where it differs from the PR's base."""
    variant = patch.parent / f"verl-{VERL_VERSION}" / patch.name
    return (variant if variant.exists() else patch).resolve()


def body_result(patch: Path, parsed: Patch) -> Result:
    result = Result(patch.stem, problems=patch_problems(parsed))
    body = patch.with_suffix(".md")
    if body.exists():
        result.problems += body_problems(body.read_text(), parsed)
        if SIGN_OFF_PLACEHOLDER in body.read_text():
            result.notes.append("sign-off pending")
    else:
        result.problems.append(f"no PR description {body.name}")
    return result


def test_targets(repo: Path, parsed: Patch, alone: list[FileDiff], whole: bool) -> list[str]:
    """The patch's test files: whole on a source tree; else new files whole and only the tests added to others."""
    targets = []
    for diff in parsed.test_files:
        names = added_test_names(diff)
        if whole or diff.new or diff in alone or not names:
            targets.append(diff.path)
        else:
            targets += [f"{diff.path}::{name}" for name in names]
    return targets


def judge_before(result: Result, before: Run, unpatched: Run | None) -> None:
    known = unpatched.ids("failed", "error") if unpatched else set()
    new_failures = before.ids("failed") - known
    wrong = [f for f in before.failed if f.split(": ", 1)[-1].startswith(WRONG_REASONS)]
    if before.errors or before.returncode not in (0, 1) or not before.tests:
        result.problems.append(f"tests do not run on unpatched verl: {before.errors or before.output[-1500:]}")
    elif not before.failed or (unpatched is not None and not new_failures):
        result.problems.append(f"tests pass on unpatched verl ({before.tests} tests): they do not show the bug")
    elif wrong:
        result.problems.append(f"tests fail before for the wrong reason: {wrong}")
    else:
        result.notes.append(f"fails-before ({len(before.failed)}/{before.tests}: {before.failed[0]})")


def judge_after(result: Result, after: Run, unpatched: Run | None) -> None:
    known = unpatched.ids("failed", "error") if unpatched else set()
    broken = sorted(after.ids("failed", "error") - known)
    if unpatched is None and (after.returncode or after.failed or after.errors):
        result.problems.append(f"tests fail after the patch: {after.failed + after.errors or after.output[-1500:]}")
    elif unpatched is not None and (broken or after.returncode not in (0, 1)):
        result.problems.append(f"tests fail after the patch: {broken or after.output[-1500:]}")
    else:
        result.notes.append(f"passes-after ({after.passed + after.skipped}/{after.tests})")
    if known:
        result.notes.append(f"{len(known)} fail on this tree without the patch too: {sorted(known)[:3]}")


def check_patch(
    base: Path, patch: Path, work: Path, timeout: int, pinned: bool = True, context: Context | None = None
) -> Result:
    ctx = context or Context(base=base, work=work, timeout=timeout, verify_counts=pinned)
    parsed = read_patch(patch)
    result = body_result(patch, parsed)
    if not parsed.test_files:
        return result
    applied = patch.resolve() if ctx.source is not None else wheel_variant(patch)
    if applied != patch.resolve():
        result.notes.append(f"applied as {applied.parent.name}/{applied.name}")
    repo = clone(ctx.base, ctx.work, patch.stem)
    alone = standalone_files(repo, read_patch(applied))
    excludes = [f"--exclude={f.path}" for f in alone]
    done = git(repo, "apply", "--check", *excludes, str(applied))
    if done.returncode:
        result.problems.append(f"does not apply: {done.stderr.strip()}")
        return result
    imports, problems = standalone_imports(patch)
    result.problems += problems
    for diff in alone:  # the lines the patch adds to a verl test file the copy lacks, run on their own
        (repo / diff.path).parent.mkdir(parents=True, exist_ok=True)
        (repo / diff.path).write_text(imports + "\n".join(diff.added) + "\n")
        result.notes.append(f"{diff.path} not in this verl: the lines the patch adds to it run alone")
    whole = ctx.source is not None
    targets = test_targets(repo, read_patch(applied), alone, whole)
    alone_paths = {f.path for f in alone}
    existing = [t for t in targets if (repo / t).exists() and t not in alone_paths]
    unpatched = run_tests(repo, existing, ctx.timeout) if whole and existing else None
    # git apply takes the first of --exclude/--include that matches a path: the standalone files' excludes go first
    for step in ([*excludes, "--include=tests/*"], ["--exclude=tests/*"]):
        done = git(repo, "apply", *step, str(applied))
        if done.returncode:
            result.problems.append(f"git apply {' '.join(step)} failed: {done.stderr.strip()}")
            return result
        if step[-1] == "--include=tests/*":
            before = run_tests(repo, targets, ctx.timeout)
            judge_before(result, before, unpatched)
    after = run_tests(repo, targets, ctx.timeout)
    judge_after(result, after, unpatched)
    if whole:
        result.notes.append(
            f"whole files: unpatched {unpatched.counts() if unpatched else 'new'} · tests only {before.counts()}"
            f" · fixed {after.counts()}"
        )
        result.problems += verl_ci_problems(repo, ctx, parsed, patch, result)
    body = patch.with_suffix(".md")
    if ctx.verify_counts and body.exists() and result.ok:
        stated_before, stated_after = stated_counts(body_sections(body.read_text()).get("Test", ""))
        if stated_before != (len(before.failed), before.passed) or stated_after != after.passed:
            result.problems.append(
                f"body states before {stated_before}, after {stated_after}; the runs gave "
                f"{(len(before.failed), before.passed)}, {after.passed}"
            )
    return result


def load_verl_ci():
    """``verl_ci.py`` beside this file (it needs PyYAML; only a source-tree check uses it)."""
    if "upstream_verl_ci" not in sys.modules:
        spec = importlib.util.spec_from_file_location("upstream_verl_ci", HERE / "verl_ci.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules["upstream_verl_ci"] = module
        spec.loader.exec_module(module)
    return sys.modules["upstream_verl_ci"]


def verl_ci_problems(repo: Path, ctx: Context, parsed: Patch, patch: Path, result: Result) -> list[str]:
    """verl's CI steps on the patched tree (verl_ci.py); their verdicts go to ``result``'s notes or problems."""
    verl_ci = load_verl_ci()
    body = patch.with_suffix(".md").read_text() if patch.with_suffix(".md").exists() else ""
    base_commit = git(ctx.base, "rev-parse", "HEAD").stdout.strip()
    verdicts = verl_ci.ci_verdicts(
        repo, base_commit, parsed.subject, body, [f.path for f in parsed.files], ctx.base_hooks
    )
    result.notes.append("verl CI: " + ", ".join(f"{v.name} {'ok' if v.ok else 'FAIL'}" for v in verdicts))
    result.notes += [f"{v.name}: {v.detail}" for v in verdicts if v.ok and v.detail]
    return [f"verl CI {v.name}: {v.detail}" for v in verdicts if not v.ok]


def check_series(base: Path, patches: list[Path], work: Path, wheel: bool = True) -> Result:
    """All patches together, in order, on one copy: they must not conflict with each other."""
    result = Result("series")
    repo = clone(base, work, "series")
    for patch in [wheel_variant(p) if wheel else p for p in patches]:
        excludes = [f"--exclude={f.path}" for f in standalone_files(repo, read_patch(patch))]
        done = git(repo, "apply", *excludes, str(patch))
        if done.returncode:
            result.problems.append(f"{patch.name} does not apply after the ones before it: {done.stderr.strip()}")
            return result
    result.notes.append(f"all {len(patches)} apply together in order")
    return result


def evidence_upstream_pr(path: Path) -> str:
    """The upstream PR an evidence file is kept for: ``#N`` in its docstring's first line."""
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    found = re.search(r"#\d+", doc.splitlines()[0] if doc else "")
    return found.group(0) if found else ""


def check_evidence(base: Path, files: list[Path], work: Path, timeout: int, pinned: bool = True) -> list[Result]:
    """Tests kept for an upstream PR: on verl 0.9.1 each must fail on an assertion (the bug is there)."""
    repo = clone(base, work, "evidence")
    (repo / "tests" / "evidence").mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copy(path, repo / "tests" / "evidence" / path.name)
    run = run_tests(repo, [f"tests/evidence/{path.name}" for path in files], timeout)
    results = []
    for path in files:
        result = Result(f"evidence/{path.name}")
        pr = evidence_upstream_pr(path)
        if not pr:
            result.problems.append("its docstring's first line names no upstream PR (#N)")
        names = {n.name for n in ast.parse(path.read_text()).body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        failed = [f for f in run.failed if f.split(":", 1)[0].split("[", 1)[0] in names]
        errors = [e for e in run.errors if e.split(":", 1)[0].split("[", 1)[0] in names]
        wrong = [f for f in failed if f.split(": ", 1)[-1].startswith(WRONG_REASONS)]
        if errors or wrong or run.returncode not in (0, 1) or not run.tests:
            result.problems.append(f"does not run: {errors or wrong or run.output[-1500:]}")
        elif failed:
            result.notes.append(f"the bug {pr} fixes is here ({len(failed)} failing: {failed[0]})")
        elif pinned:
            result.problems.append("passes on verl 0.9.1: it does not show the bug")
        else:
            result.notes.append(f"passes: fixed in this verl ({pr} or another change)")
        results.append(result)
    return results


def installed_verl() -> Source:
    spec = importlib.util.find_spec("verl")  # finds the package without importing it (verl's import takes ~7 s)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("upstream-check: verl is not installed in this interpreter")
    package = Path(next(iter(spec.submodule_search_locations)))
    version = (package / "version" / "version").read_text().strip()
    if version != VERL_VERSION:
        raise SystemExit(f"upstream-check: the patches are against verl {VERL_VERSION}, installed is {version}")
    return Source(package=package, tests=None, version=version)


def export_ref(git_dir: Path, ref: str, into: Path) -> Path:
    """A work tree of ``ref`` from a (bare) git repository, e.g. the ``fetch`` tool's mirror of verl."""
    archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", ref], capture_output=True, check=True)
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into


def tree_commit(root: Path, git_dir: Path | None, ref: str) -> str:
    where = ["--git-dir", str(git_dir)] if git_dir else ["-C", str(root)]
    done = subprocess.run(["git", *where, "rev-parse", f"{ref}^{{commit}}"], capture_output=True, text=True)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def verl_source(root: Path, ref: str = "HEAD", scratch: Path | None = None) -> Source:
    """A verl source tree (a checkout, or an unpacked sdist): ``root/verl`` and, if there, ``root/tests``. A bare
    git repository (``root/HEAD`` and ``root/objects``) is exported at ``ref`` into ``scratch`` first."""
    git_dir = root if (root / "objects").is_dir() and (root / "HEAD").is_file() else None
    commit = tree_commit(root, git_dir, ref)
    if git_dir is not None:
        root = export_ref(git_dir, ref, (scratch or Path(tempfile.mkdtemp(prefix="verl-src-"))) / "verl")
    package = root / "verl"
    if not (package / "version" / "version").exists():
        raise SystemExit(f"upstream-check: {root} is not a verl source tree (no verl/version/version)")
    tests = root / "tests" if (root / "tests").is_dir() else None
    version = (package / "version" / "version").read_text().strip()
    return Source(package=package, tests=tests, version=version, root=root, commit=commit)


def check_all(
    source: Source,
    patches: list[Path],
    evidence: list[Path] = (),
    jobs: int = 2,
    timeout: int = 600,
    preload: bool = True,
) -> list[Result]:
    """Every patch (``jobs`` at once), the evidence tests and the series; the pytest runs fork from zygotes with
    verl's dependencies imported (``preload``), else each is a fresh interpreter."""
    global ZYGOTES
    ZYGOTES = Zygotes() if preload else None
    try:
        return _check_all(source, patches, evidence, jobs, timeout)
    finally:
        if ZYGOTES is not None:
            ZYGOTES.close()
        ZYGOTES = None


def _check_all(source: Source, patches: list[Path], evidence, jobs: int, timeout: int) -> list[Result]:
    with tempfile.TemporaryDirectory(prefix="upstream-check-") as tmp:
        work = Path(tmp)
        base = make_base_repo(source, work)
        ctx = Context(base=base, work=work, timeout=timeout, verify_counts=source.commit == TARGET_COMMIT)
        if source.root is not None:
            verl_ci = load_verl_ci()
            ctx.source = source
            ctx.base_hooks = verl_ci.base_hook_results(clone(base, work, "hooks"), verl_ci.local_hooks(base))
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = [pool.submit(check_patch, base, p, work, timeout, context=ctx) for p in patches]
            if evidence:
                futures.append(pool.submit(check_evidence, base, list(evidence), work, timeout, source.pinned))
            done = [future.result() for future in futures]
        results = [r for item in done for r in (item if isinstance(item, list) else [item])]
        return [*results, check_series(base, patches, work, wheel=source.root is None)]


def report(result: Result) -> str:
    status = "ok  " if result.ok else "FAIL"
    applies = ["applies"] if result.ok and not result.patch.startswith(("series", "evidence/")) else []
    return f"{status} {result.patch}: " + " · ".join(applies + result.notes + result.problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--patches", type=Path, default=HERE, help="folder of NNNN-*.patch files and NNNN-*.md bodies")
    parser.add_argument("--verl-src", type=Path, default=None, help="a verl source tree or bare git repository")
    parser.add_argument("--verl-ref", default="HEAD", help="the commit to check in a bare --verl-src (default HEAD)")
    parser.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1), help="patches checked at once")
    parser.add_argument("--timeout", type=int, default=600, help="seconds per pytest run")
    parser.add_argument("--no-preload", action="store_true", help="each pytest run a fresh interpreter (no zygote)")
    args = parser.parse_args(argv)
    patches = sorted(args.patches.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    if not patches:
        print(f"upstream-check: no NNNN-*.patch in {args.patches}", file=sys.stderr)
        return 1
    evidence = sorted((args.patches / "evidence").glob("test_*.py"))
    with tempfile.TemporaryDirectory(prefix="verl-src-") as scratch:
        source = verl_source(args.verl_src, args.verl_ref, Path(scratch)) if args.verl_src else installed_verl()
        commit = f" at {source.commit}" if source.commit else ""
        print(f"upstream-check: verl {source.version} from {source.package.parent}{commit}", flush=True)
        results = check_all(
            source, patches, evidence, jobs=args.jobs, timeout=args.timeout, preload=not args.no_preload
        )
    for result in results:
        print(report(result), flush=True)
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
