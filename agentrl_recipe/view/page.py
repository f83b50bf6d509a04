"""The page: one HTML file with the CSS, the JS and the data embedded (no server, no network), or the same page with
only the trajectory summaries when served (:mod:`agentrl_recipe.view.serve` answers the details).

The static page is kept under a size budget (:data:`DEFAULT_BUDGET_BYTES`): every trajectory's summary row is
embedded (sampled evenly per step only when the summaries alone would take more than half the budget), and the details
(turns, tokens) of as many trajectories as fit, taken round-robin across the steps so every step has some; a
trajectory without them says so and names ``--serve``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from importlib import resources
from typing import Any

from agentrl_recipe.view import aggregate, records
from agentrl_recipe.view.sources import Inputs

DEFAULT_BUDGET_BYTES = 5_000_000  # the static page, data included: opens in a second from a shared filesystem
DETAIL_KEYS = ("turns", "tokens")
PAGE_ASSETS = ("page.html", "view.css", "view.js")


def summary(trajectory: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in trajectory.items() if k not in DETAIL_KEYS}


def detail(trajectory: Mapping[str, Any]) -> dict[str, Any]:
    """The turns and tokens the trajectory page shows (an eval's token ids decoded here, only for those shown)."""
    return {"turns": trajectory["turns"], "tokens": records.decode(trajectory["tokens"])}


def _asset(name: str) -> str:
    return resources.files("agentrl_recipe.view").joinpath("assets", name).read_text(encoding="utf-8")


def script_json(data: Any) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: no ``<``, ``>`` or ``&`` survives, so no
    string can close the element or open another."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e").replace("\u2028", "\\u2028")


def render(data: Mapping[str, Any]) -> str:
    """The HTML page with ``data`` and the assets inlined."""
    html = _asset("page.html")
    return (
        html.replace("/*@CSS@*/", _asset("view.css"))
        .replace("//@JS@", _asset("view.js"))
        .replace("@DATA@", script_json(data))
    )


def _by_step(trajectories: Iterable[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in trajectories:
        groups[(t["run"], t["step"])].append(t)
    return groups


def _size(value: Any) -> int:
    return len(script_json(value).encode("utf-8"))


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """An eval report's headline figures (eval/<source>/avg@k, pass@k, ...) and tool use, from its flat metrics."""
    flat = report.get("flat_metrics") or {}
    metrics = {k: v for k, v in flat.items() if k.startswith(("eval/", "eval_tools/")) and not k.endswith("/maj@1")}
    return {"metrics": metrics, "records": (report.get("overall") or {}).get("num_records")}


def base_data(inputs: Inputs, trajectories: list[dict[str, Any]], *, lazy: bool) -> dict[str, Any]:
    """Everything but the trajectories' details."""
    reports = {run: headline(report) for run, report in inputs.reports.items()}
    return {
        "title": inputs.root.name,
        "root": str(inputs.root),
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "lazy": lazy,
        "notes": list(inputs.notes),
        "overview": [{"run": run, "charts": aggregate.overview(m)} for run, m in sorted(inputs.metrics.items())],
        "reasoning": aggregate.reasoning_mode(trajectories),
        "reports": reports,
        "trajectories": [summary(t) for t in trajectories],
        "details": {},
    }


def _even_sample(rows: list[dict[str, Any]], keep: int) -> list[dict[str, Any]]:
    if keep >= len(rows):
        return rows
    return [rows[i * len(rows) // keep] for i in range(keep)]


def static_data(inputs: Inputs, trajectories: list[dict[str, Any]], budget_bytes: int) -> dict[str, Any]:
    """The embedded data of the static page, sampled to ``budget_bytes`` (the page's own assets included)."""
    data = base_data(inputs, trajectories, lazy=False)
    room = budget_bytes - sum(len(_asset(n).encode("utf-8")) for n in PAGE_ASSETS) - _size(data)
    if room < budget_bytes // 2 - _size(data["trajectories"]):  # the summaries alone take more than half
        groups = _by_step(trajectories)
        share = max(1, int(len(trajectories) * (budget_bytes // 2) / max(_size(data["trajectories"]), 1)))
        per_step = max(1, share // max(len(groups), 1))
        trajectories = [t for rows in groups.values() for t in _even_sample(rows, per_step)]
        data["notes"].append(
            f"{len(trajectories)} of {len(data['trajectories'])} trajectories listed (page budget "
            f"{budget_bytes / 1e6:.1f} MB; the reasoning-mode view counts them all): `agentrl-recipe view --serve` "
            "lists every one"
        )
        data["trajectories"] = [summary(t) for t in trajectories]
        room = budget_bytes - sum(len(_asset(n).encode("utf-8")) for n in PAGE_ASSETS) - _size(data)
    queues = [list(rows) for rows in _by_step(trajectories).values()]
    details: dict[str, Any] = {}
    while room > 0 and any(queues):
        for queue in queues:
            if not queue:
                continue
            t = queue.pop(0)
            shown = detail(t)
            cost = _size(shown) + len(t["id"]) + 8
            if cost <= room:
                details[t["id"]] = shown
                room -= cost
            else:
                queue.clear()
    data["details"] = details
    if len(details) < len(trajectories):
        data["notes"].append(
            f"turns and tokens embedded for {len(details)} of {len(trajectories)} listed trajectories (page budget "
            f"{budget_bytes / 1e6:.1f} MB): `agentrl-recipe view --serve` reads every one"
        )
    return data
