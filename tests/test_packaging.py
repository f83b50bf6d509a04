"""The two distributions of this repository agree: agentrl_sandbox's own pyproject.toml pins what the recipe pins, and
the recipe depends on the sandbox's exact version (a sandbox node and a trainer node run the same server code)."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from agentrl_recipe.gpu_check import bundle

REPO = Path(__file__).resolve().parents[1]


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]


def _normal(name: str) -> str:
    return name.lower().replace("_", "-")


def _pins(requirements: list[str]) -> dict[str, str]:
    return {_normal(Requirement(r).name): str(Requirement(r).specifier) for r in requirements}


def test_the_recipe_depends_on_the_sandbox_of_this_checkout() -> None:
    recipe, sandbox = _project(REPO / "pyproject.toml"), _project(REPO / "agentrl_sandbox" / "pyproject.toml")
    assert _pins(recipe["dependencies"])[sandbox["name"]] == f"=={sandbox['version']}"
    assert recipe["requires-python"] == sandbox["requires-python"]


def test_a_package_both_pin_has_one_version() -> None:
    recipe, sandbox = _project(REPO / "pyproject.toml"), _project(REPO / "agentrl_sandbox" / "pyproject.toml")
    ours = _pins(recipe["dependencies"] + recipe["optional-dependencies"]["test"])
    theirs = _pins(sandbox["dependencies"] + sandbox["optional-dependencies"]["test"])
    differ = {name: (ours[name], pin) for name, pin in theirs.items() if name in ours and ours[name] != pin}
    assert not differ, differ
    assert set(theirs) - set(ours) <= {"packaging", "prometheus-client"}  # the recipe gets these through its pins' deps


def test_no_file_a_test_reads_is_left_out_of_git() -> None:
    """A fixture .gitignore matches (runs/ once did) passes here and is missing from CI's clean clone."""
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--directory", "tests", "agentrl_recipe",
         "agentrl_sandbox", "verl_cpu", "data_prep", "verl_configs", "demo", "benchmarks", "upstream"],
        cwd=REPO, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    generated = ("__pycache__/", ".egg-info/")
    assert [p for p in listed if not p.endswith(generated)] == []


def _lock() -> dict[str, str]:
    """constraints-cpu.txt: {normalised name: version}."""
    lines = (REPO / "constraints-cpu.txt").read_text(encoding="utf-8").splitlines()
    pins = dict(line.split("==", 1) for line in lines if line and not line.startswith("#"))
    return {_normal(name): version for name, version in pins.items()}


def test_the_cpu_lock_holds_every_pin_of_the_cpu_install() -> None:
    """`make install` installs with -c constraints-cpu.txt: each pin of both pyprojects (the cpu and test extras too)
    is the lock's version, or pip would refuse the install."""
    recipe, sandbox = _project(REPO / "pyproject.toml"), _project(REPO / "agentrl_sandbox" / "pyproject.toml")
    extras = recipe["optional-dependencies"]
    requirements = [*recipe["dependencies"], *extras["test"], *extras["cpu"], *sandbox["dependencies"]]
    pins, lock = _pins(requirements), _lock()
    del pins[sandbox["name"]]  # this checkout's own, installed editable
    wrong = {
        name: (pin, lock.get(name))
        for name, pin in pins.items()
        if name not in lock or not SpecifierSet(pin).contains(lock[name])
    }
    assert not wrong, wrong


def test_the_cpu_lock_holds_the_gpu_check_bundle() -> None:
    """`make gpu-check` carries these exact wheels and its test compares them with the venv: unlocked, a fresh clone
    took peft 0.22.0 from PyPI against the bundle's 0.21.2."""
    lock = _lock()
    assert {name: lock.get(name) for name in bundle.pins()} == bundle.pins()
