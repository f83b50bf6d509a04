"""The warm interpreter that runs INSIDE the bubblewrap sandbox (Debian's /usr/bin/python3, standard library only).

Started by :mod:`agentrl_sandbox.local` as the only program of a ``bwrap`` sandbox (non-root uid, no
network, read-only minimal filesystem, cleared environment), with its sibling modules bound next to it. Four tiers
(:mod:`agentrl_sandbox.preload`), each zygote forked from the one before it:

    zygote (bare: the standard modules) ── listens on pool.sock
    ├─ fork ─> light zygote: imports numpy/scipy/gmpy2 on top ── listens on light.sock, slots of its own
    │          └─ fork ─> math zygote: + sympy/mpmath/networkx ── math.sock
    │                     └─ fork ─> heavy zygote: + pandas/sklearn ── heavy.sock
    └─ fork ─> R  a slot's relay (trusted, long-lived; never forks again): accepts the host's requests
               └─ fork ─> F  the slot's forker (trusted, long-lived): its own user + pid + mount + network
                          │  namespaces  (_zygote_slot)
                          ├─ fork ─> init  pid 1 of F's pid namespace (trusted): private /proc, hides the pool's
                          │                sockets, kills every other process of the namespace between runs
                          └─ fork ─> G     ONE run (a fresh copy of the warm interpreter): new mount/ipc/uts
                                           namespaces (the slot's network namespace, or a fresh one), private
                                           tmpfs /tmp and /dev/shm, rlimits, no capabilities, seccomp; set up (all
                                           but what depends on the request) BEFORE its request arrives, then
                                           exec()s the model's code as __main__ in a fresh module, reports its
                                           status and exits  (_zygote_run)

F hands R each G's pipes and pidfd; R relays the request to G and the reply back to the host (:mod:`_zygote_relay`).

Why tiers: a fork and an exit cost the kernel time per mapping and page-table entry of the forking process; numpy and
scipy take the bare interpreter's 80 mappings to 237 (15 -> 38 MB resident), sympy doubles the light interpreter's
resident memory, pandas + sklearn (with the scipy modules they pull in) triple its mappings. A run forks from the
smallest tier holding what it imports (the host routes by the code's imports, :mod:`agentrl_sandbox.preload`). Every
tier runs the same code with the same isolation; a misrouted run is only slower.

A run cannot see or signal the zygotes, other slots or the host (other pid namespaces), nor ptrace anything
(non-dumpable processes, seccomp); RLIMIT_NPROC counts only its slot (per-user-namespace accounting).
"""

from __future__ import annotations

import ctypes
import gc
import importlib
import json
import os
import socket
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _zygote_kernel import PR_SET_DUMPABLE, Settings, libc, recv_msg, send_msg
from _zygote_run import Reseeder
from _zygote_slot import worker

del sys.path[0]  # the runs' sys.path is the interpreter's own plus their scratch dir
MADV_COLLAPSE = 25  # Linux 6.1+
HUGE_PAGE = 2 << 20
TIERS = ("pool.sock", "light.sock", "math.sock", "heavy.sock")  # bwrap.SOCKETS, in the order of cfg["preload"]


def collapse_to_huge_pages() -> int:
    """Back the warm interpreter's anonymous memory with 2 MiB pages; returns the bytes collapsed (0 where unsupported).

    Every run forks this heap and exits: copying and freeing one page-table entry per 4 KiB page was most of a
    trivial run's CPU. A 2 MiB page costs one entry; a run that writes into one gets a private 4 KiB copy as before.
    """
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    collapsed = 0
    with open("/proc/self/maps") as f:
        regions = [line.split() for line in f]
    for fields in regions:
        if fields[1] != "rw-p" or (len(fields) > 5 and fields[5] != "[heap]"):
            continue  # anonymous private memory only: file mappings are not copied by fork anyway
        low, high = (int(x, 16) for x in fields[0].split("-"))
        low, high = (low + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1), high & ~(HUGE_PAGE - 1)
        if high - low >= HUGE_PAGE and libc.madvise(low, high - low, MADV_COLLAPSE) == 0:
            collapsed += high - low
    return collapsed


def preload(modules: list[str]) -> tuple[list[str], dict[str, str]]:
    # The zygotes' /dev/shm is read-only, so joblib's import-time check picks serial mode: what works in a run anyway
    # (loky's workers would start a python without the sandbox's site dirs).
    warnings.filterwarnings("ignore", message=".*joblib will operate in serial mode")
    ok, failed = [], {}
    for name in modules:
        try:
            importlib.import_module(name)
            ok.append(name)
        except Exception as exc:
            failed[name] = f"{type(exc).__name__}: {exc}"
    return ok, failed


def spawn(body, what: str, error_code: int) -> int:
    """Fork a child that runs ``body`` and exits: 0, or ``error_code`` and one line on stderr if it raised."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            body()
        except BaseException as exc:
            sys.stderr.write(f"agentrl sandbox {what}: {type(exc).__name__}: {exc}\n")
            code = error_code
        os._exit(code)
    return pid


def start_tier(st: Settings, cfg: dict, index: int) -> tuple[int | None, dict]:
    """Fork the zygote of tier ``index`` (and, from it, the tiers after it) from this one, before this one freezes;
    returns (its pid, the ready report of it and the tiers after it). (None, ready) past the last tier."""
    if index >= len(cfg["preload"]):
        return None, {"ready": True}
    before = set(sys.modules)
    r, w = os.pipe()

    def zygote() -> None:
        os.close(r)
        loaded, failed = preload(cfg["preload"][index])
        modules = sorted(set(sys.modules) - before)
        next_pid, after = start_tier(st, cfg, index + 1)

        def announce(report: dict) -> dict:
            report = merge_reports(report, loaded, failed, after)
            report["tier_modules"] = {TIERS[index]: modules, **after.get("tier_modules", {})}
            send_msg(w, report)
            return report

        serve_tier(st, cfg, TIERS[index], announce, next_pid)

    pid = spawn(zygote, f"zygote of {TIERS[index]}", 4)
    os.close(w)
    try:
        report = recv_msg(r)
    except (EOFError, ValueError) as exc:
        report = {"ready": False, "error": f"the zygote of {TIERS[index]} died while starting ({exc})"}
    os.close(r)
    return pid, report


def merge_reports(report: dict, loaded: list[str], failed: dict[str, str], after: dict) -> dict:
    """This tier's ready ``report`` with what it preloaded and the report of the tiers after it."""
    if report.get("ready") and not after.get("ready"):
        report = {"ready": False, "error": after.get("error")}
    report["preloaded"] = loaded + after.get("preloaded", [])
    report["preload_failed"] = {**failed, **after.get("preload_failed", {})}
    report["huge_pages_mb"] = report.get("huge_pages_mb", 0) + after.get("huge_pages_mb", 0)
    return report


def serve_tier(st: Settings, cfg: dict, sock_name: str, announce, next_pid: int | None = None) -> None:
    """Listen on ``sock_name``, freeze this interpreter, ``announce`` readiness (it returns the report it sent), then
    keep ``slots`` slots alive. ``next_pid``: the next tier's zygote, a child whose exit ends this one too."""
    if len(os.listdir("/proc/self/task")) != 1:  # unshare(CLONE_NEWUSER) needs a single-threaded process
        announce({"ready": False, "error": "zygote is multi-threaded after preloading; set OPENBLAS_NUM_THREADS=1"})
        sys.exit(2)
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # nothing of uid sandbox may ptrace or read /proc/<pid>/mem of us
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(os.path.join(st.socket_dir, sock_name))
    listener.listen(4096)
    reseed = Reseeder()
    gc.collect()
    gc.freeze()  # keep forked children from copying every page when their GC walks inherited objects
    if not announce({"ready": True, "huge_pages_mb": collapse_to_huge_pages() >> 20}).get("ready"):
        sys.exit(2)  # the host gave up on this pool already
    devnull = os.open("/dev/null", os.O_WRONLY)
    os.dup2(devnull, 1)  # keep fds 0-2 taken, so no pipe of a run can land on them
    os.close(devnull)
    children: set[int] = set()
    failures = 0
    while True:
        while len(children) < int(cfg["slots"]):
            children.add(spawn(lambda: worker(st, lambda: listener.accept()[0], [listener], reseed), "supervisor", 3))
        pid, status = os.wait()
        if pid == next_pid:  # the host sees a dead pool, restarts it, and the log says why
            sys.stderr.write(f"agentrl sandbox: the next tier's zygote exited (status {status}); zygote exiting\n")
            sys.exit(4)
        children.discard(pid)
        failures = failures + 1 if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 3 else 0
        if failures >= 20:  # runs cannot even be set up: stop, so the host sees a dead pool and says why
            sys.stderr.write("agentrl sandbox: 20 consecutive run set-up failures, zygote exiting\n")
            sys.exit(4)


def main() -> None:
    cfg = json.loads(sys.argv[1])
    try:
        st = Settings(cfg)
    except OSError as exc:  # fail closed, with the reason in the host's error
        send_msg(1, {"ready": False, "error": str(exc)})
        sys.exit(2)
    sys.path[0:0] = cfg["site_dirs"]
    if cfg.get("oneshot_fd") is not None:
        # Cold mode (the benchmark's baseline): this process is the supervisor of a single run, nothing preloaded.
        conn = socket.socket(fileno=int(cfg["oneshot_fd"]))
        worker(st, lambda: conn, [conn], Reseeder(), runs=1)
        return
    loaded, failed = preload(cfg["preload"][0])
    next_pid, after = start_tier(st, cfg, 1)

    def announce(report: dict) -> dict:
        report = merge_reports(report, loaded, failed, after)
        report["tier_modules"] = after.get("tier_modules", {})
        report["python"] = sys.version.split()[0]
        send_msg(1, report)
        return report

    serve_tier(st, cfg, TIERS[0], announce, next_pid)


if __name__ == "__main__":
    main()
