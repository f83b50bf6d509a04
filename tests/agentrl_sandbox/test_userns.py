"""The start-up error on a node that blocks bwrap's user namespace names the real sysctl and the ways out; the AppArmor
profile it points at is shipped as package data."""

from __future__ import annotations

import tomllib
from pathlib import Path

from agentrl_sandbox import userns

REPO = Path(__file__).resolve().parents[2]
UID_MAP = "bwrap: setting up uid map: Permission denied"


def sysctls(tmp_path: Path, **values: str) -> Path:
    for name, value in values.items():
        path = tmp_path / name.replace("__", "/")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(value + "\n")
    return tmp_path


def test_apparmor_restriction_names_its_sysctl_and_three_ways_out(tmp_path: Path) -> None:
    root = sysctls(tmp_path, kernel__apparmor_restrict_unprivileged_userns="1", user__max_user_namespaces="63000")
    assert userns.diagnosis(UID_MAP, root) == (
        "AppArmor blocks unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1; bwrap: "
        "'setting up uid map: Permission denied'). Ways out: (1) load the shipped AppArmor profile for bwrap: sudo "
        f"install -m 644 {userns.PROFILE} /etc/apparmor.d/agentrl-bwrap && sudo apparmor_parser -r "
        "/etc/apparmor.d/agentrl-bwrap; (2) run `agentrl-sandbox serve` on nodes where bwrap works and set "
        "agentrl.sandbox.backend=sandbox_fusion with their url; (3) point agentrl.sandbox.url at a SandboxFusion "
        "server (backend=sandbox_fusion)"
    )
    assert userns.diagnosis("bwrap: execvp python3: No such file or directory", root) is None  # another failure


def test_the_other_switches_and_a_node_without_any(tmp_path: Path) -> None:
    root = sysctls(tmp_path / "a", user__max_user_namespaces="0")
    assert userns.diagnosis("bwrap: No space left on device", root) == (
        "the kernel forbids unprivileged user namespaces (user.max_user_namespaces=0): sudo sysctl -w "
        "user.max_user_namespaces=65536, or run `agentrl-sandbox serve` on nodes where bwrap works "
        "(backend=sandbox_fusion with their url), or use a SandboxFusion server"
    )
    root = sysctls(tmp_path / "b", kernel__unprivileged_userns_clone="0")
    assert "(kernel.unprivileged_userns_clone=0): sudo sysctl -w kernel.unprivileged_userns_clone=1," in str(
        userns.diagnosis(UID_MAP, root)
    )
    assert userns.diagnosis(UID_MAP, sysctls(tmp_path / "c", kernel__apparmor_restrict_unprivileged_userns="0")) is None


def test_the_profile_is_shipped_and_lets_bwrap_create_user_namespaces() -> None:
    profile = userns.PROFILE.read_text()
    assert "profile agentrl-bwrap /usr/bin/bwrap flags=(unconfined) {\n  userns,\n" in profile
    sandbox_project = tomllib.loads((REPO / "agentrl_sandbox" / "pyproject.toml").read_text())  # its distribution
    package_data = sandbox_project["tool"]["setuptools"]["package-data"]
    assert userns.PROFILE.name in package_data["agentrl_sandbox"]
