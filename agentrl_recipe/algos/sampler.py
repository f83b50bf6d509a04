"""The v1 replay buffers of the recipe: trajectory masks + DAPO dynamic sampling with a cap on generation rounds.

verl 0.9.1's v1 trainer (``trainer.use_v1=true``, the default) samples every training batch from
:class:`verl.trainer.ppo.v1.replay_buffer.ReplayBuffer` and lets a config swap in a subclass
(``trainer.v1.sampler.custom_sampler.{path,name}``) — the one plugin hook that sees a whole batch, with the agent
loop's ``extra_fields`` and the reward's ``reward_extra_info``, *before* old-log-prob, advantage and actor update.
verl loads the class as ``getattr(import_module(path), name)``, so this module is the stable path configs name; the
classes live in:

- :mod:`.sampler_config` — :class:`SamplerSettings` (the ``sampler_kwargs``) and :func:`check_trainer_config`;
- :mod:`.batch_masking` — trajectory masks and RoC on the sampled batch, in TransferQueue (both buffers);
- :mod:`.dynamic_sampling` — :class:`AgentRLReplayBuffer`, the sync buffer with the ``max_num_gen_batches`` cap;
- :mod:`.async_sampler` — :class:`AgentRLReplayBufferAsync`, for the async trainer modes.

Config (the shipped ``verl_configs/recipe/grpo_tcr.yaml`` wires it; values are interpolated from their one home)::

    trainer.v1.sampler.custom_sampler.path: pkg://agentrl_recipe.algos.sampler
    trainer.v1.sampler.custom_sampler.name: AgentRLReplayBuffer      # AgentRLReplayBufferAsync for *_async modes
    trainer.v1.sampler.sampler_kwargs:
      masks: ${agentrl.masks}                              # agentrl.masks.* switches (MaskConfig)
      roc: ${agentrl.roc}                                  # optional: agentrl.roc.* (rStar2 RoC, RoCConfig)
      filter_groups: ${algorithm.filter_groups}            # verl's FilterGroupsConfig (see .dynamic_sampling)
      train_batch_size: ${data.train_batch_size}
      max_response_length: ${data.max_response_length}     # for agentrl.masks.overlong_filter
      sync_refill_failed_groups: ${trainer.v1.sampler.sync_refill_failed_groups}

Step metrics: ``training/filter_groups/*`` next to verl's ``training/filter_groups/evicted_samples``,
``training/masks/*``, ``training/roc/*``. The legacy trainer (``trainer.use_v1=false``) has no such hook;
:func:`check_trainer_config` reports that.
"""

from __future__ import annotations

from agentrl_recipe.algos.async_sampler import AgentRLReplayBufferAsync
from agentrl_recipe.algos.dynamic_sampling import AgentRLReplayBuffer
from agentrl_recipe.algos.sampler_config import (
    ASYNC_SAMPLER,
    SAMPLER_PATH,
    SYNC_SAMPLER,
    WIRING,
    FilterGroups,
    SamplerSettings,
    check_trainer_config,
)

__all__ = [
    "ASYNC_SAMPLER",
    "SAMPLER_PATH",
    "SYNC_SAMPLER",
    "WIRING",
    "AgentRLReplayBuffer",
    "AgentRLReplayBufferAsync",
    "FilterGroups",
    "SamplerSettings",
    "check_trainer_config",
]
