"""Data order (issue 45 item 3): the paper runs draw their prompts in the released run's order.

The released trainer (Open-AgentRL's verl 0.5, ``verl/trainer/main_ppo.py:380``) shuffled with
``torch.utils.data.RandomSampler`` on a generator seeded with ``data.get("seed", 1)``, and its data config had no
seed: 1. The composed configs must give verl 0.9.1's own ``create_rl_sampler`` the same order.
"""

from __future__ import annotations

import pytest
import torch
from verl.trainer.ppo.utils import create_rl_sampler

from agentrl_recipe.cli.configs.files import compose

ROWS = 30_000  # a dataset of the published set's size (its rows' content does not change the order)
RELEASED_SEED = 1  # verl 0.5 main_ppo.py:380 data_config.get("seed", 1)
# The first indices the released sampler draws from 30,000 rows (torch's RandomSampler, generator seeded with 1).
RELEASED_FIRST = [5845, 8907, 16390, 13940, 11331, 2048, 8249, 17775]
PAPER_CONFIGS = ["agentrl_rl_qwen3_4b", "agentrl_rl_qwen3_4b_eps028", "agentrl_rl_qwen2_7b"]


def released_order(rows: int, count: int) -> list[int]:
    """The released create_rl_sampler: torch.utils.data.RandomSampler with a generator seeded with 1."""
    generator = torch.Generator()
    generator.manual_seed(RELEASED_SEED)
    return list(torch.utils.data.RandomSampler(range(rows), generator=generator))[:count]


def first_indices(config_name: str, count: int) -> list[int]:
    cfg, _ = compose(config_name)
    sampled = iter(create_rl_sampler(cfg.data, range(ROWS)))  # verl 0.9.1's own sampler, as the trainer builds it
    return [next(sampled) for _ in range(count)]


def test_released_order_golden() -> None:
    assert released_order(ROWS, len(RELEASED_FIRST)) == RELEASED_FIRST


@pytest.mark.parametrize("config_name", PAPER_CONFIGS + [name + "_fixed" for name in PAPER_CONFIGS])
def test_first_batch_is_the_released_one(config_name: str) -> None:
    """64 prompts = data.train_batch_size: the first step's prompts are the released run's (the _fixed siblings
    draw the same, so a comparison isolates the fixes)."""
    cfg, _ = compose(config_name)
    assert cfg.data.seed == RELEASED_SEED and cfg.data.shuffle is True
    batch = cfg.data.train_batch_size
    assert first_indices(config_name, batch) == released_order(ROWS, batch)
