"""verl's FSDP2 engines registered for the CPU device (``EngineRegistry.register(..., device="cpu")``).

verl 0.9.1 registers ``FSDPEngineWithLMHead`` / ``FSDPEngineWithValueHead`` for ``cuda`` and ``npu`` only
(``workers/engine/fsdp/transformer_impl.py:1143,1594``). The same classes run on CPU with gloo under FSDP2, sdpa or
eager attention and ``use_remove_padding=false``. Only the ``fsdp2`` backend is registered: FSDP1 fails on CPU
(``device_id`` / ``sync_module_states``), so a CPU config that asks for ``fsdp`` gets verl's own "No engine registered
for device='cpu' … backend='fsdp'" at start instead of a crash mid-init.
"""

from __future__ import annotations

from verl.workers.engine.base import EngineRegistry

CPU_DEVICE = "cpu"
CPU_BACKENDS = ("fsdp2",)


_registered = False


def register_cpu_engines() -> None:
    """Register the FSDP2 LM-head and value-head engines for ``device="cpu"`` (once per process)."""
    global _registered
    if _registered:
        return
    # Imported here: the FSDP engine module is heavy and only CPU runs need it at plugin load.
    from verl.workers.engine.fsdp.transformer_impl import FSDPEngineWithLMHead, FSDPEngineWithValueHead

    for model_type, engine_cls in (("language_model", FSDPEngineWithLMHead), ("value_model", FSDPEngineWithValueHead)):
        EngineRegistry.register(model_type=model_type, backend=list(CPU_BACKENDS), device=CPU_DEVICE)(engine_cls)
    _registered = True
