"""Fixtures for data-prep tests: the handwritten source files in tests/data/ (each in its source's real schema)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


def parse(module, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv`` with a data-prep module's own ``add_arguments`` (what the CLI does)."""
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    return parser.parse_args(argv)


@pytest.fixture(scope="session")
def parse_args():
    return parse


@pytest.fixture(scope="session")
def eval_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The eval sets built once from the fixtures (decontamination and rollout tests read them)."""
    from data_prep.jobs import eval_sets as prep_eval

    out = tmp_path_factory.mktemp("eval")
    args = parse(
        prep_eval,
        [
            "--aime24",
            str(DATA / "aime_2024.jsonl"),
            "--aime25",
            str(DATA / "aime_2025.jsonl"),
            "--gpqa",
            str(DATA / "gpqa_diamond.jsonl"),
            "--lcb",
            str(DATA / "lcb_code_generation_lite_v6.jsonl"),
            "--lcb-start",
            "2025-02-01",
            "--lcb-end",
            "2025-05-31",
            "--out-dir",
            str(out),
        ],
    )
    prep_eval.build_eval_sets(args)
    return out
