"""``agentrl-recipe view RUN_OR_EVAL_DIR``: the trajectory viewer (docs/view.md) as one HTML file, or served."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentrl_recipe.view import page


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", type=Path, help="a training run, an eval run or the demo's output folder")
    parser.add_argument("--out", type=Path, default=None, help="the page to write (default: FOLDER/view.html)")
    parser.add_argument(
        "--budget-mb", type=float, default=page.DEFAULT_BUDGET_BYTES / 1e6,
        help="size budget of the static page in MB (default: %(default)s); trajectories are sampled to fit",
    )  # fmt: skip
    parser.add_argument(
        "--tokenizer", default=None,
        help="a local tokenizer folder for eval runs' token mode (default: each eval's model, from its report.json)",
    )  # fmt: skip
    parser.add_argument("--serve", action="store_true", help="serve the page on 127.0.0.1, trajectories read lazily")
    parser.add_argument("--port", type=int, default=8765, help="--serve's port (default: %(default)s; 0: any free)")


def main(args: argparse.Namespace) -> int:
    if args.serve:
        from agentrl_recipe.view.serve import make_server
        from agentrl_recipe.view.sources import discover

        inputs = discover(args.folder, args.tokenizer)
        server = make_server(inputs, args.port)
        for note in inputs.notes:
            print(f"note: {note}")
        print(f"serving {inputs.root} on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
        return 0
    from agentrl_recipe.view.build import build_page

    path, data = build_page(args.folder, args.out, int(args.budget_mb * 1e6), args.tokenizer)
    for note in data["notes"]:
        print(f"note: {note}")
    print(f"{len(data['trajectories'])} trajectories, {path.stat().st_size / 1e6:.2f} MB: {path}")
    return 0
