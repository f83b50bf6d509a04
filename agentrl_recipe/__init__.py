"""agentrl_recipe: the DemyAgent (arXiv 2510.11701) training recipe as a plugin for stock verl 0.9.1.

Three layers: :mod:`agentrl_recipe.core` (what verl imports in every worker; verl loads
:mod:`agentrl_recipe.core.plugin` through the ``verl.plugins`` entry point), :mod:`agentrl_recipe.harness` (rollout,
eval and data prep around an in-process agent loop) and :mod:`agentrl_recipe.cli` (``agentrl-recipe …``).

Importing this package only installs the finder that keeps the pre-``core/`` import paths working, with a
``DeprecationWarning`` (:mod:`agentrl_recipe._moved`).
"""

from agentrl_recipe import _moved

__version__ = "0.1.0"

_moved.install()
