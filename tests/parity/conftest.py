"""Parity fixtures: HTA 0.6.1's TraceAnalysis of a shared trace folder, built once per session.

Parsing a folder with HTA is the parity tests' main cost (100 s for the MTIA trace on a loaded
machine), so each folder's tests run in one xdist worker (`--dist loadgroup`, in pyproject's
addopts): the folder is parsed once per run, not once per worker.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

FOLDER_PARAMS = ("pair", "folder", "name")
"""The parameters that name a shared folder (or a pair of folders) in the parity tests."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every parity test of one folder in one xdist group (before xdist reads the groups)."""
    here = Path(__file__).parent
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or here not in item.path.parents:
            continue
        folder = next((callspec.params[p] for p in FOLDER_PARAMS if p in callspec.params), None)
        if folder is not None:
            item.add_marker(pytest.mark.xdist_group(f"parity:{folder}"))


_ANALYSES: dict[str, Any] = {}
_FAILURES: dict[str, str] = {}


@pytest.fixture(scope="session")
def hta_analysis(shared_traces: Path) -> Callable[[str], Any]:
    """`get(folder)` → HTA's TraceAnalysis(trace_dir=../shared/traces/folder), cached per session.

    Skips the test when HTA is not installed, or when HTA fails to load that folder (with
    HTA's error as the reason).
    """
    trace_analysis = pytest.importorskip(
        "hta.trace_analysis", reason="HTA is not installed (pip install 'traceinsight==0.6.1' 'pandas<3')"
    )
    logging.getLogger("hta").setLevel(logging.ERROR)

    def get(folder: str) -> Any:
        if folder in _FAILURES:
            pytest.skip(f"HTA cannot load {folder}: {_FAILURES[folder]}")
        if folder not in _ANALYSES:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    _ANALYSES[folder] = trace_analysis.TraceAnalysis(trace_dir=str(shared_traces / folder))
            except Exception as error:  # any HTA failure means "no reference here"
                _FAILURES[folder] = f"{type(error).__name__}: {error}"
                pytest.skip(f"HTA cannot load {folder}: {_FAILURES[folder]}")
        return _ANALYSES[folder]

    return get
