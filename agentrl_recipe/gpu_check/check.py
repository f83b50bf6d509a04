"""The child process of ``make gpu-check``: stubs first, then :mod:`.run` (verl, torch), then the JSON report."""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path
from typing import Any

from agentrl_recipe.gpu_check import stubs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_recipe.gpu_check.check")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry", action="store_true")
    parser.add_argument("--plan", action="append", default=None, help="run only these plans (names)")
    args = parser.parse_args(argv)
    stubs.install()
    from agentrl_recipe.gpu_check import run  # verl and torch: after the stubs

    if not args.dry and not run.torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); --dry runs the CPU mode")
        run.write({"ok": False, "mode": "gpu", "error": "no CUDA device", "runs": []}, args.out)
        return 2
    plans = [p for p in (run.DRY_PLANS if args.dry else run.GPU_PLANS) if not args.plan or p.name in args.plan]
    report: dict[str, Any] = {**run.environment(args.dry), "ok": False, "runs": []}
    for plan in plans:  # one after the other in this process; each one's failure is recorded, the next still runs
        try:
            result = run.run(plan, dry=args.dry)
        except Exception as error:
            result = {"plan": plan.name, "ok": False, "error": f"{type(error).__name__}: {error}",
                      "traceback": traceback.format_exc()}  # fmt: skip
        report["runs"].append(result)
        report["ok"] = len(report["runs"]) == len(plans) and all(r["ok"] for r in report["runs"])
        report["stubbed"] = {"packages": list(stubs.STUBBED), "hidden": list(stubs.ABSENT),
                             "names_touched": sorted(stubs.TOUCHED)}  # fmt: skip
        path = run.write(report, args.out)  # after every plan: a later hang keeps what came before
        brief = {k: result.get(k) for k in ("ok", "checks", "update", "error")}
        print(json.dumps({"plan": plan.name, **brief}, default=str))
    print(f"gpu-check report: {path}", file=sys.stderr)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
