"""The adapter over verl's private ``ReplayBuffer`` members: this verl matches it, a changed verl fails naming the
symbol, and each hook is reached from the private step it stands for (no TransferQueue needed)."""

from __future__ import annotations

import types
from collections import Counter

import pytest
from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

from agentrl_recipe.training.verl_adapters import replay_buffer

SYMBOL = r"verl\.trainer\.ppo\.v1\.replay_buffer\.ReplayBuffer"


def make(cls=replay_buffer.HookedReplayBuffer, **kwargs):
    return cls(
        trainer_mode="sync",
        trainer_config={},
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs={},
        poll_interval=0.0,
        **kwargs,
    )


def test_this_verl_is_the_one_the_adapter_was_written_for() -> None:
    # If this fails, verl changed a private member of its ReplayBuffer: the message names it; update the adapter.
    assert replay_buffer.problems() == []
    replay_buffer.check()
    assert set(replay_buffer.OVERRIDDEN) <= set(vars(replay_buffer.HookedReplayBuffer))
    assert "select_groups" in replay_buffer.HOOKS and "_select_prompt_uids" not in replay_buffer.HOOKS


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda mp: mp.delattr(ReplayBuffer, "_select_prompt_uids"), rf"{SYMBOL}\._select_prompt_uids is gone"),
        (
            lambda mp: mp.setattr(ReplayBuffer, "_wait_for_next_poll", lambda self, partition_id: 0.0),
            rf"{SYMBOL}\._wait_for_next_poll\(self, partition_id\) no longer takes",
        ),
        (
            lambda mp: mp.setattr(verl_replay_buffer, "_accumulate_eviction_metrics", lambda acc, new: None),
            r"verl\.trainer\.ppo\.v1\.replay_buffer\._accumulate_eviction_metrics is gone or no longer takes",
        ),
        (
            lambda mp: mp.setattr(ReplayBuffer, "sample", lambda self, global_steps, partition_id, batch_size: None),
            rf"{SYMBOL}\.sample no longer calls _terminal_eviction_reasons",
        ),
        (
            lambda mp: mp.setattr(ReplayBuffer, "select_groups", lambda self: None, raising=False),
            rf"{SYMBOL}\.select_groups now exists and would be shadowed",
        ),
    ],
)
def test_a_changed_verl_fails_naming_the_symbol(monkeypatch, change, message) -> None:
    change(monkeypatch)
    with pytest.raises(RuntimeError, match=message):
        replay_buffer.check()
    monkeypatch.setattr(replay_buffer, "_checked", False)
    with pytest.raises(RuntimeError, match=message):  # a buffer refuses to start
        make()


def test_an_instance_without_verls_classification_cache_refuses_to_start(monkeypatch) -> None:
    init = ReplayBuffer.__init__

    def without_cache(self, **kwargs):
        init(self, **kwargs)
        del self._dapo_classification_cache

    monkeypatch.setattr(ReplayBuffer, "__init__", without_cache)
    with pytest.raises(RuntimeError, match=rf"{SYMBOL} instances lack the dicts \['_dapo_classification_cache'\]"):
        make()


def test_defaults_are_verls_behaviour() -> None:
    buffer = make()
    buffer.prompt_global_steps["train"] = {"new": 3, "old": 1}
    buffer.partitions["train"] = {"old_0_0": {"status": "success"}}
    selected, snapshot, steps = buffer.select_groups("train", {"new", "old"}, 1)
    assert selected == ["old"] and snapshot == {"old_0_0": {"status": "success"}} and steps == {"new": 3, "old": 1}
    buffer.finished_keys["train"] = {"new", "old"}
    reasons = buffer.eviction_reasons(1, "train")
    assert reasons == (set(), set(), set(), Counter())
    assert buffer.sampleable_groups("train", reasons) == {"new", "old"}
    buffer._dapo_classification_cache["train"] = {"new": 0.0, "old": None}
    assert buffer.shared_metric_value("train", "new") == 0.0 and buffer.shared_metric_value("train", "old") is None
    acc: dict = {}
    replay_buffer.accumulate_eviction_metrics(acc, {"training/filter_groups/evicted_samples": 2}, 0)
    replay_buffer.accumulate_eviction_metrics(acc, {"training/filter_groups/evicted_samples": 1}, 0)
    assert acc == {"training/filter_groups/evicted_samples": 3}


class Recording(replay_buffer.HookedReplayBuffer):
    """Every hook records its call and changes verl's result, so a hook verl no longer reaches shows."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.calls: list[tuple] = []

    def filter_eviction_reasons(self, partition_id, reasons):
        self.calls.append(("filter_eviction_reasons", partition_id, reasons))
        return reasons[0], set(), reasons[2], Counter()

    def on_groups_evicted(self, stale_count, metrics):
        self.calls.append(("on_groups_evicted", stale_count, metrics))

    def reorder_selection(self, partition_id, sampleable, batch_size, selected, steps):
        self.calls.append(("reorder_selection", selected))
        return sorted(sampleable, key=lambda uid: -steps[uid])[:batch_size]

    def before_poll_wait(self, partition_id):
        self.calls.append(("before_poll_wait", partition_id))


def test_verls_private_steps_reach_the_hooks(monkeypatch) -> None:
    buffer = make(Recording)
    buffer.prompt_global_steps["train"] = {"new": 3, "old": 1}
    assert buffer._select_prompt_uids("train", {"new", "old"}, 1)[0] == ["new"]
    assert buffer.calls.pop() == ("reorder_selection", ["old"])

    monkeypatch.setattr(buffer, "_dapo_filtered_keys", lambda partition_id: ({"old"}, Counter({0.0: 1})))
    assert buffer._terminal_eviction_reasons(1, "train") == (set(), set(), set(), Counter())
    assert buffer.calls.pop() == ("filter_eviction_reasons", "train", (set(), {"old"}, set(), Counter({0.0: 1})))

    monkeypatch.setattr(verl_replay_buffer, "tq", types.SimpleNamespace(kv_clear=lambda **kwargs: None))
    evicted = buffer._evict_terminal_groups(1, "train", (set(), {"old"}, set(), Counter({0.0: 1})))
    assert evicted[0] == {"old"}
    name, stale_count, metrics = buffer.calls.pop()
    assert (name, stale_count, metrics["training/filter_groups/evicted_samples"]) == ("on_groups_evicted", 0, 1)
    buffer._evict_terminal_groups(1, "train", (set(), set(), set(), Counter()))
    assert buffer.calls == []  # nothing evicted: no call

    buffer._wait_for_next_poll("train", 0.0)
    assert buffer.calls.pop() == ("before_poll_wait", "train")
