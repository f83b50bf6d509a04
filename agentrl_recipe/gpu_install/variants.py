"""The GPU stack per CUDA version: which torch 2.13.0, vLLM 0.30.0 and cupy builds ``make install-gpu CUDA=…`` installs,
and the pip command that resolves them (``--dry-run`` for the resolution test). Standard library only: it runs before
anything is installed in the venv.

What exists (checked 2026-12 against the projects' release notes; see docs/cluster.md):

- **13.0** — torch 2.13.0 and vLLM 0.30.0 from PyPI are CUDA 13.0 builds (``cuda-toolkit==13.0.3``); cupy-cuda13x.
  Needs a driver >= 580.65.06 (R580+), or NVIDIA's forward-compatibility package on an older data-center driver.
- **12.9** — torch 2.13.0+cu129 (with torchvision 0.28.0+cu129, torchaudio 2.11.0+cu129, which vLLM 0.30.0 pins) from
  PyTorch's cu129 index; vLLM's ``+cu129`` wheel from its v0.30.0 GitHub release (vLLM publishes cu130 on PyPI and
  cu129 as a release asset, nothing older); cupy-cuda12x. Runs on any CUDA 12 driver >= 525.60.13 through CUDA
  minor-version compatibility (natively from 575.51.03).
- **12.8, 12.6** — no such build of the pair: PyTorch dropped CUDA 12.8 builds in 2.12 (2.13 has 12.6, 12.9, 13.0,
  13.2) and vLLM 0.30.0 has no cu128 or cu126 wheel. These names select the 12.9 builds, which a 12.8 (R570) or 12.6
  driver runs through minor-version compatibility; the install says so.
"""

from __future__ import annotations

import dataclasses
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import tomllib
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

REPO = Path(__file__).resolve().parents[2]
TORCH_VERSION = "2.13.0"
VLLM_VERSION = "0.30.0"
CUPY_VERSION = "14.2.0"
PYTORCH_INDEX = "https://download.pytorch.org/whl/{tag}"
VLLM_RELEASE_WHEEL = (
    "https://github.com/vllm-project/vllm/releases/download/v{version}/vllm-{version}%2B{tag}-cp38-abi3-"
    "manylinux_2_28_{arch}.whl"
)
# pip < 25 downloads every wheel whole while resolving (torch and vLLM: ~850 MB per resolution, ~5 min here);
# newer pip reads the index's metadata files. install-gpu upgrades the venv's pip to this first.
PIP_PIN = "pip==26.3"
# Minimum Linux driver per CUDA major (NVIDIA's minor-version compatibility; the same table as preflight's MIN_DRIVER).
MIN_DRIVER = {12: "525.60.13", 13: "580.65.06"}


@dataclasses.dataclass(frozen=True)
class Variant:
    """One installable GPU stack: ``name`` is what ``CUDA=`` selects."""

    name: str
    cuda_major: int
    torch_cuda: str  # torch.version.cuda of the build installed
    torch_reqs: tuple[str, ...]  # torch (+ the torchvision/torchaudio vLLM pins) in this CUDA's build
    index_url: str | None  # PyTorch's per-CUDA index; None = PyPI's default build
    vllm_req: str  # vLLM 0.30.0 for this CUDA (a requirement or a direct URL)
    cupy_req: str
    extras: str  # the package extras installed with it (the `gpu` extra is the CUDA 13 stack)
    note: str = ""  # said on install when the name is not the build's own CUDA

    def hosts(self) -> list[str]:
        """Every host pip needs for this variant (the default index first)."""
        urls = [os.environ.get("PIP_INDEX_URL") or "https://pypi.org/simple/"]
        urls += [self.index_url] if self.index_url else []
        urls += [self.vllm_req.split("@", 1)[1].strip()] if "@" in self.vllm_req else []
        return list(dict.fromkeys(urlparse(u).hostname or u for u in urls))


def _arch() -> str:
    return "aarch64" if platform.machine() in ("aarch64", "arm64") else "x86_64"


def _cu12(name: str, note: str = "") -> Variant:
    tag = "cu129"
    return Variant(
        name=name,
        cuda_major=12,
        torch_cuda="12.9",
        torch_reqs=(f"torch=={TORCH_VERSION}+{tag}", f"torchvision==0.28.0+{tag}", f"torchaudio==2.11.0+{tag}"),
        index_url=PYTORCH_INDEX.format(tag=tag),
        vllm_req=f"vllm @ {VLLM_RELEASE_WHEEL.format(version=VLLM_VERSION, tag=tag, arch=_arch())}",
        cupy_req=f"cupy-cuda12x=={CUPY_VERSION}",
        extras="test",
        note=note,
    )


_NO_CU12X = (
    "torch {torch} has no CUDA {cuda} build and vLLM {vllm} no cu{tag} wheel: installing the CUDA 12.9 builds, which "
    "a CUDA 12 driver >= {floor} runs through minor-version compatibility"
)


def variants() -> dict[str, Variant]:
    """Every ``CUDA=`` value, in the order the docs list them."""
    cu13 = Variant(
        name="13.0",
        cuda_major=13,
        torch_cuda="13.0",
        torch_reqs=(f"torch=={TORCH_VERSION}",),
        index_url=None,
        vllm_req=f"vllm=={VLLM_VERSION}",
        cupy_req=f"cupy-cuda13x=={CUPY_VERSION}",
        extras="test,gpu",
    )
    table = {"13.0": cu13, "12.9": _cu12("12.9")}
    for cuda in ("12.8", "12.6"):
        note = _NO_CU12X.format(
            torch=TORCH_VERSION, cuda=cuda, vllm=VLLM_VERSION, tag=cuda.replace(".", ""), floor=MIN_DRIVER[12]
        )
        table[cuda] = _cu12(cuda, note)
    return table


def for_driver_cuda(driver_cuda: tuple[int, int]) -> str:
    """The ``CUDA=`` value a driver supporting CUDA ``(major, minor)`` gets by default."""
    major, minor = driver_cuda
    if major >= 13:
        return "13.0"
    if major == 12:
        return "12.9" if minor >= 9 else ("12.8" if minor >= 8 else "12.6")
    raise ValueError(
        f"this driver supports CUDA {major}.{minor} only; torch {TORCH_VERSION} / vLLM {VLLM_VERSION} need CUDA 12 "
        f"(driver >= {MIN_DRIVER[12]}): ask for a newer driver, or see 'Forward compatibility' in docs/cluster.md"
    )


# This repository's other distribution: never on an index, installed from the checkout next to the recipe.
SANDBOX_DISTRIBUTION = ("agentrl-sandbox", REPO / "agentrl_sandbox")


def project_requirements(extras: str) -> list[str]:
    """pyproject's dependencies plus the named extras: what ``pip install -e '.[extras]'`` asks for, with the
    sandbox's own distribution named by its folder in this checkout."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    reqs = list(project["dependencies"])
    for extra in filter(None, extras.split(",")):
        reqs += project["optional-dependencies"][extra]
    name, folder = SANDBOX_DISTRIBUTION
    return [f"{name} @ {folder.as_uri()}" if re.match(rf"{name}\b", req) else req for req in reqs]


def stack_requirements(variant: Variant) -> list[str]:
    """Every requirement of the GPU stack of ``variant``, the project's own pins included (torch's first)."""
    reqs = list(variant.torch_reqs) + project_requirements(variant.extras)
    if "gpu" not in variant.extras.split(","):
        reqs += [variant.vllm_req, variant.cupy_req]
    # the torch pin of pyproject (`torch==2.13.0`) stays: a +cuXYZ build satisfies it
    return reqs


def index_args(variant: Variant) -> list[str]:
    """pip's index options for ``variant``: PyTorch's per-CUDA index next to PyPI (the pins select the build)."""
    return ["--extra-index-url", variant.index_url] if variant.index_url else []


def unreachable(variant: Variant, timeout_s: float = 10.0) -> list[str]:
    """The hosts of ``variant`` this machine cannot reach (a request that gets no HTTP answer at all)."""
    down = []
    for host in variant.hosts():
        try:
            urllib.request.urlopen(urllib.request.Request(f"https://{host}/", method="HEAD"), timeout=timeout_s)
        except urllib.error.HTTPError:
            continue  # an HTTP answer (even 403/404): the host is there
        except (urllib.error.URLError, OSError) as exc:
            down.append(f"{host} ({getattr(exc, 'reason', exc)})")
    return down


def _pip_version(python: str) -> tuple[int, ...]:
    out = subprocess.run([python, "-m", "pip", "--version"], capture_output=True, text=True, check=True).stdout
    return tuple(int(p) for p in out.split()[1].split(".")[:2] if p.isdigit())


def public_index_env() -> dict[str, str]:
    """The environment for a resolution against the public indexes only, as on a fresh node: no pip config files,
    find-links, extra indexes or constraints of this machine (a CPU torch wheel in a local find-links would win)."""
    drop = ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT", "PIP_NO_INDEX", "PIP_REQUIRE_VIRTUALENV")
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def resolve(variant: Variant, report: Path, python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """``pip install --dry-run`` of the whole stack of ``variant``; pip's JSON report is written to ``report``.

    Resolves for this interpreter and platform, like the install. When ``python``'s pip is older than 25, a current
    pip (:data:`PIP_PIN`) is put in a temporary directory for the resolution only.

    pip reads each wheel's metadata through HTTP range requests (``fast-deps``): without it pip downloads every wheel
    whole where the index serves no separate metadata file (PEP 658): 312 wheels, 4.4 GB for the CUDA 13.0 stack here
    (torch alone 0.5 GB), on every run. The report is the same (283 packages, every version equal); the resolve test
    took 27 CPU-seconds instead of 38-40 on 2 cores (but ~52 s of wall instead of ~43: one range request after
    another). Where a server refuses range requests, pip falls back to the whole download.
    """
    env = public_index_env()
    with tempfile.TemporaryDirectory(prefix="agentrl-pip-") as tmp:
        if _pip_version(python) < (25,):
            subprocess.run(
                [python, "-m", "pip", "install", "-q", "--target", tmp, PIP_PIN], env=env, check=True, text=True
            )
            env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--progress-bar", "off", "-q"]
        cmd += ["--use-feature=fast-deps"]
        cmd += ["--report", str(report), *index_args(variant), *stack_requirements(variant)]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=tmp)


def installed_versions(report: Path) -> dict[str, str]:
    """{normalised name: version} of what a ``--report`` says pip would install."""
    data = json.loads(report.read_text(encoding="utf-8"))
    return {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in data["install"]}
