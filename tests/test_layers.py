"""The repository's import rules, read from the source with ``ast`` (nothing is imported).

Four installed packages:
- ``agentrl_sandbox`` (runs code; usable without verl) and ``verl_cpu`` (verl on CPU) import nothing of ours;
- ``agentrl_recipe`` may import both; only its CLI (``agentrl_recipe.cli``) may import ``data_prep``, and nothing
  else in the recipe imports the CLI;
- ``data_prep`` may import the recipe (not its CLI) and the sandbox.

``demo/`` and ``benchmarks/`` (not installed) sit on top and may import anything; no package imports them or
``tests``. No import cycle anywhere.

Counted: top-level and function-local ``import``/``from … import`` statements, ``importlib.import_module("…")`` with a
literal name, and any string constant that names a module of ours (class paths such as
``"agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool"``, ``"pkg://agentrl_recipe.algos.sampler"``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agentrl_recipe", "agentrl_sandbox", "verl_cpu", "data_prep")
CLI = "agentrl_recipe.cli"
TOP = ("demo", "benchmarks", "tests")  # repository-level folders no package may import
MAY_IMPORT = {
    "agentrl_sandbox": {"agentrl_sandbox"},
    "verl_cpu": {"verl_cpu"},
    "agentrl_recipe": {"agentrl_recipe", "agentrl_sandbox", "verl_cpu"},
    "data_prep": {"data_prep", "agentrl_recipe", "agentrl_sandbox", "verl_cpu"},
}

MODULE_STRING = re.compile(
    r"(?:pkg:(?://)?)?((?:agentrl_recipe|agentrl_sandbox|verl_cpu|data_prep|demo)(?:\.[A-Za-z_]\w*)*)(?::[A-Za-z_]\w*)?"
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules(top: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((REPO / top).rglob("*.py"))}


MODULES = {name: path for package in PACKAGES for name, path in _modules(package).items()}
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


def _package(name: str) -> str:
    return name.split(".")[0]


def _in_cli(name: str) -> bool:
    return name == CLI or name.startswith(CLI + ".")


def _rule_errors(module: str, name: str) -> str | None:
    """Why ``module`` may not reference ``name`` (None when it may)."""
    top = _package(name)
    if top in TOP:
        return f"{top}/ is not part of the installed packages"
    if top not in PACKAGES:
        return None  # a third-party or standard module
    if top not in MAY_IMPORT[_package(module)] and not (top == "data_prep" and _in_cli(module)):
        return f"{_package(module)} may not import {top}"
    if _in_cli(name) and not _in_cli(module):
        return "only the CLI imports the CLI"
    return None


def test_every_reference_follows_the_package_rules() -> None:
    errors = []
    for module, path in MODULES.items():
        for line, name in _references(module, path, strings=True):
            why = _rule_errors(module, _resolve(name) or name)
            if why:
                errors.append(f"{path.relative_to(REPO)}:{line}: {module} -> {name}: {why}")
    assert not errors, "import rule broken:\n" + "\n".join(errors)


def test_the_rule_refuses_what_it_should() -> None:
    assert _rule_errors("agentrl_sandbox.local", "agentrl_recipe.names")
    assert _rule_errors("verl_cpu.platform", "agentrl_sandbox")
    assert _rule_errors("agentrl_recipe.rollout", "data_prep.io")
    assert _rule_errors("data_prep.rl_mix", "agentrl_recipe.cli.data")
    assert _rule_errors("agentrl_recipe.rewards.manager", "demo.demo_report")
    assert _rule_errors("agentrl_recipe.cli.data", "data_prep.rl_mix") is None
    assert _rule_errors("data_prep.rollouts", "agentrl_recipe.rollout") is None


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


def test_no_import_cycle() -> None:
    cycles = [sorted(c) for c in _cycles(_import_graph())]
    assert not cycles, f"import cycles among our modules: {cycles}"


def test_the_checker_sees_function_local_imports_and_strings(tmp_path: Path) -> None:
    path = tmp_path / "probe.py"
    path.write_text(
        "def f():\n"
        "    from agentrl_recipe.cli import configs\n"
        "    importlib.import_module('agentrl_recipe.rollout')\n"
        "X = 'agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool'\n"
    )
    found = {name for _, name in _references("agentrl_recipe.probe", path, strings=True)}
    assert found == {
        "agentrl_recipe.cli.configs",
        "agentrl_recipe.rollout",
        "agentrl_recipe.agent_loop.code_interpreter.CodeInterpreterTool",
    }


# The sandbox's own interpreter runs these as scripts (never imported by ours): they set up that interpreter's path.
IN_SANDBOX_SCRIPTS = {"agentrl_sandbox._zygote", "agentrl_sandbox._zygote_run"}


def _edits_sys_path(tree: ast.AST) -> bool:
    """Any ``sys.path`` item assignment, slice assignment, deletion, or mutating method call."""
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else []
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            targets = [node.func.value] if node.func.attr in ("insert", "append", "extend", "remove", "pop") else []
        for target in targets:
            base = target.value if isinstance(target, ast.Subscript) else target
            if isinstance(base, ast.Attribute) and base.attr == "path" and getattr(base.value, "id", "") == "sys":
                return True
    return False


def test_no_module_of_ours_edits_sys_path() -> None:
    editing = {m for m, path in MODULES.items() if _edits_sys_path(ast.parse(path.read_text()))}
    assert editing == IN_SANDBOX_SCRIPTS, sorted(editing ^ IN_SANDBOX_SCRIPTS)
    assert _edits_sys_path(ast.parse("import sys\nsys.path.insert(0, 'x')"))
    assert _edits_sys_path(ast.parse("import sys\nsys.path[0:0] = ['x']"))
    assert not _edits_sys_path(ast.parse("import sys\nprint(sys.path[0])"))
