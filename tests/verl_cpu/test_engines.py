"""verl's FSDP2 engines registered for device "cpu" (only when the CPU platform is selected)."""

from __future__ import annotations

import textwrap

from cpu_helpers import run_probe

ENGINE_PROBE = textwrap.dedent(
    """
    import json
    import verl  # noqa: F401
    from verl.workers.engine.base import EngineRegistry
    found = {}
    for model_type in ("language_model", "value_model"):
        for backend in ("fsdp2", "fsdp"):
            try:
                found[f"{model_type}/{backend}"] = EngineRegistry.get_engine_cls(model_type, backend).__name__
            except ValueError as exc:
                found[f"{model_type}/{backend}"] = "error: " + str(exc)[:60]
    print("@@" + json.dumps(found))
    """
)


def test_fsdp2_engines_resolve_for_cpu_and_fsdp1_is_refused() -> None:
    found = run_probe(ENGINE_PROBE)
    assert found["language_model/fsdp2"] == "FSDPEngineWithLMHead"
    assert found["value_model/fsdp2"] == "FSDPEngineWithValueHead"
    # FSDP1 fails on CPU (device_id / sync_module_states): verl's own lookup error at start, not a crash mid-init.
    assert found["language_model/fsdp"].startswith("error: No engine registered for device='cpu'")
