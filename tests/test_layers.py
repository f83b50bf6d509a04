"""The repository's import rules, read from the source with ``ast`` (nothing is imported).

Five installed packages:
- ``agentrl_sandbox`` (runs code; usable without verl) and ``verl_client`` (the generation-client contract of verl's
  agent loops) import nothing of ours; ``verl_cpu`` (verl on CPU) imports only ``verl_client``;
- ``agentrl_recipe`` may import all three; the GPU path (``offline``, ``eval``) never imports ``verl_cpu`` at module
  level, only inside the CPU-only functions (a CPU vLLM server, ``--backend hf``). Inside the recipe, what runs where
  is a rule: ``agentrl_recipe.training`` (loaded in verl's workers) imports only itself and the shared root
  modules, never the offline tools, eval or a command; the commands (``agentrl_recipe.cli``, ``.launcher``,
  ``.gpu_install``, ``.gpu_check``) are the only code that may import ``data_prep``, and nothing but a command
  imports a command;
- ``data_prep`` may import the recipe (not its commands) and the sandbox.

``demo/`` and ``benchmarks/`` (not installed) sit on top and may import anything; no package imports them or
``tests``. No import cycle anywhere.

Counted: top-level and function-local ``import``/``from … import`` statements, ``importlib.import_module("…")`` with a
literal name, and any string constant that names a module of ours (class paths such as
``"agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool"``, ``"pkg://agentrl_recipe.training.algos.sampler"``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("agentrl_recipe", "agentrl_sandbox", "verl_client", "verl_cpu", "data_prep")
COMMANDS = ("agentrl_recipe.cli", "agentrl_recipe.launcher", "agentrl_recipe.gpu_install", "agentrl_recipe.gpu_check")
TRAINING = "agentrl_recipe.training"
# the root modules every layer shares: the plugin's names and small helpers with no dependency of their own
SHARED_ROOT = {f"agentrl_recipe.{m}" for m in ("names", "fields", "atomic_io", "problems", "tasks", "config_paths")}
TOP = ("demo", "benchmarks", "tests")  # repository-level folders no package may import
MAY_IMPORT = {
    "agentrl_sandbox": {"agentrl_sandbox"},
    "verl_client": {"verl_client"},
    "verl_cpu": {"verl_cpu", "verl_client"},
    "agentrl_recipe": {"agentrl_recipe", "agentrl_sandbox", "verl_client", "verl_cpu"},
    "data_prep": {"data_prep", "agentrl_recipe", "agentrl_sandbox", "verl_client", "verl_cpu"},
}

MODULE_STRING = re.compile(
    r"(?:pkg:(?://)?)?((?:agentrl_recipe|agentrl_sandbox|verl_client|verl_cpu|data_prep|demo)(?:\.[A-Za-z_]\w*)*)(?::[A-Za-z_]\w*)?"
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


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _in_cli(name: str) -> bool:
    return any(_within(name, command) for command in COMMANDS)


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
        return "only a command imports a command"
    if _within(module, TRAINING) and top == "agentrl_recipe" and not (_within(name, TRAINING) or name in SHARED_ROOT):
        return "training code (loaded in verl's workers) imports only training code and the shared root modules"
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
    assert _rule_errors("verl_client.token_output", "verl_cpu.names")
    assert _rule_errors("verl_cpu.hf_client", "verl_client.token_output") is None
    assert _rule_errors("agentrl_recipe.offline.rollout", "data_prep.io")
    assert _rule_errors("data_prep.jobs.rl_mix", "agentrl_recipe.cli.data")
    assert _rule_errors("agentrl_recipe.training.rewards.manager", "demo.demo_report")
    assert _rule_errors("agentrl_recipe.cli.data", "data_prep.jobs.rl_mix") is None
    assert _rule_errors("agentrl_recipe.launcher.launch", "data_prep.rows") is None
    assert _rule_errors("agentrl_recipe.training.agent_loop.trajectory", "agentrl_recipe.offline.rollout")
    assert _rule_errors("agentrl_recipe.training.rewards.manager", "agentrl_recipe.eval.grading")
    assert _rule_errors("agentrl_recipe.training.rewards.manager", "agentrl_recipe.tasks") is None
    assert _rule_errors("data_prep.rollouts", "agentrl_recipe.offline.rollout") is None


GPU_PATH = ("agentrl_recipe.offline", "agentrl_recipe.eval")  # what eval on a GPU node loads


def test_the_gpu_path_loads_nothing_of_verl_cpu() -> None:
    """A GPU node evaluates through ``offline.openai_client``: verl_cpu only inside CPU-only functions."""
    found = []
    for module, path in MODULES.items():
        if any(_within(module, top) for top in GPU_PATH):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in tree.body:  # module level only
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
                names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                found += [f"{module}:{node.lineno} {n}" for n in names if _package(n) == "verl_cpu"]
    assert found == []


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
        "    importlib.import_module('agentrl_recipe.offline.rollout')\n"
        "X = 'agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool'\n"
    )
    found = {name for _, name in _references("agentrl_recipe.probe", path, strings=True)}
    assert found == {
        "agentrl_recipe.cli.configs",
        "agentrl_recipe.offline.rollout",
        "agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool",
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
