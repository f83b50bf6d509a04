"""agentrl_recipe: the DemyAgent (arXiv 2510.11701) training recipe as a plugin for stock verl 0.9.1.

verl loads :mod:`.plugin` through the ``verl.plugins`` entry point in every process. What runs in verl's workers is
:mod:`.training` (the agent loop, rewards, GRPO-TCR, the recipe config); :mod:`.offline` runs verl's agent loop outside
the trainer (rollout, an OpenAI-server client); :mod:`.eval` is the harness, :mod:`.view` the trajectory viewer, and
the commands are :mod:`.cli`, :mod:`.launcher` and :mod:`.gpu_install`. Code runs in :mod:`agentrl_sandbox`; verl on
CPU is :mod:`verl_cpu`; datasets are built by :mod:`data_prep`.
"""

__version__ = "0.1.0"
