"""``python -m agentrl_recipe.cli …``: the same as the ``agentrl-recipe`` console script."""

import sys

from agentrl_recipe.cli import main

sys.exit(main())
