"""README.md and docs/*.md: the README stays short and has an Extending section; every link and every repository path
or module they name exists (read from the files: a moved module makes this fail, naming the file and the path)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").glob("*.md"))
PAGES = [README, *DOCS]
MAX_README_LINES = 300

TOP_DIRS = ("agentrl_recipe", "agentrl_sandbox", "verl_cpu", "data_prep", "verl_configs", "demo", "benchmarks")
TOP_DIRS += ("tests", "upstream", "docs")
PACKAGES = ("agentrl_recipe", "agentrl_sandbox", "verl_client", "verl_cpu", "data_prep")  # dotted module names checked
ROOT_FILES = ("README.md", "UPSTREAM.md", "Makefile", "pyproject.toml")

FENCE = re.compile(r"^(`{3,})[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)
INLINE = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
PATH = re.compile(
    rf"(?<![\w./-])((?:{'|'.join(TOP_DIRS)})/[\w./*{{}},<>-]*|(?:{'|'.join(re.escape(f) for f in ROOT_FILES)})\b)"
)
MODULE = re.compile(rf"(?<![\w./-])(?:pkg://)?((?:{'|'.join(PACKAGES)})(?:\.[A-Za-z_]\w*)+)")
# a shortened path (`rewards/code/grade.py`, `recipe/grpo_tcr.yaml`): some repository file must end with it
SHORT = re.compile(r"(?<![\w./:-])([\w.-]+(?:/[\w.*<>-]+)+\.(?:py|yaml|md|txt|patch|jinja|toml))\b")
# files of other repositories: the released Open-AgentRL code, verl, SandboxFusion
# files of other repositories; runtime/python/ and sandbox/runners/: SandboxFusion
EXTERNAL = ("recipe/demystify/", "verl/", "examples/", "sandbox_fusion/", "runtime/python/", "sandbox/runners/")
METRICS = (
    "agentrl_sandbox/server/",
)  # step-metric names that start like a folder (agentrl_recipe/training/sandbox_routes.py)


def _code(text: str) -> list[str]:
    """The text of every fenced block and every inline code span."""
    blocks = [m.group(2) for m in FENCE.finditer(text)]
    prose = FENCE.sub("", text)
    return blocks + [m.group(2) for m in INLINE.finditer(prose)]


def _expand_braces(path: str) -> list[str]:
    """``a_{x,y}.yaml`` -> ``a_x.yaml``, ``a_y.yaml`` (nested braces are not used)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def _path_exists(path: str) -> bool:
    path = path.split("::", 1)[0].rstrip(".,:;")
    for candidate in _expand_braces(path):
        pattern = re.sub(r"<[^<>]*>", "*", candidate)  # <name> placeholders match any name
        if any(ch in pattern for ch in "*?["):
            if not any(REPO.glob(pattern.rstrip("/"))):
                return False
        elif not (REPO / pattern).exists():
            return False
    return True


def _repo_files() -> list[str]:
    files = [p for top in TOP_DIRS for p in (REPO / top).rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return [p.relative_to(REPO).as_posix() for p in files]


def _suffix_exists(path: str, files: list[str]) -> bool:
    pattern = re.compile("(?:^|/)" + re.escape(path).replace(r"\*", "[^/]*") + "$")
    return path.startswith(EXTERNAL) or any(pattern.search(f) for f in files)


def _module_exists(dotted: str) -> bool:
    """A module (file or package) of the repository, optionally followed by attributes its source defines."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:k])
        source = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
        if source.is_file():
            text = source.read_text(encoding="utf-8")
            return all(re.search(rf"\b{re.escape(attr)}\b", text) for attr in parts[k:])
    return False


def _named(text: str) -> list[tuple[str, str]]:
    """(kind, name) of every repository path and module named in the code of a page's ``text``."""
    found = []
    for code in _code(text):
        found += [("path", m.group(1)) for m in PATH.finditer(code) if not m.group(1).startswith(METRICS)]
        found += [("module", m.group(1)) for m in MODULE.finditer(code)]
        found += [("short", m.group(1)) for m in SHORT.finditer(code) if not PATH.fullmatch(m.group(1))]
    return found


def test_readme_is_short_and_has_an_extending_section() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) < MAX_README_LINES, f"README.md has {len(lines)} lines; move detail to docs/"
    assert any(re.fullmatch(r"##\s+Extending\b.*", line) for line in lines), "README.md lacks an '## Extending' section"


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / t.split("#", 1)[0]).resolve() for t in LINK.findall(README.read_text(encoding="utf-8"))}
    assert DOCS, "docs/ has no pages"
    missing = [p.relative_to(REPO).as_posix() for p in DOCS if p.resolve() not in linked]
    assert not missing, f"README.md links none of {missing}"


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page (lower case, punctuation dropped, spaces to hyphens)."""
    headings = re.findall(r"^#{1,6}\s+(.+?)\s*$", FENCE.sub("", page.read_text(encoding="utf-8")), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_points_at_a_file(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # a URL
        path, _, anchor = target.partition("#")
        file = (page.parent / path) if path else page
        if not file.exists() or (anchor and file.suffix == ".md" and anchor not in _anchors(file)):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)}: broken links {broken}"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_named_path_and_module_exists(page: Path) -> None:
    files = _repo_files()
    check = {"path": _path_exists, "module": _module_exists, "short": lambda name: _suffix_exists(name, files)}
    broken = sorted({name for kind, name in _named(page.read_text(encoding="utf-8")) if not check[kind](name)})
    assert not broken, f"{page.relative_to(REPO)} names what does not exist: {broken}"


def test_the_checks_catch_a_broken_path_and_module() -> None:
    named = _named("`agentrl_recipe/no_such_module.py`, `agentrl_recipe.core.gone` and `rewards/code_grading.py`\n")
    assert ("path", "agentrl_recipe/no_such_module.py") in named and ("module", "agentrl_recipe.core.gone") in named
    assert ("short", "rewards/code_grading.py") in named
    assert not _path_exists("agentrl_recipe/no_such_module.py") and not _module_exists("agentrl_recipe.core.gone")
    assert _path_exists("verl_configs/tools/*.yaml") and _path_exists("verl_configs/agentrl_{sft,rl}_cpu.yaml")
    assert _module_exists("agentrl_recipe.plugin.register_all") and not _module_exists("agentrl_recipe.plugin.nope")
    assert "extending" in _anchors(README) and "no-such-section" not in _anchors(README)
    files = _repo_files()
    assert _suffix_exists("rewards/code/grade.py", files) and not _suffix_exists("rewards/code_grading.py", files)


def _prose_of_python(path: Path) -> str:
    """The docstrings and comments of a Python file: where a moved file is still named after the move."""
    import ast
    import io
    import tokenize

    source = path.read_text(encoding="utf-8")
    texts = [
        ast.get_docstring(node, clean=False) or ""
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    texts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return "\n".join(texts)


RELATIVE_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data):`~?(\.[\w.]+)`")  # Sphinx's :mod:`.x`, from the file


def _relative_targets(path: Path, prose: str) -> list[str]:
    """The dotted names the docstrings' relative Sphinx roles (``:mod:`.rewards```) point at, made absolute."""
    package = path.relative_to(REPO).parent.parts  # a module's package; for __init__.py, the package itself
    return [".".join(package) + m.group(1) for m in RELATIVE_ROLE.finditer(prose)]


SOURCE_FILES = sorted(p for top in (*PACKAGES, "demo", "benchmarks") for p in (REPO / top).rglob("*.py"))


def test_every_path_and_module_a_docstring_or_comment_names_exists() -> None:
    missing = []
    for path in SOURCE_FILES:
        prose = _prose_of_python(path)
        named = [m.group(1) for m in PATH.finditer(prose) if not m.group(1).startswith(METRICS)]
        missing += [f"{path.relative_to(REPO)}: {p}" for p in named if not _path_exists(p)]
        missing += [f"{path.relative_to(REPO)}: {m}" for m in map(lambda m: m.group(1), MODULE.finditer(prose))
                    if not _module_exists(m)]  # fmt: skip
        missing += [f"{path.relative_to(REPO)}: {m}" for m in _relative_targets(path, prose) if not _module_exists(m)]
    assert not missing, "docstrings and comments name what does not exist:\n" + "\n".join(missing)
