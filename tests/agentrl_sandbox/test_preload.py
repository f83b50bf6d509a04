"""Which zygote a run forks from: the smallest tier holding what the code imports (light, math, heavy)."""

from __future__ import annotations

import pytest

from agentrl_sandbox import runtime_env
from agentrl_sandbox.preload import TIER_NAMES, TIER_PACKAGES, Router, imported_modules, tiers

# What each zygote reports on top of the one before it: its packages, scipy modules they pull in, stdlib modules.
MATH_ONLY = ["sympy", "sympy.core", "mpmath", "networkx", "networkx.algorithms", "scipy.sparse", "fractions2"]
HEAVY_ONLY = ["pandas", "pandas.core.frame", "sklearn", "sklearn.linear_model", "scipy.optimize", "csv", "uuid"]
ROUTER = Router({"math": MATH_ONLY, "heavy": HEAVY_ONLY})


@pytest.mark.parametrize(
    "code",
    [
        "import pandas as pd\nprint(pd.Series([1]).sum())",
        "from sklearn.linear_model import LinearRegression",
        "import numpy as np, pandas",
        "x = 1; import scipy.optimize",
        "def f():\n    from scipy.optimize import minimize\n    return minimize",
        "import scipy.optimize as opt",
        "from scipy import optimize",
        "pd = __import__('pandas')",
        "import sympy\nimport pandas",  # both: the heavy tier holds the math tier's packages too
    ],
)
def test_heavy_imports_go_to_the_heavy_zygote(code):
    assert ROUTER.tier(code) == "heavy"


@pytest.mark.parametrize(
    "code",
    [
        "import numpy as np\nimport sympy\nprint(np.eye(2), sympy.factorint(12))",
        "from sympy import symbols, solve",
        "import networkx as nx",
        "from mpmath import mp",
        "from scipy import sparse",  # a scipy module only the math zygote holds
        "s = __import__('sympy')",
    ],
)
def test_math_imports_go_to_the_math_zygote(code):
    assert ROUTER.tier(code) == "math"


@pytest.mark.parametrize(
    "code",
    [
        "print(1)",
        "import numpy as np\nprint(np.eye(2))",
        "import csv, uuid  # standard modules: cheaper to import in the run than to fork the heavy interpreter",
        "from scipy import special",
        "pandasql = 3\nsympyx = 4\nprint(pandasql, sympyx)",
        "import fractions2",  # not a runtime package: never counted, whatever a zygote reported
    ],
)
def test_everything_else_stays_light(code):
    assert ROUTER.tier(code) == "light"


def test_import_statements_are_read_in_every_form():
    code = "import os.path as p, sys\nfrom a.b import (c,\n  d)\nx = 1; from e import f as g  # import h\n"
    assert imported_modules(code) >= {"os.path", "sys", "a.b", "a.b.c", "e", "e.f"}
    assert "h" not in imported_modules(code)


def test_tiers_split_the_runtime_and_nothing_routes_past_the_zygotes_there_are():
    light, math, heavy = tiers()
    assert TIER_NAMES == ("light", "math", "heavy")
    assert sorted(math) == ["mpmath", "networkx", "sympy"] and sorted(heavy) == ["pandas", "sklearn"]
    assert sorted(TIER_PACKAGES["heavy"]) == sorted(heavy)
    assert {"numpy", "scipy", "gmpy2"} <= set(light) and not set(light) & set(math + heavy)
    assert set(light) | set(math) | set(heavy) >= set(runtime_env.IMPORTS.values())
    assert Router({}).tier("import pandas, sympy") == "light"
