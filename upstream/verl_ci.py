"""What verl's CI runs on a pull request, run on one patch applied to a verl source tree.

Used by ``check.py --verl-src`` (``make upstream-check VERL_SRC=...``). For a patch applied (and committed) on a
clone of the tree, with ``origin/main`` at the unpatched tree:

- **pre-commit** (``.github/workflows/pre-commit.yml``): ruff check and ruff format at the ``rev`` the tree's
  ``.pre-commit-config.yaml`` pins, mypy at its pinned ``rev`` with the tree's ``pyproject.toml``, both on the files
  the patch changes (pre-commit passes the changed files), and every ``repo: local`` hook of that file, each run as
  its ``entry`` in the tree. pre-commit fetches its hook repositories from GitHub, so the pinned tools come from PyPI
  into a virtual environment of their own (``~/.cache/agentrl-upstream/lint-ruff<v>-mypy<v>``, made on first use).
  A local hook fails when it exits non-zero or changes a file (pre-commit's rule). A hook that already fails on the
  unpatched tree is reported, not held against the patch.
- **Type Annotation and Docstring Coverage** (``type-coverage-check.yml``): ``tests/special_sanity/
  type_coverage_check.py`` against ``origin/main``.
- **check-pr-title** (``check-pr-title.yml``): ``tests/special_sanity/check_pr_title.py`` with ``PR_TITLE`` set to the
  patch's subject, and ``check_pr_description.py`` with the ``.md`` as the pull request's body.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import yaml

LINT_CACHE = Path(os.environ.get("AGENTRL_UPSTREAM_CACHE", Path.home() / ".cache" / "agentrl-upstream"))
HOOK_TIMEOUT = 900


@dataclass(frozen=True)
class Hook:
    id: str
    entry: str


@dataclass
class Verdict:
    """One CI step on one patch: ``ok`` and what to report."""

    name: str
    ok: bool
    detail: str = ""


def sh(command: list[str] | str, cwd: Path, env: dict[str, str] | None = None, timeout: int = HOOK_TIMEOUT):
    """Run a command; a timeout is a failure with its own message."""
    try:
        return subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, shell=isinstance(command, str)
        )
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(command, 124, "", f"timed out after {timeout} s")


def pinned_revs(tree: Path) -> dict[str, str]:
    """``{"ruff": "0.12.2", "mypy": "1.17.0"}`` from the tree's ``.pre-commit-config.yaml``."""
    config = yaml.safe_load((tree / ".pre-commit-config.yaml").read_text())
    revs = {}
    for repo in config.get("repos", []):
        url = str(repo.get("repo", ""))
        for tool in ("ruff", "mypy"):
            if url.rstrip("/").endswith(("ruff-pre-commit", "mirrors-mypy")) and tool in url:
                revs[tool] = str(repo["rev"]).lstrip("v")
    return revs


def local_hooks(tree: Path) -> list[Hook]:
    config = yaml.safe_load((tree / ".pre-commit-config.yaml").read_text())
    local = [repo for repo in config.get("repos", []) if repo.get("repo") == "local"]
    return [Hook(id=str(h["id"]), entry=str(h["entry"])) for repo in local for h in repo.get("hooks", [])]


def lint_venv(revs: dict[str, str]) -> Path:
    """A virtual environment with the pinned ruff and mypy from PyPI, made once per pair of versions."""
    venv = LINT_CACHE / f"lint-ruff{revs['ruff']}-mypy{revs['mypy']}"
    stamp = venv / ".installed"
    if stamp.exists():
        return venv
    LINT_CACHE.mkdir(parents=True, exist_ok=True)
    for command in (
        [sys.executable, "-m", "venv", "--clear", str(venv)],
        [str(venv / "bin" / "pip"), "install", "-q", f"ruff=={revs['ruff']}", f"mypy=={revs['mypy']}"],
    ):
        done = sh(command, cwd=LINT_CACHE)
        if done.returncode:
            raise RuntimeError(f"cannot install verl's pinned linters: {done.stderr.strip()[-800:]}")
    stamp.write_text(json.dumps(revs))
    return venv


def hook_env() -> dict[str, str]:
    """``python3`` of a hook is this interpreter (verl's dependencies, hydra for the config generator)."""
    bindir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONDONTWRITEBYTECODE": "1"}


def run_hook(repo: Path, hook: Hook) -> Verdict:
    """A local hook as pre-commit runs it: it fails when it exits non-zero or leaves the tree changed."""
    done = sh(hook.entry, cwd=repo, env=hook_env())
    changed = sh(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo).stdout.strip()
    sh(["git", "checkout", "--", "."], cwd=repo)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-3:]
        return Verdict(hook.id, False, " / ".join(tail)[:400])
    if changed:
        return Verdict(hook.id, False, f"changed files: {changed[:300]}")
    return Verdict(hook.id, True)


def base_hook_results(base: Path, hooks: list[Hook]) -> dict[str, Verdict]:
    """Each hook on the unpatched tree, once: a hook failing there is not a patch's fault."""
    return {hook.id: run_hook(base, hook) for hook in hooks}


def linters(repo: Path, venv: Path, files: list[str]) -> list[Verdict]:
    """pre-commit's ruff, ruff-format and mypy hooks on the changed Python files, with the tree's config."""
    if not files:
        return []
    bindir = venv / "bin"
    steps = {
        "ruff": [str(bindir / "ruff"), "check", "--output-format=concise", *files],
        "ruff-format": [str(bindir / "ruff"), "format", "--check", "--diff", *files],
        "mypy": [str(bindir / "mypy"), "--no-incremental", *files],
    }
    verdicts = []
    for name, command in steps.items():
        done = sh(command, cwd=repo)
        tail = " / ".join((done.stdout + done.stderr).strip().splitlines()[-4:])[:500]
        verdicts.append(Verdict(name, done.returncode == 0, "" if done.returncode == 0 else tail))
    return verdicts


def title_and_description(repo: Path, title: str, body: str) -> list[Verdict]:
    """verl's own check-pr-title scripts, with the title and body a pull request would carry."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as event:
        json.dump({"pull_request": {"title": title, "body": body}}, event)
    env = {**hook_env(), "PR_TITLE": title, "GITHUB_EVENT_PATH": event.name, "GITHUB_WORKSPACE": str(repo)}
    verdicts = []
    for script in ("check_pr_title.py", "check_pr_description.py"):
        path = repo / "tests" / "special_sanity" / script
        if not path.exists():
            continue
        done = sh([sys.executable, str(path)], cwd=repo, env=env)
        tail = " / ".join((done.stdout + done.stderr).strip().splitlines()[-2:])[:300]
        verdicts.append(Verdict(script, done.returncode == 0, "" if done.returncode == 0 else tail))
    os.unlink(event.name)
    return verdicts


def type_coverage(repo: Path) -> list[Verdict]:
    """``type_coverage_check.py``: the lines the patch adds or changes, against ``origin/main``."""
    script = repo / "tests" / "special_sanity" / "type_coverage_check.py"
    if not script.exists():
        return []
    done = sh([sys.executable, str(script)], cwd=repo, env=hook_env())
    tail = " / ".join((done.stdout + done.stderr).strip().splitlines()[-3:])[:400]
    return [Verdict("type_coverage_check.py", done.returncode == 0, "" if done.returncode == 0 else tail)]


def commit_patch(repo: Path, base_commit: str, subject: str) -> None:
    """Commit the applied patch and point ``origin/main`` at the base, as a PR branch looks in CI."""
    for args in (
        ["add", "-A"],
        ["-c", "user.name=upstream-check", "-c", "user.email=check@localhost", "commit", "-qm", subject],
        ["update-ref", "refs/remotes/origin/main", base_commit],
    ):
        done = sh(["git", *args], cwd=repo)
        if done.returncode:
            raise RuntimeError(f"git {shlex.join(args)} failed in {repo}: {done.stderr.strip()}")


def ci_verdicts(
    repo: Path, base_commit: str, subject: str, body: str, changed: list[str], base_hooks: dict[str, Verdict]
) -> list[Verdict]:
    """Every CI step above on the patched clone ``repo``."""
    commit_patch(repo, base_commit, subject)
    python = [path for path in changed if path.endswith(".py") and (repo / path).exists()]
    verdicts = linters(repo, lint_venv(pinned_revs(repo)), python)
    for hook in local_hooks(repo):  # all of them: together they take a few seconds
        verdict = run_hook(repo, hook)
        before = base_hooks.get(hook.id)
        if not verdict.ok and before is not None and not before.ok:
            verdict = Verdict(hook.id, True, f"fails on the unpatched tree too: {before.detail[:200]}")
        verdicts.append(verdict)
    return verdicts + type_coverage(repo) + title_and_description(repo, subject, body)
