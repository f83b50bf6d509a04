"""The agentrl_cpu platform as verl sees it: selected by VERL_PLATFORM or where nothing else can run, device helpers
answering for the host."""

from __future__ import annotations

import textwrap

import pytest
from cpu_helpers import run_probe
from verl.plugin.platform.platform_base import PlatformBase

from verl_cpu import names
from verl_cpu.platform import CPUPlatform

DEVICE_PROBE = textwrap.dedent(
    """
    import json
    import verl  # noqa: F401  (loads the plugin)
    from verl.plugin.platform import get_platform
    from verl.utils.device import get_device_id, get_device_name, get_nccl_backend, get_resource_name, get_torch_device
    import verl.utils.distributed as dist
    p = get_platform()
    free, total = get_torch_device().mem_get_info()
    print("@@" + json.dumps({
        "platform": type(p).__module__ + "." + type(p).__name__,
        "device": get_device_name(), "backend": get_nccl_backend(), "device_id": get_device_id(),
        "ray_resource": get_resource_name(), "mem_ok": 0 < free <= total,
        "init_fn": dist.initialize_global_process_group_ray.__module__,
    }))
    """
)


def test_verl_platform_cpu_selects_it_in_a_fresh_process() -> None:
    seen = run_probe(DEVICE_PROBE)
    assert seen == {
        "platform": "verl_cpu.platform.CPUPlatform",
        "device": "cpu",
        "backend": "gloo",
        "device_id": "cpu",  # a string: verl formats f"{device_name}:{id}" into torch devices otherwise
        "ray_resource": "GPU",  # the logical token verl's resource pools know (see platform.py)
        "mem_ok": True,
        "init_fn": "verl_cpu.distributed",
    }


def test_another_verl_platform_keeps_verls_choice() -> None:
    code = textwrap.dedent(
        """
        import json
        import verl  # noqa: F401
        from verl.plugin.platform import PlatformRegistry, get_platform
        import verl.utils.distributed as dist
        from verl_cpu import names
        print("@@" + json.dumps({
            "registered": PlatformRegistry.get(names.PLATFORM) is not None,
            "chosen": type(get_platform()).__name__,
            "init_fn": dist.initialize_global_process_group_ray.__module__,
        }))
        """
    )
    seen = run_probe(code, cpu=False)
    assert seen == {"registered": True, "chosen": "PlatformCUDA", "init_fn": "verl.utils.distributed"}


def test_every_abstract_member_of_verls_platform_base_is_implemented() -> None:
    assert not CPUPlatform.__abstractmethods__, "verl's PlatformBase gained members; implement them in cpu/platform.py"
    assert issubclass(CPUPlatform, PlatformBase)


def test_auto_detected_only_where_nothing_else_can_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """verl probes registered platforms when VERL_PLATFORM is unset: the CPU one answers only on a CPU-only torch
    build with no accelerator another platform detects: a GPU node (or a CPU-only Ray actor on one) never picks it."""
    import torch

    assert names.PLATFORM.startswith("agentrl_")
    monkeypatch.delenv(names.PLATFORM_ENV, raising=False)
    for cuda, other, chosen in ((None, False, True), (None, True, False), ("12.8", False, False)):
        names._no_accelerator.cache_clear()
        monkeypatch.setattr(torch.version, "cuda", cuda)
        monkeypatch.setattr(names, "other_platform_detected", lambda other=other: other)
        assert CPUPlatform().is_platform_available(use_smi_check=True) is chosen, (cuda, other)
    names._no_accelerator.cache_clear()
    monkeypatch.setenv(names.PLATFORM_ENV, "nvidia")  # an explicit choice stands
    assert names.cpu_platform_selected() is False


def test_a_plain_import_on_a_host_without_accelerator_selects_it() -> None:
    if names.other_platform_detected():
        pytest.skip("this host has an accelerator: verl's own choice stands")
    code = "import json, verl\nfrom verl.plugin.platform import get_platform\n"
    code += "print('@@' + json.dumps(type(get_platform()).__name__))"
    seen = run_probe(code, extra_env={"VERL_PLATFORM": ""})
    assert seen == "CPUPlatform"


@pytest.mark.parametrize("num_gpus", [1, 2])
def test_ray_options_ask_for_logical_gpus(num_gpus: int) -> None:
    assert CPUPlatform().ray_resource_options(num_gpus) == {"num_gpus": num_gpus}
