"""upstream/check.py: each upstream patch is a verl PR that passes verl's title and template rules, applies to verl
0.9.1, and whose tests fail before and pass after.

The checker's own verdicts are tested on a tiny package (no verl import, ~1 s per pytest run); the real check over
upstream/*.patch runs verl's import twice per patch and is marked slow.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parents[2] / "upstream"
_spec = importlib.util.spec_from_file_location("upstream_check", UPSTREAM / "check.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["upstream_check"] = check  # dataclasses resolve their module by name
_spec.loader.exec_module(check)

PATCHES = sorted(UPSTREAM.glob("[0-9][0-9][0-9][0-9]-*.patch"))
BUGGY = "def double(x):\n    return x + 2\n"
FIXED = "def double(x):\n    return 2 * x\n"
TEST = "from pkg.calc import double\n\n\ndef test_double():\n    assert double(5) == 10\n"
TEST_PATH = "tests/test_calc_on_cpu.py"
HEADER = "# Copyright 2026 Bytedance Ltd. and/or its affiliates\n"
FAILS_BEFORE = "fails-before (1/1: test_double: assert 7 == 10)"


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()
    return done.stdout.decode()


def _package(root: Path, source: str = BUGGY) -> Path:
    package = root / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "calc.py").write_text(source)
    return package


def body(test_path: str = TEST_PATH, before: str = "1 failed, 0 passed", after: str = "1 passed") -> str:
    """A PR description in verl's template that passes the checks."""
    return f"""### What does this PR do?

`double` adds 2. The bug was introduced by #1234.

### Checklist Before Starting

- [x] Search for similar PRs: https://github.com/verl-project/verl/pulls?q=is%3Apr+double. None.
- [x] Format the PR title as `[{{modules}}] {{type}}: {{description}}`.

### Test

```bash
python -m pytest {test_path}
```

Before the fix: {before}. With the fix: {after}.

### API and Usage Example

No API change.

### Design & Code Changes

- `pkg/calc.py`: multiply.

### Checklist Before Submitting

- [x] Read the contribute guide.

### AI assistance

AI assistance was used.

Signed-off-by: <submitter> <submitter-email>
"""


def _make_patch(
    tmp_path: Path,
    name: str,
    fix: str,
    test: str,
    base: str = BUGGY,
    title: str = "[misc] fix: double adds 2",
    existing_test: str | None = None,
) -> Path:
    """A git format-patch file against a package whose calc.py is ``base``: calc.py → ``fix`` plus ``test``
    (appended to ``existing_test`` when the source tree already has that test file), and its PR body."""
    repo = tmp_path / f"src-{name}"
    _package(repo, base)
    if existing_test is not None:
        (repo / "tests").mkdir()
        (repo / TEST_PATH).write_text(existing_test)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "calc.py").write_text(fix)
    (repo / "tests").mkdir(exist_ok=True)
    (repo / TEST_PATH).write_text(HEADER + test if existing_test is None else existing_test + "\n\n" + test)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", title)
    patch = tmp_path / f"{name}.patch"
    patch.write_text(_git(repo, "format-patch", "-1", "--stdout"))
    patch.with_suffix(".md").write_text(body())
    return patch


def _check(tmp_path: Path, patch: Path, with_tests: str | None = None) -> check.Result:
    """Check ``patch`` against the buggy package; ``with_tests``: the copy also has TEST_PATH with that text."""
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "installed"
    tests = None
    if with_tests is not None:
        (root / "tests").mkdir(parents=True)
        (root / TEST_PATH).write_text(with_tests)
        tests = root / "tests"
    base = check.make_base_repo(check.Source(package=_package(root), tests=tests, version="0.9.1"), work)
    return check.check_patch(base, patch, work, timeout=120)


def test_a_patch_whose_test_proves_the_bug_passes(tmp_path: Path) -> None:
    result = _check(tmp_path, _make_patch(tmp_path, "good", FIXED, TEST))
    assert result.ok, result.problems
    assert result.notes == [
        "sign-off pending",
        FAILS_BEFORE,
        "passes-after (1/1)",
    ]
    assert check.report(result).startswith("ok   good: applies · sign-off pending · fails-before")


def test_a_test_that_passes_before_the_fix_is_rejected(tmp_path: Path) -> None:
    harmless = "from pkg.calc import double\n\n\ndef test_double():\n    assert double(0) == 2 or double(0) == 0\n"
    result = _check(tmp_path, _make_patch(tmp_path, "weak", FIXED, harmless))
    assert not result.ok and "they do not show the bug" in result.problems[0]


def test_a_test_failing_on_a_missing_new_symbol_is_rejected(tmp_path: Path) -> None:
    fix = FIXED + "\n\ndef triple(x):\n    return 3 * x\n"
    test = "from pkg.calc import triple\n\n\ndef test_triple():\n    assert triple(2) == 6\n"
    result = _check(tmp_path, _make_patch(tmp_path, "newsymbol", fix, test))
    assert not result.ok and "do not run on unpatched" in result.problems[0]  # a collection error, not a failure


def test_a_fix_that_does_not_fix_is_rejected(tmp_path: Path) -> None:
    result = _check(tmp_path, _make_patch(tmp_path, "nofix", "def double(x):\n    return x + 3\n", TEST))
    assert not result.ok and "tests fail after the patch" in result.problems[0]


def test_a_patch_that_does_not_apply_is_rejected(tmp_path: Path) -> None:
    patch = _make_patch(tmp_path, "stale", FIXED, TEST, base="def double(x):\n    return x * 3\n")
    result = _check(tmp_path, patch)
    assert not result.ok and result.problems[0].startswith("does not apply")


def test_counts_the_body_states_must_match_the_runs(tmp_path: Path) -> None:
    patch = _make_patch(tmp_path, "counts", FIXED, TEST)
    patch.with_suffix(".md").write_text(body(before="2 failed, 0 passed"))
    result = _check(tmp_path, patch)
    assert result.problems == ["body states before (2, 0), after 1; the runs gave (1, 0), 1"]


EXISTING = "def test_unrelated_and_broken():\n    assert False\n"
ADDED = "def test_double():\n    assert double(5) == 10\n"


def test_tests_added_to_a_file_the_copy_has_run_alone_from_it(tmp_path: Path) -> None:
    # Only the tests the patch adds run: the file's own (here a broken one) are not the patch's to prove.
    patch = _make_patch(tmp_path, "inplace", FIXED, "from pkg.calc import double\n\n\n" + ADDED, existing_test=EXISTING)
    result = _check(tmp_path, patch, with_tests=EXISTING)
    assert result.ok, result.problems
    assert result.notes[1:] == [
        FAILS_BEFORE,
        "passes-after (1/1)",
    ]


def test_tests_added_to_a_file_the_wheel_lacks_run_after_the_imports_file(tmp_path: Path) -> None:
    existing = "from pkg.calc import double\n\n\n" + EXISTING
    patch = _make_patch(tmp_path, "0001-alone", FIXED, ADDED, existing_test=existing)
    no_imports = _check(tmp_path / "a", patch)
    assert "test_double: NameError" in " ".join(no_imports.problems)  # ``double`` came from the file's imports
    patch.with_name("0001-alone.imports.py").write_text("from pkg.calc import double\n")
    result = _check(tmp_path / "b", patch)
    assert result.ok, result.problems
    assert f"{TEST_PATH} not in this verl: the lines the patch adds to it run alone" in result.notes
    patch.with_name("0001-alone.imports.py").write_text("from pkg.calc import double\nX = 1\n")
    assert "0001-alone.imports.py: line 2 is not an import" in _check(tmp_path / "c", patch).problems


@pytest.mark.parametrize(
    "title",
    [
        "[trainer] fix: sync DAPO raises at max_num_gen_batches",
        "[trainer, sglang] fix: two calls",
        "[BREAKING][fsdp, megatron] feat: dynamic batching",
        "[1/N][rollout] refactor: first step",
    ],
)
def test_titles_verl_accepts(title: str) -> None:
    assert check.title_problems(title) == []


@pytest.mark.parametrize(
    "title, problem",
    [
        ("[agent] fix: hermes tool calls", "modules verl does not allow: agent"),  # our old 0002
        ("[utils] fix: process-group backend", "modules verl does not allow: utils"),  # our old 0005
        ("[rollout] perf: render once", "the type after [modules]"),  # our old 0003
        ("fix: no module", "no [modules] prefix"),
        ("[trainer]fix: no space", "the type after [modules]"),
    ],
)
def test_titles_verl_rejects(title: str, problem: str) -> None:
    assert problem in check.title_problems(title)[0]


def _body_problems(text: str) -> list[str]:
    return check.body_problems(text, check.Patch(Path("x.patch"), "t", "m", [check.FileDiff(TEST_PATH, new=True)]))


def test_a_filled_in_body_passes() -> None:
    assert _body_problems(body()) == []


@pytest.mark.parametrize(
    "edit, problem",
    [
        (lambda b: b.replace("### API and Usage Example\n\nNo API change.\n\n", ""), "template sections missing"),
        (lambda b: b.replace("### Test", "### Testing"), "template sections missing: ['Test']"),
        (lambda b: b.replace("introduced by #1234", "old"), "does not name the PR that introduced the bug"),
        (lambda b: b.replace("https://github.com/verl-project/verl/pulls?q=is%3Apr+double", "done"), "duplicate"),
        (lambda b: b.replace(f"pytest {TEST_PATH}", "pytest"), "does not name ['tests/test_calc_on_cpu.py']"),
        (lambda b: b.replace("With the fix: 1 passed", "Passes"), "'With the fix: N passed'"),
        (lambda b: b.replace("\nSigned-off-by: <submitter> <submitter-email>", ""), "Signed-off-by"),
        (lambda b: b.replace("No API change.", "> Demonstrate how the API changes if any"), "placeholders left"),
    ],
)
def test_a_body_that_misses_a_rule_is_rejected(edit, problem: str) -> None:
    problems = _body_problems(edit(body()))
    assert any(problem in p for p in problems), problems


def test_the_template_head_unchanged_is_rejected_as_verls_description_check_does() -> None:
    head = "\n".join(check.TEMPLATE_HEAD)
    assert "placeholder is unchanged" in _body_problems(head + "\n" + body().split("\n", 2)[2])[0]


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.stem)
def test_every_upstream_patch_has_a_title_and_body_verl_accepts(patch: Path) -> None:
    parsed = check.read_patch(patch)
    assert check.patch_problems(parsed) == []
    assert check.body_problems(patch.with_suffix(".md").read_text(), parsed) == []
    assert all(f.path.startswith("tests/") and Path(f.path).name.startswith("test_") for f in parsed.test_files)


def test_every_evidence_file_names_the_upstream_pr_it_is_kept_for() -> None:
    files = sorted((UPSTREAM / "evidence").glob("test_*.py"))
    assert files and all(re.fullmatch(r"#\d+", check.evidence_upstream_pr(path)) for path in files)


def test_a_verl_source_tree_is_read_with_its_tests(tmp_path: Path) -> None:
    (tmp_path / "verl" / "version").mkdir(parents=True)
    (tmp_path / "verl" / "version" / "version").write_text("0.10.0.dev\n")
    (tmp_path / "tests").mkdir()
    source = check.verl_source(tmp_path)
    assert (source.version, source.tests, source.pinned) == ("0.10.0.dev", tmp_path / "tests", False)


def test_installed_verl_is_the_version_the_patches_target() -> None:
    source = check.installed_verl()
    assert source.pinned and source.tests is None


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 2 pytest runs per patch, forked from zygotes: ~2.5 min on 2 busy cores (6.5 without)
def test_every_upstream_patch_applies_fails_before_and_passes_after() -> None:
    assert len(PATCHES) >= 5
    evidence = sorted((UPSTREAM / "evidence").glob("test_*.py"))
    results = check.check_all(check.installed_verl(), PATCHES, evidence, jobs=2)
    lines = [check.report(result) for result in results]
    assert all(result.ok for result in results), "\n".join(lines)


def test_the_wheel_check_applies_a_patchs_0_9_1_variant_where_there_is_one(tmp_path: Path) -> None:
    patch = tmp_path / "0001-x.patch"
    patch.write_text("main")
    assert check.wheel_variant(patch) == patch.resolve()
    variant = tmp_path / f"verl-{check.VERL_VERSION}" / patch.name
    variant.parent.mkdir()
    variant.write_text("0.9.1")
    assert check.wheel_variant(patch) == variant.resolve()


def test_verl_ci_reads_the_pinned_linters_and_local_hooks_from_the_tree(tmp_path: Path) -> None:
    (tmp_path / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        "  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: 'v0.12.2'\n    hooks: [{id: ruff}]\n"
        "  - repo: https://github.com/pre-commit/mirrors-mypy\n    rev: 'v1.17.0'\n    hooks: [{id: mypy}]\n"
        "  - repo: local\n    hooks:\n      - {id: check-license, entry: python3 check_license.py}\n"
    )
    verl_ci = check.load_verl_ci()
    assert verl_ci.pinned_revs(tmp_path) == {"ruff": "0.12.2", "mypy": "1.17.0"}
    assert verl_ci.local_hooks(tmp_path) == [verl_ci.Hook("check-license", "python3 check_license.py")]


def test_a_zygote_runs_pytest_in_a_fork_and_kills_a_run_past_its_timeout(tmp_path: Path) -> None:
    (tmp_path / "test_quick.py").write_text("import time\n\n\ndef test_quick():\n    assert time.time()\n")
    (tmp_path / "test_slow.py").write_text("import time\n\n\ndef test_slow():\n    time.sleep(60)\n")
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    zygote = check.Zygote(env, preload=())
    try:
        returncode, output = zygote.run(tmp_path, env, ["-q", "-p", "no:cacheprovider", "test_quick.py"], timeout=120)
        assert (returncode, "1 passed" in output) == (0, True), output
        started = time.monotonic()
        assert zygote.run(tmp_path, env, ["-q", "-p", "no:cacheprovider", "test_slow.py"], timeout=2)[0] == "timeout"
        assert time.monotonic() - started < 30
        assert zygote.run(tmp_path, env, ["-q", "-p", "no:cacheprovider", "test_quick.py"], timeout=120)[0] == 0
    finally:
        zygote.close()
