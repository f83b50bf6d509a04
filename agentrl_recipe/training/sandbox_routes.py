"""Per-server training metrics of a sandbox fleet, ``agentrl_sandbox/server/<host>_<port>/<name>``.

Names: ``calls`` (runs the server answered), ``failures`` (attempts that failed there: connection lost, 5xx,
SandboxError, 4xx), ``latency_p50_ms`` / ``latency_p99_ms`` (round trips of the answered runs). The key is the URL's
host and port joined by ``_``, every other character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (``:`` is not a
valid tag character in TensorBoard or MLflow).

The route: the ``sandbox_fusion`` client puts a :class:`~agentrl_sandbox.types.Route` on every result;
the ``code_interpreter`` tool copies it into its call metrics (:func:`route_metrics`); the agent loop keeps them per
trajectory in three ``extra_fields`` (:func:`trajectory_fields`); the replay buffer's ``step_metrics`` turns a
batch's into what verl logs (:func:`server_metrics`). Per call that is a dict and three appends; the percentiles are
computed once per step. The local backend has no route: no keys.

The code reward reaches the same servers from the reward workers: the reward manager grades through a
:class:`RouteRecorder` and hands the routes on as one JSON string per trajectory (``reward_extra_info`` values must
be scalars: verl stacks them with ``np.array``), which :func:`server_metrics` counts with the tool's.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from agentrl_recipe import fields
from agentrl_sandbox.types import Route

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
        fields.SANDBOX_SERVERS.column: [str(m[SERVER]) for m in answered],
        fields.SANDBOX_LATENCY_S.column: [float(m[LATENCY_S]) for m in answered],
        fields.SANDBOX_FAILED.column: [str(url) for m in calls for url in m.get(FAILED) or ()],
    }


class RouteRecorder:
    """A sandbox that remembers the route of every run it passes on (the graders call ``arun``; the rest delegates).

    ``get_sandbox`` is called on first use only: grading a math row never starts a sandbox.
    """

    def __init__(self, get_sandbox: Callable[[], Any]) -> None:
        self._get_sandbox = get_sandbox
        self._sandbox: Any = None
        self.calls: list[dict[str, Any]] = []

    @property
    def sandbox(self) -> Any:
        if self._sandbox is None:
            self._sandbox = self._get_sandbox()
        return self._sandbox

    async def arun(self, *args: Any, **kwargs: Any) -> Any:
        result = await self.sandbox.arun(*args, **kwargs)
        if result.route is not None:
            self.calls.append(route_metrics(result.route))
        return result

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # never resolve the sandbox for copy/pickle probes of private names
            raise AttributeError(name)
        return getattr(self.sandbox, name)

    def to_json(self) -> str:
        """The ``reward_extra_info`` value: ``"[]"`` when no call had a route (math rows, the local backend)."""
        return json.dumps(self.calls)


def _column(record: Mapping[str, Any], field: str) -> Sequence[Any]:
    value = record.get(field)
    return () if value is None else value


def _calls(record: Mapping[str, Any]) -> list[tuple[str, float, Sequence[str]]]:
    """(server, latency, failed attempts) of every routed call of one trajectory: its tool calls, then its grade's."""
    servers = _column(record, fields.SANDBOX_SERVERS.column)
    latencies = _column(record, fields.SANDBOX_LATENCY_S.column)
    out: list[tuple[str, float, Sequence[str]]] = [
        (str(url), float(latency), ()) for url, latency in zip(servers, latencies, strict=True)
    ]
    out.append(("", 0.0, [str(url) for url in _column(record, fields.SANDBOX_FAILED.column)]))
    for call in json.loads(record.get(fields.REWARD_SANDBOX_ROUTES.column) or "[]"):
        out.append((str(call[SERVER] or ""), float(call[LATENCY_S]), [str(url) for url in call[FAILED]]))
    return out


def server_metrics(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """Per-server calls, failures and latency p50/p99 (ms) over a batch's trajectory records."""
    calls: Counter[str] = Counter()
    failures: Counter[str] = Counter()
    latencies: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for url, latency, failed in _calls(record):
            if url:
                key = server_key(url)
                calls[key] += 1
                latencies[key].append(latency)
            for failed_url in failed:
                failures[server_key(failed_url)] += 1
    out: dict[str, float] = {}
    for key in sorted(calls.keys() | failures.keys()):
        out[f"{PREFIX}/{key}/calls"] = float(calls[key])
        out[f"{PREFIX}/{key}/failures"] = float(failures[key])
        if latencies[key]:
            p50, p99 = np.percentile(latencies[key], [50, 99])
            out[f"{PREFIX}/{key}/latency_p50_ms"] = 1000 * float(p50)
            out[f"{PREFIX}/{key}/latency_p99_ms"] = 1000 * float(p99)
    return out
