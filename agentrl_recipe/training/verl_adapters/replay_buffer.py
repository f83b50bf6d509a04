"""verl's sync v1 replay buffer, ``verl.trainer.ppo.v1.replay_buffer.ReplayBuffer``: its private members, in one place.

verl 0.9.1's ``ReplayBuffer.sample`` is one polling loop with no public hook. The recipe's dynamic-sampling cap
(:mod:`agentrl_recipe.training.algos.sampler`) has to step into four of its private methods and call four more
private members. :class:`HookedReplayBuffer` is the only place they are named: it overrides each private step once and
routes it to a public hook (whose default is verl's behaviour), and exposes the private helpers as public methods.

:data:`METHODS` holds each private method's parameters as verl 0.9.1 has them; :func:`problems` compares them with
this verl (and that ``sample`` still calls the overridden steps), and a buffer refuses to start, naming the verl
symbol, when they differ — an override of a renamed method would otherwise be skipped without a word. On a verl
upgrade, this module is the one to change.
"""

from __future__ import annotations

import inspect
from collections import Counter
from typing import Any

from transfer_queue import KVBatchMeta
from verl.trainer.ppo.v1 import replay_buffer as verl_replay_buffer
from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

SYMBOL = "verl.trainer.ppo.v1.replay_buffer.ReplayBuffer"
MODULE = "verl.trainer.ppo.v1.replay_buffer"

# verl's private methods the recipe uses -> their parameters after ``self`` (verl 0.9.1)
METHODS = {
    "_terminal_eviction_reasons": ("global_steps", "partition_id"),  # overridden: filter_eviction_reasons
    "_evict_terminal_groups": ("global_steps", "partition_id", "eviction_reasons"),  # overridden: on_groups_evicted
    "_select_prompt_uids": ("partition_id", "sampleable_keys", "batch_size"),  # overridden: reorder_selection
    "_wait_for_next_poll": ("partition_id", "last_debug_time"),  # overridden: before_poll_wait
    "_sync_metadata_from_transfer_queue": (),
    "_sampleable_terminal_keys": ("partition_id", "eviction_reasons"),
    "_materialize_batch": ("partition_id", "selected_prompt_uids", "partition_snapshot"),
}
OVERRIDDEN = tuple(list(METHODS)[:4])  # each must still be called by ReplayBuffer.sample, or its hook never runs
FUNCTIONS = {"_accumulate_eviction_metrics": ("acc", "new", "stale_count")}  # module-level, in MODULE
ATTRIBUTES = ("_dapo_classification_cache",)  # per instance: partition -> uid -> shared metric value (None: variance)

# (stale uids, DAPO-filtered uids, failed uids, DAPO metric value -> group count), as verl passes them around
EvictionReasons = tuple[set[str], set[str], set[str], Counter]

_checked = False


def _parameters(function: Any) -> tuple[str, ...] | None:
    try:
        return tuple(inspect.signature(function).parameters)
    except (TypeError, ValueError):
        return None


def problems() -> list[str]:
    """How this verl differs from what :class:`HookedReplayBuffer` expects (empty list = as in verl 0.9.1)."""
    found = []
    for name, params in METHODS.items():
        member = inspect.getattr_static(ReplayBuffer, name, None)
        if not callable(member):
            found.append(f"{SYMBOL}.{name} is gone")
        elif _parameters(member) != ("self", *params):
            found.append(f"{SYMBOL}.{name}{inspect.signature(member)} no longer takes (self, {', '.join(params)})")
    for name, params in FUNCTIONS.items():
        function = getattr(verl_replay_buffer, name, None)
        if not callable(function) or _parameters(function) != params:
            found.append(f"{MODULE}.{name} is gone or no longer takes ({', '.join(params)})")
    try:
        source = inspect.getsource(ReplayBuffer.sample)
    except (OSError, TypeError):  # no source shipped: the tests, which have it, check this
        source = None
    if source is not None:
        found += [f"{SYMBOL}.sample no longer calls {name}" for name in OVERRIDDEN if f"self.{name}(" not in source]
    found += [f"{SYMBOL}.{name} now exists and would be shadowed" for name in HOOKS if hasattr(ReplayBuffer, name)]
    return found


def check() -> None:
    """Raise, naming the verl symbols, if this verl's ReplayBuffer is not the one this adapter was written for."""
    found = problems()
    if found:
        raise RuntimeError(f"verl changed its replay buffer; update {__name__}: {'; '.join(found)}")


def accumulate_eviction_metrics(acc: dict, new: dict, stale_count: int) -> None:
    """verl's merge of one poll's eviction metrics into ``acc`` (in place)."""
    verl_replay_buffer._accumulate_eviction_metrics(acc, new, stale_count)


class HookedReplayBuffer(ReplayBuffer):
    """verl's sync ReplayBuffer with its private sampling steps routed to public hooks (defaults: verl's behaviour)."""

    def __init__(self, **kwargs: Any) -> None:
        global _checked
        if not _checked:
            check()
            _checked = True
        super().__init__(**kwargs)
        missing = [name for name in ATTRIBUTES if not isinstance(getattr(self, name, None), dict)]
        if missing:
            raise RuntimeError(f"verl changed its replay buffer: {SYMBOL} instances lack the dicts {missing}")

    # ---- hooks a subclass overrides ---------------------------------------------------------------------------------
    def filter_eviction_reasons(self, partition_id: str, reasons: EvictionReasons) -> EvictionReasons:
        """The groups verl would evict this poll; return fewer to keep some."""
        return reasons

    def on_groups_evicted(self, stale_count: int, metrics: dict) -> None:
        """Called after verl evicted groups, with that poll's eviction metrics."""

    def reorder_selection(
        self, partition_id: str, sampleable: set[str], batch_size: int, selected: list[str], steps: dict[str, int]
    ) -> list[str]:
        """The prompt uids to train on; ``selected`` is verl's choice, ``steps`` each uid's global step."""
        return selected

    def before_poll_wait(self, partition_id: str) -> None:
        """Called each time ``sample`` is about to sleep for the next poll; may raise to leave verl's loop."""

    # ---- verl's private helpers, as public calls --------------------------------------------------------------------
    def sync_metadata(self) -> None:
        self._sync_metadata_from_transfer_queue()

    def eviction_reasons(self, global_steps: int, partition_id: str) -> EvictionReasons:
        return self._terminal_eviction_reasons(global_steps, partition_id)

    def sampleable_groups(self, partition_id: str, reasons: EvictionReasons) -> set[str]:
        return self._sampleable_terminal_keys(partition_id, reasons)

    def select_groups(
        self, partition_id: str, sampleable: set[str], batch_size: int
    ) -> tuple[list[str], dict[str, dict], dict[str, int]]:
        """(selected prompt uids, partition snapshot, uid -> global step), through :meth:`reorder_selection`."""
        return self._select_prompt_uids(partition_id, sampleable, batch_size)

    def materialize_batch(self, partition_id: str, selected: list[str], snapshot: dict[str, dict]) -> KVBatchMeta:
        return self._materialize_batch(partition_id, selected, snapshot)

    def shared_metric_value(self, partition_id: str, uid: str) -> float | None:
        """The value every trajectory of a finished group shares in the DAPO metric (``None``: the group varies)."""
        return self._dapo_classification_cache[partition_id].get(uid)

    # ---- verl's private steps, overridden once ----------------------------------------------------------------------
    def _terminal_eviction_reasons(self, global_steps: int, partition_id: str) -> EvictionReasons:
        reasons = super()._terminal_eviction_reasons(global_steps, partition_id)
        return self.filter_eviction_reasons(partition_id, reasons)

    def _evict_terminal_groups(
        self, global_steps: int, partition_id: str, eviction_reasons: EvictionReasons
    ) -> tuple[set[str], int, int, dict]:
        result = super()._evict_terminal_groups(global_steps, partition_id, eviction_reasons)
        evicted, stale_count, _dapo_count, metrics = result
        if evicted:
            self.on_groups_evicted(stale_count, metrics)
        return result

    def _select_prompt_uids(
        self, partition_id: str, sampleable_keys: set[str], batch_size: int
    ) -> tuple[list[str], dict[str, dict], dict[str, int]]:
        selected, snapshot, steps = super()._select_prompt_uids(partition_id, sampleable_keys, batch_size)
        return self.reorder_selection(partition_id, sampleable_keys, batch_size, selected, steps), snapshot, steps

    def _wait_for_next_poll(self, partition_id: str, last_debug_time: float) -> float:
        self.before_poll_wait(partition_id)
        return super()._wait_for_next_poll(partition_id, last_debug_time)


# the public names above: verl must not grow members of the same name (they would be shadowed)
HOOKS = tuple(
    name for name, value in vars(HookedReplayBuffer).items() if not name.startswith("_") and inspect.isfunction(value)
)
