"""verl's v1 trainer, ``verl.trainer.ppo.v1.trainer_base.PPOTrainer._build_replay_buffer`` (private): what it derives.

verl builds the replay buffer in that method. Its built-in buffers get arguments derived from the config
(``filter_groups_metric``, ``gen_batch_size``, …); a custom sampler (``trainer.v1.sampler.custom_sampler``) gets only
:data:`CUSTOM_SAMPLER_KWARGS` and must derive the rest itself. The recipe's samplers derive them with
:func:`sync_buffer_kwargs` / :func:`async_buffer_kwargs`, which mirror verl 0.9.1's derivation; the test of this module
runs verl's method and fails, naming :data:`SYMBOL`, when the two part. On a verl upgrade, this module is the one to
change.
"""

from __future__ import annotations

from typing import Any

SYMBOL = "verl.trainer.ppo.v1.trainer_base.PPOTrainer._build_replay_buffer"

# what verl passes a custom sampler's constructor (keyword arguments)
CUSTOM_SAMPLER_KWARGS = (
    "trainer_mode",
    "trainer_config",
    "max_off_policy_threshold",
    "max_off_policy_strategy",
    "sampler_kwargs",
    "refill_fn",
)


def async_buffer_kwargs(*, filter_groups_metric: str | None, sync_refill_failed_groups: bool) -> dict[str, Any]:
    """The arguments verl derives for its built-in ``ReplayBufferAsync``.

    ``filter_groups_metric``: ``algorithm.filter_groups.metric`` when ``filter_groups.enable``, else ``None``.
    """
    return {"filter_groups_metric": filter_groups_metric, "sync_refill_failed_groups": sync_refill_failed_groups}


def sync_buffer_kwargs(
    *,
    filter_groups_metric: str | None,
    sync_refill_failed_groups: bool,
    train_batch_size: int | None,
    max_inflight_gen_batches: int,
) -> dict[str, Any]:
    """The arguments verl derives for its built-in sync ``ReplayBuffer``.

    One difference, on purpose: verl's ``gen_batch_size`` for a buffer that refills nothing exactly is
    ``data.gen_batch_size or data.train_batch_size``; this gives ``train_batch_size`` (the sampler is not wired
    ``data.gen_batch_size``), and verl's buffer reads ``gen_batch_size`` only when it refills exactly (then it is 1).
    """
    exact_refill = filter_groups_metric is not None or sync_refill_failed_groups
    return {
        **async_buffer_kwargs(
            filter_groups_metric=filter_groups_metric, sync_refill_failed_groups=sync_refill_failed_groups
        ),
        "train_batch_size": train_batch_size,
        "gen_batch_size": 1 if exact_refill else train_batch_size,
        "max_inflight_gen_batches": max_inflight_gen_batches if filter_groups_metric else 1,
    }
