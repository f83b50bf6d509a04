"""agentrl_recipe.offline.vllm_server without vLLM: the command per build, the build detection, and the process handling
(health wait, exit and timeout errors with the log's tail, the process-group stop) on scripted stand-in servers.
The real server: tests/integration/test_vllm_serve_on_cpu.py."""

from __future__ import annotations

import dataclasses
import importlib.metadata as md
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from agentrl_recipe.offline import vllm_server
from agentrl_recipe.offline.vllm_server import VllmServer, VllmServerError, VllmServerSpec, group_alive, stop_on_sigterm

_FAKE_SERVER = textwrap.dedent(
    """
    import http.server, signal, subprocess, sys
    # a child in the server's process group that ignores SIGTERM, as a wedged engine process would
    subprocess.Popen([sys.executable, "-c", "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                      "open(sys.argv[1], 'w').close(); time.sleep(600)", sys.argv[2]])

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

    print("fake server up", flush=True)
    http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Health).serve_forever()
    """
)


@dataclasses.dataclass(frozen=True)
class ScriptedSpec(VllmServerSpec):
    """A spec whose process is a Python script (argv: port, then ``args``) instead of vLLM."""

    script: str = ""
    args: tuple[str, ...] = ()

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.script, str(self.port), *self.args]


def test_cpu_command_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")  # the user's setting wins over the default
    spec = VllmServerSpec(model="/m", max_model_len=544, port=8123, build="vllm-cpu", extra_args=("--dtype", "bf16"))
    assert spec.command() == [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--served-model-name", "/m",
        "--host", "127.0.0.1", "--port", "8123", "--max-model-len", "544", "--dtype", "float32", "--seed", "0",
        "--generation-config", "vllm", "--enforce-eager", "--dtype", "bf16",
    ]  # fmt: skip
    env = spec.environment()
    assert (env["VLLM_CPU_KVCACHE_SPACE"], env["VLLM_CPU_OMP_THREADS_BIND"]) == ("1", "0-1")
    assert spec.url == "http://127.0.0.1:8123/v1"


def test_gpu_command_keeps_the_checkpoint_dtype_and_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VLLM_CPU_KVCACHE_SPACE", raising=False)
    spec = VllmServerSpec(model="org/m", max_model_len=24576, served_model_name="m", build="vllm", seed=3)
    argv = spec.command()
    assert argv[argv.index("--dtype") + 1] == "auto" and "--enforce-eager" not in argv
    assert argv[argv.index("--served-model-name") + 1] == "m" and argv[argv.index("--seed") + 1] == "3"
    assert argv[argv.index("--max-model-len") + 1] == "24576"
    assert "VLLM_CPU_KVCACHE_SPACE" not in spec.environment()
    assert 0 < spec.port < 65536  # a free port was chosen


@pytest.mark.parametrize(
    ("installed", "build"),
    [
        ({"vllm-cpu": "0.30.0"}, "vllm-cpu"),
        ({"vllm": "0.30.0+cpu", "vllm-cpu": "0.30.0"}, "vllm-cpu"),  # verl_cpu's alias answering for vllm-cpu
        ({"vllm": "0.30.0"}, "vllm"),
        ({}, None),
    ],
)
def test_the_build_comes_from_the_installed_distribution(
    monkeypatch: pytest.MonkeyPatch, installed: dict[str, str], build: str | None
) -> None:
    def version(name: str) -> str:
        if name not in installed:
            raise md.PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(vllm_server.md, "version", version)
    assert vllm_server.vllm_build() == build
    if build is None:
        with pytest.raises(VllmServerError, match=r"vLLM is not installed.*--backend hf"):
            VllmServerSpec(model="m", max_model_len=8)


def test_a_server_that_exits_fails_with_its_root_cause_line(tmp_path: Path) -> None:
    # what vLLM logs when a folder has no weights: the engine core's error, then the API server's wrapper traceback
    core = "(EngineCore_DP0 pid=11) ERROR 12-06 03:24:16 [core.py:708]"
    log = [
        f"{core} EngineCore failed to start.",
        f"{core} Traceback (most recent call last):",
        f"{core} RuntimeError: Cannot find any model weights with `/m`",
        "Traceback (most recent call last):",
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
    ]
    spec_log = tmp_path / "s.log"
    spec_log.write_text("RuntimeError: an earlier launch's error, appended to the same log\n")
    script = f"import sys; print({chr(10).join(log)!r}, flush=True); sys.exit(3)"
    spec = ScriptedSpec(model="m", max_model_len=8, build="vllm", log_path=spec_log, script=script)
    server = VllmServer(spec)
    with pytest.raises(VllmServerError) as err:
        server.start()
    assert str(err.value) == (
        f"vLLM server for m on port {spec.port} exited with code 3 before it was ready: "
        f"RuntimeError: Cannot find any model weights with `/m` (log: {spec_log})"
    )
    assert server.proc is None
    assert vllm_server.root_cause("") == "(the server log is empty)"
    assert vllm_server.root_cause("starting\nkilled\n") == "killed"  # no exception line: the last line


def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path: Path) -> None:
    script = "import os, sys, time; print('loading weights', os.getpid(), flush=True); time.sleep(600)"
    spec = ScriptedSpec(
        model="m", max_model_len=8, build="vllm", log_path=tmp_path / "s.log", start_timeout_s=1.0, script=script
    )
    with pytest.raises(
        VllmServerError, match=r"did not answer /health within 1 s: loading weights \d+ \(log: .*s\.log\)$"
    ):
        VllmServer(spec).start()
    pid = int(spec.log_path.read_text().split()[-1])
    assert not group_alive(pid)  # stopped on the way out


def test_healthy_server_then_stop_ends_its_whole_process_group(tmp_path: Path) -> None:
    child_ready = tmp_path / "child_ready"
    spec = ScriptedSpec(
        model="m", max_model_len=8, build="vllm", log_path=tmp_path / "s.log", script=_FAKE_SERVER,
        args=(str(child_ready),),
    )  # fmt: skip
    bystander = subprocess.Popen(["sleep", "600"])  # outside the server's group: stop() must leave it alone
    try:
        server = VllmServer(spec).start()
        assert server.start_s is not None and server.url == spec.url and server.proc is not None
        pgid = server.proc.pid
        deadline = time.monotonic() + 60
        while not child_ready.exists() and time.monotonic() < deadline:  # the child starts before the server listens
            time.sleep(0.05)
        assert child_ready.exists() and group_alive(pgid)
        server.stop(grace_s=1.0)  # the leader ends on SIGTERM; the child ignores it and is killed
        assert not group_alive(pgid) and server.proc is None
        server.stop()  # idempotent
        assert bystander.poll() is None
    finally:
        bystander.kill()
        bystander.wait()
    assert "fake server up" in spec.log_path.read_text()


def test_sigterm_inside_stop_on_sigterm_exits_through_the_with_blocks() -> None:
    before = signal.getsignal(signal.SIGTERM)
    stopped = []
    with pytest.raises(SystemExit) as exit_, stop_on_sigterm():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises at the next bytecode, long before this ends
        finally:
            stopped.append(True)  # where VllmServer.__exit__ stops the server
    assert exit_.value.code == 143 and stopped == [True]
    assert signal.getsignal(signal.SIGTERM) == before
