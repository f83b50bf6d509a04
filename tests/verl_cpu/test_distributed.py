"""The gloo fix: verl's process-group initialisers on the CPU platform (and the bug they fix, on verl's own)."""

from __future__ import annotations

import inspect
import textwrap

import verl.utils.distributed as verl_distributed
from cpu_helpers import run_probe

from agentrl_sandbox.ports import free_port
from verl_cpu import distributed


def _torchrun_env() -> dict[str, str]:
    return {
        "RANK": "0",
        "LOCAL_RANK": "0",
        "WORLD_SIZE": "1",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(free_port()),
    }


INIT_PROBE = textwrap.dedent(
    """
    import json
    import torch
    import verl  # noqa: F401
    from verl.utils.distributed import initialize_global_process_group  # bound after the plugin ran, as verl does
    ranks = initialize_global_process_group(timeout_second=60)
    t = torch.ones(2)
    torch.distributed.all_reduce(t)
    print("@@" + json.dumps({"ranks": ranks, "backend": torch.distributed.get_backend(), "sum": t.tolist()}))
    torch.distributed.destroy_process_group()
    """
)


def test_verls_initialiser_runs_on_gloo_with_the_plugin() -> None:
    seen = run_probe(INIT_PROBE, extra_env=_torchrun_env())
    assert seen == {"ranks": [0, 0, 1], "backend": "gloo", "sum": [1.0, 1.0]}


def test_verls_own_initialiser_fails_on_the_cpu_platform() -> None:
    # The bug the module exists for: verl's function builds "cpu:gloo,cpu:gloo", which torch rejects.
    code = textwrap.dedent(
        """
        import json
        import verl  # noqa: F401
        from verl_cpu import distributed
        try:
            distributed._VERL_INIT_RAY(timeout_second=60)
            outcome = "initialised"
        except Exception as exc:
            outcome = type(exc).__name__ + ": " + str(exc)
        print("@@" + json.dumps({"outcome": outcome}))
        """
    )
    outcome = run_probe(code, extra_env=_torchrun_env())["outcome"]
    assert outcome != "initialised" and "cpu" in outcome, outcome


def test_verl_symbols_the_fix_replaces_still_exist() -> None:
    # An upgrade that renames or re-signs these makes the fix a no-op: fail here, naming verl's symbol.
    for name in ("initialize_global_process_group", "initialize_global_process_group_ray"):
        assert hasattr(verl_distributed, name), f"verl.utils.distributed.{name} is gone; update verl_cpu/distributed.py"
    params = inspect.signature(distributed._VERL_INIT_RAY).parameters
    assert {"timeout_second", "backend"} <= set(params), (
        "verl.utils.distributed.initialize_global_process_group_ray changed"
    )
