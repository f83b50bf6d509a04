"""Which process ran which of our components: one marker file per (component, process), when asked for.

verl runs the plugin's parts in different Ray workers (agent-loop workers, reward-loop workers, the actor worker,
the trainer). With ``AGENTRL_TRACE_DIR`` set (the launcher passes it to every worker), each component writes
``<dir>/<component>@<host>-<pid>.json`` the first time it runs in a process — nothing else, so the cost is one small
file per process. It answers "did our loss / reward / tool actually run in that job, and where?" from the run's own
files, for users debugging a cluster run and for the CPU trainer tests; unset, :func:`mark` does nothing.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_write_text

_marked: set[str] = set()


def mark(component: str, **details: Any) -> None:
    """Record that ``component`` ran in this process (once per process; a no-op unless the trace dir is set)."""
    directory = os.environ.get(names.ENV_TRACE_DIR)
    if not directory or component in _marked:
        return
    _marked.add(component)
    host, pid = socket.gethostname(), os.getpid()
    path = Path(directory) / f"{component}@{host}-{pid}.json"
    marker = {"component": component, "host": host, "pid": pid, "ray_node": _ray_node_id(), **details}
    atomic_write_text(path, json.dumps(marker, default=str))


def _ray_node_id() -> str | None:
    """The Ray node this process runs on (several raylets can share one host), or None outside Ray."""
    try:
        import ray  # already imported in every Ray worker; here only to read the runtime context

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else None
    except Exception:
        return None


def read(directory: str | os.PathLike) -> list[dict[str, Any]]:
    """Every marker in ``directory`` (what ran where)."""
    return [json.loads(p.read_text()) for p in sorted(Path(directory).glob("*@*.json"))]
