"""agentrl_recipe: the DemyAgent (arXiv 2510.11701) training recipe as a plugin for stock verl 0.9.1.

Importing this package has no side effects; verl loads :mod:`agentrl_recipe.plugin` through the
``verl.plugins`` entry point.
"""

__version__ = "0.1.0"
