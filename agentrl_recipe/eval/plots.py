"""PNG plots of an eval report (matplotlib, Agg backend), written next to the report JSON."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import itertools

import matplotlib.pyplot as plt

from agentrl_recipe.atomic_io import save_figure
from agentrl_recipe.eval.table import display_name


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


def _grid(n: int) -> tuple[Any, list[Any]]:
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 3.6 * rows), squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.axis("off")
    return fig, flat[:n]


def plot_headline(report: dict[str, Any], path: Path) -> Path:
    results = [(s, r) for s, r in report["results"].items() if r.get("headline")]
    fig, ax = plt.subplots(figsize=(1.6 * max(len(results), 2) + 2, 3.6))
    names = [display_name(s) for s, _ in results]
    values = [100 * r["headline"]["value"] for _, r in results]
    err_low = [100 * (r["headline"]["value"] - r["headline"]["ci_low"]) for _, r in results]
    err_high = [100 * (r["headline"]["ci_high"] - r["headline"]["value"]) for _, r in results]
    ax.bar(names, values, yerr=[err_low, err_high], capsize=4, color="#4C72B0")
    for i, (_, r) in enumerate(results):
        ax.annotate(
            r["headline"]["metric"],
            (i, values[i]),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.set_title("headline metric per benchmark (bootstrap CI)")
    return _save(fig, path)


def plot_pass_at_k(report: dict[str, Any], path: Path) -> Path:
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for s, r in report["results"].items():
        m = r.get("metrics")
        if not m:
            continue
        ks = [int(k) for k in m["pass@k"]]
        ax.plot(ks, [100 * v["value"] for v in m["pass@k"].values()], marker="o", label=display_name(s))
        ax.fill_between(
            ks,
            [100 * v["ci_low"] for v in m["pass@k"].values()],
            [100 * v["ci_high"] for v in m["pass@k"].values()],
            alpha=0.15,
        )
    ax.set_xscale("log", base=2)
    ks_all = sorted({int(k) for r in report["results"].values() if r.get("metrics") for k in r["metrics"]["pass@k"]})
    ax.set_xticks(ks_all, [str(k) for k in ks_all])
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    ax.set_title("unbiased pass@k")
    return _save(fig, path)


def _per_source(
    report: dict[str, Any], path: Path, title: str, xlabel: str, ylabel: str, draw: Callable[[Any, dict], None]
) -> Path:
    """One panel per data source; ``draw(ax, tool_stats)`` fills it."""
    items = list(report["results"].items())
    fig, axes = _grid(len(items))
    for ax, (s, r) in zip(axes, items, strict=True):
        draw(ax, r["tool_stats"])
        ax.set_title(display_name(s), fontsize=9)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    fig.suptitle(title)
    return _save(fig, path)


def _int_bars(key: str) -> Callable[[Any, dict], None]:
    def draw(ax: Any, ts: dict) -> None:
        ax.bar(list(ts[key]), list(ts[key].values()), color="#55A868")

    return draw


def _length_bars(ax: Any, ts: dict) -> None:
    h = ts["response_tokens_histogram"]
    if h["counts"]:
        widths = [b - a for a, b in itertools.pairwise(h["edges"])]
        ax.bar(h["edges"][:-1], h["counts"], width=widths, align="edge", color="#8172B2")


def _accuracy_bars(ax: Any, ts: dict) -> None:
    buckets = ts["accuracy_vs_tool_calls"]
    ax.bar(list(buckets), [100 * b["accuracy"] for b in buckets.values()], color="#C44E52")
    for i, b in enumerate(buckets.values()):
        ax.annotate(
            f"n={b['num_samples']}",
            (i, 100 * b["accuracy"]),
            ha="center",
            va="bottom",
            fontsize=7,
            xytext=(0, 2),
            textcoords="offset points",
        )
    ax.set_ylim(0, 105)


def plot_tool_status(report: dict[str, Any], path: Path) -> Path:
    counts = report["overall"]["tool_stats"]["tool_status_counts"]
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    ax.bar(list(counts) or ["(no tool calls)"], list(counts.values()) or [0], color="#DD8452")
    ax.set_ylabel("tool calls")
    ax.set_title("tool call outcome (sandbox status)")
    ax.tick_params(axis="x", labelrotation=20)
    return _save(fig, path)


def write_plots(report: dict[str, Any], out_dir: str | os.PathLike[str]) -> list[str]:
    """Draw every plot into ``out_dir``; returns the file names written."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = [
        plot_headline(report, out / "headline.png"),
        plot_pass_at_k(report, out / "pass_at_k.png"),
        _per_source(
            report,
            out / "tool_calls_hist.png",
            "tool calls per trajectory",
            "tool calls",
            "trajectories",
            _int_bars("tool_calls_histogram"),
        ),
        _per_source(
            report,
            out / "turns_hist.png",
            "turns per trajectory",
            "turns",
            "trajectories",
            _int_bars("turns_histogram"),
        ),
        _per_source(
            report,
            out / "response_length_hist.png",
            "response length",
            "response tokens (incl. tool output)",
            "trajectories",
            _length_bars,
        ),
        _per_source(
            report,
            out / "accuracy_vs_tool_calls.png",
            "accuracy vs number of tool calls",
            "tool calls in the trajectory",
            "accuracy (%)",
            _accuracy_bars,
        ),
        plot_tool_status(report, out / "tool_status.png"),
    ]
    return [p.name for p in written]
