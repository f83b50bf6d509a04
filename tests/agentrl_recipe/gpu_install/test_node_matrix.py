"""The GPU nodes people have, simulated: each row is a set of facts faked where the code reads them — the bootstrap
Python (a fake interpreter given as PYTHON_BOOTSTRAP), root or not (a fake ``id``/``sudo``/``apt-get`` on PATH), the
driver (a fake ``nvidia-smi`` on PATH; libcuda answers nothing), ``nvcc`` on PATH or not, which indexes answer
(``install.unreachable_hosts``), the system's python3 (a fake interpreter), AppArmor's userns switch (a fake
/proc/sys tree). For every row ``make install-gpu DRY_RUN=1``, the installer's dry run, ``make system-deps``, the
sandbox interpreter, the AppArmor diagnosis and the vLLM server's environment either reach a plan or stop before
any download with one line naming the node's fact and the way out. docs/cluster.md#the-node-matrix lists the rows."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
from pathlib import Path

import pytest

from agentrl_recipe.gpu_install import install as install_gpu
from agentrl_recipe.offline import vllm_server
from agentrl_sandbox import SandboxError, runtime_env, userns

REPO = Path(__file__).resolve().parents[3]
PYTORCH_HOST, GITHUB_HOST = "download.pytorch.org", "github.com"


@dataclasses.dataclass(frozen=True)
class Node:
    os: str
    bootstrap_python: str  # `python3 --version` of the node: what PYTHON_BOOTSTRAP defaults to
    system_python: str  # /usr/bin/python3: the sandbox's interpreter by default
    driver: str
    driver_cuda: str  # nvidia-smi's "CUDA Version"
    nvcc: str | None  # the release of the nvcc on PATH (None: no CUDA module loaded)
    apparmor_userns: bool  # kernel.apparmor_restrict_unprivileged_userns=1
    root: bool
    pytorch_index: bool  # download.pytorch.org and github.com answer (PyPI always does)

    @property
    def id(self) -> str:
        root = "root" if self.root else "user"
        index = "pytorch-index" if self.pytorch_index else "pypi-only"
        return f"{self.os}-r{self.driver.split('.')[0]}-{root}-{index}"


BASES = [
    # Ubuntu 22.04: python3 3.10, CUDA 12.2 (R535) / 12.4 (R550) drivers, a CUDA 12 module on PATH
    dict(os="ubuntu22.04", bootstrap_python="3.10", system_python="3.10", driver="535.183.01", driver_cuda="12.2",
         nvcc="12.4", apparmor_userns=False),
    dict(os="ubuntu22.04", bootstrap_python="3.10", system_python="3.10", driver="550.127.05", driver_cuda="12.4",
         nvcc=None, apparmor_userns=False),
    # Ubuntu 24.04: python3 3.12, AppArmor restricts unprivileged user namespaces
    dict(os="ubuntu24.04", bootstrap_python="3.12", system_python="3.12", driver="570.124.06", driver_cuda="12.8",
         nvcc="12.8", apparmor_userns=True),
    dict(os="ubuntu24.04", bootstrap_python="3.12", system_python="3.12", driver="580.65.06", driver_cuda="13.0",
         nvcc=None, apparmor_userns=True),
    # RHEL 9: python3 3.9 (a module gives 3.11 to PYTHON_BOOTSTRAP), R570
    dict(os="rhel9", bootstrap_python="3.11", system_python="3.9", driver="570.86.15", driver_cuda="12.8",
         nvcc="12.8", apparmor_userns=False),
]  # fmt: skip
NODES = [
    Node(**base, root=root, pytorch_index=reach)  # type: ignore[arg-type]
    for base in BASES
    for root in (True, False)
    for reach in (True, False)
]


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)
    return path


def fake_python(path: Path, version: str, venv_python_body: str = "exit 0\n") -> Path:
    """An interpreter that reports ``version``; ``-m venv DIR`` makes DIR/bin/python run ``venv_python_body``."""
    body = _script(path.with_name(path.name + ".venv-python"), venv_python_body)
    return _script(
        path, f'case "$1" in\n  -c|-I) echo {version};;\n  -m) mkdir -p "$3/bin"; cp {body} "$3/bin/python";;\nesac\n'
    )


def node_bin(node: Node, tmp: Path) -> Path:
    """A bin dir with the node's commands: nvidia-smi, nvcc (when loaded), id, sudo, apt-get (recording)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    smi = (
        'case "$*" in\n'
        "  *compute_cap*) for i in 0 1 2 3 4 5 6 7; do echo 9.0; done;;\n"
        '  -L) for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100 80GB HBM3 (UUID: GPU-$i)"; done;;\n'
        f'  *) echo "| Driver Version: {node.driver}   CUDA Version: {node.driver_cuda} |";;\n'
        "esac\n"
    )
    _script(bin_dir / "nvidia-smi", smi)
    if node.nvcc:
        _script(bin_dir / "nvcc", f'echo "Cuda compilation tools, release {node.nvcc}, V{node.nvcc}.1"\n')
    _script(bin_dir / "id", f"echo {0 if node.root else 1000}\n")
    _script(bin_dir / "sudo", "exit 1\n")  # no passwordless sudo
    _script(bin_dir / "apt-get", f'echo "apt-get $*" >> {tmp}/apt.log\n')
    return bin_dir


def node_env(node: Node, tmp: Path) -> dict[str, str]:
    """PATH with the node's commands first and none of this machine's that would answer instead (bwrap absent)."""
    bin_dir = node_bin(node, tmp)
    system = [d for d in ("/usr/bin", "/bin") if Path(d).is_dir()]
    shadow = tmp / "shadow"
    shadow.mkdir()
    for tool in ("bash", "sh", "make", "cat", "cp", "mkdir", "chmod", "rm", "tail", "echo"):
        for d in system:
            if (Path(d) / tool).exists():
                (shadow / tool).symlink_to(Path(d) / tool)
                break
    # nor the outer make's variables (`make test` runs pytest): a nested make would print make[1]: lines
    outer = ("CUDA_HOME", "CUDA_PATH", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")
    env = {k: v for k, v in os.environ.items() if k not in outer}
    env["PATH"] = f"{bin_dir}:{shadow}"
    return env


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip() and not re.match(r"make(\[\d+\])?: \*\*\*", line)]
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_make_install_gpu_checks_the_bootstrap_python_before_the_venv(node: Node, tmp_path: Path) -> None:
    """Python < 3.11 stops before .venv exists, naming PYTHON_BOOTSTRAP; otherwise the installer is reached."""
    env = node_env(node, tmp_path)
    reached = tmp_path / "installer-reached"
    python = fake_python(tmp_path / "python3", node.bootstrap_python, f'echo "$*" > {reached}\n')
    venv = tmp_path / "venv"
    args = ["make", "-s", "-C", str(REPO), "install-gpu", "DRY_RUN=1", f"VENV={venv}", f"PYTHON_BOOTSTRAP={python}"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=60)
    if node.bootstrap_python == "3.10":
        assert done.returncode != 0 and not venv.exists() and not reached.exists()
        line = one_line(done.stdout + done.stderr)
        assert "is Python 3.10 but this package needs >= 3.11: PYTHON_BOOTSTRAP=python3.11" in line
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert reached.read_text().split() == [
            "-m",
            "agentrl_recipe.gpu_install.install",
            "--max-jobs",
            "8",
            "--dry-run",
        ]


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_the_installers_dry_run_plans_or_stops_before_any_download(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("PATH", node_env(node, tmp_path)["PATH"])
    for name in ("CUDA_HOME", "CUDA_PATH", install_gpu.FLASH_ATTN_ARCHS_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(
        vllm_server, "DEFAULT_CUDA_HOME", tmp_path / "no-cuda"
    )  # this machine's toolkit is not the node's
    monkeypatch.setattr(install_gpu, "libcuda_version", lambda: None)  # the driver answers through nvidia-smi
    monkeypatch.setattr(install_gpu, "run", lambda cmd, env=None: pytest.fail(f"ran {cmd}"))
    monkeypatch.setattr(install_gpu, "toolchain_problems", _toolchain_without_compiler_check)
    down = [] if node.pytorch_index else [f"{PYTORCH_HOST} (refused)", f"{GITHUB_HOST} (refused)"]
    monkeypatch.setattr(install_gpu, "unreachable_hosts", lambda v: [d for d in down if d.split()[0] in v.hosts()])
    code = install_gpu.main(["--dry-run"])
    out = capsys.readouterr()
    cuda13 = node.driver_cuda == "13.0"
    if not cuda13 and not node.pytorch_index:
        assert code == 1
        line = one_line(out.err)
        assert f"cannot reach {PYTORCH_HOST} (refused), {GITHUB_HOST} (refused)" in line
        assert "a driver >= 580.65.06 (R580) or NVIDIA's forward-compatibility package" in line
        assert line.endswith("nothing was downloaded")
    elif node.nvcc is None or (not cuda13 and not node.nvcc.startswith("12.")) or (cuda13 and node.nvcc[:2] != "13"):
        assert code == 1
        line = one_line(out.err)
        assert "cannot build flash-attn: nvcc" in line and "FLASH_ATTN_WHEEL=<wheel>" in line
    else:
        assert code == 0, out.err
        plan = [line for line in out.out.splitlines() if "would run:" in line]
        assert "FLASH_ATTN_CUDA_ARCHS=90 MAX_JOBS=8" in plan[-1] and "flash-attn==2.8.3" in plan[-1]
        assert ("+cu129" in "\n".join(plan)) is not cuda13
        assert "dry run: the CUDA" in out.out


def _toolchain_without_compiler_check(cuda_major: int) -> list[str]:
    """The real nvcc check; this machine's g++ and Python headers stand for the node's (they are not node facts)."""
    return [p for p in REAL_TOOLCHAIN(cuda_major) if p.startswith("nvcc")]


REAL_TOOLCHAIN = install_gpu.toolchain_problems


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_system_deps_install_as_root_and_name_the_administrator_command_otherwise(node: Node, tmp_path: Path) -> None:
    env = node_env(node, tmp_path)
    done = subprocess.run(
        ["make", "-s", "-C", str(REPO), "system-deps"], capture_output=True, text=True, env=env, timeout=60
    )
    apt_log = tmp_path / "apt.log"
    if node.root:
        assert done.returncode == 0, done.stdout + done.stderr
        assert apt_log.read_text().splitlines()[:2] == ["apt-get update -qq", "apt-get install -y -qq bubblewrap"]
    else:
        assert done.returncode != 0 and not apt_log.exists()
        line = one_line(done.stdout + done.stderr)
        assert "missing system packages: bubblewrap (no root or no apt-get here)" in line
        assert "SANDBOX_URL= names a sandbox server elsewhere" in line


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_the_sandbox_interpreter_is_the_systems_or_refused_with_the_way_out(node: Node, tmp_path: Path) -> None:
    python = fake_python(tmp_path / "python3", node.system_python)
    if node.system_python == "3.9":
        with pytest.raises(SandboxError) as info:
            runtime_env.interpreter_version(str(python))
        assert f"{python} is Python 3.9, too old for the sandbox's packages: set AGENTRL_SANDBOX_PYTHON" in str(
            info.value
        )
        assert "dnf install python3.11" in str(info.value) and "SANDBOX_URL=" in str(info.value)
    else:
        assert runtime_env.interpreter_version(str(python)) == node.system_python


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_apparmors_userns_switch_is_diagnosed_with_the_profile(node: Node, tmp_path: Path) -> None:
    switch = tmp_path / "kernel" / "apparmor_restrict_unprivileged_userns"
    switch.parent.mkdir()
    switch.write_text("1\n" if node.apparmor_userns else "0\n")
    said = userns.diagnosis("bwrap: setting up uid map: Permission denied", tmp_path)
    if node.apparmor_userns:
        assert said is not None and f"apparmor_parser -r {userns.PROFILE_TARGET}" in said
    else:
        assert said is None


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_vllm_gets_every_gpu_and_no_flashinfer_jit_without_nvcc(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = node_env(node, tmp_path)
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop(vllm_server.FLASHINFER_SAMPLER_ENV, None)
    monkeypatch.setattr(os, "environ", env)
    monkeypatch.setattr(
        Path, "is_file", lambda self: os.path.isfile(self) and not str(self).startswith("/usr/local/cuda")
    )
    spec = vllm_server.VllmServerSpec(model="m", max_model_len=23040, build=vllm_server.GPU_BUILD, port=1)
    command = spec.command()
    assert command[command.index("--data-parallel-size") + 1] == "8"
    expected = {} if node.nvcc else {vllm_server.FLASHINFER_SAMPLER_ENV: "0"}
    assert {k: v for k, v in spec.environment().items() if k == vllm_server.FLASHINFER_SAMPLER_ENV} == expected


def test_the_matrix_covers_the_issues_nodes() -> None:
    assert len(NODES) >= 10
    assert {(n.os, n.driver.split(".")[0]) for n in NODES} == {
        ("ubuntu22.04", "535"), ("ubuntu22.04", "550"), ("ubuntu24.04", "570"), ("ubuntu24.04", "580"), ("rhel9", "570")
    }  # fmt: skip
    assert {(n.root, n.pytorch_index) for n in NODES} == {(True, True), (True, False), (False, True), (False, False)}
