"""The v1 replay buffer on a real TransferQueue: DAPO refill to full size, the generation cap, trajectory masks.

A scripted rollout stands in for verl's AgentLoopWorkerTQ: it writes prompt groups into TransferQueue with the
same keys ({uid}_{session}_{index}), tags and fields (response_mask, loss_mask, rm_scores, extra_fields with
reward_extra_info) that verl's agent loop writes, so verl's own ReplayBuffer code does the sampling.
"""

from __future__ import annotations

import itertools
import logging
import uuid

import pytest
import torch

from agentrl_recipe.core import names

N = 2  # rollout.n
B = 4  # train_batch_size (prompts)
MAX_LEN = 8


class ScriptedRollout:
    """Each prompt's group is 'var' (acc 1 and 0) or 'zero' (all acc 0); ``extra`` adds per-session fields."""

    def __init__(self, tq, script, extra=None, finish_now=True):
        self.tq, self.script, self.extra = tq, iter(script), extra or {}
        self.prompts, self.running = 0, []
        self.finish_now = finish_now
        self.step = 1

    def submit(self, num_prompts: int, finished: bool = True) -> int:
        from verl.utils.tensordict_utils import list_of_dict_to_tensordict

        for _ in range(num_prompts):
            kind = next(self.script)
            uid = uuid.uuid4().hex[:12]
            status = "finished" if finished else "running"
            self.tq.kv_put(
                key=uid, partition_id="train", tag={"is_prompt": True, "status": status, "global_steps": self.step}
            )
            keys, fields, tags = [], [], []
            accs = kind if isinstance(kind, list) else [float(kind == "var" and s == 0) for s in range(N)]
            for session, acc in enumerate(accs):
                length = 3 + session
                extra = {"reward_extra_info": {"acc": acc}, **self.extra.get((self.prompts, session), {})}
                keys.append(f"{uid}_{session}_0")
                fields.append(
                    {
                        "responses": torch.arange(length),
                        "response_mask": torch.ones(length, dtype=torch.int64),
                        "loss_mask": torch.ones(length, dtype=torch.int64),
                        "rm_scores": torch.tensor([0.0] * (length - 1) + [acc]),
                        "extra_fields": extra,
                        "data_source": "math_dapo",
                    }
                )
                tags.append({"status": "success", "response_len": length, "seq_len": 2 + length, "global_steps": 1})
            self.tq.kv_batch_put(keys=keys, partition_id="train", fields=list_of_dict_to_tensordict(fields), tags=tags)
            if not finished:
                self.running.append(uid)
            self.prompts += 1
        return num_prompts

    def refill(self, num_prompts: int) -> int:
        for uid in self.running:  # what was generating finishes by the next refill
            self.tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})
        self.running = []
        self.refills.append(num_prompts)
        return self.submit(num_prompts)

    refills: list[int]


def make_buffer(cls, rollout: ScriptedRollout, masks=None, filter_groups=None, roc=None):
    rollout.refills = []
    kwargs = {
        "masks": masks or {},
        "roc": roc or {},
        "filter_groups": filter_groups or {"enable": False},
        "train_batch_size": B,
        "max_response_length": MAX_LEN,
    }
    return cls(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=kwargs,
        refill_fn=rollout.refill,
        poll_interval=0.01,
    )


def groups_of(tq, batch) -> dict[str, list[float]]:
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])
    out: dict[str, list[float]] = {}
    for key, extra in zip(batch.keys, data["extra_fields"], strict=True):
        out.setdefault(key.split("_")[0], []).append(getattr(extra, "data", extra)["reward_extra_info"]["acc"])
    return out


@pytest.fixture
def tq(transfer_queue):
    yield transfer_queue
    listing = transfer_queue.kv_list() or {}
    for partition, items in listing.items():
        if items:
            transfer_queue.kv_clear(keys=list(items), partition_id=partition)


DAPO = {"enable": True, "metric": "acc", "max_num_gen_batches": 10, "max_inflight_gen_batches": 1}


def test_zero_variance_groups_are_refilled_to_full_size(tq) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    rollout = ScriptedRollout(tq, itertools.chain(["var", "zero", "zero", "var"], itertools.repeat("var")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups=DAPO)
    rollout.submit(B)  # the trainer's prepare_step
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    groups = groups_of(tq, batch)
    assert len(groups) == B and len(batch) == B * N
    assert all(len(set(accs)) > 1 for accs in groups.values())  # every group carries signal
    assert rollout.refills == [4]  # verl's 2 prompts per evicted group
    assert metrics["training/filter_groups/evicted_samples"] == 2  # verl's metric
    assert metrics["training/filter_groups/refill_prompts"] == 4
    assert metrics["training/filter_groups/gen_batches"] == 2.0
    assert metrics["training/filter_groups/cap_reached"] == 0.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == 0.0


def test_verl_builtin_buffer_ignores_the_cap(tq) -> None:
    """verl 0.9.1's sync ReplayBuffer never stops generating when every group is zero-variance (the bug we fix)."""
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    rollout.refills = []

    def refill(n: int) -> int:
        if len(rollout.refills) >= 12:  # > max_num_gen_batches=10 rounds: it would go on forever
            raise RuntimeError("still refilling")
        return rollout.refill(n)

    buffer = ReplayBuffer(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        refill_fn=refill,
        poll_interval=0.01,
        filter_groups_metric="acc",
        train_batch_size=B,
        gen_batch_size=1,
        max_inflight_gen_batches=1,
    )
    rollout.submit(B)
    with pytest.raises(RuntimeError, match="still refilling"):
        buffer.sample(global_steps=1, partition_id="train", batch_size=B)


def test_cap_stops_generation_with_a_warning(tq, caplog) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    rollout = ScriptedRollout(tq, itertools.repeat("zero"))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 3})
    rollout.submit(B)
    with caplog.at_level(logging.WARNING, logger="agentrl_recipe.core.algos.dynamic_sampling"):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == (3 - 1) * B  # the first batch + 2 refill batches, then no more
    assert len(groups_of(tq, batch)) == B  # still a full batch: zero-variance groups are kept at the cap
    assert metrics["training/filter_groups/cap_reached"] == 1.0
    assert metrics["training/filter_groups/gen_batches"] == 3.0
    assert metrics["training/filter_groups/zero_variance_groups_kept"] == B
    assert "max_num_gen_batches=3" in caplog.text


def test_cap_prefers_groups_with_variance_and_trains_a_short_batch(tq, caplog) -> None:
    """Half of the first batch is still generating when the buffer starts; the budget runs out mid-refill, and
    once nothing is in flight the buffer trains on the groups it has rather than waiting forever."""
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    rollout = ScriptedRollout(tq, itertools.chain(["zero"] * 4 + ["var"], itertools.repeat("zero")))
    buffer = make_buffer(AgentRLReplayBuffer, rollout, filter_groups={**DAPO, "max_num_gen_batches": 2})
    rollout.submit(2)
    rollout.submit(2, finished=False)
    with caplog.at_level(logging.WARNING, logger="agentrl_recipe.core.algos.dynamic_sampling"):
        batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert sum(rollout.refills) == B
    groups = groups_of(tq, batch)
    assert len(groups) < B and metrics["training/filter_groups/batch_groups"] == len(groups)
    assert any(len(set(accs)) > 1 for accs in groups.values())  # the one group with signal is in
    assert "training this step on" in caplog.text
    # 2 zero groups, then the 2 late ones + 1 refilled zero group; verl's count survives the short path
    assert metrics["training/filter_groups/evicted_samples"] == 5


def test_nothing_to_train_on_at_the_cap_is_a_clear_error(tq) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    buffer = make_buffer(AgentRLReplayBuffer, ScriptedRollout(tq, []), filter_groups={**DAPO, "max_num_gen_batches": 1})
    with pytest.raises(RuntimeError, match="too easy or too hard"):
        buffer._short_batch(global_steps=1, partition_id="train", batch_size=B)


def test_masks_zero_response_and_loss_masks_in_transfer_queue(tq) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    extra = {(0, 1): {names.FIELD_VOID_TURN: True}, (1, 0): {names.FIELD_TOOL_INFRA_FAILURE: True}}
    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, masks={"void_turn": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["response_mask", "loss_mask"])
    extras = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])["extra_fields"]
    for row, extra in enumerate(extras):
        void = bool(getattr(extra, "data", extra).get(names.FIELD_VOID_TURN))
        for field in ("response_mask", "loss_mask"):
            values = data[field][row]
            assert len(values) in (3, 4)  # lengths kept
            assert bool(values.sum() == 0) is void  # only the void-turn trajectory; infra_failure is off
    assert metrics["training/masks/masked_trajectories"] == 1
    assert metrics["training/masks/void_turn_ratio"] == pytest.approx(1 / (B * N))
    assert metrics["training/masks/infra_failure_ratio"] == pytest.approx(1 / (B * N))
    assert "training/filter_groups/cap_reached" not in metrics  # dynamic sampling is off
    # the step's reward metrics reach verl's tracker through the buffer's metrics
    assert metrics["reward/math_dapo/acc"] == pytest.approx(1 / N)


def test_sampler_kwargs_are_validated() -> None:
    from agentrl_recipe.core.algos.sampler import SamplerSettings

    wired = {"masks": {}, "filter_groups": {}, "train_batch_size": 4, "max_response_length": 8}
    assert SamplerSettings.from_kwargs(wired).masks.enabled == ()
    with pytest.raises(ValueError, match=r"masks: \$\{agentrl.masks\}"):  # unwired: would silently do nothing
        SamplerSettings.from_kwargs({k: v for k, v in wired.items() if k != "masks"})
    with pytest.raises(ValueError, match="void_turns"):
        SamplerSettings.from_kwargs({**wired, "masks": {"void_turns": True}})
    with pytest.raises(ValueError, match="metric"):
        SamplerSettings.from_kwargs({**wired, "filter_groups": {"enable": True}})
    with pytest.raises(ValueError, match="train_batch_size"):
        SamplerSettings.from_kwargs(
            {**wired, "filter_groups": {"enable": True, "metric": "acc"}, "train_batch_size": None}
        )
    with pytest.raises(ValueError, match="unknown key"):
        SamplerSettings.from_kwargs({**wired, "mask": {}})


def _trainer_config(masks: dict, mode: str = "sync", sampler: str = "AgentRLReplayBuffer"):
    """The wiring verl_configs ship: values in their one home, interpolated into the sampler kwargs."""
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "data": {"train_batch_size": B, "max_response_length": MAX_LEN},
            "algorithm": {
                "filter_groups": {
                    "_target_": "verl.trainer.config.FilterGroupsConfig",
                    "enable": True,
                    "metric": "acc",
                    "max_num_gen_batches": 10,
                    "max_inflight_gen_batches": 1,
                }
            },
            "agentrl": {"masks": masks, "roc": {"enable": False}},
            "trainer": {
                "use_v1": True,
                "v1": {
                    "trainer_mode": mode,
                    mode: {},
                    "sampler": {
                        "max_off_policy_threshold": None,
                        "max_off_policy_strategy": "drop",
                        "sync_refill_failed_groups": False,
                        "custom_sampler": {"path": "pkg://agentrl_recipe.core.algos.sampler", "name": sampler},
                        "sampler_kwargs": {
                            "masks": "${agentrl.masks}",
                            "roc": "${agentrl.roc}",
                            "filter_groups": "${algorithm.filter_groups}",
                            "train_batch_size": "${data.train_batch_size}",
                            "max_response_length": "${data.max_response_length}",
                            "sync_refill_failed_groups": "${trainer.v1.sampler.sync_refill_failed_groups}",
                        },
                    },
                },
            },
        }
    )


def test_verl_trainer_builds_our_buffer_from_config() -> None:
    """verl's own PPOTrainer._build_replay_buffer loads the sampler from trainer.v1.sampler.custom_sampler."""
    from types import SimpleNamespace

    from verl.trainer.ppo.v1.trainer_base import PPOTrainer

    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer, check_trainer_config

    cfg = _trainer_config({"void_turn": True, "overlong_filter": True})
    trainer = SimpleNamespace(config=cfg, trainer_mode="sync", _add_prompts_to_generate=lambda n: n)
    buffer = PPOTrainer._build_replay_buffer(trainer)
    assert type(buffer) is AgentRLReplayBuffer
    assert buffer.settings.masks.enabled == ("void_turn", "overlong_filter")
    assert buffer.filter_groups_metric == "acc" and buffer.gen_batch_size == 1 and buffer.max_num_gen_batches == 10
    assert buffer.settings.max_response_length == MAX_LEN
    assert check_trainer_config(cfg) == []


def test_check_trainer_config_reports_a_mask_that_would_do_nothing() -> None:
    from agentrl_recipe.core.algos.sampler import check_trainer_config

    cfg = _trainer_config({"infra_failure": True})
    cfg.trainer.v1.sampler.custom_sampler.path = None  # verl's built-in buffer: the mask would be ignored
    assert any("custom_sampler" in problem for problem in check_trainer_config(cfg))
    cfg = _trainer_config({"infra_failure": True}, mode="colocate_async")  # sync sampler in an async mode
    assert any("AgentRLReplayBufferAsync" in problem for problem in check_trainer_config(cfg))
    cfg = _trainer_config({"infra_failure": True})
    cfg.trainer.use_v1 = False
    assert any("use_v1" in problem for problem in check_trainer_config(cfg))
    cfg = _trainer_config({"void_turn": True})
    cfg.agentrl.roc = {"enable": True, "keep_per_group": 8}
    del cfg.trainer.v1.sampler.sampler_kwargs["roc"]  # RoC on but not wired: the sampler would never see it
    assert any("sampler_kwargs.roc" in problem for problem in check_trainer_config(cfg))
    cfg = _trainer_config({})
    cfg.algorithm.filter_groups.enable = False
    assert check_trainer_config(cfg) == []  # nothing needs the sampler


def test_roc_keeps_the_clean_correct_trajectories_by_masking_the_rest(tq) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBuffer

    # one group of 4: two correct (session 0 with failing tool calls, session 1 clean), two incorrect
    tools = {names.FIELD_TOOL_CALLS: 4}
    extra = {(0, 0): {**tools, names.FIELD_TOOL_FAILURES: 3}, (0, 1): {**tools, names.FIELD_TOOL_FAILURES: 0}}
    rollout = ScriptedRollout(tq, iter([[1.0, 1.0, 0.0, 0.0]]), extra=extra)
    buffer = make_buffer(AgentRLReplayBuffer, rollout, roc={"enable": True, "keep_per_group": 2})
    rollout.submit(1)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=1)
    masks = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["loss_mask"])["loss_mask"]
    kept = {key.split("_")[1]: bool(row.sum() > 0) for key, row in zip(batch.keys, masks.unbind(), strict=True)}
    assert kept["0"] is False and kept["1"] is True  # the clean correct one
    assert sum(kept.values()) == 2
    assert metrics["training/roc/dropped_trajectories"] == 2
    assert metrics["training/roc/correct_penalty_mean"] == pytest.approx(0.375)
    assert metrics["training/roc/kept_correct_penalty_mean"] == 0.0


def test_async_buffer_applies_masks_and_rejects_the_sync_cap(tq) -> None:
    from agentrl_recipe.core.algos.sampler import AgentRLReplayBufferAsync

    rollout = ScriptedRollout(tq, itertools.repeat("var"), extra={(0, 0): {names.FIELD_TOOL_INFRA_FAILURE: True}})
    with pytest.raises(ValueError, match="sync dynamic sampling only"):
        make_buffer(AgentRLReplayBufferAsync, rollout, filter_groups=DAPO)
    buffer = make_buffer(AgentRLReplayBufferAsync, rollout, masks={"infra_failure": True})
    rollout.submit(B)
    batch, metrics = buffer.sample(global_steps=1, partition_id="train", batch_size=B)
    assert len(batch) == B * N and metrics["training/masks/masked_trajectories"] == 1
