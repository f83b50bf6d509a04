"""Runtime fix (vLLM on CPU): keep each linear layer's weight after packing, so verl can load new weights again.

After loading, vLLM's CPU build packs every unquantized linear weight for its GEMM kernels and replaces
``layer.weight`` with an empty ``Parameter`` (``vllm/model_executor/layers/linear.py``,
``UnquantizedLinearMethod.process_weights_after_loading`` → ``dispatch_cpu_unquantized_gemm(layer,
remove_weight=True)`` in ``vllm/model_executor/layers/utils.py``). The empty parameter has no ``weight_loader``, so
the next ``model.load_weights`` — verl's weight sync after every actor update — fails with ``'Parameter' object has
no attribute 'weight_loader'``. With ``remove_weight=False`` the original parameter stays: the sync writes into it and
verl's ``process_weights_after_loading`` re-packs from the new values. The cost is the linear weights held twice
(packed and plain) in the rollout server.

:func:`apply` wraps ``dispatch_cpu_unquantized_gemm`` to force ``remove_weight=False``: at once when the module is
already imported, else when it is first imported (:mod:`verl_cpu.import_hook`), so it holds in vLLM's worker processes,
which import verl (and this plugin) before they load the model.

Not a vLLM bug: vLLM's own reload path (``initialize_layerwise_reload`` / ``finalize_layerwise_reload``, behind its
``reload_weights`` and weight-transfer engines) reloads a packed CPU layer without the second copy; verl 0.9.1 calls
``model.load_weights`` directly. verl PR #7987 (open) moves verl's sync onto vLLM's reload path; delete this module
once verl has it (``UPSTREAM.md``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from verl_cpu import import_hook

TARGET_MODULE = "vllm.model_executor.layers.utils"
TARGET_FUNCTION = "dispatch_cpu_unquantized_gemm"
_MARK = "__agentrl_keeps_weight__"


def _keep_weight(dispatch: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(dispatch)
    def dispatch_keeping_weight(layer: Any, remove_weight: bool = False, *args: Any, **kwargs: Any) -> Any:
        return dispatch(layer, False, *args, **kwargs)

    setattr(dispatch_keeping_weight, _MARK, True)
    return dispatch_keeping_weight


def patch_module(module: ModuleType) -> None:
    """Wrap ``module.dispatch_cpu_unquantized_gemm`` (idempotent); raise naming the symbol when vLLM renamed it."""
    dispatch = getattr(module, TARGET_FUNCTION, None)
    if dispatch is None:
        raise RuntimeError(f"verl_cpu: vLLM has no {TARGET_MODULE}.{TARGET_FUNCTION}; the CPU reload fix needs it")
    if not getattr(dispatch, _MARK, False):
        setattr(module, TARGET_FUNCTION, _keep_weight(dispatch))


def apply() -> None:
    """Keep CPU linear weights in this process, now or when vLLM's layer utilities are first imported (idempotent)."""
    import_hook.when_imported(TARGET_MODULE, patch_module)
