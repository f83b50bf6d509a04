"""What the local pool's warm interpreters import, in four tiers, and which tier a run goes to.

Every package of the sandbox's runtime (:data:`runtime_env.IMPORTS`) is imported once at start-up, so a run's ``import
sympy`` is free and a package that does not import stops the start-up (fail closed) instead of failing every tool call.
Forking and exiting cost the kernel time per page-table entry and mapping of the forking interpreter, so the packages
live in a chain of zygotes, each holding the previous one's plus its own (:data:`TIER_PACKAGES`): ``bare`` (the standard
modules competitive-programming code imports), ``light`` (+ numpy, scipy's top level, gmpy2), ``math`` (+ sympy, mpmath,
networkx: twice light's resident memory) and ``heavy`` (+ pandas, scikit-learn and the scipy modules they pull in: three
times the mappings). Code that imports no runtime package (arithmetic, string work, ``print(1)``) forks the bare
interpreter: 15 MB resident and 80 mappings against light's 38 MB and 237, so its fork and exit cost the kernel that
much less (a trivial pool call: 5.8 -> 4.0 ms of CPU, docs/sandbox.md). A run forks from the smallest tier that holds
what its code imports. :class:`Router` decides by the code's import statements plus any mention of a tier's package name
(``__import__("pandas")``); a run it misroutes works the same, only slower (it imports what it needs itself).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentrl_sandbox import runtime_env

# What each tier adds to the one before it; the first tier holds every other runtime package and STDLIB.
TIER_PACKAGES: dict[str, tuple[str, ...]] = {
    "bare": (),
    "light": ("numpy", "scipy", "gmpy2"),
    "math": ("sympy", "mpmath", "networkx"),
    "heavy": ("pandas", "sklearn"),
}
TIER_NAMES = tuple(TIER_PACKAGES)
HEAVY_PACKAGES = TIER_PACKAGES["heavy"]
STDLIB = (
    # The standard modules competitive-programming code imports.
    "math cmath fractions decimal statistics itertools functools collections heapq bisect "
    "re string random typing json copy operator dataclasses array"
).split()
TIER_SUBMODULES = {"light": ("numpy.random",)}  # submodules a tier imports beyond its packages' top level
# The packages a run imports itself (runtime_env.EXTRA_IMPORTS, not preloaded) and the tier holding what they import:
# matplotlib on the bare interpreter would import numpy itself too, statsmodels pandas.
EXTRA_TIERS = {"matplotlib": "light", "cvxpy": "light", "numba": "light", "xgboost": "light", "statsmodels": "heavy"}
_STATEMENT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+([^\n;#]*)|import[ \t]+([^\n;#]*))", re.M)
_SPLIT = re.compile(r"[;\n]")


def tiers() -> list[list[str]]:
    """What each zygote of :data:`TIER_NAMES` imports on top of the one before it."""
    packages = list(runtime_env.IMPORTS.values())
    later = {p for extra in TIER_PACKAGES.values() for p in extra}
    first = [p for p in packages if p not in later] + STDLIB
    extra = [
        [p for p in packages if p in TIER_PACKAGES[name]] + list(TIER_SUBMODULES.get(name, ()))
        for name in TIER_NAMES[1:]
    ]
    return [first, *extra]


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
    """Picks the tier of a run from its code. ``tier_modules``: per tier after the first, what its zygote imported on
    top of the tier before it (as the zygotes report it).

    A tier is needed when one of its packages (or of the :data:`EXTRA_TIERS` sent to it) is named anywhere in the code,
    or the code imports a submodule of a runtime package that only it holds (``scipy.optimize``); the run goes to the
    last tier it needs. Standard modules a
    tier's packages happened to import (``csv``) are not counted: importing one in a run costs less than forking the
    larger interpreter.
    """

    def __init__(self, tier_modules: dict[str, Iterable[str]]) -> None:
        runtime = set(runtime_env.IMPORTS.values())
        self._tiers: list[tuple[str, frozenset[str], re.Pattern[str] | None]] = []
        for name in reversed(TIER_NAMES[1:]):
            modules = frozenset(m for m in tier_modules.get(name, ()) if m.split(".")[0] in runtime)
            packages = sorted({m.split(".")[0] for m in modules} & set(TIER_PACKAGES[name]))
            packages += sorted(extra for extra, tier in EXTRA_TIERS.items() if tier == name)
            mention = re.compile(r"\b(?:" + "|".join(packages) + r")\b") if packages else None
            self._tiers.append((name, modules, mention))

    def tier(self, code: str) -> str:
        names: set[str] | None = None
        for name, modules, mention in self._tiers:
            if mention is not None and mention.search(code):
                return name
            if names is None:
                names = imported_modules(code)
            for imported in names:
                parts = imported.split(".")
                if any(".".join(parts[:i]) in modules for i in range(1, len(parts) + 1)):
                    return name
        return TIER_NAMES[0]
