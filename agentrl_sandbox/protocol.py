"""SandboxFusion's ``/run_code`` wire protocol, both directions, so our client talks to a real SandboxFusion and
SandboxFusion's own client (PyPI ``sandbox-fusion``) talks to ``agentrl-recipe sandbox serve``.

Request ``RunCodeRequest``: code, language, compile_timeout, run_timeout, memory_limit_MB (-1 = none), stdin,
files (path -> base64), fetch_files. Response ``RunCodeResponse``: status Success | Failed | SandboxError, message,
compile_result/run_result = {status Finished | Error | TimeLimitExceeded, execution_time, return_code, stdout, stderr},
executor_pod_name, files. ``Failed`` = non-zero return code or time limit; ``SandboxError`` = the sandbox failed.

Our server adds one field SandboxFusion clients ignore, ``agentrl: {status, duration_s, message, queue_s}``, so our
client recovers the exact status (memory_exceeded, output_truncated) instead of inferring it, and how long the run
waited in the server's queue.

Progress (ours, opt-in, so a SandboxFusion client never sees it): a request carrying ``Agentrl-Progress: 1`` is
answered, once admitted and validated, with 200 ``application/x-ndjson`` at once: one line
``{"agentrl_progress": "queued", "queue_depth": N, "waited_s": x}`` on admission and every
:data:`PROGRESS_INTERVAL_S` while it waits for a run slot, ``{"agentrl_progress": "running", "waited_s": x}`` when its
run starts and every interval while it runs, then the RunCodeResponse object as the last line. The lines are the
server's heartbeat: a client tells a busy server (lines keep coming, the queue wait is reported) from a hung one
(silence). A SandboxFusion server ignores the header and answers plain JSON at the end.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentrl_sandbox.types import ExecResult, classify

PROGRESS_HEADER = "Agentrl-Progress"  # request header "1": answer with progress lines (module doc)
PROGRESS_MEDIA_TYPE = "application/x-ndjson"
PROGRESS_KEY = "agentrl_progress"  # queued | running; the last line (the answer) has no such key
PROGRESS_INTERVAL_S = 1.0  # a progress line at least this often while queued or running

LANGUAGES = ("python", "python3")  # what this server runs; SandboxFusion's enum spells Python "python"


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: str
    language: str = "python"
    compile_timeout: float = 10.0
    run_timeout: float = 10.0
    memory_limit_MB: int = -1  # SandboxFusion's spelling
    stdin: str | None = None
    files: dict[str, str | None] = Field(default_factory=dict)
    fetch_files: list[str] = Field(default_factory=list)


def build_request(
    code: str, stdin: str | None, timeout_s: float, memory_mb: int, files: dict[str, bytes]
) -> dict[str, Any]:
    return {
        "code": code,
        "language": "python",
        "compile_timeout": timeout_s,
        "run_timeout": timeout_s,
        "memory_limit_MB": memory_mb,
        "stdin": stdin,
        "files": {k: base64.b64encode(v).decode() for k, v in files.items()},
    }


def decode_files(files: dict[str, str | None]) -> dict[str, bytes]:
    return {k: base64.b64decode(v or "") for k, v in files.items()}


def response_from_result(res: ExecResult) -> dict[str, Any]:
    """Our ExecResult as a SandboxFusion RunCodeResponse (plus the ``agentrl`` extension)."""
    ext = {"status": res.status, "duration_s": res.duration_s, "message": res.message, "queue_s": res.queue_s}
    if res.status == "infra_error":
        return {"status": "SandboxError", "message": res.message, "run_result": None, "files": {}, "agentrl": ext}
    if res.status == "timeout":
        run_status, return_code = "TimeLimitExceeded", None
    elif res.status == "output_truncated" and res.exit_code is None:
        run_status, return_code = "Finished", -9  # we SIGKILLed it at the output cap
    else:
        run_status, return_code = "Finished", res.exit_code
    run_result = {
        "status": run_status,
        "execution_time": res.duration_s,
        "return_code": return_code,
        "stdout": res.stdout,
        "stderr": res.stderr,
    }
    success = res.status == "ok"
    return {
        "status": "Success" if success else "Failed",
        "message": res.message,
        "compile_result": None,
        "run_result": run_result,
        "executor_pod_name": None,
        "files": {},
        "agentrl": ext,
    }


def result_from_response(body: dict[str, Any], duration_s: float) -> ExecResult:
    """A RunCodeResponse (ours or a real SandboxFusion's) as an ExecResult."""
    status = body.get("status")
    run = body.get("run_result") or {}
    compile_ = body.get("compile_result") or {}
    ext = body.get("agentrl") if isinstance(body.get("agentrl"), dict) else None
    stdout, stderr = run.get("stdout") or "", run.get("stderr") or ""
    exit_code = run.get("return_code")
    if status == "SandboxError":
        return ExecResult.infra(f"sandbox server error: {body.get('message') or 'SandboxError'}", duration_s)
    if status not in ("Success", "Failed"):
        return ExecResult.infra(f"unexpected sandbox response status {status!r}", duration_s)
    if ext and ext.get("status") in ("ok", "runtime_error", "timeout", "memory_exceeded", "output_truncated"):
        ext_status = ext["status"]
        if ext_status in ("timeout", "output_truncated") and exit_code == -9:
            exit_code = None
        return ExecResult(
            ext_status,
            stdout,
            stderr,
            exit_code,
            float(ext.get("duration_s") or duration_s),
            str(ext.get("message") or ""),
            queue_s=min(_seconds(ext.get("queue_s")), duration_s),  # never more than the round trip
        )
    timed_out = "TimeLimitExceeded" in (run.get("status"), compile_.get("status"))
    if not timed_out and not run:
        return ExecResult.infra(f"sandbox response without run_result: {body.get('message')!r}", duration_s)
    if status == "Success" and exit_code is None:
        exit_code = 0
    result_status = classify(None if timed_out else exit_code, stderr, timed_out=timed_out, truncated=False)
    if status == "Failed" and result_status == "ok":  # a Failed response never means success
        result_status = "runtime_error"
    elapsed = run.get("execution_time")
    return ExecResult(
        result_status,
        stdout,
        stderr,
        None if timed_out else exit_code,
        float(elapsed) if elapsed is not None else duration_s,
        str(body.get("message") or ""),
    )


def _seconds(value: Any) -> float:
    """A duration from a server's answer: a finite number >= 0, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if 0.0 <= value < float("inf") else 0.0
