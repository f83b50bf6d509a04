"""The sandbox's own Python environment: what model-written code may import, independent of the training venv.

The local backend runs Debian's ``/usr/bin/python3`` (under ``/usr``, so the sandbox uid can read it; a pyenv/conda
interpreter under a 0700 home cannot be bound). Its packages must be built for *that* interpreter's version, not the
venv's: a 3.12 venv's numpy does not import in a 3.11 interpreter. So ``make install`` runs
``python -m agentrl_sandbox.runtime_env build``, which pip-installs the pinned wheels of
``runtime_requirements.txt`` for the interpreter's version into ``<venv>/agentrl-sandbox/site-packages``
(``AGENTRL_SANDBOX_RUNTIME`` moves it), byte-compiles them with that interpreter and writes ``manifest.json`` last.
The build is idempotent (instant when the manifest matches) and atomic (a half-built tree is never used).

:func:`load` is what the backend calls: it refuses, naming ``make install``, when the environment is missing, was
built for another Python version, or from other pins.

Package choice (SandboxFusion's Python runtime, which the paper's model was trained against): numpy, scipy, sympy,
pandas, networkx, scikit-learn, gmpy2 (+ mpmath). SandboxFusion gets sympy and networkx through torch. Left out:
torch/tensorflow/xgboost/lightgbm/catboost (GBs, GPU-oriented, not math/code-contest material), matplotlib/seaborn/
plotly (plots have nowhere to go; ~60 MB with pillow/fonttools), web/database/GUI/cloud clients (Flask, Django, redis,
PyQt5, docker: no network in the sandbox), rdkit/pyscf/opencv/statsmodels/cvxpy and other domain libraries (large,
rare in math/code problems). The installed tree is ~470 MB.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from agentrl_sandbox.config import ENV_SANDBOX_RUNTIME
from agentrl_sandbox.types import SandboxError

INTERPRETER = "/usr/bin/python3"  # Debian's interpreter: under /usr, readable by the sandbox uid
REQUIREMENTS = Path(__file__).with_name("runtime_requirements.txt")
MANIFEST = "manifest.json"
# distribution -> import name, for the packages model code imports directly (doctor lists them, preflight and the
# backend's start-up import every one of them inside the sandbox).
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
FIX = "run `make install` (it builds the sandbox's Python packages)"


@dataclasses.dataclass(frozen=True)
class RuntimeEnv:
    """A built environment: where it is and what it holds."""

    root: Path
    python_version: str  # "3.11": the interpreter minor version it was built for
    pins: tuple[str, ...]

    @property
    def site_dir(self) -> Path:
        return self.root / "site-packages"

    @property
    def imports(self) -> list[str]:
        return list(IMPORTS.values())

    def packages(self) -> dict[str, str]:
        """distribution -> pinned version, for the packages in :data:`IMPORTS`."""
        versions = dict(pin.split("==", 1) for pin in self.pins)
        return {dist: versions[dist] for dist in IMPORTS if dist in versions}


def default_root() -> Path:
    """``$AGENTRL_SANDBOX_RUNTIME`` or ``<sys.prefix>/agentrl-sandbox`` (inside the venv)."""
    return Path(os.environ.get(ENV_SANDBOX_RUNTIME) or Path(sys.prefix) / "agentrl-sandbox")


def read_pins(path: Path = REQUIREMENTS) -> tuple[str, ...]:
    """The ``name==version`` lines of the requirements file (comments and blanks skipped); unpinned lines raise."""
    pins = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "==" not in line:
            raise ValueError(f"{path}:{number}: {line!r} is not pinned (name==version)")
        pins.append(line)
    return tuple(pins)


def interpreter_version(python: str = INTERPRETER) -> str:
    """``X.Y`` of ``python``; SandboxError when it cannot run."""
    try:
        out = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SandboxError(f"the sandbox interpreter {python} does not run ({exc}); apt-get install python3") from exc
    return out.stdout.strip()


def load(root: Path | None = None, python: str = INTERPRETER, pins: Sequence[str] | None = None) -> RuntimeEnv:
    """The environment at ``root``, checked against ``python``'s version and the pins; SandboxError if unusable."""
    root = default_root() if root is None else Path(root)
    wanted = tuple(read_pins() if pins is None else pins)
    path = root / MANIFEST
    if not path.is_file():
        raise SandboxError(f"the sandbox's Python packages are not installed (no {path}): {FIX}")
    manifest = json.loads(path.read_text())
    env = RuntimeEnv(root=root, python_version=str(manifest.get("python")), pins=tuple(manifest.get("pins", ())))
    version = interpreter_version(python)
    if env.python_version != version:
        raise SandboxError(
            f"the sandbox's packages at {root} were built for Python {env.python_version} but {python} is {version}: "
            f"{FIX}"
        )
    if env.pins != wanted:
        raise SandboxError(f"the sandbox's packages at {root} do not match runtime_requirements.txt: {FIX}")
    return env


def pip_command(target: Path, version: str, pins: Sequence[str], pip: Sequence[str]) -> list[str]:
    """pip install of binary wheels for CPython ``version`` into ``target`` (no compile: the interpreter does it)."""
    tag = version.replace(".", "")
    return [
        *pip,
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-compile",
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


def build(
    root: Path | None = None,
    python: str = INTERPRETER,
    pins: Sequence[str] | None = None,
    pip: Sequence[str] = (sys.executable, "-m", "pip"),
) -> tuple[RuntimeEnv, bool]:
    """Build (or keep) the environment; returns it and whether anything was installed."""
    root = default_root() if root is None else Path(root)
    wanted = tuple(read_pins() if pins is None else pins)
    try:
        return load(root, python, wanted), False
    except SandboxError:
        pass
    version = interpreter_version(python)
    staging = root.with_name(root.name + ".building")
    shutil.rmtree(staging, ignore_errors=True)
    site = staging / "site-packages"
    old_umask = os.umask(0o022)  # the sandbox uid (nobody) must read every file
    try:
        subprocess.run(pip_command(site, version, wanted, pip), check=True)
        # .pyc for the sandbox's own interpreter: the sandbox is read-only, so it could never write them itself.
        subprocess.run([python, "-I", "-m", "compileall", "-q", "-j", "0", str(site)], check=False)
        manifest = {"python": version, "pins": list(wanted), "interpreter": python}
        (staging / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    finally:
        os.umask(old_umask)
    shutil.rmtree(root, ignore_errors=True)
    os.rename(staging, root)
    return load(root, python, wanted), True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentrl_sandbox.runtime_env", description=__doc__)
    parser.add_argument("action", choices=("build", "show"))
    parser.add_argument(
        "--root", type=Path, default=None, help="default: $AGENTRL_SANDBOX_RUNTIME or <venv>/agentrl-sandbox"
    )
    args = parser.parse_args(argv)
    try:
        env, built = build(args.root) if args.action == "build" else (load(args.root), False)
    except (SandboxError, subprocess.CalledProcessError) as exc:
        print(f"sandbox runtime: {exc}", file=sys.stderr)
        return 1
    state = "built" if built else "up to date"
    packages = " ".join(f"{k}=={v}" for k, v in env.packages().items())
    print(f"sandbox runtime {state}: {env.root} (Python {env.python_version}): {packages}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
