"""verl on a host without an accelerator: the platform chosen without verl's alarm, and the notices that say nothing
on CPU kept out of the logs (never an ERROR).

- :func:`prefer_cpu_platform` — for a process that reads configs or starts others (a CLI, a launcher): with no
  ``VERL_PLATFORM`` and no accelerator verl can detect, verl would warn "No supported accelerator detected …
  Falling back to 'nvidia'" and then that nvidia is not available. This selects ``agentrl_cpu`` in this process
  only (``verl.plugin.platform.set_platform``): never in the environment, so the processes it starts and any GPU
  node are unaffected. A training process gets ``VERL_PLATFORM`` from the launcher instead.
- :func:`install` — verl's optional engines that are not installed (``megatron engine is not available`` and four
  siblings, a Python warning per process) and vLLM's ``sleep mode is not supported on CPU`` (the CPU configs turn
  sleep mode off; verl's weight sync still asks) are dropped and counted in :data:`DROPPED`. Installed by the plugin
  in every process of a CPU run and by :func:`prefer_cpu_platform`.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections import Counter

from verl_cpu import names

OPTIONAL_ENGINES = r"(torchtitan|veomni|automodel|mindspeed|megatron) engine is not available"  # verl/workers/engine
CPU_NOTICES = {"vllm.v1.worker.cpu_worker": ("sleep mode is not supported on CPU",)}  # logger -> message prefixes
DROPPED: Counter[str] = Counter()  # message prefix -> records dropped in this process


class DropNotices(logging.Filter):
    """Drops records below ERROR that start with one of ``prefixes``, counting them."""

    def __init__(self, prefixes: tuple[str, ...]) -> None:
        super().__init__()
        self.prefixes = prefixes

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= logging.ERROR:
            return True
        message = record.getMessage()
        for prefix in self.prefixes:
            if message.startswith(prefix):
                DROPPED[prefix] += 1
                return False
        return True


def install() -> None:
    """The filters of this module, once per process."""
    warnings.filterwarnings("ignore", message=OPTIONAL_ENGINES, category=UserWarning)
    for name, prefixes in CPU_NOTICES.items():
        target = logging.getLogger(name)
        if not any(isinstance(f, DropNotices) for f in target.filters):
            target.addFilter(DropNotices(prefixes))


def prefer_cpu_platform() -> str | None:
    """Select ``agentrl_cpu`` in this process when neither ``VERL_PLATFORM`` nor an accelerator says otherwise;
    returns the platform name chosen here, or None when verl's own choice stands."""
    if os.environ.get(names.PLATFORM_ENV, "").strip() or names.other_platform_detected():
        return None
    from verl.plugin.platform import set_platform

    from verl_cpu.platform import CPUPlatform

    set_platform(CPUPlatform())
    install()
    return names.PLATFORM
