"""Cases for #7361 (open: reduce_metrics picks max/min from the key's last segment instead of a substring).

verl 0.9.1's ``reduce_metrics`` takes np.max / np.min for any key that merely contains "max" / "min", so a policy
loss's ``actor/loss_denominator_tokens`` ("min" in "denominator") is reduced over mini-batches to its smallest value.
The ``MEAN_KEYS`` cases fail on 0.9.1 for that reason. The ``MAX_KEYS`` / ``MIN_KEYS`` cases are verl metric names
that ask for a max or min with "max" / "min" as a word of the last segment but not the whole segment
(``perf/max_memory_allocated_gb``, ``distillation/loss_min``, ...): #7361's rule (the segment is exactly "max" /
"min") would turn them into means; its tests do not cover them. For a reviewer of #7361, in
``tests/trainer/ppo/test_metric_utils_on_cpu.py``.
"""

import pytest
from verl.utils.metric import reduce_metrics

PER_MINI_BATCH = [2.0, 1.0, 6.0]  # mean 3, max 6, min 1

# Reach reduce_metrics as one value per mini-batch (the actor's update metrics: workers/engine_workers.py,
# trainer/distillation/losses.py and, in bypass mode, trainer/ppo/rollout_corr_helper.py), or follow their naming.
MAX_KEYS = [
    "perf/max_memory_allocated_gb",
    "perf/max_memory_reserved_gb",
    "distillation/loss_max",
    "distillation/teacher_mass_max",
    "rollout_corr/rollout_is_max",
    "rollout_corr/rollout_is_seq_max_deviation",
    "rollout_corr/log_ppl_diff_max",
    "critic/score/max",
    "response_length/max",
]
MIN_KEYS = [
    "distillation/loss_min",
    "distillation/teacher_mass_min",
    "rollout_corr/rollout_is_min",
    "rollout_corr/log_ppl_diff_min",
    "critic/score/min",
    "response_length/min",
]
# "max" / "min" only inside a word: means.
MEAN_KEYS = [
    "actor/loss_denominator_tokens",
    "actor/num_minibatches",
    "env/terminal_reward",
    "tool/admin_calls",
]


@pytest.mark.parametrize("key", MAX_KEYS)
def test_max_by_name(key):
    assert reduce_metrics({key: list(PER_MINI_BATCH)})[key] == 6.0


@pytest.mark.parametrize("key", MIN_KEYS)
def test_min_by_name(key):
    assert reduce_metrics({key: list(PER_MINI_BATCH)})[key] == 1.0


@pytest.mark.parametrize("key", MEAN_KEYS)
def test_max_or_min_inside_a_word_is_a_mean(key):
    assert reduce_metrics({key: list(PER_MINI_BATCH)})[key] == pytest.approx(3.0)
