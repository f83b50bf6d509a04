"""What runs inside verl's processes: the driver, the actor/rollout workers, the agent-loop and reward workers.

verl loads this code through the plugin (:mod:`agentrl_recipe.plugin`) or by the paths our configs name (the agent
loop, the tool, the reward manager, the dataset, the replay buffer). Everything here is paid for in every worker's
start-up, so it imports nothing from :mod:`agentrl_recipe.offline`, :mod:`agentrl_recipe.eval` or the commands.

- :mod:`.recipe_config` — the ``agentrl:`` block of the trainer config, resolved once per process
(:class:`RecipeConfig`);
- :mod:`.compat` — the ``agentrl.compat`` table: the released code's behaviour or ours;
- :mod:`.agent_loop` — the hermes tool loop and the ``code_interpreter`` tool;
- :mod:`.rewards` — the reward manager and the graders; :mod:`.algos` — GRPO-TCR's loss, advantages, masks, buffers;
- :mod:`.verl_adapters` — one module per private verl member we touch.
"""
