"""Cases for #7399 (open: drop the super().__post_init__() call in RewardManagerConfig).

``RewardManagerConfig.__post_init__`` calls ``super().__post_init__()``, which ``BaseConfig`` does not define, so
converting the reward manager section of the composed ``ppo_trainer`` config to its dataclass raises
``AttributeError`` on verl 0.9.1. #7399 shows the error with a hand-written dataclass; this converts the section
verl's own config composes. For a reviewer of #7399, in ``tests/workers/config/``.
"""

import os

from hydra import compose, initialize_config_dir
from verl.trainer import main_ppo
from verl.utils.config import omega_conf_to_dataclass
from verl.workers.config.reward import RewardManagerConfig


def test_the_composed_reward_manager_section_converts_to_its_dataclass():
    config_dir = os.path.join(os.path.dirname(main_ppo.__file__), "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        config = compose(config_name="ppo_trainer")
    reward_manager = omega_conf_to_dataclass(config.reward.reward_manager)
    assert isinstance(reward_manager, RewardManagerConfig)
    assert (reward_manager.source, reward_manager.name) == ("register", "naive")
