"""The sandbox's settings (``agentrl.sandbox`` in a recipe config) and the environment variables that override them.

Environment variables override config values where noted, so one value set for a whole Ray cluster reaches every
process that runs code (the rollout tool and the code reward alike).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ENV_SANDBOX_URL = "AGENTRL_SANDBOX_URL"  # one endpoint for the tool and the code reward
ENV_SANDBOX_BACKEND = "AGENTRL_SANDBOX_BACKEND"  # local | sandbox_fusion | subprocess
ENV_SANDBOX_TOKEN = "AGENTRL_SANDBOX_TOKEN"  # shared token of `sandbox serve --token-file` (client and server)
# a file holding that token: the form the launcher ships to Ray workers (a runtime env is printed; the token is not)
ENV_SANDBOX_TOKEN_FILE = "AGENTRL_SANDBOX_TOKEN_FILE"
# the sandbox's Python runtime by name (agentrl.sandbox.runtime), and the folder the runtimes are built in
ENV_SANDBOX_RUNTIME = "AGENTRL_SANDBOX_RUNTIME"
ENV_SANDBOX_RUNTIME_DIR = "AGENTRL_SANDBOX_RUNTIME_DIR"  # default <venv>/agentrl-sandbox; one subfolder each
# sandboxfusion: SandboxFusion's Python packages (numpy 1.26.3, ...), what the paper's model was trained against;
# modern: the same packages at current versions (numpy 2). agentrl_sandbox/runtime_requirements*.txt.
RUNTIMES = ("sandboxfusion", "modern")
DEFAULT_RUNTIME = "sandboxfusion"
ENV_SANDBOX_POOL_SIZE = "AGENTRL_SANDBOX_POOL_SIZE"  # pool_size, shipped to every worker by the recipe's launcher
ENV_SANDBOX_PROCESSES_PER_NODE = "AGENTRL_SANDBOX_PROCESSES_PER_NODE"  # sandbox-using processes per node (pool sizing)
REDACTED = "***"  # what a config dump, report or log line shows for a token
SECRET_KEYS = ("token",)  # agentrl.sandbox keys never printed, logged or stored


@dataclasses.dataclass
class SandboxConfig:
    """``agentrl.sandbox``: where and how model-written code runs (tool calls, code rewards, data prep, eval).

    One block serves the rollout tool and the code reward — never two places. ``AGENTRL_SANDBOX_URL`` (when set)
    overrides ``url`` and selects the ``sandbox_fusion`` backend; ``AGENTRL_SANDBOX_BACKEND`` overrides ``backend``.
    """

    backend: str = "local"  # local (bubblewrap pool, default) | sandbox_fusion (HTTP client) | subprocess (debug only)
    # SandboxFusion-compatible endpoint(s), e.g. http://node:8080, or a list / comma-separated string of several:
    # the client spreads calls by least outstanding requests and takes failing servers out (backend=sandbox_fusion).
    url: str | list[str] | tuple[str, ...] | None = None
    # local pool: runs at once per process. None = this node's CPUs / the sandbox-using processes on it (the launcher
    # exports both, with this value, to every worker: AGENTRL_SANDBOX_POOL_SIZE / AGENTRL_SANDBOX_PROCESSES_PER_NODE).
    pool_size: int | None = None
    timeout_s: float = 30.0  # paper/tool: 30 s per call
    memory_mb: int = 2048  # paper/tool: 2 GB
    # local backend: the sandbox's Python packages (RUNTIMES); env AGENTRL_SANDBOX_RUNTIME overrides. [code]:
    # SandboxFusion's runtime (numpy 1.26.3, pandas 2.2.0, scipy 1.11.4, ...) = sandboxfusion; modern = numpy 2.
    runtime: str = DEFAULT_RUNTIME
    max_output_bytes: int = 1 << 20  # stdout/stderr kept per stream; the rest is dropped and status says so
    max_concurrency: int = 64  # in-flight requests per process (client and pool queue)
    retries: int = 3  # sandbox_fusion client: retries on connection errors / 5xx
    request_deadline_s: float = 120.0  # sandbox_fusion client: total deadline per call, retries included
    # sandbox_fusion client, our additions (the paper and the released code had one open server): the shared token of
    # `agentrl-recipe sandbox serve --token-file`, given here, in `token_file`, or in env AGENTRL_SANDBOX_TOKEN /
    # AGENTRL_SANDBOX_TOKEN_FILE. Prefer token_file: a config's values are printed by verl's config dump.
    token: str | None = dataclasses.field(default=None, repr=False)
    token_file: str | None = None
    # sandbox_fusion client's failure detector (ours; the released code had one server and no detector):
    health_interval_s: float = 2.0  # how often every server gets the deep health check (/health runs a program)
    health_timeout_s: float = 10.0  # a deep health check not answered within this fails (the server is taken out)
    connect_timeout_s: float = 10.0  # per request: a server that does not accept the connection within this is out
    # per request: a run not answered within its own timeout_s + this is taken as hung: the server is taken out and
    # the run resent to another (a re-execution). The server's queue wait must fit in it (sandbox serve --max-queue).
    read_slack_s: float = 30.0
    # sandbox_fusion client: a `sandbox serve` server reports (progress lines) how long a run waits in its queue; that
    # wait extends the call's request_deadline_s by up to this much in all (a busy server is not a hung one).
    max_queue_wait_s: float = 600.0
    eject_after_errors: int = 3  # consecutive 5xx / SandboxError answers that take a server out

    def __post_init__(self) -> None:
        if isinstance(self.url, list | tuple):  # OmegaConf lists arrive as lists; a tuple keeps the config hashable
            self.url = tuple(str(u) for u in self.url)
        if self.runtime not in RUNTIMES:
            moved = f" ({ENV_SANDBOX_RUNTIME_DIR} now holds the folder)" if "/" in str(self.runtime) else ""
            raise ValueError(f"agentrl.sandbox.runtime must be one of {list(RUNTIMES)}, got {self.runtime!r}{moved}")
        for key in ("health_interval_s", "health_timeout_s", "connect_timeout_s", "read_slack_s", "max_queue_wait_s"):
            if not float(getattr(self, key)) > 0:
                raise ValueError(f"agentrl.sandbox.{key} must be > 0, got {getattr(self, key)!r}")
        if int(self.eject_after_errors) < 1:
            raise ValueError(f"agentrl.sandbox.eject_after_errors must be >= 1, got {self.eject_after_errors!r}")

    @property
    def urls(self) -> list[str]:
        """Every server URL (a list, or one comma-separated string), without trailing slashes."""
        raw = self.url.split(",") if isinstance(self.url, str) else list(self.url or ())
        return [u.strip().rstrip("/") for u in raw if u.strip()]

    def resolve_token(self) -> str | None:
        """The shared token: ``token``, else the content of ``token_file`` (stripped), else None."""
        if self.token:
            return self.token
        if self.token_file:
            token = Path(self.token_file).read_text(encoding="utf-8").strip()
            if not token:
                raise ValueError(f"agentrl.sandbox.token_file {self.token_file} is empty")
            return token
        return None

    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None) -> SandboxConfig:
        values = dict(values or {})
        known = sorted(f.name for f in dataclasses.fields(cls))
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"unknown key(s) {unknown} in agentrl.sandbox; valid keys: {known}")
        return cls(**values).with_env_overrides()

    def with_env_overrides(self, environ: Mapping[str, str] | None = None) -> SandboxConfig:
        """The ``AGENTRL_SANDBOX_*`` overrides of ``environ`` (this process's environment by default) applied. A url
        (from either) names a server: it selects ``sandbox_fusion`` unless another backend than the local pool is
        named."""
        env = os.environ if environ is None else environ
        env_url = env.get(ENV_SANDBOX_URL)
        backend = env.get(ENV_SANDBOX_BACKEND) or self.backend
        if backend == "local" and (env_url or self.url):  # the local pool would ignore the url
            backend = "sandbox_fusion"
        token = env.get(ENV_SANDBOX_TOKEN) or self.token
        token_file = env.get(ENV_SANDBOX_TOKEN_FILE) or self.token_file
        pool_size = int(env.get(ENV_SANDBOX_POOL_SIZE) or 0) or self.pool_size
        runtime = env.get(ENV_SANDBOX_RUNTIME) or self.runtime
        return dataclasses.replace(
            self,
            url=env_url or self.url,
            backend=backend,
            token=token,
            token_file=token_file,
            pool_size=pool_size,
            runtime=runtime,
        )


def redacted(values: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``values`` (an ``agentrl.sandbox`` mapping) with every set secret shown as ``'***'``: for dumps and reports."""
    if values is None:
        return None
    return {k: REDACTED if k in SECRET_KEYS and v else v for k, v in values.items()}
