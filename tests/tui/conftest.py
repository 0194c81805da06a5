"""Generated traces for the TUI tests, an app factory, and helpers to wait for the views."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input

from fixtures.generate import write_scenario
from htatui.jobs.load import load_traces
from htatui.trace import TraceSet


@pytest.fixture(scope="session")
def trace_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """small/ (2 ranks, hand-derived answers) and edge/ (one folder per edge case)."""
    root = tmp_path_factory.mktemp("traces")
    write_scenario("small", root / "small")
    write_scenario("edge", root / "edge")
    return root


def _load(folder: Path) -> TraceSet:
    return load_traces([folder], use_cache=False, max_workers=1)


@pytest.fixture(scope="session")
def small_traces(trace_root: Path) -> TraceSet:
    return _load(trace_root / "small")


@pytest.fixture(scope="session")
def cpu_only_traces(trace_root: Path) -> TraceSet:
    return _load(trace_root / "edge" / "cpu_only")


@pytest.fixture(scope="session")
def amd_traces(trace_root: Path) -> TraceSet:
    return _load(trace_root / "edge" / "amd")


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A blinking cursor would make snapshots depend on timing."""
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
    yield
