"""``python -m demo [--fast] [--seed S] …``: the same as ``make demo``, run from the repository root."""

from __future__ import annotations

import argparse
import sys

from demo import demo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m demo", description=demo.__doc__.splitlines()[0])
    demo.add_arguments(parser)
    return int(demo.main(parser.parse_args(argv)) or 0)


if __name__ == "__main__":
    sys.exit(main())
