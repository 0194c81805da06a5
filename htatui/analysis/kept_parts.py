"""A rank's rows of a per-rank table, kept on disk (`TraceSet.kept`: a trace folder's parse-cache
entry) so the next `report` of the same table reads them instead of the rank's events.

A per-rank table's rows of a rank come from that rank alone (`registry.Table.per_rank`), so they
hold while nothing they were made from changes: the rank's file (the cache entry), its rank number
and time shift, the rules and htatui's code (the entry's tag: `jobs.cached_tables.tables_tag`),
the table and its options (the part's name, a digest of both). A change to any of them (an
edited view, another `--steps`) makes and keeps a new part; an old one is never served. The
sentence a table may come with is kept beside its rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import polars as pl

from htatui.analysis.core.kept import options_key
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.trace.model import TraceSet

PART_PREFIX = "part/"
"""What the parse cache calls a part (kept in step with `trace.cache.PART_PREFIX`)."""
MAX_PART_BYTES = 1 << 20
"""Rows bigger than this (a launch table's row per kernel) are made again: reading them back would
save little next to reading the rank, and would fill the cache."""

Build = Callable[[TraceSet, Any], Any]


def part_name(table_id: str, options: CommonOptions) -> str:
    """The name a rank's rows of `table_id` made with `options` (any ranks) are kept under."""
    made_from = (table_id, options_key(options.with_ranks(None)))
    return PART_PREFIX + hashlib.sha256(repr(made_from).encode()).hexdigest()[:32]


def kept_or_made(traces: TraceSet, alone: TraceSet, name: str, build: Build, options: Any) -> Any:
    """`build` on `alone` (a job of one of `traces`' ranks), served from the rank's kept part when
    there is one, and kept when it was made."""
    (rank,) = alone.ranks
    kept = read_part(traces, rank, name)
    if kept is not None:
        return kept
    made = build(alone, options)
    keep_part(traces, rank, name, made)
    return made


def read_part(traces: TraceSet, rank: int, name: str) -> pl.DataFrame | NotedTable | None:
    if traces.kept is None:
        return None
    rows = traces.kept.read(name, [rank])
    sentence = traces.kept.read(name + "#message", [rank]) if rows is not None else None
    if rows is None or sentence is None or sentence.columns != ["message"] or sentence.height != 1:
        return None  # both or neither: rows without their sentence would say less than the table
    message = sentence["message"][0]
    return rows if message is None else NotedTable(rows, message)


def keep_part(traces: TraceSet, rank: int, name: str, result: Any) -> None:
    if traces.kept is None:
        return
    rows, message = (result, None) if isinstance(result, pl.DataFrame) else (result.frame, result.message)
    if rows.estimated_size() > MAX_PART_BYTES:
        return
    sentence = pl.DataFrame({"message": [message]}, schema={"message": pl.Utf8()})
    traces.kept.keep(rank, {name: rows, name + "#message": sentence})
