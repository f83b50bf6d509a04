"""Build the static page of a folder: read every trajectory, sample to the budget, write the HTML atomically."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentrl_recipe.atomic_io import atomic_write_text
from agentrl_recipe.view import page
from agentrl_recipe.view.sources import discover

PAGE_NAME = "view.html"


def build_page(
    root: Path,
    out: Path | None = None,
    budget_bytes: int = page.DEFAULT_BUDGET_BYTES,
    tokenizer: str | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Write the page of ``root`` to ``out`` (default ``<root>/view.html``); returns its path and embedded data.
    ``tokenizer`` decodes eval token ids (default: each eval's model)."""
    inputs = discover(root, tokenizer)
    trajectories = [t for step_file in inputs.steps for t in step_file.read()]
    data = page.static_data(inputs, trajectories, budget_bytes)
    target = out if out is not None else inputs.root / PAGE_NAME
    atomic_write_text(target, page.render(data))
    return target, data
