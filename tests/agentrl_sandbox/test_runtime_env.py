"""The sandbox's own Python environments: pinned per runtime and interpreter, built for Debian's python3, checked, and
fail-closed when broken. The default runtime is SandboxFusion's (numpy 1.26.3): what the paper's model saw."""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from agentrl_sandbox import SandboxError, get_sandbox, health_check, runtime_env
from agentrl_sandbox.config import SandboxConfig
from agentrl_sandbox.local import LocalSandbox

FAKE_PIP = """
import json, os, sys
args = sys.argv[1:]
target = args[args.index("--target") + 1]
os.makedirs(os.path.join(target, "numpy"), exist_ok=True)
meta = os.environ.get("FAKE_PIP_METADATA")
if meta:
    os.makedirs(os.path.join(target, "numpy-1.0.dist-info"), exist_ok=True)
    with open(os.path.join(target, "numpy-1.0.dist-info", "METADATA"), "w") as f:
        f.write(meta)
with open(os.environ["FAKE_PIP_LOG"], "a") as log:
    log.write(json.dumps(args) + "\\n")
"""
# bytedance/SandboxFusion runtime/python/requirements.txt (sympy: what torch==2.1.2 resolved to before 2025-06-10)
SANDBOXFUSION = {
    "numpy": "1.26.3",
    "pandas": "2.2.0",
    "scipy": "1.11.4",
    "sympy": "1.14.0",
    "scikit-learn": "1.4.0",
    "gmpy2": "2.1.5",
    "matplotlib": "3.8.2",
    "statsmodels": "0.14.1",
    "cvxpy": "1.4.3",
    "pulp": "2.8.0",
    "numba": "0.58.1",
    "xgboost": "2.0.3",
}
PYTHONS = ("3.10", "3.11", "3.12", "3.13")  # Ubuntu 22.04, Debian 12, Ubuntu 24.04, Debian 13


def _fake_env(root: Path, python_version: str, pins: tuple[str, ...]) -> Path:
    (root / "site-packages").mkdir(parents=True)
    (root / runtime_env.MANIFEST).write_text(json.dumps({"python": python_version, "pins": list(pins)}))
    return root


def _versions(pins: tuple[str, ...]) -> dict[str, str]:
    return dict(pin.split("==", 1) for pin in pins)


@pytest.mark.parametrize("runtime", ["sandboxfusion", "modern"])
@pytest.mark.parametrize("python", PYTHONS)
def test_every_runtime_pins_each_package_once_for_every_supported_python(runtime: str, python: str) -> None:
    pins = runtime_env.pins_for(runtime, python)
    names = [pin.split("==")[0] for pin in pins]
    assert len(names) == len(set(names))
    assert set(runtime_env.runtime_imports(runtime)) <= set(names)


@pytest.mark.parametrize("python", ["3.10", "3.11"])
def test_the_default_runtime_is_sandboxfusions_own_versions(python: str) -> None:
    assert SandboxConfig().runtime == "sandboxfusion"
    versions = _versions(runtime_env.pins_for("sandboxfusion", python))
    assert {dist: versions[dist] for dist in SANDBOXFUSION} == SANDBOXFUSION
    assert runtime_env.sandboxfusion_gaps("sandboxfusion", python) == (
        [] if python == "3.10" else ["Python 3.11 (SandboxFusion: 3.10)"]
    )


def test_interpreters_without_sandboxfusion_wheels_fall_back_and_say_so() -> None:
    assert runtime_env.sandboxfusion_gaps("sandboxfusion", "3.12") == [
        "Python 3.12 (SandboxFusion: 3.10)",
        "gmpy2 2.2.0 (SandboxFusion: 2.1.5)",
        "numba 0.59.0 (SandboxFusion: 0.58.1)",
    ]
    gaps_313 = runtime_env.sandboxfusion_gaps("sandboxfusion", "3.13")
    assert "numpy 2.1.0 (SandboxFusion: 1.26.3)" in gaps_313 and "pulp" not in " ".join(gaps_313)
    modern = runtime_env.sandboxfusion_gaps("modern", "3.11")
    assert "numpy 2.3.5 (SandboxFusion: 1.26.3)" in modern and "xgboost absent (SandboxFusion: 2.0.3)" in modern
    with pytest.raises(SandboxError, match=r"sandboxfusion sandbox runtime has no pins of numpy.*Python 3.14"):
        runtime_env.pins_for("sandboxfusion", "3.14")


def test_markers_are_evaluated_for_the_sandbox_interpreter_and_unpinned_lines_refused(tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text(
        '# comment\nnumpy==1.26.3 ; python_version < "3.13"  # trailing\nnumpy==2.1.0 ; python_version >= "3.13"\n'
        "pulp==2.8.0\n"
    )
    assert runtime_env.read_pins(req, "3.11") == ("numpy==1.26.3", "pulp==2.8.0")
    assert runtime_env.read_pins(req, "3.13") == ("numpy==2.1.0", "pulp==2.8.0")
    req.write_text("numpy==2.3.5\nscipy  # no version\n")
    with pytest.raises(ValueError, match=r"req.txt:2: 'scipy' is not pinned"):
        runtime_env.read_pins(req, "3.11")


def test_the_runtime_key_is_checked_and_the_env_overrides_it(monkeypatch) -> None:
    with pytest.raises(ValueError, match=r"runtime must be one of \['sandboxfusion', 'modern'\], got 'numpy2'"):
        SandboxConfig(runtime="numpy2")
    monkeypatch.setenv("AGENTRL_SANDBOX_RUNTIME", "/opt/sandbox-runtime")  # what the variable used to hold
    with pytest.raises(ValueError, match=r"AGENTRL_SANDBOX_RUNTIME_DIR now holds the folder"):
        SandboxConfig.from_dict({})
    monkeypatch.setenv("AGENTRL_SANDBOX_RUNTIME", "modern")
    assert SandboxConfig.from_dict({"runtime": "sandboxfusion"}).runtime == "modern"


def test_load_names_the_build_when_missing_stale_or_for_another_python(tmp_path: Path) -> None:
    version = runtime_env.interpreter_version()
    pins = runtime_env.pins_for("sandboxfusion", version)
    with pytest.raises(SandboxError, match=r"sandboxfusion Python packages are not installed.*make install"):
        runtime_env.load("sandboxfusion", tmp_path / "absent")
    with pytest.raises(SandboxError, match=r"not installed.*AGENTRL_SANDBOX_RUNTIME=modern make sandbox-env"):
        runtime_env.load("modern", tmp_path / "absent")
    with pytest.raises(SandboxError, match=rf"built for Python 2.7 but .* is {version}.*make install"):
        runtime_env.load("sandboxfusion", _fake_env(tmp_path / "old", "2.7", pins))
    with pytest.raises(SandboxError, match=r"do not match runtime_requirements.txt.*make install"):
        runtime_env.load("sandboxfusion", _fake_env(tmp_path / "stale", version, ("numpy==1.0.0",)))
    with pytest.raises(SandboxError, match=r"do not match runtime_requirements_modern.txt"):
        runtime_env.load("modern", tmp_path / "stale")
    assert runtime_env.load("sandboxfusion", _fake_env(tmp_path / "good", version, pins)).python_version == version


def test_build_is_pinned_for_the_sandbox_python_and_idempotent(tmp_path: Path, monkeypatch) -> None:
    pip = tmp_path / "fake_pip.py"
    pip.write_text(FAKE_PIP)
    log = tmp_path / "pip.log"
    monkeypatch.setenv("FAKE_PIP_LOG", str(log))
    pins = ("numpy==2.3.5",)
    root = tmp_path / "env"
    env, built = runtime_env.build("modern", root, pins=pins, pip=[sys.executable, str(pip)])
    assert built and env.pins == pins and (root / "site-packages" / "numpy").is_dir()
    (args,) = [json.loads(line) for line in log.read_text().splitlines()]
    version = runtime_env.interpreter_version()
    assert args[args.index("--python-version") + 1] == version  # the sandbox's interpreter, not this venv's
    assert "--only-binary=:all:" in args and "--no-deps" in args and args[-1] == "numpy==2.3.5"
    assert runtime_env.build("modern", root, pins=pins, pip=[sys.executable, str(pip)]) == (env, False)
    assert len(log.read_text().splitlines()) == 1  # nothing reinstalled
    assert not root.with_name("env.building").exists()
    assert json.loads((root / runtime_env.MANIFEST).read_text())["runtime"] == "modern"


def test_a_pin_list_missing_a_requirement_is_refused_before_anything_is_used(tmp_path: Path, monkeypatch) -> None:
    pip = tmp_path / "fake_pip.py"
    pip.write_text(FAKE_PIP)
    monkeypatch.setenv("FAKE_PIP_LOG", str(tmp_path / "pip.log"))
    metadata = "Metadata-Version: 2.1\nName: numpy\nVersion: 1.0\nRequires-Dist: six>=1.5\n"
    monkeypatch.setenv("FAKE_PIP_METADATA", metadata)
    root = tmp_path / "env"
    with pytest.raises(SandboxError, match=r"misses requirements of its own pins: numpy 1.0 needs six>=1.5"):
        runtime_env.build("modern", root, pins=("numpy==1.0",), pip=[sys.executable, str(pip)])
    assert not root.exists() and not root.with_name("env.building").exists()


def test_requirements_are_judged_for_the_sandbox_python_not_this_one(tmp_path: Path) -> None:
    info = tmp_path / "pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\nRequires-Dist: tomli; python_version < '3.11'\n"
        "Requires-Dist: pytest; extra == 'test'\n"
    )
    assert runtime_env.unmet_requirements(tmp_path, "3.10") == [
        'pkg 1.0 needs tomli; python_version < "3.11" (pinned: None)'
    ]
    assert runtime_env.unmet_requirements(tmp_path, "3.11") == []


def test_a_default_build_clears_the_one_runtime_layout(tmp_path: Path, monkeypatch) -> None:
    _fake_env(tmp_path, "3.11", ("numpy==2.3.5",))
    (tmp_path / "sandboxfusion").mkdir()
    runtime_env.remove_legacy(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sandboxfusion"]
    monkeypatch.setenv("AGENTRL_SANDBOX_RUNTIME_DIR", str(tmp_path))
    assert runtime_env.default_root("modern") == tmp_path / "modern"


@pytest.fixture
def shared_tmp():
    """A directory the sandbox uid (nobody) can traverse; pytest's tmp_path is 0700."""
    path = Path(tempfile.mkdtemp(prefix="agentrl-runtime-test-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_the_sandbox_refuses_to_start_when_numpy_does_not_import(shared_tmp: Path, monkeypatch) -> None:
    """A valid manifest over an empty site-packages: the interpreter cannot import numpy, so no pool starts."""
    version = runtime_env.interpreter_version()
    _fake_env(shared_tmp / "sandboxfusion", version, runtime_env.pins_for("sandboxfusion", version))
    monkeypatch.setenv("AGENTRL_SANDBOX_RUNTIME_DIR", str(shared_tmp))
    with pytest.raises(SandboxError, match=r"cannot import numpy: ModuleNotFoundError.*make install"):
        LocalSandbox(SandboxConfig(pool_size=1))
    report = health_check(SandboxConfig(pool_size=1, memory_mb=1000))  # a config no other test caches a pool for
    assert not report["ok"] and "cannot import numpy" in report["error"] and "make install" in report["error"]
    # agentrl.sandbox.runtime picks the folder the pool binds: modern's is not there, and its build is named.
    with pytest.raises(SandboxError, match=r"modern Python packages are not installed.*RUNTIME=modern make sandbox"):
        LocalSandbox(SandboxConfig(pool_size=1, runtime="modern"))


def test_numpy_prints_as_in_sandboxfusion_in_the_default_sandbox(pool: LocalSandbox) -> None:
    """The issue's check: numpy 1.26 scalars print as 3 and 1.4142135623730951 (numpy 2: np.int64(3), ...)."""
    versions = _versions(runtime_env.pins_for("sandboxfusion", runtime_env.interpreter_version()))
    res = pool.run(
        "import numpy as np, pandas, scipy\nprint([np.int64(3), np.sqrt(2.0)])\n"
        "print(np.__version__, pandas.__version__, scipy.__version__)",
        timeout_s=10,
    )
    assert res.status == "ok", res.stderr
    assert res.stdout.split("\n")[1] == f"{versions['numpy']} {versions['pandas']} {versions['scipy']}"
    if versions["numpy"] == "1.26.3":  # every interpreter but 3.13, whose fallback is numpy 2.1
        assert res.stdout.split("\n")[0] == "[3, 1.4142135623730951]"


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


HEALTH_CONFIG = SandboxConfig(pool_size=1, memory_mb=1024)  # one pool for the two tests below (get_sandbox shares it)


def test_health_check_imports_the_runtime_packages_not_print() -> None:
    report = health_check(HEALTH_CONFIG)
    assert report["ok"], report["error"]
    assert report["imports"] == list(runtime_env.runtime_imports("sandboxfusion").values())
    assert report["runtime"] == "sandboxfusion"


def test_sandboxfusions_extra_packages_work_inside_the_sandbox() -> None:
    """matplotlib, statsmodels, cvxpy, pulp (its CBC binary), numba (its JIT) and xgboost under 1 GB."""
    code = """
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
plt.plot([1, 2, 3]); plt.savefig("/tmp/p.png")
import numpy as np, statsmodels.api as sm
print(round(float(sm.OLS([1.0, 3.0, 5.0], sm.add_constant([0.0, 1.0, 2.0])).fit().params[1]), 6))
import cvxpy as cp
x = cp.Variable()
cp.Problem(cp.Minimize((x - 2) ** 2)).solve()
print(round(float(x.value), 4))
import pulp
p = pulp.LpProblem("p", pulp.LpMaximize); y = pulp.LpVariable("y", 0, 3); p += y; p.solve(pulp.PULP_CBC_CMD(msg=0))
print(pulp.value(y))
import numba
@numba.njit
def total(n):
    s = 0
    for i in range(n):
        s += i
    return s
print(total(10))
import xgboost
model = xgboost.XGBRegressor(n_estimators=2, max_depth=1).fit(np.array([[0.0], [1.0]]), np.array([0.0, 1.0]))
print(model.predict(np.array([[0.5]])).shape)
"""
    res = get_sandbox(HEALTH_CONFIG).run(code, timeout_s=60)
    assert res.status == "ok", res.stderr
    assert res.stdout.split("\n")[:5] == ["2.0", "2.0", "3.0", "45", "(1,)"]
