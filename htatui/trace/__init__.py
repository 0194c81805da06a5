"""Trace discovery, decoding and parsing into polars (no Textual, no printing); `htatui.jobs.load`
puts a job together.

The names below are imported when first asked for, so that a light module of this package
(errors) can be imported without polars: `htatui --version` must not pay for the loader.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from htatui.trace.loader import LoadCancelled, LoadError, LoadProgress
    from htatui.trace.model import EVENT_SCHEMA, LoadProblem, RankTrace, TraceMeta, TraceSet

_HOMES = {
    "EVENT_SCHEMA": "htatui.trace.model",
    "LoadCancelled": "htatui.trace.loader",
    "LoadError": "htatui.trace.loader",
    "LoadProblem": "htatui.trace.model",
    "LoadProgress": "htatui.trace.loader",
    "RankTrace": "htatui.trace.model",
    "TraceMeta": "htatui.trace.model",
    "TraceSet": "htatui.trace.model",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "EVENT_SCHEMA",
    "LoadCancelled",
    "LoadError",
    "LoadProblem",
    "LoadProgress",
    "RankTrace",
    "TraceMeta",
    "TraceSet",
]
