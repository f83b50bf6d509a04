"""agentrl_recipe: the DemyAgent (arXiv 2510.11701) training recipe as a plugin for stock verl 0.9.1.

verl loads :mod:`agentrl_recipe.plugin` through the ``verl.plugins`` entry point in every process; it registers the
agent loop (:mod:`.agent_loop`), the reward manager (:mod:`.rewards`) and GRPO-TCR (:mod:`.algos`). Around them:
the in-process rollout (:mod:`.rollout`), evaluation (:mod:`.eval`) and ``agentrl-recipe`` (:mod:`.cli`). Code runs
in :mod:`agentrl_sandbox`; verl on CPU is :mod:`verl_cpu`; datasets are built by :mod:`data_prep`.
"""

__version__ = "0.1.0"
