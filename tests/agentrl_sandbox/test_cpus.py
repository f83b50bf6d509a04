"""Pool sizing from the CPUs a process may use: affinity, cgroup v2/v1 quota (own cgroup and ancestors, a container's
view) and SLURM_CPUS_ON_NODE, on fake /sys/fs/cgroup trees (the share per process: test_local.py)."""

from __future__ import annotations

from pathlib import Path

from agentrl_sandbox import cpus


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2(tmp_path: Path, quotas: dict[str, str], own: str = "/slurm/job_7/step_0") -> tuple[Path, Path]:
    root = tmp_path / "cgroup"
    for rel, value in quotas.items():
        write(root / rel.lstrip("/") / "cpu.max", value)
    (root / own.lstrip("/")).mkdir(parents=True, exist_ok=True)
    write(tmp_path / "self_cgroup", f"0::{own}\n")
    return root, tmp_path / "self_cgroup"


def test_cgroup_v2_takes_the_tightest_quota_up_the_tree(tmp_path: Path) -> None:
    root, self_cgroup = v2(tmp_path, {"/": "max 100000", "/slurm/job_7": "600000 100000", "/slurm/job_7/step_0": "max"})
    assert cpus.cgroup_quota_cpus(root, self_cgroup) == 6
    root, self_cgroup = v2(tmp_path / "b", {"/slurm/job_7/step_0": "250000 100000"})
    assert cpus.cgroup_quota_cpus(root, self_cgroup) == 3  # 2.5 CPUs rounded up
    root, self_cgroup = v2(tmp_path / "c", {"/": "max 100000"})
    assert cpus.cgroup_quota_cpus(root, self_cgroup) is None


def test_a_containers_view_reads_the_mount_itself(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu.max", "400000 100000")
    write(tmp_path / "self_cgroup", "0::/kubepods/burstable/pod1/abc\n")  # a host path this namespace does not show
    assert cpus.cgroup_quota_cpus(root, tmp_path / "self_cgroup") == 4


def test_cgroup_v1_cfs_quota(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    write(root / "cpu,cpuacct" / "docker" / "c1" / "cpu.cfs_quota_us", "300000\n")
    write(root / "cpu,cpuacct" / "docker" / "c1" / "cpu.cfs_period_us", "100000\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    write(root / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    write(tmp_path / "self_cgroup", "12:memory:/docker/c1\n4:cpu,cpuacct:/docker/c1\n")
    assert cpus.cgroup_quota_cpus(root, tmp_path / "self_cgroup") == 3
    write(root / "cpu,cpuacct" / "docker" / "c1" / "cpu.cfs_quota_us", "-1\n")
    assert cpus.cgroup_quota_cpus(root, tmp_path / "self_cgroup") is None
    assert cpus.cgroup_quota_cpus(root, tmp_path / "missing") is None


def test_usable_cpus_is_the_least_of_affinity_quota_and_slurm(tmp_path: Path) -> None:
    root, self_cgroup = v2(tmp_path, {"/slurm/job_7": "1200000 100000"})
    kw = {"cgroup_root": root, "proc_self_cgroup": self_cgroup}
    assert cpus.usable_cpus(environ={}, affinity=64, **kw) == 12
    assert cpus.usable_cpus(environ={}, affinity=8, **kw) == 8
    assert cpus.usable_cpus(environ={cpus.ENV_SLURM_CPUS: "4"}, affinity=64, **kw) == 4
    assert cpus.usable_cpus(environ={cpus.ENV_SLURM_CPUS: "junk"}, affinity=64, **kw) == 12
    assert cpus.usable_cpus(environ={}, affinity=0, cgroup_root=tmp_path / "none", proc_self_cgroup=tmp_path) == 1
