"""upstream/check.py: every upstream patch applies to verl 0.9.1, its test fails before and passes after.

The checker's own verdicts are tested on a tiny package (no verl import, ~1 s per pytest run); the real check over
upstream/*.patch runs verl's import twice per patch and is marked slow.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

UPSTREAM = Path(__file__).resolve().parents[2] / "upstream"
_spec = importlib.util.spec_from_file_location("upstream_check", UPSTREAM / "check.py")
check = importlib.util.module_from_spec(_spec)
sys.modules["upstream_check"] = check  # dataclasses resolve their module by name
_spec.loader.exec_module(check)

BUGGY = "def double(x):\n    return x + 2\n"
FIXED = "def double(x):\n    return 2 * x\n"
TEST = "from pkg.calc import double\n\n\ndef test_double():\n    assert double(5) == 10\n"


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


def _make_patch(tmp_path: Path, name: str, fix: str, test: str, base: str = BUGGY) -> Path:
    """A git format-patch file against a package whose calc.py is ``base``: calc.py → ``fix`` plus ``test``."""
    repo = tmp_path / f"src-{name}"
    _package(repo, base)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (repo / "pkg" / "calc.py").write_text(fix)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_calc_on_cpu.py").write_text(test)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", f"fix: {name}")
    patch = tmp_path / f"{name}.patch"
    patch.write_text(_git(repo, "format-patch", "-1", "--stdout"))
    return patch


def _check(tmp_path: Path, patch: Path) -> check.Result:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    base = check.make_base_repo(_package(tmp_path / "installed"), work)
    return check.check_patch(base, patch, work, timeout=120)


def test_a_patch_whose_test_proves_the_bug_passes(tmp_path: Path) -> None:
    result = _check(tmp_path, _make_patch(tmp_path, "good", FIXED, TEST))
    assert result.ok, result.problems
    assert result.notes[0].startswith("fails-before (1/1: test_double: assert 7 == 10")
    assert result.notes[1] == "passes-after (1/1)"
    assert check.report(result).startswith("ok   good: applies · fails-before")


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


def test_patch_test_files_lists_the_new_tests() -> None:
    for patch in sorted(UPSTREAM.glob("[0-9][0-9][0-9][0-9]-*.patch")):
        tests = check.patch_test_files(patch)
        assert tests and all(t.startswith("tests/") and t.endswith("_on_cpu.py") for t in tests), patch.name


def test_installed_verl_is_the_version_the_patches_target() -> None:
    assert (check.installed_verl() / "version" / "version").read_text().strip() == check.VERL_VERSION


@pytest.mark.slow
@pytest.mark.timeout(1800)  # 2 pytest runs of a verl copy per patch: ~4 min quiet, it timed out at 300 s under load
def test_every_upstream_patch_applies_fails_before_and_passes_after() -> None:
    patches = sorted(UPSTREAM.glob("[0-9][0-9][0-9][0-9]-*.patch"))
    assert len(patches) >= 5
    results = check.check_all(check.installed_verl(), patches, jobs=2)
    lines = [check.report(result) for result in results]
    assert all(result.ok for result in results), "\n".join(lines)
