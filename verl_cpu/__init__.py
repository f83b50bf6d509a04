"""verl's trainers on CPU, from the plugin: a ``cpu`` platform, the FSDP2 engines registered for it, and the one
runtime fix of verl it needs.

Selected by ``VERL_PLATFORM=agentrl_cpu`` (the CPU configs' launcher sets it for the driver, torchrun and every Ray
worker), or by verl's own platform probe where nothing else can run (a CPU-only torch build, no accelerator: see
:func:`verl_cpu.names.cpu_platform_selected`); on CUDA nothing here changes verl's behaviour. verl has no CPU path of
its own (verl#3266).
"""

from __future__ import annotations

# Import verl before any module of this package: verl's plugin loader imports verl_cpu.plugin, which imports
# .checkpoint_engine. A process whose first import is that module (the Ray worker of its mailbox actor) would
# otherwise meet it half-initialised.
import verl  # noqa: F401
