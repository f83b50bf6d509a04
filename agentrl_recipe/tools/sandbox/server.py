"""``agentrl-recipe sandbox serve``: SandboxFusion's ``/run_code`` API backed by the local bubblewrap pool.

Run one per CPU node; point the tool and the code reward at it with ``agentrl.sandbox.url`` (or env
``AGENTRL_SANDBOX_URL``). SandboxFusion's own client works against it unchanged. Only Python runs here.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import FastAPI, HTTPException

from agentrl_recipe.tools.sandbox.protocol import LANGUAGES, RunCodeRequest, decode_files, response_from_result
from agentrl_recipe.tools.sandbox.types import ExecResult, Sandbox

MAX_TIMEOUT_S = 600.0


def create_app(sandbox: Sandbox, *, default_memory_mb: int | None = None) -> FastAPI:
    """The FastAPI app; ``sandbox`` runs the code (normally the local pool)."""
    app = FastAPI(title="agentrl sandbox (SandboxFusion /run_code compatible)")
    stats: dict[str, Any] = {"calls": 0, "by_status": {}, "started": time.time()}

    @app.post("/run_code")
    async def run_code(req: RunCodeRequest) -> dict[str, Any]:
        if req.language not in LANGUAGES:
            raise HTTPException(400, f"language {req.language!r} is not supported here; this server runs {LANGUAGES}")
        if req.fetch_files:
            raise HTTPException(400, "fetch_files is not supported by this server")
        if not 0 < req.run_timeout <= MAX_TIMEOUT_S:
            raise HTTPException(400, f"run_timeout must be in (0, {MAX_TIMEOUT_S}]")
        memory = req.memory_limit_MB if req.memory_limit_MB > 0 else (default_memory_mb or sandbox.default_memory_mb)
        try:
            files = decode_files(req.files)
            result = await sandbox.arun(
                req.code, stdin=req.stdin, timeout_s=req.run_timeout, memory_mb=memory, files=files
            )
        except ValueError as exc:  # bad file paths, bad base64
            raise HTTPException(400, str(exc)) from exc
        except Exception as exc:  # the sandbox failed, not the code
            result = ExecResult.infra(f"{type(exc).__name__}: {exc}")
        stats["calls"] += 1
        stats["by_status"][result.status] = stats["by_status"].get(result.status, 0) + 1
        return response_from_result(result)

    @app.get("/v1/ping")
    async def ping() -> str:  # SandboxFusion's liveness probe
        return "pong"

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"ok": True, **sandbox.describe(), **stats}

    return app
