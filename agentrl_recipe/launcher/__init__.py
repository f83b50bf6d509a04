"""``make sft``/``make rl``/``make rl-smoke``: compose a shipped config, check it, and start verl's own trainer.

Run as ``python -m agentrl_recipe.launcher.launch`` (the Makefile does); :mod:`.env` builds the environment every Ray
worker gets, :mod:`.resume` finds what a resumed run continues from.
"""
