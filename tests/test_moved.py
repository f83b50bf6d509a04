"""The deprecated import paths (agentrl_recipe/_moved.py): an old name is the same module object as the new one, with
a DeprecationWarning naming the new path — so copied configs that name old class paths keep working."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from agentrl_recipe import _moved


def _forget(monkeypatch: pytest.MonkeyPatch, old: str) -> None:
    """Import ``old`` afresh in this test (an earlier import left it in sys.modules and as an attribute of its
    package); restored afterwards."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        monkeypatch.delitem(sys.modules, name)
    parent, _, leaf = old.rpartition(".")
    if parent in sys.modules:
        monkeypatch.delattr(sys.modules[parent], leaf, raising=False)


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_every_old_name_is_the_new_module_and_warns(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    new = importlib.import_module(_moved.MOVED[old])
    _forget(monkeypatch, old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated: import {_moved.MOVED[old]}$"):
        module = importlib.import_module(old)
    assert module is new
    assert module.__name__ == module.__spec__.name == _moved.MOVED[old]  # the module keeps its own spec


def test_submodules_and_class_paths_of_old_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    from hydra.utils import get_class
    from verl.utils.import_utils import load_extern_object

    from agentrl_recipe.core.algos import sampler
    from agentrl_recipe.core.tools.code_interpreter import CodeInterpreterTool

    _forget(monkeypatch, "agentrl_recipe.tools")
    _forget(monkeypatch, "agentrl_recipe.algos")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # what a copied tool YAML and grpo_tcr.yaml's custom sampler name
        assert get_class("agentrl_recipe.tools.code_interpreter.CodeInterpreterTool") is CodeInterpreterTool
        buffer = load_extern_object("pkg://agentrl_recipe.algos.sampler", "AgentRLReplayBuffer")
    assert buffer is sampler.AgentRLReplayBuffer
    assert sys.modules["agentrl_recipe.algos.sampler"] is sampler
    messages = {str(w.message) for w in caught if w.category is DeprecationWarning}
    assert "agentrl_recipe.tools is deprecated: import agentrl_recipe.core.tools" in messages
    assert "agentrl_recipe.algos.sampler is deprecated: import agentrl_recipe.core.algos.sampler" in messages


def test_the_longest_old_prefix_wins() -> None:
    assert _moved.new_name("agentrl_recipe.tools.cli") == "agentrl_recipe.cli.tools"
    assert _moved.new_name("agentrl_recipe.tools.sandbox.local") == "agentrl_recipe.core.tools.sandbox.local"
    assert _moved.new_name("agentrl_recipe.generation.openai_client") == "agentrl_recipe.harness.openai_client"
    assert _moved.new_name("agentrl_recipe.generation.hf_client") == "agentrl_recipe.core.generation.hf_client"
    assert _moved.new_name("agentrl_recipe.core.names") is None
    assert _moved.new_name("agentrl_recipe.toolsx") is None


def test_every_old_name_points_at_an_existing_module() -> None:
    for old, new in _moved.MOVED.items():
        assert importlib.util.find_spec(new) is not None, f"{old} -> {new}: no such module"


def test_python_m_an_old_module_runs_it() -> None:
    """``python -m agentrl_recipe.launch`` (the Makefile's and README's command before the move) still launches."""
    proc = subprocess.run(
        [sys.executable, "-m", "agentrl_recipe.launch", "--help"], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: python -m agentrl_recipe.cli.launch")
