"""Which zygote a run forks from: the light one unless the code imports what only the heavy one holds."""

from __future__ import annotations

import pytest

from agentrl_sandbox import runtime_env
from agentrl_sandbox.preload import HEAVY_PACKAGES, Router, imported_modules, tiers

# What the heavy zygote reports on top of the light one: its packages, scipy modules they pull in, stdlib modules.
HEAVY_ONLY = ["pandas", "pandas.core.frame", "sklearn", "sklearn.linear_model", "scipy.optimize", "csv", "uuid"]


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
    ],
)
def test_heavy_imports_go_to_the_heavy_zygote(code):
    assert Router(HEAVY_ONLY).heavy(code)


@pytest.mark.parametrize(
    "code",
    [
        "print(1)",
        "import numpy as np\nimport sympy\nprint(np.eye(2), sympy.factorint(12))",
        "import csv, uuid  # standard modules: cheaper to import in the run than to fork the heavy interpreter",
        "from scipy import special",
        "pandasql = 3\nprint(pandasql)",
    ],
)
def test_everything_else_stays_light(code):
    assert not Router(HEAVY_ONLY).heavy(code)


def test_import_statements_are_read_in_every_form():
    code = "import os.path as p, sys\nfrom a.b import (c,\n  d)\nx = 1; from e import f as g  # import h\n"
    assert imported_modules(code) >= {"os.path", "sys", "a.b", "a.b.c", "e", "e.f"}
    assert "h" not in imported_modules(code)


def test_tiers_split_the_runtime_and_nothing_routes_heavy_without_a_heavy_zygote():
    light, heavy = tiers()
    assert sorted(heavy) == sorted(HEAVY_PACKAGES) and not set(light) & set(heavy)
    assert set(light) | set(heavy) >= set(runtime_env.IMPORTS.values())
    assert not Router([]).heavy("import pandas")
