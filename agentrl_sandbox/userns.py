"""Why bubblewrap cannot create its user namespace on this node, and the ways out — one line for the start-up error.

On Ubuntu 23.10+ (24.04 included) ``kernel.apparmor_restrict_unprivileged_userns=1`` lets only AppArmor-profiled
programs create user namespaces, and bwrap fails with "setting up uid map: Permission denied". Elsewhere the switches
are ``user.max_user_namespaces`` (0 = none) and Debian's ``kernel.unprivileged_userns_clone`` (0 = root only).
"""

from __future__ import annotations

from pathlib import Path

SYSCTL_DIR = Path("/proc/sys")
APPARMOR_SYSCTL = "kernel.apparmor_restrict_unprivileged_userns"
PROFILE = Path(__file__).with_name("apparmor-bwrap")  # shipped as package data
PROFILE_TARGET = "/etc/apparmor.d/agentrl-bwrap"


def read_sysctl(name: str, sysctl_dir: Path = SYSCTL_DIR) -> str | None:
    try:
        return (sysctl_dir / name.replace(".", "/")).read_text().strip()
    except OSError:
        return None


def diagnosis(bwrap_stderr: str, sysctl_dir: Path = SYSCTL_DIR) -> str | None:
    """The sysctl that keeps bwrap (whose stderr is ``bwrap_stderr``) from its user namespace here, with the ways
    out; None when no such switch is set (the failure is something else)."""
    apparmor = read_sysctl(APPARMOR_SYSCTL, sysctl_dir) == "1"
    if apparmor and ("uid map" in bwrap_stderr or "Permission denied" in bwrap_stderr):
        return (
            f"AppArmor blocks unprivileged user namespaces ({APPARMOR_SYSCTL}=1; bwrap: 'setting up uid map: "
            f"Permission denied'). Ways out: (1) load the shipped AppArmor profile for bwrap: sudo install -m 644 "
            f"{PROFILE} {PROFILE_TARGET} && sudo apparmor_parser -r {PROFILE_TARGET}; (2) run `agentrl-sandbox serve` "
            "on nodes where bwrap works and set agentrl.sandbox.backend=sandbox_fusion with their url; (3) point "
            "agentrl.sandbox.url at a SandboxFusion server (backend=sandbox_fusion)"
        )
    for name, fix in (("user.max_user_namespaces", "65536"), ("kernel.unprivileged_userns_clone", "1")):
        if read_sysctl(name, sysctl_dir) == "0":
            return (
                f"the kernel forbids unprivileged user namespaces ({name}=0): sudo sysctl -w {name}={fix}, or run "
                "`agentrl-sandbox serve` on nodes where bwrap works (backend=sandbox_fusion with their url), or use a "
                "SandboxFusion server"
            )
    return None
