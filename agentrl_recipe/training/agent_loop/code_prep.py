"""What the ``code_interpreter`` tool does to the model's code before running it (the paper's behaviour, done right).

* :func:`extract_code` — the model often wraps the argument in Markdown fences; run the first fenced block.
* Final expression — like a notebook cell, the value of a final bare expression is printed. The paper's tool wraps
  the last *line* in ``print(...)``, which breaks ``x = 1`` (``print(x = 1)``) and indented or multi-line endings.
  Here the code runs unchanged from ``cell.py`` through a small launcher that rewrites the *syntax tree* (``ast``):
  tracebacks show the model's own lines and line numbers. ``None`` is not printed (as in Jupyter), so a trailing
  ``f()`` that prints and returns nothing is not followed by ``None``.
* Stateful replay — the launcher first re-runs the trajectory's earlier cells with their output swallowed.

Code without a final expression (and without history) runs as-is, no launcher.

``auto_print: last_line`` (``agentrl.compat: open_agentrl``) is the released tool's rule instead, mistakes included
(:func:`released_prep`): the first ```` ```python ```` block, stripped; then the last non-empty line, unless it starts
with ``print``, becomes ``print(<line>)`` — ``x = 1`` gives a TypeError, an indented last line an IndentationError, a
trailing comment a SyntaxError.
"""

from __future__ import annotations

import ast
import json
import re

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)
CELL_FILE = "cell.py"
HISTORY_FILE = "history.json"

# Runs in the sandbox's interpreter (standard library only). Every name it leaves in the globals is prefixed.
LAUNCHER = """\
def _agentrl_run_():
    import ast, contextlib, io, json, os, sys, traceback
    here = os.path.dirname(os.path.abspath(__file__))
    g = globals()
    history = os.path.join(here, "history.json")
    if os.path.exists(history):
        with open(history, encoding="utf-8") as f:
            cells = json.load(f)
        for cell in cells:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                try:
                    exec(compile(cell, "<earlier cell>", "exec"), g)
                except BaseException:
                    pass
    path = os.path.join(here, "cell.py")
    with open(path, encoding="utf-8") as f:
        source = f.read()
    try:
        tree = ast.parse(source, path)
    except SyntaxError as exc:
        traceback.print_exception(type(exc), exc, None)
        sys.exit(1)
    last = tree.body[-1] if tree.body else None
    if _agentrl_auto_print_ and isinstance(last, ast.Expr) and not (
        isinstance(last.value, ast.Call) and isinstance(last.value.func, ast.Name) and last.value.func.id == "print"
    ):
        show = ast.Call(func=ast.Name("_agentrl_show_", ast.Load()), args=[last.value], keywords=[])
        tree.body[-1] = ast.fix_missing_locations(ast.copy_location(ast.Expr(show), last))
    try:
        exec(compile(tree, path, "exec"), g)
    except SystemExit:
        raise
    except BaseException as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != path:
            tb = tb.tb_next  # drop the launcher's own frames: the traceback reads as if cell.py ran directly
        traceback.print_exception(type(exc), exc, tb)
        sys.exit(1)


def _agentrl_show_(value):
    if value is not None:
        print(value)


_agentrl_run_()
"""


_RELEASED_FENCE = re.compile(r"```python(.*?)```", re.DOTALL)


def released_prep(code: str) -> str:
    """What ``CustomSandboxFusionTool.execute`` ran for argument ``code`` (Open-AgentRL recipe/demystify/reward.py)."""
    blocks = _RELEASED_FENCE.findall(code)
    if blocks:
        code = blocks[0].strip()
    lines = code.split("\n")
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] == "":  # only truly empty lines are skipped; a line of spaces is "the last line"
            continue
        if not lines[i].startswith("print"):
            lines[i] = f"print({lines[i]})"
        break
    return "\n".join(lines)


def extract_code(text: str) -> str:
    """The first fenced block of ``text`` if it has one (```python, ```py or bare ```), else ``text`` itself."""
    if "```" not in text:
        return text
    match = _FENCE.search(text)
    return match.group(1) if match else text.replace("```", "")


def ends_with_expression(code: str) -> bool:
    """True when the code parses and its last top-level statement is a bare expression other than ``print(...)``."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    value = tree.body[-1].value
    return not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "print")


def build_run(code: str, *, auto_print: bool = True, history: list[str] | None = None) -> tuple[str, dict[str, str]]:
    """(program, files) for one tool call: ``code`` itself, or the launcher plus ``cell.py`` (and the history)."""
    show = auto_print and ends_with_expression(code)
    if not show and not history:
        return code, {}
    files = {CELL_FILE: code}
    if history:
        files[HISTORY_FILE] = json.dumps(history)
    return f"_agentrl_auto_print_ = {bool(show)}\n" + LAUNCHER, files
