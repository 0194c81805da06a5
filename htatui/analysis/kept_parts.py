"""A rank's rows of a per-rank table, kept in its parse-cache entry so a trace folder's next
`report` of the same table reads them instead of the rank's events.

A per-rank table's rows of a rank come from that rank alone (`registry.Table.per_rank`), so they
hold while nothing they were made from changes: the rank's file (the cache entry), its rank number
and time shift (the entry's tag), the table, its options, the communication rules, the device
peaks and htatui's own code. The part's name is a digest of all but the first two, so a change
to any of them (an edited view, another `--steps`) makes and keeps a new part; an old one is
never served. The sentence a table may come with is kept beside its rows.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

from htatui.analysis.core.comm_rules import comm_rules
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.trace.model import TraceSet

PART_PREFIX = "part/"
"""What the parse cache's `store_parts` calls a part (kept in step with `trace.cache.PART_PREFIX`)."""
MAX_PART_BYTES = 1 << 20
"""Rows bigger than this (a launch table's row per kernel) are made again: reading them back would
save little next to reading the rank, and would fill the cache."""

Build = Callable[[TraceSet, Any], Any]


@functools.cache
def code_digest() -> str:
    """A digest of htatui's source files: a part made by other code is never served."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def part_name(table_id: str, options: CommonOptions) -> str:
    """The name a rank's rows of `table_id` made with `options` (any ranks) are kept under."""
    from htatui.analysis.perf.peaks import devices

    made_from = (table_id, repr(options.with_ranks(None)), comm_rules().fingerprint, repr(devices()), code_digest())
    return PART_PREFIX + hashlib.sha256(repr(made_from).encode()).hexdigest()[:32]


def kept_build(traces: TraceSet, name: str, build: Build) -> Build:
    """`build` on a job of one rank, served from the rank's kept part when there is one, and kept
    when it was made (`traces` carries the cache's reader and keeper)."""

    def kept_or_made(alone: TraceSet, options: Any) -> Any:
        (rank,) = alone.ranks
        kept = read_part(traces, rank, name)
        if kept is not None:
            return kept
        made = build(alone, options)
        keep_part(traces, rank, name, made)
        return made

    return kept_or_made


def read_part(traces: TraceSet, rank: int, name: str) -> pl.DataFrame | NotedTable | None:
    if traces.stored_part is None:
        return None
    rows = traces.stored_part(rank, name)
    sentence = traces.stored_part(rank, name + "#message") if rows is not None else None
    if rows is None or sentence is None or sentence.columns != ["message"] or sentence.height != 1:
        return None  # both or neither: rows without their sentence would say less than the table
    message = sentence["message"][0]
    return rows if message is None else NotedTable(rows, message)


def keep_part(traces: TraceSet, rank: int, name: str, result: Any) -> None:
    if traces.keep_part is None:
        return
    rows, message = (result, None) if isinstance(result, pl.DataFrame) else (result.frame, result.message)
    if rows.estimated_size() > MAX_PART_BYTES:
        return
    sentence = pl.DataFrame({"message": [message]}, schema={"message": pl.Utf8()})
    traces.keep_part(rank, {name: rows, name + "#message": sentence})
