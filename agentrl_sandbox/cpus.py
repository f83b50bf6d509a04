"""The CPUs this process may really use, which size the local pool: the least of its CPU affinity
(``os.sched_getaffinity``: taskset, Slurm's and Kubernetes' cpusets), its cgroup CPU quota (v2 ``cpu.max``, v1
``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``, on its own cgroup and every ancestor) and ``SLURM_CPUS_ON_NODE``.
``os.cpu_count()`` counts the whole machine, which oversubscribes a shared node.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
PROC_SELF_CGROUP = Path("/proc/self/cgroup")
ENV_SLURM_CPUS = "SLURM_CPUS_ON_NODE"
V1_CPU_CONTROLLERS = ("cpu,cpuacct", "cpu", "cpuacct,cpu")  # how distributions name the v1 cpu hierarchy's mount


def usable_cpus(
    *,
    environ: Mapping[str, str] = os.environ,
    cgroup_root: Path = CGROUP_ROOT,
    proc_self_cgroup: Path = PROC_SELF_CGROUP,
    affinity: int | None = None,
) -> int:
    """The least of affinity, cgroup quota and Slurm's CPU count (each only where it applies); at least 1."""
    limits: list[int | None] = [affinity if affinity is not None else affinity_cpus()]
    limits.append(cgroup_quota_cpus(cgroup_root, proc_self_cgroup))
    slurm = environ.get(ENV_SLURM_CPUS, "").strip()
    limits.append(int(slurm) if slurm.isdigit() and int(slurm) > 0 else None)
    return max(1, min(n for n in limits if n is not None))


def affinity_cpus() -> int:
    """CPUs this process may run on (``sched_getaffinity``; ``cpu_count`` where the platform lacks it)."""
    getaffinity = getattr(os, "sched_getaffinity", None)
    return len(getaffinity(0)) if getaffinity else (os.cpu_count() or 1)


def cgroup_quota_cpus(cgroup_root: Path = CGROUP_ROOT, proc_self_cgroup: Path = PROC_SELF_CGROUP) -> int | None:
    """CPUs the tightest cgroup quota on this process's cgroup or an ancestor allows (rounded up); None = none."""
    try:
        lines = proc_self_cgroup.read_text().splitlines()
    except OSError:
        return None
    quotas = [q for directory, read in _cgroup_dirs(lines, cgroup_root) if (q := read(directory)) is not None]
    return max(1, math.ceil(min(quotas))) if quotas else None


def _cgroup_dirs(lines: list[str], root: Path) -> Iterator[tuple[Path, Callable[[Path], float | None]]]:
    """(directory, reader) for the process's cgroup and each ancestor, in v2 and in the v1 cpu hierarchy. In a
    container the cgroup path names a directory of the host; the mount itself is then the process's cgroup."""
    for line in lines:
        hierarchy, controllers, path = [*line.split(":", 2), "", ""][:3]
        if hierarchy == "0" and controllers == "":
            yield from ((d, _v2_quota) for d in _ancestors(root, path))
        elif "cpu" in controllers.split(","):
            for name in V1_CPU_CONTROLLERS:
                if (root / name).is_dir():
                    yield from ((d, _v1_quota) for d in _ancestors(root / name, path))
                    break


def _ancestors(mount: Path, path: str) -> Iterator[Path]:
    parts = [p for p in path.strip().split("/") if p]
    if parts and not (mount.joinpath(*parts)).is_dir():
        parts = []  # a container's view: the mount is this process's cgroup
    for depth in range(len(parts), -1, -1):
        yield mount.joinpath(*parts[:depth])


def _v2_quota(directory: Path) -> float | None:
    try:
        quota, period = (directory / "cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(directory: Path) -> float | None:
    try:
        quota = int((directory / "cpu.cfs_quota_us").read_text())
        period = int((directory / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
