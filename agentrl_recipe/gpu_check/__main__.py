"""``make gpu-check`` / ``python -m agentrl_recipe.gpu_check``: install the bundle if needed, run :mod:`.check`.

Standard library only, so it starts on a machine without verl. The check runs in a child process (a fresh
interpreter: the stubs must come before anything imports verl; a crash or hang still leaves a report). The report
goes to ``$OUT`` when set (the device tool's output folder), else ``./gpu_check``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from agentrl_recipe.gpu_check import bundle

ROOT = Path(__file__).resolve().parents[2]  # the checkout: agentrl_recipe/ is importable from here
CHILD_TIMEOUT_S = 540  # the machine's command limit is 10 min; 9 for the check, the rest for start-up and copies


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def child_env(dry: bool, site: Path | None) -> dict[str, str]:
    """One torch.distributed rank (verl's worker reads these as a Ray worker would) and, on GPU, the bundle's path."""
    env = dict(os.environ)
    env.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    env.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")
    if dry:
        env["VERL_PLATFORM"] = "agentrl_cpu"  # verl_cpu's platform: FSDP2 on CPU with gloo (docs/cpu.md)
    paths = [str(site)] if site else []
    env["PYTHONPATH"] = os.pathsep.join([*paths, str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_recipe.gpu_check", description=__doc__)
    parser.add_argument("--dry", action="store_true", help="CPU, tiny dims, this environment's packages (make test)")
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "gpu_check"))
    parser.add_argument("--plan", action="append", default=None, help="run only this plan (run.GPU_PLANS' names)")
    parser.add_argument("--timeout", type=int, default=CHILD_TIMEOUT_S)
    args = parser.parse_args(argv)
    site = None
    if not args.dry:
        site = ROOT / bundle.SITE_DIR
        try:
            installed = bundle.install(ROOT / bundle.WHEELS_DIR, site)
        except FileNotFoundError as error:
            print(f"gpu-check: {error}", file=sys.stderr)
            return 2
        print(f"gpu-check: {len(installed)} wheels in {site}", file=sys.stderr)
    command = [sys.executable, "-m", "agentrl_recipe.gpu_check.check", "--out", str(args.out)]
    command += ["--dry"] * args.dry + [arg for name in args.plan or () for arg in ("--plan", name)]
    start = time.perf_counter()
    try:
        code = subprocess.run(command, env=child_env(args.dry, site), timeout=args.timeout).returncode
    except subprocess.TimeoutExpired:
        args.out.mkdir(parents=True, exist_ok=True)
        report = {"ok": False, "error": f"the check ran past {args.timeout} s", "mode": "dry" if args.dry else "gpu"}
        (args.out / "gpu_check_report.json").write_text(json.dumps(report, indent=2) + "\n")
        code = 1
    print(f"gpu-check: {'passed' if code == 0 else 'FAILED'} in {time.perf_counter() - start:.0f} s; "
          f"report {args.out / 'gpu_check_report.json'}", file=sys.stderr)  # fmt: skip
    return code


if __name__ == "__main__":
    raise SystemExit(main())
