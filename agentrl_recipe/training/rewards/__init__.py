"""Rewards: per-row scorers (:mod:`.scoring`), sandboxed code grading (:mod:`.code_grading`) and the
``agentrl_reward`` verl reward manager (:mod:`.manager`). See the README's *Rewards* section."""

# Import verl before any module of this package: verl's plugin loader imports agentrl_recipe.plugin, which imports
# this package's modules. Were a user to import one of them first, the plugin would meet it half-initialised.
import verl  # noqa: F401
