"""Trace discovery, decoding and parsing into polars (no Textual, no printing); `htatui.jobs.load`
puts a job together."""

from htatui.trace.loader import LoadCancelled, LoadError, LoadProgress
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
]
