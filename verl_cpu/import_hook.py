"""Run a fix on a module once it is imported, without importing it first (vLLM costs seconds and memory per process).

:func:`when_imported` calls ``fix(module)`` at once when the module is already in ``sys.modules``, else right after
the module's own code has run on its first import, before any caller can take names from it. The runtime fixes of
verl_cpu use it for modules that only some processes import (vLLM's layers in its worker, verl's weight sender in the
rollout adapter).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable, Sequence
from types import ModuleType

Fix = Callable[[ModuleType], None]


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the real loader of each awaited module so its fixes run after it executes."""

    def __init__(self) -> None:
        self.pending: dict[str, list[Fix]] = {}

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        fixes = self.pending.pop(fullname, None)
        if fixes is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            self.pending[fullname] = fixes  # not importable from here: keep waiting
            return spec
        exec_module = spec.loader.exec_module

        def exec_and_fix(module: ModuleType) -> None:
            exec_module(module)
            for fix in fixes:
                fix(module)

        spec.loader.exec_module = exec_and_fix  # type: ignore[method-assign]
        return spec


_FINDER = _AfterImport()


def when_imported(module_name: str, fix: Fix) -> None:
    """Apply ``fix`` to ``module_name`` now if it is imported, else right after its first import."""
    module = sys.modules.get(module_name)
    if module is not None:
        fix(module)
        return
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)
    fixes = _FINDER.pending.setdefault(module_name, [])
    if fix not in fixes:
        fixes.append(fix)
