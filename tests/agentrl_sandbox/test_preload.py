"""Which zygote a run forks from: the smallest tier holding what the code imports (bare, light, math, heavy)."""

from __future__ import annotations

import pytest

from agentrl_sandbox import runtime_env
from agentrl_sandbox.preload import STDLIB, TIER_NAMES, TIER_PACKAGES, Router, imported_modules, tiers

# What each zygote reports on top of the one before it: its packages, scipy modules they pull in, stdlib modules.
LIGHT_ONLY = ["numpy", "numpy.core", "numpy.random", "scipy", "gmpy2", "pickle"]
MATH_ONLY = ["sympy", "sympy.core", "mpmath", "networkx", "networkx.algorithms", "scipy.sparse", "fractions2"]
HEAVY_ONLY = ["pandas", "pandas.core.frame", "sklearn", "sklearn.linear_model", "scipy.optimize", "csv", "uuid"]
ROUTER = Router({"light": LIGHT_ONLY, "math": MATH_ONLY, "heavy": HEAVY_ONLY})


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
        "import statsmodels.api as sm",  # not preloaded, but it imports pandas
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
        "import numpy as np\nprint(np.eye(2))",
        "from scipy import special",
        "import gmpy2",
        "from numpy.random import default_rng",
        "x = __import__('numpy')",
        "import matplotlib.pyplot as plt",  # not preloaded, but it imports numpy: forked with numpy ready
        "from numba import njit",
    ],
)
def test_numpy_scipy_and_gmpy2_go_to_the_light_zygote(code):
    assert ROUTER.tier(code) == "light"


@pytest.mark.parametrize(
    "code",
    [
        "print(1)",
        "from fractions import Fraction\nimport math, itertools\nprint(Fraction(1, 3) + math.comb(5, 2))",
        "import csv, uuid  # standard modules: cheaper to import in the run than to fork a larger interpreter",
        "pandasql = 3\nsympyx = 4\nnumpyish = 5\nprint(pandasql, sympyx, numpyish)",
        "import fractions2",  # not a runtime package: never counted, whatever a zygote reported
        "import pulp",  # not preloaded, and pure Python: nothing of a larger interpreter helps it
    ],
)
def test_code_without_runtime_packages_stays_bare(code):
    assert ROUTER.tier(code) == "bare"


def test_import_statements_are_read_in_every_form():
    code = "import os.path as p, sys\nfrom a.b import (c,\n  d)\nx = 1; from e import f as g  # import h\n"
    assert imported_modules(code) >= {"os.path", "sys", "a.b", "a.b.c", "e", "e.f"}
    assert "h" not in imported_modules(code)


def test_tiers_split_the_runtime_and_nothing_routes_past_the_zygotes_there_are():
    bare, light, math, heavy = tiers()
    assert TIER_NAMES == ("bare", "light", "math", "heavy")
    assert sorted(light) == ["gmpy2", "numpy", "numpy.random", "scipy"]
    assert sorted(math) == ["mpmath", "networkx", "sympy"] and sorted(heavy) == ["pandas", "sklearn"]
    assert sorted(TIER_PACKAGES["heavy"]) == sorted(heavy)
    assert set(bare) == set(STDLIB) and not set(bare) & set(runtime_env.IMPORTS.values())
    assert set(bare) | set(light) | set(math) | set(heavy) >= set(runtime_env.IMPORTS.values())
    assert Router({}).tier("import pandas, sympy") == "bare"
