"""The sandbox's own Python environments: what model-written code may import, independent of the training venv.

The local backend runs Debian's ``/usr/bin/python3`` or ``$AGENTRL_SANDBOX_PYTHON`` (under ``/usr``, so the sandbox
uid can read it; a pyenv/conda interpreter under a 0700 home cannot be bound). Its packages must be built for *that*
interpreter's version, not the venv's: a 3.12 venv's numpy does not import in a 3.11 interpreter. So ``make install``
runs ``python -m agentrl_sandbox.runtime_env build``, which pip-installs the pinned wheels of the chosen runtime's
requirements file for the interpreter's version into ``<venv>/agentrl-sandbox/<runtime>/site-packages``
(``AGENTRL_SANDBOX_RUNTIME_DIR`` moves ``<venv>/agentrl-sandbox``), checks that the pins are closed under their own
requirements, byte-compiles them with that interpreter and writes ``manifest.json`` last. The build is idempotent
(instant when the manifest matches) and atomic (a half-built tree is never used).

Two runtimes (``agentrl.sandbox.runtime``, env ``AGENTRL_SANDBOX_RUNTIME``):

- ``sandboxfusion`` (default, the released behaviour): SandboxFusion's Python runtime, which the paper's model was
  trained against — numpy 1.26.3, pandas 2.2.0, scipy 1.11.4, sympy 1.14.0, scikit-learn 1.4.0, gmpy2 2.1.5 and
  matplotlib, statsmodels, cvxpy, pulp, numba, xgboost (``runtime_requirements.txt``; its header says how every pin
  was chosen and what falls back on interpreters without wheels). ~1.3 GB installed (xgboost 416 MB).
- ``modern``: the same math/code packages at current versions (numpy 2.3.5, pandas 3.1.1, scipy 1.17.1;
  ``runtime_requirements_modern.txt``), ~470 MB. numpy 2 prints ``np.int64(3)`` where numpy 1.26 printed ``3``.

Each line's ``python_version`` marker is evaluated here for the sandbox interpreter's version (pip would evaluate it
for the venv's), and pip installs exactly those pins (``--no-deps``). :func:`load` is what the backend calls: it
refuses, naming the build command, when the environment is missing, was built for another Python version, or from
other pins. :func:`sandboxfusion_gaps` is what ``preflight`` warns with.

Preloaded in the pool's warm interpreters: :data:`IMPORTS` (both runtimes). The ``sandboxfusion`` runtime's
:data:`EXTRA_IMPORTS` (matplotlib, statsmodels, cvxpy, pulp, numba, xgboost) are imported by the code that uses them,
as every import was in SandboxFusion (a fresh interpreter per call); the health check imports them all.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from agentrl_sandbox.config import (
    DEFAULT_RUNTIME,
    ENV_SANDBOX_RUNTIME,
    ENV_SANDBOX_RUNTIME_DIR,
    RUNTIMES,
    SandboxConfig,
)
from agentrl_sandbox.types import SandboxError

# The interpreter the sandbox runs: Debian's python3 by default. AGENTRL_SANDBOX_PYTHON names another one (RHEL/Rocky
# 9's /usr/bin/python3 is 3.9, too old for the pins: `dnf install python3.11`, then /usr/bin/python3.11). It must lie
# under /usr, the only host tree bwrap binds into the sandbox (a pyenv/conda/module interpreter elsewhere is refused).
ENV_SANDBOX_PYTHON = "AGENTRL_SANDBOX_PYTHON"
INTERPRETER = "/usr/bin/python3"  # the default: under /usr, readable by the sandbox uid
BOUND_TREE = "/usr"
# The oldest Python the runtimes' requirement files pin packages for (runtime_requirements*.txt markers).
MIN_PYTHON = (3, 10)
HERE = Path(__file__).parent
REQUIREMENTS = {"sandboxfusion": HERE / "runtime_requirements.txt", "modern": HERE / "runtime_requirements_modern.txt"}
assert set(REQUIREMENTS) == set(RUNTIMES), "agentrl_sandbox.config.RUNTIMES and runtime_env.REQUIREMENTS disagree"
SANDBOXFUSION_PYTHON = "3.10"  # SandboxFusion's runtime: conda python=3.10 (runtime/python/install-python-runtime.sh)
MANIFEST = "manifest.json"
# distribution -> import name, for the packages model code imports directly: preloaded by the pool, listed by doctor,
# imported inside the sandbox by the health check (preflight's too).
IMPORTS = {
    "numpy": "numpy",
    "scipy": "scipy",
    "sympy": "sympy",
    "mpmath": "mpmath",
    "pandas": "pandas",
    "networkx": "networkx",
    "scikit-learn": "sklearn",
    "gmpy2": "gmpy2",
}
# Imported by the code that uses them (not preloaded: numba and xgboost alone would double a warm interpreter).
EXTRA_IMPORTS: dict[str, dict[str, str]] = {
    "sandboxfusion": {
        "matplotlib": "matplotlib",
        "statsmodels": "statsmodels",
        "cvxpy": "cvxpy",
        "pulp": "pulp",
        "numba": "numba",
        "xgboost": "xgboost",
    },
    "modern": {},
}
_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")


def fix(runtime: str = DEFAULT_RUNTIME) -> str:
    """The command that builds ``runtime``."""
    if runtime == DEFAULT_RUNTIME:
        return "run `make install` (it builds the sandbox's Python packages)"
    return f"run `{ENV_SANDBOX_RUNTIME}={runtime} make sandbox-env` (it builds the {runtime} runtime's packages)"


FIX = fix()


@dataclasses.dataclass(frozen=True)
class RuntimeEnv:
    """A built environment: where it is and what it holds."""

    root: Path
    python_version: str  # "3.11": the interpreter minor version it was built for
    pins: tuple[str, ...]
    runtime: str = DEFAULT_RUNTIME

    @property
    def site_dir(self) -> Path:
        return self.root / "site-packages"

    @property
    def imports(self) -> list[str]:
        return list(runtime_imports(self.runtime).values())

    def packages(self) -> dict[str, str]:
        """distribution -> pinned version, for the packages model code imports (:func:`runtime_imports`)."""
        versions = dict(pin.split("==", 1) for pin in self.pins)
        return {dist: versions[dist] for dist in runtime_imports(self.runtime) if dist in versions}


def check_runtime(runtime: str) -> str:
    """``runtime`` if it is one of :data:`RUNTIMES`, else ValueError naming them."""
    if runtime not in RUNTIMES:
        raise ValueError(f"unknown sandbox runtime {runtime!r}; choose from {list(RUNTIMES)}")
    return runtime


def runtime_imports(runtime: str) -> dict[str, str]:
    """distribution -> import name of every package ``runtime`` offers model code (preloaded ones first)."""
    return {**IMPORTS, **EXTRA_IMPORTS[check_runtime(runtime)]}


def base_dir() -> Path:
    """``$AGENTRL_SANDBOX_RUNTIME_DIR`` or ``<sys.prefix>/agentrl-sandbox`` (in the venv): one folder per runtime."""
    return Path(os.environ.get(ENV_SANDBOX_RUNTIME_DIR) or Path(sys.prefix) / "agentrl-sandbox")


def default_root(runtime: str = DEFAULT_RUNTIME) -> Path:
    """Where ``runtime`` is built: ``<base_dir()>/<runtime>``."""
    return base_dir() / check_runtime(runtime)


def read_pins(path: Path, python_version: str) -> tuple[str, ...]:
    """The ``name==version`` lines of a requirements file whose ``; marker`` holds for CPython ``python_version``
    (comments and blanks skipped); an unpinned line raises ValueError naming it."""
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0"}
    pins = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        requirement, _, marker = (part.strip() for part in line.partition(";"))
        if not _PIN.match(requirement):
            raise ValueError(f"{path}:{number}: {line!r} is not pinned (name==version [; marker])")
        if not marker or Marker(marker).evaluate(environment):
            pins.append(requirement)
    return tuple(pins)


def pins_for(runtime: str, python_version: str) -> tuple[str, ...]:
    """``runtime``'s pins for CPython ``python_version``; SandboxError when its file does not cover that version."""
    path = REQUIREMENTS[check_runtime(runtime)]
    pins = read_pins(path, python_version)
    pinned = {canonicalize_name(pin.split("==", 1)[0]) for pin in pins}
    missing = [dist for dist in runtime_imports(runtime) if canonicalize_name(dist) not in pinned]
    if missing:
        raise SandboxError(
            f"the {runtime} sandbox runtime has no pins of {', '.join(missing)} for Python {python_version} "
            f"({path.name} covers the python_version markers it lists): {_way_out(interpreter())}"
        )
    return pins


def interpreter() -> str:
    """The sandbox's interpreter: ``$AGENTRL_SANDBOX_PYTHON``, else :data:`INTERPRETER`."""
    return os.environ.get(ENV_SANDBOX_PYTHON) or INTERPRETER


def _way_out(python: str) -> str:
    return (
        f"set {ENV_SANDBOX_PYTHON} to a Python >= {MIN_PYTHON[0]}.{MIN_PYTHON[1]} under {BOUND_TREE} (e.g. an "
        f"administrator's `dnf install python3.11` gives /usr/bin/python3.11), or run the sandbox on another machine "
        f"(`agentrl-sandbox serve` there, SANDBOX_URL=http://<it>:8080)"
    )


def interpreter_version(python: str | None = None) -> str:
    """``X.Y`` of the sandbox interpreter (``python``, default :func:`interpreter`); SandboxError when it is outside
    /usr, cannot run, or is older than :data:`MIN_PYTHON` (no runtime pins packages for it)."""
    python = python or interpreter()
    if python == interpreter() and not os.path.realpath(python).startswith(BOUND_TREE + "/"):
        raise SandboxError(
            f"the sandbox interpreter {python} is not under {BOUND_TREE}, the only host tree the sandbox binds: "
            + _way_out(python)
        )
    try:
        out = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(
            f"the sandbox interpreter {python} does not run ({exc}): apt-get install python3, or " + _way_out(python)
        ) from exc
    version = out.stdout.strip()
    if tuple(int(p) for p in version.split(".")) < MIN_PYTHON:
        raise SandboxError(f"the sandbox interpreter {python} is Python {version}, too old for the sandbox's "
                           f"packages: " + _way_out(python))  # fmt: skip
    return version


def load(
    runtime: str = DEFAULT_RUNTIME,
    root: Path | None = None,
    python: str | None = None,
    pins: Sequence[str] | None = None,
) -> RuntimeEnv:
    """``runtime``'s environment (at ``root``), checked against ``python``'s version and the pins; SandboxError if
    unusable."""
    python = python or interpreter()
    root = default_root(runtime) if root is None else Path(root)
    path = root / MANIFEST
    if not path.is_file():
        raise SandboxError(f"the sandbox's {runtime} Python packages are not installed (no {path}): {fix(runtime)}")
    manifest = json.loads(path.read_text())
    env = RuntimeEnv(
        root=root, python_version=str(manifest.get("python")), pins=tuple(manifest.get("pins", ())), runtime=runtime
    )
    version = interpreter_version(python)
    if env.python_version != version:
        raise SandboxError(
            f"the sandbox's packages at {root} were built for Python {env.python_version} but {python} is {version}: "
            f"{fix(runtime)}"
        )
    wanted = tuple(pins_for(runtime, version) if pins is None else pins)
    if env.pins != wanted:
        raise SandboxError(
            f"the sandbox's packages at {root} do not match {REQUIREMENTS[runtime].name}: {fix(runtime)}"
        )
    return env


def pip_command(target: Path, version: str, pins: Sequence[str], pip: Sequence[str]) -> list[str]:
    """pip install of exactly ``pins`` (no dependency resolution: the file pins every transitive package) as binary
    wheels for CPython ``version`` into ``target`` (no compile: the interpreter does it)."""
    tag = version.replace(".", "")
    return [
        *pip,
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
        "--no-deps",
        "--target",
        str(target),
        "--python-version",
        version,
        "--implementation",
        "cp",
        "--abi",
        f"cp{tag}",
        "--only-binary=:all:",
        *pins,
    ]


def unmet_requirements(site: Path, python_version: str) -> list[str]:
    """Requirements of the distributions in ``site`` that nothing in ``site`` satisfies, for CPython
    ``python_version`` on this machine's platform: what a ``--no-deps`` install of an incomplete pin list lacks."""
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0", "extra": ""}
    dists = list(importlib.metadata.distributions(path=[str(site)]))
    have = {canonicalize_name(d.metadata["Name"]): d.version for d in dists}
    unmet = []
    for dist in dists:
        for raw in dist.requires or ():
            requirement = Requirement(raw)
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            version = have.get(canonicalize_name(requirement.name))
            if version is None or not requirement.specifier.contains(version, prereleases=True):
                unmet.append(f"{dist.metadata['Name']} {dist.version} needs {requirement} (pinned: {version})")
    return sorted(unmet)


def remove_legacy(base: Path) -> None:
    """Drop the one-runtime layout (``<base>/site-packages`` + ``<base>/manifest.json``) older builds left."""
    if (base / MANIFEST).is_file():
        (base / MANIFEST).unlink()
        shutil.rmtree(base / "site-packages", ignore_errors=True)


def build(
    runtime: str = DEFAULT_RUNTIME,
    root: Path | None = None,
    python: str | None = None,
    pins: Sequence[str] | None = None,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
) -> tuple[RuntimeEnv, bool]:
    """Build (or keep) ``runtime``'s environment; returns it and whether anything was installed. SandboxError when
    the pins are not closed under their requirements (nothing is installed then)."""
    if root is None:
        remove_legacy(base_dir())
    python = python or interpreter()
    root = default_root(runtime) if root is None else Path(root)
    version = interpreter_version(python)
    wanted = tuple(pins_for(runtime, version) if pins is None else pins)
    try:
        return load(runtime, root, python, wanted), False
    except SandboxError:
        pass
    staging = root.with_name(root.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "site-packages"
    old_umask = os.umask(0o022)  # the sandbox uid (nobody) must read every file
    try:
        subprocess.run(pip_command(site, version, wanted, pip), check=True)
        unmet = unmet_requirements(site, version)
        if unmet:
            shutil.rmtree(staging, ignore_errors=True)
            raise SandboxError(f"{REQUIREMENTS[runtime].name} misses requirements of its own pins: {'; '.join(unmet)}")
        # .pyc for the sandbox's own interpreter: the sandbox is read-only, so it could never write them itself.
        subprocess.run([python, "-I", "-m", "compileall", "-q", "-j", "0", str(site)], check=False)
        manifest = {"runtime": runtime, "python": version, "pins": list(wanted), "interpreter": python}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    finally:
        os.umask(old_umask)
    root.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(root, ignore_errors=True)
    os.rename(staging, root)
    return load(runtime, root, python, wanted), True


def sandboxfusion_gaps(runtime: str, python_version: str) -> list[str]:
    """How ``runtime`` on CPython ``python_version`` differs from SandboxFusion's Python (3.10 with its pins):
    one entry per difference, [] when the versions match."""
    reference = dict(pin.split("==", 1) for pin in pins_for("sandboxfusion", SANDBOXFUSION_PYTHON))
    try:
        mine = dict(pin.split("==", 1) for pin in pins_for(runtime, python_version))
    except SandboxError:
        mine = {}
    gaps = [] if python_version == SANDBOXFUSION_PYTHON else [f"Python {python_version} (SandboxFusion: 3.10)"]
    for dist in runtime_imports("sandboxfusion"):
        if mine.get(dist) != reference[dist]:
            gaps.append(f"{dist} {mine.get(dist, 'absent')} (SandboxFusion: {reference[dist]})")
    return gaps


def _runtimes(name: str | None) -> list[str]:
    if name == "all":
        return list(RUNTIMES)
    if name is None:  # the config's default with its env override
        name = SandboxConfig().with_env_overrides().runtime
    return [check_runtime(name)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_sandbox.runtime_env", description=__doc__)
    parser.add_argument("action", choices=("build", "show"))
    parser.add_argument(
        "--runtime",
        default=None,
        help=f"{' | '.join(RUNTIMES)} | all (default: ${ENV_SANDBOX_RUNTIME}, else {DEFAULT_RUNTIME})",
    )
    parser.add_argument(
        "--root",
        type=Path,
        default=None,
        help=f"one runtime's folder (default: ${ENV_SANDBOX_RUNTIME_DIR} or <venv>/agentrl-sandbox, /<runtime>)",
    )
    args = parser.parse_args(argv)
    try:
        for runtime in _runtimes(args.runtime):
            if args.action == "build":
                env, built = build(runtime, args.root)
            else:
                env, built = load(runtime, args.root), False
            state = "built" if built else "up to date"
            packages = " ".join(f"{k}=={v}" for k, v in env.packages().items())
            print(f"sandbox runtime {runtime} {state}: {env.root} (Python {env.python_version}): {packages}")
    except (SandboxError, ValueError, subprocess.CalledProcessError) as exc:
        print(f"sandbox runtime: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
