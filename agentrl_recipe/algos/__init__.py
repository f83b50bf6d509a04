"""GRPO-TCR and its stabilisers for verl 0.9.1.

- :mod:`.losses` — policy loss ``agentrl_tcr`` (verl's clipped objective + split clip metrics);
- :mod:`.advantages` — advantage estimator ``agentrl_grpo`` (GRPO whose group statistics skip masked trajectories);
- :mod:`.masking` — trajectory masks (``agentrl.masks``), the switches and the per-batch mask computation;
- :mod:`.sampler` — the v1 replay buffer that applies the masks and caps DAPO dynamic sampling.

Registration happens only in :mod:`agentrl_recipe.plugin`. Heavy imports (torch, verl) stay inside the modules
that need them so ``agentrl_recipe.config`` can import :class:`.masking.MaskConfig` cheaply.
"""
