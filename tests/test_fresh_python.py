"""tests/fresh_python.py: a job forked from the zygote runs as a new interpreter would run it, or runs as one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_python import PRELOAD, run_python

# What a job sees of its own process: the parent that started it, which modules it holds, its cwd, argv and __main__.
PROBE = (
    "import json, os, sys\n"
    "print(json.dumps({'ppid': os.getppid(), 'cwd': os.getcwd(), 'argv': sys.argv,"
    " 'verl': 'verl' in sys.modules, 'torch': 'torch' in sys.modules, 'main': sorted(vars(sys.modules['__main__'])),"
    " 'var': os.environ.get('AGENTRL_FRESH_PYTHON_PROBE')}))\n"
)


def _probe(tmp_path: Path, env: dict[str, str]) -> dict:
    proc = run_python(["-c", PROBE, "an-argument"], env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_a_job_forks_with_the_heavy_imports_done_and_nothing_of_verl(tmp_path: Path) -> None:
    seen = _probe(tmp_path, {**os.environ, "AGENTRL_FRESH_PYTHON_PROBE": "mine"})
    assert seen["ppid"] != os.getpid()  # the zygote's child, not this process's
    assert (seen["torch"], seen["verl"]) == (True, False)
    assert (seen["cwd"], seen["argv"], seen["var"]) == (str(tmp_path), ["-c", "an-argument"], "mine")
    plain = json.loads(subprocess.run([sys.executable, "-c", PROBE, "x"], capture_output=True, text=True).stdout)
    assert seen["main"] == plain["main"]  # a fresh __main__, as `python -c` makes it: the job's own imports added
    assert {"json", "os", "sys"} <= set(seen["main"])
    assert "verl" not in PRELOAD and "vllm" not in PRELOAD


@pytest.mark.parametrize("variable", ["PYTHONPATH", "HF_HUB_OFFLINE", "RAY_DEDUP_LOGS"])
def test_a_variable_read_at_start_up_that_differs_runs_a_plain_interpreter(tmp_path: Path, variable: str) -> None:
    env = {**os.environ, variable: os.environ.get(variable, "") + "-changed"}
    seen = _probe(tmp_path, env)
    assert seen["ppid"] == os.getpid() and seen["torch"] is False  # subprocess.run's child: a new interpreter


def test_exit_status_traceback_and_interpreter_exit_as_python_gives_them(tmp_path: Path) -> None:
    assert run_python(["-c", "raise SystemExit(3)"]).returncode == 3
    failed = run_python(["-c", "1 / 0"])
    assert failed.returncode == 1
    frames = ['  File "<string>", line 1, in <module>', "ZeroDivisionError: division by zero"]
    assert failed.stderr.splitlines()[1:] == frames  # from the job's first frame, as the interpreter prints it
    # a normal interpreter exit: a non-daemon thread is joined, then atexit handlers run and buffers are flushed
    code = (
        "import atexit, sys, threading, time\n"
        "atexit.register(lambda: print('atexit'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread'))).start()\n"
        "sys.stdout.write('main ')\n"
    )
    done = run_python(["-c", code])
    assert (done.returncode, done.stdout.split()) == (0, ["main", "thread", "atexit"])
    module = run_python(["-m", "json.tool"], cwd=tmp_path)  # -m: stdin is /dev/null, as with subprocess.run
    assert (module.returncode, module.stderr.strip()) == (1, "Expecting value: line 1 column 1 (char 0)")


def test_a_job_past_its_timeout_is_killed_with_its_children_and_the_zygote_serves_on(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(marker)!r}, 'w').write(str(child.pid))\n"
        "time.sleep(60)\n"
    )
    with pytest.raises(subprocess.TimeoutExpired):
        run_python(["-c", code], timeout=3)
    assert _state(int(marker.read_text())) in ("gone", "Z")  # killed with the job (a zombie until reaped)
    assert run_python(["-c", "print('next')"]).stdout == "next\n"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"


def test_other_interpreter_options_run_a_plain_interpreter() -> None:
    proc = run_python(["-I", "-c", "import os, sys; print(os.getppid(), 'torch' in sys.modules)"])
    assert proc.stdout.split() == [str(os.getpid()), "False"]
    assert sys.executable == proc.args[0]
