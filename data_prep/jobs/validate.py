"""Check existing RL or SFT parquet files against the schema; each error names the file, the row and the field.

``agentrl-recipe data validate rl|sft FILE…`` exits 1 when any row is invalid.
"""

from __future__ import annotations

import argparse

from data_prep import standalone
from data_prep.schema import validate_file

SHOWN_ERRORS = 20  # per file; the rest are counted


def validate_files(kind: str, files: list[str]) -> int:
    """Print each file's errors and verdict; returns the number of errors."""
    bad = 0
    for path in files:
        errors = validate_file(path, kind)
        for e in errors[:SHOWN_ERRORS]:
            print(e)
        if len(errors) > SHOWN_ERRORS:
            print(f"... and {len(errors) - SHOWN_ERRORS} more errors in {path}")
        bad += len(errors)
        print(f"{path}: {'OK' if not errors else f'{len(errors)} error(s)'}")
    return bad


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("kind", choices=("rl", "sft"))
    parser.add_argument("files", nargs="+")


def main(args: argparse.Namespace) -> int:
    return 1 if validate_files(args.kind, args.files) else 0


if __name__ == "__main__":
    raise SystemExit(standalone(__name__))
