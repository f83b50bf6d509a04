"""The sandbox's own Python environment: pinned, built for Debian's python3, checked, and fail-closed when broken."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from agentrl_sandbox import SandboxError, health_check, runtime_env
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox

FAKE_PIP = """
import json, os, sys
args = sys.argv[1:]
target = args[args.index("--target") + 1]
os.makedirs(os.path.join(target, "numpy"), exist_ok=True)
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
"""


def _fake_env(root: Path, python_version: str, pins: tuple[str, ...]) -> Path:
    (root / "site-packages").mkdir(parents=True)
    (root / runtime_env.MANIFEST).write_text(json.dumps({"python": python_version, "pins": list(pins)}))
    return root


def test_every_listed_package_is_pinned_in_the_shipped_requirements() -> None:
    pins = dict(pin.split("==") for pin in runtime_env.read_pins())
    assert set(runtime_env.IMPORTS) <= set(pins)
    assert {"numpy", "scipy", "sympy", "pandas", "networkx", "sklearn"} <= set(runtime_env.IMPORTS.values())


def test_an_unpinned_line_is_refused(tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text("numpy==2.3.5\nscipy  # no version\n")
    with pytest.raises(ValueError, match=r"req.txt:2: 'scipy' is not pinned"):
        runtime_env.read_pins(req)


def test_load_names_make_install_when_missing_stale_or_for_another_python(tmp_path: Path) -> None:
    version = runtime_env.interpreter_version()
    pins = runtime_env.read_pins()
    with pytest.raises(SandboxError, match=r"not installed.*make install"):
        runtime_env.load(tmp_path / "absent")
    with pytest.raises(SandboxError, match=rf"built for Python 2.7 but .* is {version}.*make install"):
        runtime_env.load(_fake_env(tmp_path / "old", "2.7", pins))
    with pytest.raises(SandboxError, match=r"do not match runtime_requirements.txt.*make install"):
        runtime_env.load(_fake_env(tmp_path / "stale", version, ("numpy==1.0.0",)))
    assert runtime_env.load(_fake_env(tmp_path / "good", version, pins)).python_version == version


def test_build_is_pinned_for_the_sandbox_python_and_idempotent(tmp_path: Path, monkeypatch) -> None:
    pip = tmp_path / "fake_pip.py"
    pip.write_text(FAKE_PIP)
    log = tmp_path / "pip.log"
    monkeypatch.setenv("FAKE_PIP_LOG", str(log))
    pins = ("numpy==2.3.5",)
    root = tmp_path / "env"
    env, built = runtime_env.build(root, pins=pins, pip=[sys.executable, str(pip)])
    assert built and env.pins == pins and (root / "site-packages" / "numpy").is_dir()
    (args,) = [json.loads(line) for line in log.read_text().splitlines()]
    version = runtime_env.interpreter_version()
    assert args[args.index("--python-version") + 1] == version  # the sandbox's interpreter, not this venv's
    assert "--only-binary=:all:" in args and args[-1] == "numpy==2.3.5"
    assert runtime_env.build(root, pins=pins, pip=[sys.executable, str(pip)]) == (env, False)  # nothing reinstalled
    assert len(log.read_text().splitlines()) == 1
    assert not root.with_name("env.building").exists()


@pytest.fixture
def shared_tmp():
    """A directory the sandbox uid (nobody) can traverse; pytest's tmp_path is 0700."""
    path = Path(tempfile.mkdtemp(prefix="agentrl-runtime-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_sandbox_refuses_to_start_when_numpy_does_not_import(shared_tmp: Path, monkeypatch) -> None:
    """A valid manifest over an empty site-packages: the interpreter cannot import numpy, so no pool starts."""
    root = _fake_env(shared_tmp / "empty", runtime_env.interpreter_version(), runtime_env.read_pins())
    monkeypatch.setenv("AGENTRL_SANDBOX_RUNTIME", str(root))
    with pytest.raises(SandboxError, match=r"cannot import numpy: ModuleNotFoundError.*make install"):
        LocalSandbox(SandboxConfig(pool_size=1))
    report = health_check(SandboxConfig(pool_size=1, memory_mb=1000))  # a config no other test caches a pool for
    assert not report["ok"] and "cannot import numpy" in report["error"] and "make install" in report["error"]


def test_each_parity_package_imports_and_works_inside_the_sandbox(pool: LocalSandbox) -> None:
    code = """
import gmpy2, mpmath, networkx as nx, numpy as np, pandas as pd, scipy.optimize, sklearn.linear_model, sympy
x = sympy.symbols("x")
print(sympy.solve(x**2 - 4, x))
print(round(float(scipy.optimize.brentq(lambda t: t**3 - 2, 0, 2)), 6))
print(int(pd.DataFrame({"a": [1, 2, 3]}).a.sum()), int(np.arange(5).sum()))
print(nx.shortest_path_length(nx.path_graph(5), 0, 4))
print(round(float(sklearn.linear_model.LinearRegression().fit([[0], [1], [2]], [1, 3, 5]).coef_[0]), 6))
print(gmpy2.is_prime(2**61 - 1), mpmath.mpf(2) ** 10)
"""
    res = pool.run(code, timeout_s=10)
    assert res.status == "ok", res.stderr
    assert res.stdout.split("\n")[:6] == ["[-2, 2]", "1.259921", "6 10", "4", "2.0", "True 1024.0"]


def test_health_check_imports_the_runtime_packages_not_print() -> None:
    report = health_check(SandboxConfig(pool_size=1, memory_mb=1024))
    assert report["ok"], report["error"]
    assert report["imports"] == list(runtime_env.IMPORTS.values())
