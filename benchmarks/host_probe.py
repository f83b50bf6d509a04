"""How fast this host runs the suite's kind of work right now, printed beside every suite figure.

The load average does not say it. On 2026-12-07 this 2-core VM ran `make test` from fresh clones in 940.8 s at 16:39
and in 1,332.2 s at 17:58, the second commit changing only where Hydra writes its run dir, the load under 1 before
both; a bare `import verl` took 4.8-5.5 s at 17:10 and 17-31 s at 18:00, while a pure-Python loop ran at the same
speed. What had changed was memory: a copy ran at
0.7-2.9 GB/s and a first write to a fresh page cost 8-30 µs. Unmarshalling bytecode, building modules and tensors
are memory-bound, and most of the suite is new interpreters importing torch, vLLM and verl.

Four figures, each the median of ``REPEATS``:
- ``copy_gb_s``: GB/s of one copy between two ``COPY_MIB`` MiB buffers already in memory (the memory's bandwidth);
- ``page_fault_us``: microseconds per first write to a page of fresh anonymous memory (``FAULT_MIB`` MiB mapped
  and touched once per page);
- ``loop_ns``: nanoseconds per iteration of a pure-Python loop that allocates nothing (the CPU itself);
- ``import_torch_s``: CPU seconds (user + system) of a new interpreter running ``import torch``.

Usage: ``python benchmarks/host_probe.py [--json]``. ``benchmarks/test_suite.py`` prints it before and after a run,
``.ci/run`` before and after ``make test``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import mmap
import resource
import statistics
import subprocess
import sys
import time

PAGE = mmap.PAGESIZE
FAULT_MIB = 64
COPY_MIB = 256
LOOP_ITERATIONS = 2_000_000
REPEATS = 3


@dataclasses.dataclass(frozen=True)
class HostSpeed:
    copy_gb_s: float
    page_fault_us: float
    loop_ns: float
    import_torch_s: float | None  # None: torch is not importable by this interpreter

    def line(self) -> str:
        torch = "n/a" if self.import_torch_s is None else f"{self.import_torch_s:.2f} s"
        return (
            f"memory copy {self.copy_gb_s:.1f} GB/s, page fault {self.page_fault_us:.2f} µs, "
            f"python loop {self.loop_ns:.1f} ns/iteration, "
            f"import torch {torch} of CPU"
        )


def touch_fresh_pages(mib: int = FAULT_MIB) -> tuple[int, int, float]:
    """Map ``mib`` MiB of anonymous memory and write one byte to each page: (pages, minor faults taken, seconds)."""
    pages = (mib << 20) // PAGE
    with mmap.mmap(-1, pages * PAGE) as memory:
        if hasattr(mmap, "MADV_NOHUGEPAGE"):  # a fault per base page, whatever the host's transparent huge pages
            memory.madvise(mmap.MADV_NOHUGEPAGE)
        view = memoryview(memory)
        ones = b"\x01" * pages
        faults_before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        start = time.perf_counter()
        view[::PAGE] = ones  # one strided C copy: a write, so a fault, per page
        seconds = time.perf_counter() - start
        faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults_before
        view.release()
    return pages, faults, seconds


def copy_gb_s(mib: int = COPY_MIB) -> float:
    source, target = bytearray(b"\x01" * (mib << 20)), bytearray(mib << 20)
    target[:] = source  # both in memory before the timed copy
    start = time.perf_counter()
    target[:] = source
    return (mib << 20) / (time.perf_counter() - start) / 1e9


def page_fault_us(mib: int = FAULT_MIB) -> float:
    pages, _, seconds = touch_fresh_pages(mib)
    return seconds / pages * 1e6


def loop_ns(iterations: int = LOOP_ITERATIONS) -> float:
    start = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i
    return (time.perf_counter() - start) / iterations * 1e9


def import_cpu_s(module: str = "torch", python: str = sys.executable) -> float | None:
    """CPU seconds of ``python -c 'import <module>'`` (its own and its children's), None if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return None
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def measure(repeats: int = REPEATS, python: str = sys.executable) -> HostSpeed:
    imports = [import_cpu_s("torch", python) for _ in range(repeats)]
    return HostSpeed(
        copy_gb_s=statistics.median(copy_gb_s() for _ in range(repeats)),
        page_fault_us=statistics.median(page_fault_us() for _ in range(repeats)),
        loop_ns=statistics.median(loop_ns() for _ in range(repeats)),
        import_torch_s=None if None in imports else statistics.median(t for t in imports if t is not None),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    speed = measure()
    print(json.dumps(dataclasses.asdict(speed)) if args.json else f"host speed: {speed.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
