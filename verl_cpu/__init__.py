"""verl's trainers on CPU, from the plugin: a ``cpu`` platform, the FSDP2 engines registered for it, and the one
runtime fix of verl it needs.

Selected only when asked for (``VERL_PLATFORM=agentrl_cpu``, which the CPU configs' launcher sets for the driver,
torchrun and every Ray worker); on CUDA nothing here changes verl's behaviour. verl has no CPU path of its own
(verl#3266).
"""

from __future__ import annotations

import os

from verl_cpu.names import PLATFORM as PLATFORM_NAME

PLATFORM_ENV = "VERL_PLATFORM"  # verl's own switch (plugin/platform/platform_manager.py::_detect_platform_name)


def cpu_platform_selected() -> bool:
    """True when this process asked verl for the CPU platform (``VERL_PLATFORM=agentrl_cpu``)."""
    return os.environ.get(PLATFORM_ENV, "").strip().lower() == PLATFORM_NAME
