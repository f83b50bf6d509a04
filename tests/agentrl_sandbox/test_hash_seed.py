"""The string-hash seed of sandbox runs (issue 45 item 6), a documented deviation (fidelity row
``agentrl.sandbox.backend``): SandboxFusion starts a fresh interpreter per call, so each call draws its own hash seed
(set iteration order differs between calls); the local pool forks every run from one warm interpreter, so the runs of
one pool start share its seed. Why not a fresh seed per run: Python fixes the secret at start-up and caches every
string's hash; rewriting it in a forked run breaks the interpreter (measured below), and a fresh interpreter per run is
the cost the pool exists to avoid (a slot restart = a zygote start with the runtime's imports)."""

from __future__ import annotations

import subprocess
import sys

SET_ORDER = "print(hash('abc'), list({'a', 'b', 'c', 'd', 'e', 'f'}))"
REWRITE_THE_SECRET = """
import ctypes, os
secret = (ctypes.c_ubyte * 24).in_dll(ctypes.pythonapi, "_Py_HashSecret")
ctypes.memmove(secret, os.urandom(24), 24)
try:
    getattr(os, "".join(["pa", "th"]))
    print("lookups work")
except AttributeError as exc:
    print("lookups broken:", exc)
"""


def test_runs_of_one_pool_share_its_seed(pool) -> None:
    outputs = {pool.run(SET_ORDER, timeout_s=10).stdout for _ in range(4)}
    assert len(outputs) == 1, outputs


def test_fresh_interpreters_draw_their_own_seed() -> None:
    """What SandboxFusion's per-call `python file.py` gives (PYTHONHASHSEED unset)."""
    runs = {
        subprocess.run([sys.executable, "-I", "-c", SET_ORDER], capture_output=True, text=True).stdout for _ in range(4)
    }
    assert len(runs) > 1


def test_rewriting_the_seed_after_start_breaks_the_interpreter() -> None:
    out = subprocess.run([sys.executable, "-I", "-c", REWRITE_THE_SECRET], capture_output=True, text=True).stdout
    assert out.strip() == "lookups broken: module 'os' has no attribute 'path'"
