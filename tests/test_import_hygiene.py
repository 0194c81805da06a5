"""The analysis core never imports Textual (or any UI module), so the CLI and tests stay headless."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import importlib, pkgutil, sys
import htatui.analysis as analysis
names = [m.name for m in pkgutil.walk_packages(analysis.__path__, "htatui.analysis.")]
for name in names:
    importlib.import_module(name)
import htatui.trace, htatui.tui
ui = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "textual_plotext", "plotext")
            or m.startswith("htatui.tui."))
print(len(names))
print(",".join(ui))
"""


def test_analysis_imports_no_textual() -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    count, loaded = int(lines[0]), (lines[1] if len(lines) > 1 else "")
    assert count >= 5, "expected the analysis view modules to be importable"
    assert loaded == "", f"importing htatui.analysis pulled in UI modules: {loaded}"


def _imports_of(path: Path, modules: set[str]) -> set[str]:
    """The htatui modules `path` imports, lazy imports included, `if TYPE_CHECKING:` blocks excluded.

    `from a.b import c` counts as importing the module a.b.c when there is one, else a.b.
    """
    import ast

    tree = ast.parse(path.read_text())
    typing_only = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for statement in block.body
        for node in ast.walk(statement)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & modules


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of two or more nodes: the import circles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return circles


def _module_graph() -> tuple[dict[str, set[str]], set[str]]:
    """Each htatui module's htatui imports (lazy ones too), and the names that are packages."""
    root = ROOT / "htatui"
    modules = {
        ".".join(f.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): f for f in root.rglob("*.py")
    }
    packages = {name for name, path in modules.items() if path.name == "__init__.py"}
    names = set(modules)
    return {name: _imports_of(path, names) - {name} for name, path in modules.items()}, packages


def test_no_import_circles() -> None:
    """No two htatui modules import each other, directly or around a loop (lazy imports count)."""
    graph, _packages = _module_graph()
    assert _circles(graph) == [], f"import circles: {_circles(graph)}"


def test_no_package_circles() -> None:
    """No two packages import each other either: a module counts as its package (a package's
    __init__ as the package). The root package is left out: its __main__ runs the CLI, which
    reads the version from its __init__."""
    modules, packages = _module_graph()

    def package_of(name: str) -> str:
        return name if name in packages else name.rpartition(".")[0]

    graph: dict[str, set[str]] = {}
    for name, targets in modules.items():
        source = package_of(name)
        if source == "htatui":
            continue
        edges = graph.setdefault(source, set())
        for target in targets:
            dest = package_of(target)
            if dest not in (source, "htatui"):
                edges.add(dest)
    for package in list(graph.values()):
        for dest in package:
            graph.setdefault(dest, set())
    assert _circles(graph) == [], f"package circles: {_circles(graph)}"


def _private_imports(source: str, package: str) -> list[str]:
    """`name from module` for each name starting with `_` that `source`, a module of `package`, imports
    from an htatui module; dunder names (`__version__`) and `from __future__` are fine."""
    import ast

    found: list[str] = []
    parts = package.split(".")
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ImportFrom) or node.module == "__future__":
            continue
        # `from .x import y` is package.x; each further dot goes one package up.
        base = parts[: len(parts) - node.level + 1] if node.level else []
        origin = ".".join([*base, *([node.module] if node.module else [])])
        if origin.split(".")[0] != "htatui":
            continue
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                found.append(f"{name} from {origin}")
    return found


def test_the_private_import_check_sees_every_form() -> None:
    source = """
from __future__ import annotations
from htatui import __version__
from htatui.trace.frame import _ints, finish_rows
from .loader import _assign_ranks
from . import _helpers
from polars import _private
"""
    assert _private_imports(source, "htatui.trace") == [
        "_ints from htatui.trace.frame",
        "_assign_ranks from htatui.trace.loader",
        "_helpers from htatui.trace",
    ]


def test_no_module_imports_another_modules_private_names() -> None:
    """A name starting with `_` belongs to its module: one another module needs is given a public name."""
    found = [
        f"{path.relative_to(ROOT)}: {imported}"
        for path in sorted((ROOT / "htatui").rglob("*.py"))
        for imported in _private_imports(path.read_text(), ".".join(path.parent.relative_to(ROOT).parts))
    ]
    assert found == []
