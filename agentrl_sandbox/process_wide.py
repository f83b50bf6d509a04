"""Process-wide instances keyed by their settings: the one mechanism behind the recipe's shared pools.

An instance is built on first use, shared by every caller in the process, closed at interpreter exit, and forgotten in
a forked child (DataLoader worker, multiprocessing): the child inherits the object but not its threads or helper
processes, so its calls would hang. The parent still owns it; the child builds its own on first use.

Users: the sandbox backends (:func:`agentrl_sandbox.get_sandbox`) and the isolated grader pools
(:func:`agentrl_recipe.training.rewards.isolation.get_isolated_pool`).
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Hashable
from typing import Generic, Protocol, TypeVar


class Closeable(Protocol):
    @property
    def closed(self) -> bool: ...

    def close(self) -> None: ...


T = TypeVar("T", bound=Closeable)


class ProcessWide(Generic[T]):
    """A registry of shared instances of one kind; ``get(key, build)`` returns the live one for ``key``."""

    def __init__(self) -> None:
        self._instances: dict[Hashable, T] = {}
        self._lock = threading.Lock()
        atexit.register(self.close_all)
        os.register_at_fork(after_in_child=self._forget)

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The instance for ``key``; ``build()`` makes one when there is none yet or the last one was closed."""
        with self._lock:
            instance = self._instances.get(key)
            if instance is None or instance.closed:
                instance = self._instances[key] = build()
            return instance

    def close_all(self) -> None:
        """Close every instance (also runs at interpreter exit); the next ``get`` builds anew."""
        with self._lock:
            instances = list(self._instances.values())
            self._instances.clear()
        for instance in instances:
            instance.close()

    def _forget(self) -> None:
        self._lock = threading.Lock()  # another thread may have held it at the fork
        self._instances.clear()
