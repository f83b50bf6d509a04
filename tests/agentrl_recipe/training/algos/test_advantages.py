"""agentrl_grpo through verl's own compute_advantage: masked trajectories leave the group statistics."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from agentrl_recipe import names


def batch(scores: list[float], uids: list[str], masked: set[int], length: int = 5):
    """A DataProto like the v1 trainer's: the outcome reward sits on each response's last valid token."""
    from verl import DataProto

    n = len(scores)
    lengths = [length - (i % 3) for i in range(n)]
    response_mask = torch.zeros(n, length)
    rewards = torch.zeros(n, length)
    for i, (score, valid) in enumerate(zip(scores, lengths, strict=True)):
        response_mask[i, :valid] = 1
        rewards[i, valid - 1] = score
        if i in masked:
            response_mask[i] = 0  # what AgentRLReplayBuffer writes for a masked trajectory
    data = DataProto.from_dict(tensors={"token_level_rewards": rewards, "response_mask": response_mask})
    data.non_tensor_batch["uid"] = np.array(uids, dtype=object)
    return data


def advantages(data, estimator: str, norm_by_std: bool = True) -> torch.Tensor:
    from verl.trainer.ppo.ray_trainer import compute_advantage

    config = OmegaConf.create({"norm_adv_by_std_in_grpo": norm_by_std})
    out = compute_advantage(data, adv_estimator=estimator, norm_adv_by_std_in_grpo=norm_by_std, config=config)
    return out.batch["advantages"]


@pytest.fixture(scope="module", autouse=True)
def plugin() -> None:
    from verl.trainer.ppo import core_algos

    from agentrl_recipe import plugin
    from agentrl_recipe.training.algos.advantages import compute_grpo_masked_outcome_advantage

    registered = core_algos.get_adv_estimator_fn(names.ADV_ESTIMATOR)
    assert registered is plugin.ADV_ESTIMATOR_FN  # loads the module on its first call
    assert (registered.__module__, registered.__qualname__) == (
        compute_grpo_masked_outcome_advantage.__module__,
        compute_grpo_masked_outcome_advantage.__qualname__,
    )


@pytest.mark.parametrize("norm_by_std", [True, False])
def test_equals_verl_grpo_without_masks(norm_by_std: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    scores = (torch.randint(-1, 2, (24,), generator=gen).float() * torch.rand(24, generator=gen)).tolist()
    uids = [f"p{i // 4}" for i in range(20)] + ["solo"] + ["p9"] * 3  # groups of 4 and 3, and a singleton
    ours = advantages(batch(scores, uids, set()), names.ADV_ESTIMATOR, norm_by_std)
    verl = advantages(batch(scores, uids, set()), "grpo", norm_by_std)
    torch.testing.assert_close(ours, verl, atol=1e-6, rtol=0)


def test_golden_masked_member_leaves_mean_and_std() -> None:
    # group a: rewards 1, -1, 1 and a masked -1 (say a sandbox crash); group b unmasked
    data = batch([1, -1, 1, -1, 1, 0, 0, 0], ["a"] * 4 + ["b"] * 4, masked={3})
    adv = advantages(data, names.ADV_ESTIMATOR)
    mean, std = 1 / 3, math.sqrt(((2 / 3) ** 2 * 2 + (4 / 3) ** 2) / 2)  # unbiased, over the 3 unmasked only
    expected_a = [(1 - mean) / (std + 1e-6), (-1 - mean) / (std + 1e-6), (1 - mean) / (std + 1e-6), 0.0]
    first_token = adv[:, 0]
    assert first_token[:4].tolist() == pytest.approx(expected_a, abs=1e-6)
    # verl's grpo counts the masked -1: mean 0, std √(4/3) → the siblings' advantages move
    verl_a = advantages(batch([1, -1, 1, -1, 1, 0, 0, 0], ["a"] * 4 + ["b"] * 4, set()), "grpo")[:4, 0]
    assert verl_a.tolist() == pytest.approx([0.866025, -0.866025, 0.866025, -0.866025], abs=1e-5)
    # group b: 1, 0, 0, 0 → mean 0.25, std 0.5
    assert first_token[4:].tolist() == pytest.approx([0.75 / 0.5, -0.5, -0.5, -0.5], abs=1e-5)
    # broadcast over valid tokens only; the masked row is zero everywhere
    assert torch.equal(adv != 0, (data.batch["response_mask"] > 0) & (adv[:, :1] != 0))
    assert torch.count_nonzero(adv[3]) == 0


def test_all_masked_group_and_lone_survivor_give_zero_without_nan() -> None:
    data = batch([1, -1, 1, 1, 1, -1, 0.5], ["a", "a", "a", "b", "b", "b", "solo"], masked={0, 1, 2, 3, 4})
    adv = advantages(data, names.ADV_ESTIMATOR)
    assert not torch.isnan(adv).any()
    assert torch.count_nonzero(adv[:6]) == 0  # group a all masked; group b's lone survivor has no baseline
    assert adv[6, 0].item() == pytest.approx(0.5)  # rollout.n = 1: verl's singleton convention (mean 0, std 1)


def test_through_the_v1_trainer_advantage_step() -> None:
    """The v1 trainer calls compute_advantage_for_multi_trajectories with the TransferQueue keys."""
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    data = batch([1, -1, 1, -1], ["a"] * 4, masked={3})
    keys = [f"a_{i}_0" for i in range(4)]
    out = compute_advantage_for_multi_trajectories(
        data, batch_keys=keys, adv_estimator=names.ADV_ESTIMATOR, config=OmegaConf.create({})
    )
    assert out.batch["advantages"][3].abs().sum() == 0
    assert out.batch["advantages"][0, 0].item() == pytest.approx(0.57735, abs=1e-4)


def test_missing_uid_is_an_error() -> None:
    from agentrl_recipe.training.algos.advantages import compute_grpo_masked_outcome_advantage

    with pytest.raises(ValueError, match="uid"):
        compute_grpo_masked_outcome_advantage(torch.zeros(2, 3), torch.ones(2, 3), index=None)
