"""The analysis core never imports Textual (or any UI module), so the CLI and tests stay headless."""

from __future__ import annotations

import functools
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


@functools.cache
def _module_graph() -> tuple[dict[str, set[str]], set[str]]:
    """Each htatui module's htatui imports (lazy ones too), and the names that are packages (parsed
    once for the three tests that read it; they never change it)."""
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


VIEW_TO_VIEW = {
    ("htatui.analysis.views.ranks", "htatui.analysis.views.steps"),
    ("htatui.analysis.views.ranks.tables", "htatui.analysis.views.steps"),
    ("htatui.analysis.views.critical_path.job", "htatui.analysis.views.ranks.meeting"),
    ("htatui.analysis.views.critical_path.step_graphs", "htatui.analysis.views.ranks.meeting"),
    ("htatui.analysis.views.critical_path.step_model", "htatui.analysis.views.ranks"),
    ("htatui.analysis.views.critical_path.step_model", "htatui.analysis.views.ranks.phases"),
}
"""The view → view imports left (docs/contributing-views.md forbids them): the Ranks views read
the steps view's table and HTA's straggler method; the job's critical path and the step model the
meeting points, the step model the Ranks page's straggler and phase figures (its what-ifs act on
them); they move to core once those views stop changing under other branches (issue 39)."""


def test_no_view_imports_another_for_a_helper() -> None:
    """A view imports core, model and perf, never another view (its own package's parts aside)."""
    graph, _packages = _module_graph()
    prefix = "htatui.analysis.views."

    def view_of(name: str) -> str:
        return ".".join(name.split(".")[:4])

    found = {
        (source, target)
        for source, targets in graph.items()
        if source.startswith(prefix)
        for target in targets
        if target.startswith(prefix) and view_of(target) != view_of(source)
    }
    assert found == VIEW_TO_VIEW


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


# Start-up: a command imports what it needs when it needs it (issue 26). `-X importtime` lists every
# module a process imports, on stderr, one `import time: self | cumulative | name` line each.
UI_PACKAGES = ("textual", "textual_plotext", "plotext")


def _imported_modules(*args: str, cache: Path) -> tuple[int, set[str], str]:
    """The exit code, the modules (dotted names) `python -m htatui ARGS` imported, and its other stderr."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), HTATUI_CACHE_DIR=str(cache))
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "htatui", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    modules = set()
    other = []
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and line.count("|") == 2:
            name = line.rsplit("|", 1)[1].strip()
            if name != "package":  # the header line
                modules.add(name)
        else:
            other.append(line)
    return result.returncode, modules, "\n".join(other)


def _imported_by(*args: str, cache: Path) -> tuple[int, set[str], str]:
    """The exit code, the top-level packages `python -m htatui ARGS` imported, and its stderr."""
    code, modules, stderr = _imported_modules(*args, cache=cache)
    return code, {name.split(".")[0] for name in modules}, stderr


def test_version_and_help_import_no_analysis_libraries(tmp_path: Path) -> None:
    for args in (["--version"], ["--help"], []):
        code, modules, stderr = _imported_by(*args, cache=tmp_path)
        assert code == 0, stderr
        assert "htatui" in modules, "the probe saw no imports at all"
        heavy = modules & {"polars", "numpy", "rich", "pyarrow", *UI_PACKAGES}
        assert heavy == set(), f"htatui {' '.join(args)} imported {sorted(heavy)}"


def test_top_level_help_lists_each_subcommand_as_its_own_parser_does() -> None:
    """`--help` lists the subcommands without building their parsers: its text must be the built one's."""
    from htatui.cli.main import SUBCOMMANDS, _build_parser

    assert _build_parser(built=()).format_help() == _build_parser(built=SUBCOMMANDS).format_help()


def test_headless_commands_import_no_textual(tmp_path: Path) -> None:
    from kineto_util import kernel, runtime, step, write_trace
    from memory_util import snapshot_a, write_pickle

    trace = write_trace(
        tmp_path / "job" / "rank-0.json",
        [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)],
        rank=0,
    )
    job = str(trace.parent)
    snapshot = str(write_pickle(tmp_path / "snapshot.pickle", snapshot_a()))
    (tmp_path / "out").mkdir()
    commands = [
        ["info", job],
        ["check", job],
        ["report", job, "--view", "kernels"],
        ["diff", job, job, "--format", "csv"],
        ["memory", snapshot, "--format", "csv"],
        ["export", "counters", job, "-o", str(tmp_path / "out")],
    ]
    for args in commands:
        code, modules, stderr = _imported_by(*args, cache=tmp_path / "cache")
        assert code in (0, 1), f"htatui {' '.join(args)}: {stderr}"  # check exits 1 on warnings
        assert "polars" in modules, "the probe saw no imports at all"
        ui = modules & set(UI_PACKAGES)
        assert ui == set(), f"headless `htatui {args[0]}` imported {sorted(ui)}"


def test_a_cached_info_table_imports_neither_numpy_nor_the_dataset_reader(tmp_path: Path) -> None:
    """A cached `info` prints figures its cache entries keep: no numpy (only CSV and JSON clean
    floats with it), no job-dataset reader, no Textual."""
    from kineto_util import kernel, runtime, step, write_trace

    trace = write_trace(
        tmp_path / "job" / "rank-0.json",
        [step(1, 0, 100), runtime("cudaLaunchKernel", 10, 5, corr=1), kernel("gemm", 20, 30, corr=1)],
        rank=0,
    )
    code, _, stderr = _imported_by("info", str(trace), cache=tmp_path / "cache")  # fills the cache
    assert code == 0, stderr
    code, imported, stderr = _imported_modules("info", str(trace), cache=tmp_path / "cache")
    assert code == 0, stderr
    assert "polars" in imported and "htatui.trace.cache" in imported, "the probe saw no imports at all"
    unwanted = {name for name in imported if name.split(".")[0] in ("numpy", *UI_PACKAGES)}
    assert unwanted | (imported & {"htatui.store.dataset"}) == set()
