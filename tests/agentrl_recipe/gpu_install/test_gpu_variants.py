"""The GPU stacks of ``make install-gpu CUDA=…``: what each installs, and a ``pip install --dry-run`` of each distinct
stack against the public indexes (the resolution downloads metadata and wheels to a temporary place, installs nothing).

A stack whose index this machine cannot reach is skipped, naming the host: the CUDA 12.9 stack needs PyTorch's cu129
index and vLLM's GitHub release, which the development machines of this project do not reach (only PyPI)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from agentrl_recipe.cli.preflight import MIN_DRIVER as PREFLIGHT_MIN_DRIVER
from agentrl_recipe.gpu_install import variants as gpu_variants
from agentrl_recipe.gpu_install.variants import Variant, variants

REPO = Path(__file__).resolve().parents[3]
VLLM_CU129 = (
    "vllm @ https://github.com/vllm-project/vllm/releases/download/v0.30.0/"
    "vllm-0.30.0%2Bcu129-cp38-abi3-manylinux_2_28_x86_64.whl"
)


def test_every_cuda_name_and_the_build_it_installs() -> None:
    table = variants()
    assert list(table) == ["13.0", "12.9", "12.8", "12.6"]
    cu13 = table["13.0"]
    assert (cu13.torch_reqs, cu13.index_url, cu13.vllm_req, cu13.cupy_req) == (
        ("torch==2.13.0",),
        None,
        "vllm==0.30.0",
        "cupy-cuda13x==14.2.0",
    )
    assert cu13.extras == "test,gpu" and cu13.note == ""
    cu129 = table["12.9"]
    assert cu129.torch_reqs == ("torch==2.13.0+cu129", "torchvision==0.28.0+cu129", "torchaudio==2.11.0+cu129")
    assert cu129.index_url == "https://download.pytorch.org/whl/cu129" and cu129.cupy_req == "cupy-cuda12x==14.2.0"
    if cu129.vllm_req.endswith("x86_64.whl"):
        assert cu129.vllm_req == VLLM_CU129
    assert cu129.hosts()[1:] == ["download.pytorch.org", "github.com"]  # [0]: PyPI, or PIP_INDEX_URL's host
    for name in ("12.8", "12.6"):  # no torch 2.13 / vLLM 0.30 build of their own: the 12.9 builds, said on install
        assert table[name] == Variant(**{**cu129.__dict__, "name": name, "note": table[name].note})
        assert f"no CUDA {name} build" in table[name].note and "minor-version compatibility" in table[name].note


def test_the_cuda_13_stack_is_the_gpu_extra_of_pyproject() -> None:
    extra = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert extra["gpu"] == [variants()["13.0"].vllm_req, variants()["13.0"].cupy_req]
    reqs = gpu_variants.stack_requirements(variants()["12.9"])
    assert reqs[:3] == list(variants()["12.9"].torch_reqs) and reqs[-2:] == [
        variants()["12.9"].vllm_req,
        "cupy-cuda12x==14.2.0",
    ]
    assert not any(r.startswith(("vllm==", "cupy-cuda13x")) for r in reqs)  # no `gpu` extra in a CUDA 12 stack


def test_driver_minimums_agree_with_preflight() -> None:
    assert {k: PREFLIGHT_MIN_DRIVER[k] for k in (12, 13)} == gpu_variants.MIN_DRIVER


def test_the_default_stack_per_driver_cuda() -> None:
    assert [gpu_variants.for_driver_cuda(c) for c in [(13, 2), (13, 0), (12, 9), (12, 8), (12, 4)]] == [
        "13.0",
        "13.0",
        "12.9",
        "12.8",
        "12.6",
    ]
    with pytest.raises(ValueError, match=r"supports CUDA 11\.8 only; .* need CUDA 12 \(driver >= 525\.60\.13\)"):
        gpu_variants.for_driver_cuda((11, 8))


DISTINCT = ["13.0", "12.9"]  # 12.8 and 12.6 install the 12.9 builds (test above)
EXPECTED = {
    "13.0": {"torch": "2.13.0", "vllm": "0.30.0", "cupy-cuda13x": "14.2.0", "cuda-toolkit": "13.0.3.0"},
    "12.9": {"torch": "2.13.0+cu129", "vllm": "0.30.0+cu129", "cupy-cuda12x": "14.2.0", "torchvision": "0.28.0+cu129"},
}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", DISTINCT)
def test_the_stack_resolves_with_pip_dry_run(name: str, tmp_path: Path) -> None:
    variant = variants()[name]
    down = gpu_variants.unreachable(variant)
    if down:
        pytest.skip(f"CUDA {name} stack not resolvable from here: unreachable {', '.join(down)}")
    report = tmp_path / "report.json"
    done = gpu_variants.resolve(variant, report)
    assert done.returncode == 0, f"pip could not resolve the CUDA {name} stack:\n{done.stderr[-3000:]}"
    versions = gpu_variants.installed_versions(report)
    assert {k: versions.get(k) for k in EXPECTED[name]} == EXPECTED[name]
    assert ("cupy-cuda12x" in versions) == (name != "13.0") and ("cupy-cuda13x" in versions) == (name == "13.0")
    assert versions["transformers"] == "5.10.4" and versions["verl"] == "0.9.1"  # the project's own pins hold


def test_the_resolution_reads_metadata_by_range_requests(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """pip's fast-deps: the dry-run reads each wheel's metadata, not 4.4 GB of wheels (an index without PEP 658)."""
    commands: list[list[str]] = []
    monkeypatch.setattr(gpu_variants, "_pip_version", lambda python: (26, 3))
    monkeypatch.setattr(gpu_variants.subprocess, "run", lambda cmd, **kwargs: commands.append(cmd))
    gpu_variants.resolve(variants()["13.0"], tmp_path / "report.json", python="python")
    (command,) = commands
    assert command[:5] == ["python", "-m", "pip", "install", "--dry-run"]
    assert "--use-feature=fast-deps" in command
    assert command[command.index("--report") + 1] == str(tmp_path / "report.json")
