"""What the xdist workers of one ``make test`` session share: a folder, and the locks kept in it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """``<session temp>/name``, the same path for every xdist worker of this session (each has its own basetemp)."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # .../pytest-N/popen-gwK -> .../pytest-N
    return root / name
