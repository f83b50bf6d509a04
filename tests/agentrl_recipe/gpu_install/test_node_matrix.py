"""The GPU nodes people have, simulated: each row is a set of facts faked where the code reads them — the bootstrap
Python (a fake interpreter given as PYTHON_BOOTSTRAP), root or not (a fake ``id``/``sudo``/``apt-get`` on PATH), the
driver (a fake ``nvidia-smi`` on PATH; libcuda answers nothing), ``nvcc`` on PATH or not, which indexes answer
(``install.unreachable_hosts``), the system's python3 (a fake interpreter), AppArmor's userns switch (a fake
/proc/sys tree). For every row ``make install-gpu DRY_RUN=1``, the installer's dry run, ``make system-deps``, the
sandbox interpreter, the AppArmor diagnosis and the vLLM server's environment either reach a plan or stop before
any download with one line naming the node's fact and the way out. docs/cluster.md#the-node-matrix lists the rows."""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from agentrl_recipe.cli import preflight, preflight_facts
from agentrl_recipe.cli.configs.checks import check
from agentrl_recipe.cli.configs.files import compose
from agentrl_recipe.cli.preflight_facts import FLASH_ATTN_MISSING
from agentrl_recipe.eval.protocol import PAPER_PROTOCOL, batch_size_for
from agentrl_recipe.gpu_install import install as install_gpu
from agentrl_recipe.launcher import launch
from agentrl_recipe.offline import vllm_server
from agentrl_sandbox import SandboxError, bwrap, runtime_env, userns

REPO = Path(__file__).resolve().parents[3]
PYTORCH_HOST, GITHUB_HOST = "download.pytorch.org", "github.com"
PAPER_RL = "agentrl_rl_qwen3_4b"  # what the sbatch files preflight and launch
NODE_CPUS = 64  # the node's cores: Ray's logical CPUs for the run's own ray.init


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
        f"  *driver_version,memory.total*) for i in 0 1 2 3 4 5 6 7; do echo '{node.driver}, 81559'; done;;\n"
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
    assert (code == 0) is install_plans(node)
    if not cuda13 and not node.pytorch_index:
        assert code == 1
        line = one_line(out.err)
        assert f"cannot reach {PYTORCH_HOST} (refused), {GITHUB_HOST} (refused)" in line
        assert "a driver >= 580.65.06 (R580) or NVIDIA's forward-compatibility package" in line
        assert line.endswith("nothing was downloaded")
    elif not nvcc_builds_flash_attn(node):
        assert code == 1
        line = one_line(out.err)
        assert "cannot build flash-attn: nvcc" in line and "FLASH_ATTN_WHEEL=<wheel>" in line
    else:
        assert code == 0, out.err
        plan = [line for line in out.out.splitlines() if "would run:" in line]
        assert "FLASH_ATTN_CUDA_ARCHS=90 MAX_JOBS=8" in plan[-1] and "flash-attn==2.8.3" in plan[-1]
        assert ("+cu129" in "\n".join(plan)) is not cuda13
        assert "dry run: the CUDA" in out.out


def nvcc_builds_flash_attn(node: Node) -> bool:
    """The node's nvcc is of the CUDA major its stack is built for (12 for the 12.9 builds, 13 for 13.0)."""
    return node.nvcc is not None and node.nvcc.split(".")[0] == ("13" if node.driver_cuda == "13.0" else "12")


def install_plans(node: Node) -> bool:
    """``make install-gpu`` reaches a plan (its dry run exits 0) on this node."""
    return (node.driver_cuda == "13.0" or node.pytorch_index) and nvcc_builds_flash_attn(node)


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
    # eval's batch keeps the 8 engines busy: 8 x 256 trajectories = 64 problems of the paper's 32 samples
    assert spec.engines() == 8 and batch_size_for(spec.engines(), PAPER_PROTOCOL["n_samples"]) == 64


@pytest.fixture(scope="module")
def paper_rl(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, object, object]:
    """(MODEL=, configs check's report, the composed config) of the paper RL run with a local model folder: checked
    and composed once, reused by every row (the node's facts are what differ; each takes seconds to compose)."""
    model = tmp_path_factory.mktemp("sft_export")
    (model / "config.json").write_text("{}")
    overrides = [f"actor_rollout_ref.model.path={model}"]
    return str(model), check(PAPER_RL, overrides), compose(PAPER_RL, overrides)


def installed_torch_cuda(node: Node) -> str:
    """The CUDA of the torch on the node after its install: the stack install-gpu picked, or, where it stopped on
    PyPI's reach alone, PyPI's default torch (a CUDA 13 build) that a user installs by hand."""
    return "12.9" if node.pytorch_index and node.driver_cuda != "13.0" else "13.0"


def node_sandbox_check(cfg: object, timeout_s: float | None = None, *, shared: bool = True) -> dict[str, object]:
    """The local sandbox's start-up checks on the node (bwrap on its PATH, its python3), without starting one."""
    assert not shared, "preflight checks on a sandbox of its own (the launcher's process must hold none after)"
    try:
        bwrap.preflight()
        runtime_env.interpreter_version()
    except SandboxError as exc:
        return {"backend": "local", "ok": False, "error": f"SandboxError: {exc}", "imports": []}
    return {"backend": "local", "ok": True, "error": None, "imports": ["numpy"], "latency_s": 0.1}


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_make_preflight_passes_or_names_the_nodes_fact(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], paper_rl
) -> None:
    """`make preflight CONFIG=agentrl_rl_qwen3_4b MODEL=…` after the node's install: every FAIL line is one of the
    node's facts with its way out, the others pass."""
    model, report, composed = paper_rl
    env = node_env(node, tmp_path)
    if node.root:  # make install's system-deps installed bubblewrap (a stand-in: preflight only looks it up)
        _script(tmp_path / "bin" / "bwrap", "exit 0\n")
    monkeypatch.setenv("PATH", env["PATH"])
    for name in ("CUDA_HOME", "CUDA_PATH", "RAY_ADDRESS", runtime_env.ENV_SANDBOX_PYTHON):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(vllm_server, "DEFAULT_CUDA_HOME", tmp_path / "no-cuda")
    monkeypatch.setattr(preflight, "check", lambda name, overrides: report)
    monkeypatch.setattr(preflight, "compose", lambda name, overrides: composed)
    # the node's /usr holds its python3 (the sandbox binds only that tree)
    monkeypatch.setattr(runtime_env, "BOUND_TREE", str(tmp_path))
    monkeypatch.setattr(runtime_env, "INTERPRETER", str(fake_python(tmp_path / "python3", node.system_python)))
    monkeypatch.setattr(preflight_facts, "health_check", node_sandbox_check)
    monkeypatch.setattr(preflight_facts, "torch_cuda_build", lambda: installed_torch_cuda(node))
    installed = install_plans(node)
    monkeypatch.setattr(preflight_facts, "flash_attn_error", lambda: None if installed else FLASH_ATTN_MISSING)
    monkeypatch.setattr(preflight_facts, "vllm_version", lambda: "0.30.0")
    monkeypatch.setattr(preflight_facts, "vllm_async_server_error", lambda: None)
    monkeypatch.setattr(preflight_facts.os, "cpu_count", lambda: NODE_CPUS)
    done = subprocess.run(["make", "-n", "-s", "-C", str(REPO), "preflight", f"CONFIG={PAPER_RL}", f"MODEL={model}"],
                          capture_output=True, text=True, timeout=60, env=env)  # fmt: skip
    argv = shlex.split(done.stdout.strip().splitlines()[-1])
    assert argv[:2] == [".venv/bin/agentrl-recipe", "preflight"], done.stdout + done.stderr
    parser = argparse.ArgumentParser()
    preflight.add_arguments(parser)
    code = preflight.main(parser.parse_args(argv[2:]))
    out = capsys.readouterr()
    lines = {
        line.split(":")[0].split()[1]: line for line in out.out.splitlines() if line.startswith(("ok", "warn", "FAIL"))
    }
    failed = {check for check, line in lines.items() if line.startswith("FAIL")}
    expected = set()
    if installed_torch_cuda(node) == "13.0" and node.driver_cuda != "13.0":
        expected.add("driver")
        assert (
            f"driver {node.driver} is too old for torch/vLLM built for CUDA 13.0 (needs >= 580.65.06)"
            in lines["driver"]
        )
    if not installed:
        expected.add("flash_attn")
        assert "flash_attn is not installed: `make install-gpu` builds it" in lines["flash_attn"]
        assert "`module load cuda`" in lines["flash_attn"] and "FLASH_ATTN_WHEEL=<wheel>" in lines["flash_attn"]
    if not node.root:
        expected.add("sandbox")
        assert "bubblewrap (bwrap) is not installed" in lines["sandbox"] and "SANDBOX_URL=" in lines["sandbox"]
    elif node.system_python == "3.9":
        expected.add("sandbox")
        assert "is Python 3.9, too old for the sandbox's packages: set AGENTRL_SANDBOX_PYTHON" in lines["sandbox"]
        assert "not compared with SandboxFusion's" in lines["runtime"]
    assert failed == expected, out.out
    assert (code == 0) is not expected
    assert lines["nvcc"].startswith("warn nvcc: no nvcc") is (node.nvcc is None)
    assert lines["gpus"] == "ok   gpus: 8 GPUs, 80 GiB each, TP 4"  # nvidia-smi's 81,559 MiB per GPU
    assert lines["ray_cpus"].startswith(f"ok   ray_cpus: {NODE_CPUS} logical CPUs")


@pytest.mark.parametrize("node", NODES, ids=[n.id for n in NODES])
def test_make_rl_gives_the_rollout_the_nodes_flashinfer_setting(
    node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, paper_rl
) -> None:
    """verl's vLLM rollout (make rl) samples without FlashInfer's JIT where the node has no nvcc."""
    monkeypatch.setenv("PATH", node_env(node, tmp_path)["PATH"])
    for name in ("CUDA_HOME", "CUDA_PATH", "RAY_ADDRESS", vllm_server.FLASHINFER_SAMPLER_ENV):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(vllm_server, "DEFAULT_CUDA_HOME", tmp_path / "no-cuda")
    monkeypatch.setattr(launch, "compose", lambda name, overrides: paper_rl[2])
    parser = argparse.ArgumentParser()
    launch.add_arguments(parser)
    _, env = launch.rl_command(PAPER_RL, [], parser.parse_intermixed_args(["rl"]))
    expected = None if node.nvcc else "0"
    assert env.get(vllm_server.FLASHINFER_SAMPLER_ENV) == expected


def test_the_matrix_covers_the_issues_nodes() -> None:
    assert len(NODES) >= 10
    assert {(n.os, n.driver.split(".")[0]) for n in NODES} == {
        ("ubuntu22.04", "535"), ("ubuntu22.04", "550"), ("ubuntu24.04", "570"), ("ubuntu24.04", "580"), ("rhel9", "570")
    }  # fmt: skip
    assert {(n.root, n.pytorch_index) for n in NODES} == {(True, True), (True, False), (False, True), (False, False)}
