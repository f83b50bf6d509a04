"""``--serve``: the page over HTTP on 127.0.0.1, for runs too large for one file. The summaries are read once at start
(the list and the reasoning-mode view need them; an eval's token sidecar is not read then); a trajectory's turns and
tokens are read from its dump when the page asks for them (``GET /api/detail?id=…``): a training step file whole (the
last one kept in memory), an eval's one sample at its byte offset."""

from __future__ import annotations

import http.server
import json
import urllib.parse
from typing import Any

from agentrl_recipe.view import page
from agentrl_recipe.view.sources import Inputs, StepFile


class Index:
    """Trajectory id -> the dump file holding it; reads a file's details on demand (one file cached)."""

    def __init__(self, inputs: Inputs) -> None:
        self.inputs = inputs
        self.where: dict[str, StepFile] = {}
        summaries: list[dict[str, Any]] = []
        for step_file in inputs.steps:
            for t in step_file.read(tokens=False):
                self.where[t["id"]] = step_file
                summaries.append(t | {"turns": None, "tokens": None})
        self.data = page.base_data(inputs, summaries, lazy=True)
        self._cached: tuple[StepFile | None, dict[str, Any]] = (None, {})

    def detail(self, trajectory_id: str) -> dict[str, Any] | None:
        step_file = self.where.get(trajectory_id)
        if step_file is None:
            return None
        if step_file.kind == "eval":
            found = step_file.find(trajectory_id)
            return None if found is None else page.detail(found)
        if self._cached[0] is not step_file:
            self._cached = (step_file, {t["id"]: page.detail(t) for t in step_file.read()})
        return self._cached[1].get(trajectory_id)


def handler(index: Index) -> type[http.server.BaseHTTPRequestHandler]:
    html = page.render(index.data).encode("utf-8")

    class Handler(http.server.BaseHTTPRequestHandler):
        def _send(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            url = urllib.parse.urlparse(self.path)
            if url.path in ("/", "/index.html"):
                self._send(200, html, "text/html; charset=utf-8")
            elif url.path == "/api/detail":
                ids = urllib.parse.parse_qs(url.query).get("id", [""])
                found = index.detail(ids[0])
                if found is None:
                    self._send(404, b'{"error": "unknown trajectory"}', "application/json")
                else:
                    self._send(200, json.dumps(found, ensure_ascii=False).encode("utf-8"), "application/json")
            else:
                self._send(404, b"not found", "text/plain")

        def log_message(self, format: str, *args: Any) -> None:
            return

    return Handler


def make_server(inputs: Inputs, port: int) -> http.server.ThreadingHTTPServer:
    """A server bound to 127.0.0.1:``port`` (0: any free port); call ``serve_forever``."""
    return http.server.ThreadingHTTPServer(("127.0.0.1", port), handler(Index(inputs)))
