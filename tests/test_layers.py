"""The package's import rule, read from the source with ``ast`` (nothing is imported).

Layers, lowest first: ``agentrl_recipe.core`` (what verl imports in every worker) ← ``agentrl_recipe.harness`` (rollout,
eval, data prep around an in-process agent loop) ← ``agentrl_recipe.cli``; ``demo/`` and ``benchmarks/`` (not
installed) sit on top and may import anything. A module may import its own layer and the ones below it, never above;
nothing in the package imports ``demo``, ``benchmarks`` or ``tests``, nor a deprecated path (``agentrl_recipe._moved``).

Counted: top-level and function-local ``import``/``from … import`` statements, ``importlib.import_module("…")`` with a
literal name, and any string constant that names a module of the package or of ``demo`` (class paths such as
``"agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool"``, ``"pkg:agentrl_recipe.rewards.x:fn"``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "agentrl_recipe"
LAYERS = {"core": 0, "harness": 1, "cli": 2}
TOP = ("demo", "benchmarks", "tests")  # repository-level folders the package must not import

# References that go up a layer on purpose. The CLI's table of subcommands names the demo's module: `agentrl-recipe
# demo` imports it from the checkout (demo/ is not installed) and fails with one line when it is not there.
ALLOWED_UP = {("agentrl_recipe.cli", "demo.demo")}

# Import cycles tolerated for now (none since issue 19 broke eval/runner <-> eval/generate and data/generate <->
# data/prep_sft); any other cycle fails. Remove an entry when its cycle is gone (test_known_cycles_still_exist).
KNOWN_CYCLES: set[frozenset[str]] = set()

MODULE_STRING = re.compile(r"(?:pkg:(?://)?)?((?:agentrl_recipe|demo)(?:\.[A-Za-z_]\w*)+)(?::[A-Za-z_]\w*)?")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(top: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / top).rglob("*.py"))}


MODULES = _modules(PACKAGE)
KNOWN = {**MODULES, **_modules("demo")}


def _resolve(name: str) -> str | None:
    """The module a dotted name refers to: itself, or the module it is an attribute of."""
    while name:
        if name in KNOWN:
            return name
        name = name.rpartition(".")[0]
    return None


def _references(module: str, path: Path, *, strings: bool) -> Iterator[tuple[int, str]]:
    """(line, referenced name) for every import in ``path`` (and, with ``strings``, every module-naming string)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            for alias in node.names:  # `from pkg import mod` imports pkg.mod when it is a module
                sub = f"{source}.{alias.name}"
                yield node.lineno, sub if sub in KNOWN else source
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value
        elif strings and isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_STRING.fullmatch(node.value)
            if match and _resolve(match[1]) not in (None, "demo"):
                yield node.lineno, match[1]


def _layer(name: str) -> int | None:
    parts = name.split(".")
    return LAYERS.get(parts[1]) if parts[0] == PACKAGE and len(parts) > 1 else None


def test_every_module_is_in_a_layer() -> None:
    outside = [m for m in MODULES if m != PACKAGE and m != f"{PACKAGE}._moved" and _layer(m) is None]
    assert not outside, f"modules outside core/, harness/, cli/: {outside}"


def test_no_module_imports_a_higher_layer() -> None:
    errors = []
    for module, path in MODULES.items():
        if module == f"{PACKAGE}._moved":
            continue  # its table names the deprecated paths
        own = _layer(module)
        for line, name in _references(module, path, strings=True):
            target = _resolve(name) or name
            where = f"{path.relative_to(REPO)}:{line}"
            top = name.split(".")[0]
            if top in TOP:
                if (module, target) not in ALLOWED_UP:
                    errors.append(f"{where}: {module} imports {name} ({top}/ is not part of the package)")
            elif top == PACKAGE and name not in (PACKAGE, f"{PACKAGE}._moved"):
                layer = _layer(name)
                if layer is None:
                    errors.append(f"{where}: {module} imports {name}, a deprecated path (agentrl_recipe._moved)")
                elif own is not None and layer > own:
                    errors.append(f"{where}: {module} imports {name}, a higher layer")
    assert not errors, "layer rule broken (core ← harness ← cli):\n" + "\n".join(errors)


def _import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for _, name in _references(module, path, strings=False):
            target = _resolve(name)
            if target in MODULES and target != module:
                graph[module].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle_but_the_known_ones() -> None:
    new = [sorted(c) for c in _cycles(_import_graph()) if c not in KNOWN_CYCLES]
    assert not new, f"import cycles among agentrl_recipe modules: {new}"


def test_known_cycles_still_exist() -> None:
    gone = [sorted(c) for c in KNOWN_CYCLES if c not in _cycles(_import_graph())]
    assert not gone, f"these cycles are broken: remove them from KNOWN_CYCLES: {gone}"


def test_the_checker_sees_function_local_imports_and_strings(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(
        "def f():\n"
        "    from agentrl_recipe.cli import configs\n"
        "    importlib.import_module('agentrl_recipe.rollout')\n"
        "X = 'agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool'\n"
    )
    found = {name for _, name in _references("agentrl_recipe.core.probe", path, strings=True)}
    assert found == {
        "agentrl_recipe.cli.configs",
        "agentrl_recipe.rollout",
        "agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool",
    }
