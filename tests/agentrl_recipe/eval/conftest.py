"""Fixtures of the eval tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from eval_helpers import EVAL_PARQUET


@pytest.fixture
def eval_parquet() -> Path:
    return EVAL_PARQUET
