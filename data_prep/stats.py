"""Stats reports: a JSON file and the PNG plots next to it (matplotlib, Agg backend)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentrl_recipe.atomic_io import atomic_write_json, save_figure


def _pyplot() -> Any:
    import matplotlib  # here: Agg must be chosen before pyplot is imported, and only plotting pays for it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def summarize(values: Sequence[float]) -> dict[str, float]:
    if not len(values):
        return {"n": 0}
    arr = np.asarray(values, dtype=float)
    return {
        "n": int(arr.size),
        "mean": float(arr.mean()),
        "p50": float(np.percentile(arr, 50)),
        "p90": float(np.percentile(arr, 90)),
        "p99": float(np.percentile(arr, 99)),
        "max": float(arr.max()),
    }


def plot_length_histogram(path: Path, lengths: Mapping[str, Sequence[float]], *, unit: str, title: str) -> None:
    """One stacked histogram of lengths per group (e.g. prompt length per data_source)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    groups = [(k, np.asarray(v, dtype=float)) for k, v in lengths.items() if len(v)]
    if groups:
        hi = max(float(v.max()) for _, v in groups)
        bins = np.linspace(0, max(hi, 1.0), 41)
        ax.hist([v for _, v in groups], bins=bins, stacked=True, label=[f"{k} (n={len(v)})" for k, v in groups])
        ax.legend(fontsize=8)
    ax.set_xlabel(f"prompt length ({unit})")
    ax.set_ylabel("rows")
    ax.set_title(title)
    save_figure(fig, path, bbox_inches="tight")


def plot_bar_comparison(
    path: Path, categories: Sequence[str], series: Mapping[str, Sequence[float]], *, ylabel: str, title: str
) -> None:
    """Side-by-side bars, one group per category (e.g. difficulty bin before/after/target)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    width = 0.8 / max(1, len(series))
    x = np.arange(len(categories))
    for i, (label, values) in enumerate(series.items()):
        ax.bar(x + i * width - 0.4 + width / 2, values, width, label=label)
    ax.set_xticks(x, categories)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    save_figure(fig, path, bbox_inches="tight")


def write_report(path: Path, report: dict[str, Any]) -> None:
    atomic_write_json(path, report, sort_keys=True)
