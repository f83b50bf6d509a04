"""Import-only stand-ins for packages a bare GPU machine lacks and that are too big to bring along.

verl 0.9.1 imports Ray at module level all along the actor's path (``verl/protocol.py:29``,
``single_controller/base/worker.py:23``, ``utils/distributed.py:22``) and ``datasets``/``pandas``/``PIL`` through
``verl/utils/dataset/__init__.py`` (``workers/utils/losses.py:21`` imports ``dataset_utils`` from it); the actor update
itself calls none of them: it runs in one process without a Ray runtime, as verl's own SFT trainer runs
``TrainingWorker``. Ray's wheel alone is over the 64 MiB the machine gets, pyarrow (which ``datasets`` needs) about 40.

:func:`install` puts a finder first on ``sys.meta_path`` that serves each named package and every submodule of it as a
placeholder module: its names may be imported, subclassed, used in annotations or as a bare decorator (``@ray.remote``
returns the class unchanged); calling anything raises :class:`StubUsed`, so a path that does use one fails loudly. Every
name touched is recorded in :data:`TOUCHED` and goes into the report. The stubs carry no distribution metadata, so
``importlib.metadata``-based availability checks (transformers') see the packages as absent.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Iterable, Sequence
from typing import Any

STUBBED = ("ray", "datasets", "pandas", "PIL")
# Optional for verl (imported under try/except ImportError) and absent on a bare machine; hidden in every mode so the
# dry run takes the path the GPU run takes.
ABSENT = ("transfer_queue",)
TOUCHED: set[str] = set()


class StubUsed(RuntimeError):
    """Code on the checked path called a stubbed package: the check's claim that it runs without it is false."""


class _Placeholder:
    def __init__(self, name: str) -> None:
        self._name = name
        TOUCHED.add(name)

    def __getattr__(self, attr: str) -> _Placeholder:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self._name}.{attr}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and isinstance(args[0], type | types.FunctionType):
            return args[0]  # a bare decorator at import time (`@ray.remote class X`)
        raise StubUsed(f"{self._name}() was called, but it is an import-only stub in gpu-check")

    def __getitem__(self, item: Any) -> _Placeholder:
        return self  # `ray.ObjectRef[...]` in an annotation

    def __or__(self, other: Any) -> Any:
        return Any  # `ray.ObjectRef | None` in an annotation

    __ror__ = __or__

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        return (object,)  # `class X(ray.SomeBase)`

    def __repr__(self) -> str:
        return f"<gpu-check stub {self._name}>"


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str) -> _Placeholder:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _Placeholder(f"{self.__name__}.{attr}")


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        TOUCHED.add(spec.name)
        return _StubModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__path__ = []  # a package: `import ray.util.placement_group` comes here again


class _StubFinder(importlib.abc.MetaPathFinder):
    def __init__(self, packages: Iterable[str], absent: Iterable[str]) -> None:
        self.packages = frozenset(packages)
        self.absent = frozenset(absent)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        top = fullname.partition(".")[0]
        if top in self.absent:
            raise ModuleNotFoundError(f"No module named {fullname!r} (hidden by gpu-check)", name=fullname)
        if top not in self.packages:
            return None
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)


def install(packages: Sequence[str] = STUBBED, absent: Sequence[str] = ABSENT) -> list[str]:
    """Stub ``packages`` and hide ``absent`` for the rest of this process (before anything imports them).

    Returns the stubbed packages, sorted."""
    already = sorted(p for p in (*packages, *absent) if p in sys.modules)
    if already:
        raise RuntimeError(f"cannot stub {already}: already imported in this process")
    sys.meta_path.insert(0, _StubFinder(packages, absent))
    return sorted(packages)
