"""What the local pool's warm interpreters import, in two tiers, and which tier a run goes to.

Every package of the sandbox's runtime (:data:`runtime_env.IMPORTS`) is imported once at start-up, so a run's
``import sympy`` is free and a package that does not import stops the start-up (fail closed) instead of failing every
tool call. pandas and scikit-learn (with the scipy modules they pull in) triple the mappings of the interpreter, and
forking and exiting cost the kernel time per mapping: they live in a second, *heavy* zygote, and only runs that import
them (or a module only that zygote holds, e.g. ``scipy.optimize``) fork from it. :class:`Router` decides by the
code's import statements plus any mention of a heavy package's name (``__import__("pandas")``); a run it misroutes
works the same, only slower (it imports what it needs itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentrl_sandbox import runtime_env

HEAVY_PACKAGES = ("pandas", "sklearn")
STDLIB = (
    # The standard modules competitive-programming code imports.
    "math numpy.random cmath fractions decimal statistics itertools functools collections heapq bisect "
    "re string random typing json copy operator dataclasses array"
).split()
_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([^\n;#]*)|import[ \t]+([^\n;#]*))", re.M)
_SPLIT = re.compile(r"[;\n]")


def tiers() -> tuple[list[str], list[str]]:
    """(light, heavy): what the zygote imports, and what the heavy zygote adds on top."""
    packages = list(runtime_env.IMPORTS.values())
    light = [p for p in packages if p not in HEAVY_PACKAGES] + STDLIB
    return light, [p for p in packages if p in HEAVY_PACKAGES]


def imported_modules(code: str) -> set[str]:
    """Dotted names the code's import statements name (``from a import b`` gives ``a`` and ``a.b``)."""
    names: set[str] = set()
    for statement in _SPLIT.split(code):
        for match in _STATEMENT.finditer(statement.strip()):
            base, members, modules = match.groups()
            if base is not None:
                names.add(base)
                names.update(f"{base}.{m}" for m in re.findall(r"\w+", members.split(" as ")[0]))
            else:
                names.update(part.split()[0] for part in modules.split(",") if part.split())
    return names


class Router:
    """Picks the tier of a run from its code. ``heavy_modules``: what only the heavy zygote has imported.

    Heavy: a heavy package named anywhere, or an imported submodule of a runtime package that only the heavy zygote
    holds (``scipy.optimize``). Standard modules the heavy packages happened to import (``csv``) stay light: importing
    one in a run costs less than forking the heavy interpreter.
    """

    def __init__(self, heavy_modules: Iterable[str]) -> None:
        runtime = set(runtime_env.IMPORTS.values())
        self.heavy_modules = frozenset(m for m in heavy_modules if m.split(".")[0] in runtime)
        packages = sorted({m.split(".")[0] for m in self.heavy_modules} & set(HEAVY_PACKAGES))
        self._mention = re.compile(r"\b(?:" + "|".join(packages) + r")\b") if packages else None

    def heavy(self, code: str) -> bool:
        if self._mention is None:
            return False
        if self._mention.search(code):
            return True
        for name in imported_modules(code):
            parts = name.split(".")
            if any(".".join(parts[:i]) in self.heavy_modules for i in range(1, len(parts) + 1)):
                return True
        return False
