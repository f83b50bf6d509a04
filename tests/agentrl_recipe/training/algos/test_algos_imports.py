"""``algos/`` is math over batches: it imports none of the agent loop, tools or reward stack (read with ``ast``).

Step statistics come from :mod:`agentrl_recipe.training.metrics` (a leaf statistics module), verl's private
members through :mod:`agentrl_recipe.training.verl_adapters`.
"""

from __future__ import annotations

import ast
from pathlib import Path

import agentrl_recipe.training.algos as algos

ALLOWED = (
    "agentrl_recipe.training.algos",
    "agentrl_recipe.training.verl_adapters",
    "agentrl_recipe.names",
    "agentrl_recipe.fields",  # the per-trajectory columns the masks read
    "agentrl_recipe.training.trajectory_dump",  # the replay buffer writes the viewer's per-step sample
    "agentrl_recipe.training.trace",
    "agentrl_recipe.training.recipe_config",
    "agentrl_recipe.training.metrics",
)


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{path.name}: relative import"
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name.startswith("agentrl_recipe")}


def test_algos_imports_only_statistics_and_adapters() -> None:
    paths = sorted(Path(algos.__file__).parent.glob("*.py"))
    assert len(paths) > 5
    bad = {
        f"{path.name}: {name}"
        for path in paths
        for name in _imports(path)
        if not any(name == allowed or name.startswith(allowed + ".") for allowed in ALLOWED)
    }
    assert not bad, f"algos/ imports outside its layer: {sorted(bad)}"
