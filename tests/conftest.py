"""Shared fixtures: the real traces beside the checkout, generated traces, an isolated cache, no user keymap."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from htatui.jobs.load import load_traces
from htatui.trace import TraceSet

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"

HIDDEN_WITHOUT_HTA = ("hta", "pandas")
"""What README's second test command hides (`HTATUI_TESTS_WITHOUT_HTA=1`): HTA and the pandas it
brings, so the analysis tests show that no number depends on them, as an install without the
`hta` extra would. A `None` in `sys.modules` makes `import` fail and `find_spec` answer None."""

if os.environ.get("HTATUI_TESTS_WITHOUT_HTA"):
    imported = [name for name in HIDDEN_WITHOUT_HTA if sys.modules.get(name) is not None]
    if imported:
        raise pytest.UsageError(f"HTATUI_TESTS_WITHOUT_HTA: {', '.join(imported)} imported before the tests")
    for hidden in HIDDEN_WITHOUT_HTA:
        sys.modules[hidden] = None  # type: ignore[assignment]


def pytest_report_header() -> str | None:
    return "hidden: hta, pandas (HTATUI_TESTS_WITHOUT_HTA)" if os.environ.get("HTATUI_TESTS_WITHOUT_HTA") else None


@pytest.fixture(autouse=True)
def isolated_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache dir, so no test depends on another's cached parse."""
    folder = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("HTATUI_CACHE_DIR", str(folder))
    return folder


@pytest.fixture(autouse=True)
def no_user_keymap(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """A keymap file that does not exist, so a developer's own keymap never changes what a test presses."""
    monkeypatch.setenv("HTATUI_KEYMAP", str(tmp_path_factory.getbasetemp() / "no-keymap.toml"))


@pytest.fixture(scope="session")
def shared_traces() -> Path:
    """../shared/traces beside the checkout; tests that need it skip when it is absent."""
    if not SHARED_TRACES.is_dir():
        pytest.skip(f"real traces not found at {SHARED_TRACES} (clone with ../shared beside it)")
    return SHARED_TRACES


_LOADED: dict[str, TraceSet] = {}


@pytest.fixture(scope="session")
def load_shared(shared_traces: Path):  # type: ignore[no-untyped-def]
    """Load a ../shared/traces folder once per session (without the cache)."""

    def load(folder: str) -> TraceSet:
        if folder not in _LOADED:
            _LOADED[folder] = load_traces([shared_traces / folder], use_cache=False, max_workers=1)
        return _LOADED[folder]

    return load


TRACELENS_GIT = ROOT.parent / ".mirror" / "AMD-AGI+TraceLens" / "repo"
"""The fetched mirror of AMD-AGI/TraceLens (a bare git directory): its public test traces are
read from it, never copied into the project."""


@pytest.fixture(scope="session")
def tracelens(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """`tracelens("tests/traces/…")` → that file of TraceLens's mirror, written to a temp folder
    (same relative path); tests that need it skip when the mirror is absent."""
    import subprocess

    if not (TRACELENS_GIT / "HEAD").is_file():
        pytest.skip(f"TraceLens mirror not found at {TRACELENS_GIT} (fetch github:AMD-AGI/TraceLens)")
    out = tmp_path_factory.mktemp("tracelens")

    def extract(relative: str) -> Path:
        target = out / relative
        if not target.exists():
            shown = subprocess.run(
                ["git", "--git-dir", str(TRACELENS_GIT), "show", f"HEAD:{relative}"], capture_output=True, check=False
            )
            if shown.returncode != 0 or not shown.stdout:
                pytest.skip(f"{relative} is not in the TraceLens mirror ({shown.stderr.decode().strip()[:120]})")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(shown.stdout)
        return target

    return extract


@pytest.fixture(scope="session")
def small(tmp_path_factory: pytest.TempPathFactory) -> TraceSet:
    """The generated `small` scenario (fixtures/scenarios.py), loaded once per session: the view
    tests read it and never change it."""
    from fixtures.generate import write_scenario

    folder = tmp_path_factory.mktemp("small")
    write_scenario("small", folder)
    return load_traces([folder], use_cache=False, max_workers=1)


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The generated `small` and `edge` scenarios, each in a folder of its own, written once per session."""
    from fixtures.generate import write_scenario

    root = tmp_path_factory.mktemp("generated")
    write_scenario("small", root / "small")
    write_scenario("edge", root / "edge")
    return root


_CLI_LOADED: dict[tuple[object, ...], TraceSet] = {}


def _load_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's `_load` patched: each job's files are loaded and checked once per session, and the
    commands run under the patch share one job per path, begun with nothing derived."""
    cli_main = importlib.import_module("htatui.cli.main")  # the package's `main` is the function
    real_load = cli_main._load
    mine: dict[tuple[object, ...], TraceSet] = {}

    def load(paths: Sequence[Any], use_cache: bool, show_warnings: bool = True, **kwargs: Any) -> TraceSet:
        key = tuple(paths)
        if key not in _CLI_LOADED:
            _CLI_LOADED[key] = real_load(paths, use_cache, show_warnings, **kwargs)
        if key not in mine:
            first = _CLI_LOADED[key]
            mine[key] = TraceSet(
                first.ranks,
                first.problems,
                first.notes,
                summary=first.summary,
                kept=first.kept,
                captures=first.captures,
            )
        return mine[key]

    monkeypatch.setattr(cli_main, "_load", load)


@pytest.fixture(scope="module")
def cli_module_job() -> Iterator[None]:
    """As `cli_one_job` for a whole module: its tests' commands share one job per path, begun with
    nothing derived (and nothing shared with a job a test loads itself). For a module that asks
    `report` for each table once: what another table derived is reused, as in one process."""
    with pytest.MonkeyPatch.context() as patch:
        _load_once(patch)
        yield


@pytest.fixture
def cli_one_job(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The test's CLI commands share one job per path, loaded once per session and begun with
    nothing derived: what one command derives (a step model, the kernels typed) the next reuses, as
    one `report` process making several tables would. Nothing is shared with a job the test loaded
    itself, nor with another test. The tests that use it compare tables, never the loading."""
    _load_once(monkeypatch)
    yield
