"""GRPO-TCR and its stabilisers for verl 0.9.1.

- :mod:`.losses` — policy loss ``agentrl_tcr`` (verl's clipped objective + split clip metrics);
- :mod:`.advantages` — advantage estimator ``agentrl_grpo`` (GRPO whose group statistics skip masked trajectories);
- :mod:`.masking` — trajectory masks (``agentrl.masks``), the switches and the per-batch mask computation;
- :mod:`.roc` — rStar2-Agent's Resample-on-Correct; :mod:`.infra_guard` — stop a run whose sandbox keeps failing;
- :mod:`.sampler` — the v1 replay buffers verl loads by that path, their settings and config check: they apply the
  masks (and RoC) to each sampled batch and cap DAPO dynamic sampling. verl's private replay-buffer members are
  reached only through :mod:`agentrl_recipe.training.verl_adapters`.

Registration happens only in :mod:`agentrl_recipe.plugin`. ``agentrl_recipe.training.recipe_config`` resolves
:class:`.masking.MaskConfig` lazily, so this package may import verl.
"""

# Import verl before any module of this package: verl's plugin loader imports agentrl_recipe.plugin, which imports
# this package's modules. Were a user to import one of them first, the plugin would meet it half-initialised.
import verl  # noqa: F401
