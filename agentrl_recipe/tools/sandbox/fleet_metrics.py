"""Per-server training metrics of a sandbox fleet, ``agentrl_sandbox/server/<host>_<port>/<name>``.

Names: ``calls`` (runs the server answered), ``failures`` (attempts that failed there: connection lost, 5xx,
SandboxError, 4xx), ``latency_p50_ms`` / ``latency_p99_ms`` (round trips of the answered runs). The key is the URL's
host and port joined by ``_``, every other character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (``:`` is not a
valid tag character in TensorBoard or MLflow).

The route: the ``sandbox_fusion`` client puts a :class:`~agentrl_recipe.tools.sandbox.types.Route` on every result;
the ``code_interpreter`` tool copies it into its call metrics (:func:`route_metrics`); the agent loop keeps them per
trajectory in three ``extra_fields`` (:func:`trajectory_fields`); the replay buffer's ``step_metrics`` turns a
batch's into what verl logs (:func:`server_metrics`). Per call that is a dict and three appends; the percentiles are
computed once per step. The local backend has no route: no keys.
"""

from __future__ import annotations

import re
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from agentrl_recipe import names
from agentrl_recipe.tools.sandbox.types import Route

PREFIX = "agentrl_sandbox/server"
SERVER, LATENCY_S, FAILED = "sandbox_server", "sandbox_latency_s", "sandbox_failed"  # keys of the tool's metrics
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def server_key(url: str) -> str:
    """``http://10.0.0.7:8080/`` -> ``10.0.0.7_8080``: a tracker-safe name for one server."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or url
    try:
        port = parts.port
    except ValueError:  # not a number: keep whatever it was, made safe
        port = None
    return _UNSAFE.sub("_", f"{host}_{port}" if port else host)


def route_metrics(route: Route | None) -> dict[str, Any]:
    """The tool-call metrics of one result's route (none for backends without servers)."""
    if route is None:
        return {}
    return {SERVER: route.server, LATENCY_S: route.latency_s, FAILED: list(route.failed)}


def trajectory_fields(calls: Sequence[Mapping[str, Any]]) -> dict[str, list]:
    """A trajectory's ``extra_fields`` from its tool calls' metrics (calls without a route are skipped)."""
    answered = [m for m in calls if m.get(SERVER)]
    return {
        names.FIELD_SANDBOX_SERVERS: [str(m[SERVER]) for m in answered],
        names.FIELD_SANDBOX_LATENCY_S: [float(m[LATENCY_S]) for m in answered],
        names.FIELD_SANDBOX_FAILED: [str(url) for m in calls for url in m.get(FAILED) or ()],
    }


def _column(record: Mapping[str, Any], field: str) -> Sequence[Any]:
    value = record.get(field)
    return () if value is None else value


def server_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per-server calls, failures and latency p50/p99 (ms) over a batch's trajectory records."""
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    latencies: dict[str, list[float]] = defaultdict(list)
    for record in records:
        servers = _column(record, names.FIELD_SANDBOX_SERVERS)
        for url, latency in zip(servers, _column(record, names.FIELD_SANDBOX_LATENCY_S), strict=True):
            key = server_key(str(url))
            calls[key] += 1
            latencies[key].append(float(latency))
        for url in _column(record, names.FIELD_SANDBOX_FAILED):
            failures[server_key(str(url))] += 1
    out: dict[str, float] = {}
    for key in sorted(calls.keys() | failures.keys()):
        out[f"{PREFIX}/{key}/calls"] = float(calls[key])
        out[f"{PREFIX}/{key}/failures"] = float(failures[key])
        if latencies[key]:
            p50, p99 = np.percentile(latencies[key], [50, 99])
            out[f"{PREFIX}/{key}/latency_p50_ms"] = 1000 * float(p50)
            out[f"{PREFIX}/{key}/latency_p99_ms"] = 1000 * float(p99)
    return out
