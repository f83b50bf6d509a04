"""Deprecated import paths of the modules that moved into ``core/``, ``harness/`` and ``cli/``.

:func:`install` (called by ``agentrl_recipe/__init__.py``) puts one finder first on :data:`sys.meta_path`: importing
an old name (or anything below it, ``agentrl_recipe.tools.code_interpreter``) warns with a ``DeprecationWarning``
naming the new path and returns the module at that path, the SAME object, so class identity and verl's registries
hold for configs that still name the old class paths (``agentrl_recipe.tools.code_interpreter.CodeInterpreterTool``,
``pkg://agentrl_recipe.algos.sampler``). The longest old prefix wins. The top-level ``data_prep`` package and the
demo modules (now ``demo/`` at the repository root, not installed) have no alias.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import CodeType, ModuleType

_CORE = (
    "agent_loop", "agent_loop_config", "algos", "compat", "config", "cpu", "generation", "log_filters", "names",
    "plugin", "render_cache", "rewards", "templates", "tools", "trace", "training_metrics", "verl_adapters",
)  # fmt: skip
_HARNESS = ("cpu_inputs", "demo_task", "eval", "fidelity", "rollout", "tiny_model")
_CLI = ("async_checks", "configs", "doctor", "launch", "preflight", "preflight_facts")

MOVED: dict[str, str] = {
    **{f"agentrl_recipe.{m}": f"agentrl_recipe.core.{m}" for m in _CORE},
    **{f"agentrl_recipe.{m}": f"agentrl_recipe.harness.{m}" for m in _HARNESS},
    **{f"agentrl_recipe.{m}": f"agentrl_recipe.cli.{m}" for m in _CLI},
    "agentrl_recipe.generation.openai_client": "agentrl_recipe.harness.openai_client",
    "agentrl_recipe.tools.cli": "agentrl_recipe.cli.tools",
    "agentrl_recipe.eval.cli": "agentrl_recipe.cli.eval",
}


def new_name(fullname: str) -> str | None:
    """Where ``fullname`` lives now, or None when it did not move."""
    old = max((o for o in MOVED if fullname == o or fullname.startswith(o + ".")), key=len, default=None)
    return None if old is None else MOVED[old] + fullname[len(old) :]


class _Alias(importlib.abc.Loader):
    """Loads an old name as the module already imported under its new one."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module
        self.spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system set the alias's spec on it: give the module its own back

    def get_code(self, fullname: str) -> CodeType | None:
        """``python -m <old name>`` (runpy) runs the module's code, as ``python -m <new name>`` does."""
        return self.spec.loader.get_code(self.spec.name)


class MovedFinder(importlib.abc.MetaPathFinder):
    """First on sys.meta_path, so that no path finder loads a second copy of a moved module under its old name."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        new = new_name(fullname)
        if new is None:
            return None
        warnings.warn(f"{fullname} is deprecated: import {new}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        return importlib.machinery.ModuleSpec(fullname, _Alias(module), is_package=hasattr(module, "__path__"))


def install() -> None:
    """Put the finder first on sys.meta_path (once)."""
    if not any(isinstance(f, MovedFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, MovedFinder())
