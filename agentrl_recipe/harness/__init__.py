"""Built around an in-process ``AgentLoopWorker`` (:mod:`.rollout`): data prep (:mod:`.data`), evaluation
(:mod:`.eval`), the OpenAI-compatible clients, the tiny offline model and the CPU configs' inputs.

Imports :mod:`agentrl_recipe.core` only (tests/test_layers.py).
"""
