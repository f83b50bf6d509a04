"""What verl imports in every worker: the plugin entry point (:mod:`.plugin`), every name it registers (:mod:`.names`)
and the modules behind them — agent loop, tools and sandbox, rewards, algorithms, the CPU platform, the generation
replica, verl adapters.

Nothing here imports :mod:`agentrl_recipe.harness`, :mod:`agentrl_recipe.cli` or the demo (tests/test_layers.py).
"""
