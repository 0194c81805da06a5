"""Trace discovery, decoding and loading into polars (no Textual, no printing)."""

from htatui.trace.loader import LoadCancelled, LoadError, LoadProgress, load_traces
from htatui.trace.model import EVENT_SCHEMA, LoadProblem, RankTrace, TraceMeta, TraceSet

__all__ = [
    "EVENT_SCHEMA",
    "LoadCancelled",
    "LoadError",
    "LoadProblem",
    "LoadProgress",
    "RankTrace",
    "TraceMeta",
    "TraceSet",
    "load_traces",
]
