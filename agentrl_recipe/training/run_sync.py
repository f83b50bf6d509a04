"""Run a coroutine from sync code, whether or not this thread already runs an event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any


def run_coroutine_sync(coro: Any) -> Any:
    """``asyncio.run`` that also works when this thread already runs a loop (runs the coroutine in a helper thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="agentrl-grade-sync")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]
