"""`agentrl-recipe doctor`'s sandbox interpreter line (issue 38 item 8): which Python the local sandbox runs
(`AGENTRL_SANDBOX_PYTHON` or /usr/bin/python3), or why it cannot. The whole probe: tests/agentrl_recipe/test_plugin.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agentrl_recipe.cli import doctor
from agentrl_sandbox import runtime_env


def sandbox_python_line(report: dict, capsys: pytest.CaptureFixture[str]) -> str:
    doctor._print_human({"sandbox_runtime": report, "sandbox": {"skipped": True}, "ok": report["ok"]})
    return next(line for line in capsys.readouterr().out.splitlines() if "sandbox python" in line)


def test_doctor_names_the_interpreter_the_sandbox_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(runtime_env.ENV_SANDBOX_PYTHON, raising=False)
    monkeypatch.delenv("AGENTRL_SANDBOX_RUNTIME", raising=False)
    report = doctor._sandbox_runtime()
    version = runtime_env.interpreter_version("/usr/bin/python3")
    assert (report["ok"], report["interpreter"], report["python"]) == (True, "/usr/bin/python3", version)
    line = sandbox_python_line(report, capsys)
    assert line.startswith(f"  [ok ] sandbox python    sandboxfusion runtime, /usr/bin/python3 (Python {version}) at ")
    monkeypatch.setenv(runtime_env.ENV_SANDBOX_PYTHON, "/usr/bin/python3")  # named explicitly: the same one
    assert doctor._sandbox_runtime()["interpreter"] == "/usr/bin/python3"


def test_doctor_refuses_an_interpreter_the_sandbox_cannot_bind(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    python = tmp_path / "python3.11"  # a module's or conda's Python: outside /usr, which the sandbox cannot see
    python.write_text("#!/bin/sh\necho 3.11\n")
    python.chmod(0o755)
    monkeypatch.setenv(runtime_env.ENV_SANDBOX_PYTHON, str(python))
    report = doctor._sandbox_runtime()
    assert (report["ok"], report["interpreter"]) == (False, str(python))
    line = sandbox_python_line(report, capsys)
    said = f"the sandbox interpreter {python} is not under /usr, the only host tree the sandbox binds: set "
    assert line.startswith(f"  [BAD] sandbox python    sandboxfusion runtime: {said}AGENTRL_SANDBOX_PYTHON to a Python")
