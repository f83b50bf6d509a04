"""The wheels ``make gpu-check`` brings to a bare GPU machine, and how they get there and are installed.

The machine has torch (CUDA) and transformers with their dependencies (numpy, safetensors, tokenizers, huggingface-hub,
httpx, pydantic, pyyaml, jinja2, ...) and nothing else of ours; it takes at most 64 MiB of files. These are what verl
0.9.1's actor path imports beyond that, found by importing it from a copy of site-packages holding only torch,
transformers and their requirements (``tests/agentrl_recipe/gpu_check/test_gpu_check.py`` keeps the pins equal to
this venv's). Pure Python except psutil (abi3), tensordict and orjson (one wheel per CPython 3.10-3.13). Ray, datasets,
pandas and Pillow are not brought: :mod:`.stubs`.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

WHEELS_DIR = Path(".gpu_check/wheels")
SITE_DIR = Path(".gpu_check/site")
LIMIT_BYTES = 64 * 2**20  # what the machine takes: this checkout's tracked files + the carried wheels
PURE = {
    "verl": "0.9.1",
    "pyvers": "0.1.0",  # tensordict
    "cloudpickle": "3.1.3",  # tensordict
    "omegaconf": "2.3.1",
    "antlr4-python3-runtime": "4.9.3",  # omegaconf; an sdist on PyPI, built into a wheel here
    "hydra-core": "1.3.8",  # verl.experimental.agent_loop (our plugin registers the agent loop there)
    "codetiming": "1.4.0",
    "psutil": "7.2.2",  # abi3
    "peft": "0.21.2",  # verl.utils.fsdp_utils
    "accelerate": "1.16.0",  # peft
    "cachetools": "8.0.2",  # verl.workers.rollout.router
    "fastapi": "0.136.3",  # verl.workers.rollout.utils
    "starlette": "1.10.0",  # fastapi
    "uvicorn": "0.55.0",  # verl.workers.rollout.utils
}
BINARY = {"tensordict": "0.10.0", "orjson": "3.13.0"}  # orjson: verl.utils.tracking
PYTHONS = ("310", "311", "312", "313")
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")


def pins() -> dict[str, str]:
    return {**PURE, **BINARY}


def download(dest: Path = WHEELS_DIR) -> None:
    """``pip download --no-deps`` every pinned wheel into ``dest`` (antlr4's sdist built into a wheel)."""
    dest.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip"]
    pure = [f"{name}=={version}" for name, version in PURE.items() if name != "antlr4-python3-runtime"]
    subprocess.run([*pip, "download", "-q", "--no-deps", "-d", str(dest), *pure], check=True)
    subprocess.run([*pip, "wheel", "-q", "--no-deps", "-w", str(dest), "antlr4-python3-runtime==4.9.3"], check=True)
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    binary = [f"{name}=={version}" for name, version in BINARY.items()]
    for python in PYTHONS:
        subprocess.run(
            [*pip, "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python, *platforms,
             "-d", str(dest), *binary],
            check=True,
        )  # fmt: skip


def _normal(name: str) -> str:
    return name.lower().replace("-", "_")


def _fits(wheel: Path, python: str) -> bool:
    """Whether ``wheel`` installs on this interpreter (``python`` = "311"): pure, abi3, or built for it."""
    _, _, python_tag, abi, platform = wheel.stem.rsplit("-", 4)[-5:]
    if platform == "any":
        return True
    if not sysconfig.get_platform().replace("-", "_").endswith("x86_64"):
        return False
    return abi == "abi3" or python_tag == f"cp{python}"


def pick(wheels_dir: Path, python: str) -> dict[str, Path]:
    """The wheel of every pin that fits ``python``; raises naming the ones missing."""
    chosen: dict[str, Path] = {}
    for name, version in pins().items():
        prefix = f"{_normal(name)}-{version}-"
        found = [w for w in sorted(wheels_dir.glob("*.whl")) if w.name.lower().startswith(prefix) and _fits(w, python)]
        if found:
            chosen[name] = found[0]
    missing = sorted(set(pins()) - set(chosen))
    if missing:
        raise FileNotFoundError(
            f"no wheel for {missing} (CPython {python}) in {wheels_dir}: "
            "run `make gpu-check-bundle` where PyPI is reachable"
        )
    return chosen


def install(wheels_dir: Path = WHEELS_DIR, site: Path = SITE_DIR) -> list[str]:
    """Unpack the fitting wheels into ``site`` (a wheel is a zip of its files and metadata: no pip, no network).

    Returns the wheel names installed; a ``site`` already holding them is left as is."""
    python = f"{sys.version_info.major}{sys.version_info.minor}"
    chosen = pick(wheels_dir, python)
    marker = site / ".installed"
    names = sorted(w.name for w in chosen.values())
    if marker.exists() and marker.read_text().split() == names:
        return names
    site.mkdir(parents=True, exist_ok=True)
    for wheel in chosen.values():
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(site)
    marker.write_text("\n".join(names) + "\n")
    return names


def tracked_bytes() -> int:
    """Bytes of this checkout's tracked files (what the device machine copies besides the carried paths)."""
    files = subprocess.run(["git", "ls-files", "-z"], capture_output=True, check=True).stdout.split(b"\0")
    return sum(Path(f.decode()).stat().st_size for f in files if f and Path(f.decode()).is_file())


def size_line(wheels_dir: Path = WHEELS_DIR) -> tuple[str, bool]:
    wheels = sum(w.stat().st_size for w in wheels_dir.glob("*.whl"))
    checkout = tracked_bytes()
    total = wheels + checkout
    ok = total <= LIMIT_BYTES
    line = (
        f"gpu-check bundle: {wheels / 2**20:.2f} MiB of wheels in {wheels_dir} + {checkout / 2**20:.2f} MiB of "
        f"tracked files = {total / 2**20:.2f} MiB ({'within' if ok else 'OVER'} the {LIMIT_BYTES / 2**20:.0f} MiB "
        "a bare machine takes)"
    )
    return line, ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_recipe.gpu_check.bundle", description=__doc__)
    parser.add_argument("--dest", type=Path, default=WHEELS_DIR)
    args = parser.parse_args(argv)
    download(args.dest)
    line, ok = size_line(args.dest)
    print(line)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
