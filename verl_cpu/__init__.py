"""verl's trainers on CPU, from the plugin: a ``cpu`` platform, the FSDP2 engines registered for it, and the one
runtime fix of verl it needs.

Selected only when asked for (``VERL_PLATFORM=agentrl_cpu``, which the CPU configs' launcher sets for the driver,
torchrun and every Ray worker); on CUDA nothing here changes verl's behaviour. verl has no CPU path of its own
(verl#3266).
"""

from __future__ import annotations

# Import verl before any module of this package: verl's plugin loader imports verl_cpu.plugin, which imports
# .checkpoint_engine. A process whose first import is that module (the Ray worker of its mailbox actor) would
# otherwise meet it half-initialised.
import verl  # noqa: F401
