"""A scripted rollout on a real TransferQueue, for the replay-buffer tests (test_sampler, test_infra_guard), and the
sampler wiring verl_configs ship (test_sampler).

The scripted rollout stands in for verl's AgentLoopWorkerTQ: it writes prompt groups into TransferQueue with the same
keys ({uid}_{session}_{index}), tags and fields (response_mask, loss_mask, rm_scores, extra_fields with
reward_extra_info) that verl's agent loop writes, so verl's own ReplayBuffer code does the sampling.
"""

from __future__ import annotations

import uuid

import torch
from omegaconf import OmegaConf
from verl.trainer.ppo.v1.utils import MetricsAggregator
from verl.utils.tensordict_utils import list_of_dict_to_tensordict

N = 2  # rollout.n
B = 4  # train_batch_size (prompts)
MAX_LEN = 8
DAPO = {"enable": True, "metric": "acc", "max_num_gen_batches": 10, "max_inflight_gen_batches": 1}


class ScriptedRollout:
    """Each prompt's group is 'var' (acc 1 and 0) or 'zero' (all acc 0); ``extra`` adds per-session fields."""

    def __init__(self, tq, script, extra=None, finish_now=True):
        self.tq, self.script, self.extra = tq, iter(script), extra or {}
        self.prompts, self.running = 0, []
        self.finish_now = finish_now
        self.step = 1

    def submit(self, num_prompts: int, finished: bool = True) -> int:
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


def make_buffer(
    cls, rollout: ScriptedRollout, masks=None, filter_groups=None, roc=None, infra_guard=None, mode="sync", config=None
):
    rollout.refills = []
    kwargs = {
        "masks": masks or {},
        "roc": roc or {},
        "infra_guard": infra_guard or {},
        "filter_groups": filter_groups or {"enable": False},
        "train_batch_size": B,
        "max_response_length": MAX_LEN,
        "batch_partition": "verl",
    }
    return cls(
        trainer_mode=mode,
        trainer_config=config or {},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=kwargs,
        refill_fn=rollout.refill,
        poll_interval=0.01,
    )


def step_metrics(*calls: dict, sample_counts=None) -> dict:
    """One step's metrics as verl's v1 trainer logs them: each sample call's through ``MetricsAggregator``."""
    aggregator = MetricsAggregator()
    for i, metrics in enumerate(calls):
        aggregator.add_step_metrics(metrics, sample_count=sample_counts[i] if sample_counts else 1)
    return aggregator.get_aggregated_metrics()


def groups_of(tq, batch) -> dict[str, list[float]]:
    data = tq.kv_batch_get(keys=batch.keys, partition_id="train", select_fields=["extra_fields"])
    out: dict[str, list[float]] = {}
    for key, extra in zip(batch.keys, data["extra_fields"], strict=True):
        out.setdefault(key.split("_")[0], []).append(getattr(extra, "data", extra)["reward_extra_info"]["acc"])
    return out


def trainer_config(masks: dict, mode: str = "sync", sampler: str = "AgentRLReplayBuffer"):
    """The wiring verl_configs ship: values in their one home, interpolated into the sampler kwargs."""
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
                        "custom_sampler": {"path": "pkg://agentrl_recipe.training.algos.sampler", "name": sampler},
                        "sampler_kwargs": {
                            "masks": "${agentrl.masks}",
                            "batch_partition": "${agentrl_compat:batch_partition}",
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
