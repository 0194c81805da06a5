"""A trace folder's analysis tables, kept in the parse cache beside each rank's events.

The cross-rank views read small per-rank tables (`analysis.views.ranks.tables`) and the per-rank
view tables are made a rank at a time (`analysis.kept_parts`); a trace folder keeps each rank's
rows of both in its parse-cache entry the first time they are made from its events, tagged with
what they were made for: the rank number and time shift (both depend on the whole job: another
set of files moves them) and the code (`analysis.core.kept.made_with`; the cross-rank tables are
the default scope's, made under the shipped rules, and a part's name holds its rules). A rank's rows
are served only under its own tag; else the views make them from the events, and keep them
under the new tag (the old ones are dropped).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from htatui.analysis.core.kept import made_with
from htatui.analysis.views.ranks.tables import SCHEMAS
from htatui.trace import cache
from htatui.trace.model import RankTrace


def tables_tag(trace: RankTrace) -> str:
    """What a rank's kept tables were made for: its rank number and time shift, and the code."""
    return f"rank {trace.rank}|shift {trace.shift_us!r}|made {made_with()}"


class ParseCacheTables:
    """The `TraceSet.kept` of a trace folder loaded with the cache (`trace.model.KeptTables`).

    `read=False` (`--no-cache`) serves nothing but keeps what is made, for the next open.
    """

    def __init__(self, ranks: Mapping[int, RankTrace], *, read: bool = True) -> None:
        self.local = {rank: trace for rank, trace in ranks.items() if _cacheable(trace)}
        self.reading = read
        self._lock = threading.Lock()
        self._entries: dict[tuple[int, str], cache.CachedTables | None] = {}

    def read(self, name: str, ranks: Sequence[int]) -> pl.DataFrame | None:
        if not self.reading or not ranks:
            return None
        frames = []
        for rank in ranks:
            entry = self._entry(rank)
            frame = entry.read(name) if entry is not None else None
            if frame is None or (name in SCHEMAS and frame.schema != pl.Schema(SCHEMAS[name])):
                return None  # a rank without its rows: the views make them all again
            frames.append(frame)
        return frames[0] if len(frames) == 1 else pl.concat(frames, how="vertical")

    def keep(self, rank: int, tables: Mapping[str, pl.DataFrame]) -> None:
        trace = self.local.get(rank)
        if trace is None:
            return
        tag = tables_tag(trace)
        cache.store_tagged(trace.path, trace.source_identity, tag, dict(tables))
        with self._lock:
            self._entries.pop((rank, tag), None)  # read again: the record names the new offsets

    def _entry(self, rank: int) -> cache.CachedTables | None:
        # The entry's record is read once per tag (the JSON only), not once per table.
        trace = self.local.get(rank)
        if trace is None:
            return None
        tag = tables_tag(trace)
        with self._lock:
            if (rank, tag) not in self._entries:
                self._entries[(rank, tag)] = cache.cached_tables(trace.path, trace.source_identity, tag)
            return self._entries[(rank, tag)]


def _cacheable(trace: RankTrace) -> bool:
    return isinstance(trace.path, Path) and trace.source_identity is not None


def parse_cache_tables(ranks: Mapping[int, RankTrace], *, read: bool = True) -> ParseCacheTables | None:
    """The kept tables of a job's ranks that are cacheable local files (None when no rank is one)."""
    kept = ParseCacheTables(ranks, read=read)
    return kept if kept.local else None
