"""A trace folder's per-rank analysis tables, kept in the parse cache beside each rank's events.

The cross-rank views read small per-rank tables (`analysis.views.ranks.tables`); a dataset stores
them at ingest, and a trace folder keeps them in each rank's parse-cache entry the first time they
are made from its events. They hold only for the rank number and time shift they were made with
(both depend on the whole job: another set of files moves them), so each entry's tables carry
that tag and are served only when every rank of the job has tables of its own tag; else the
views make them from the events, as before, and keep them for the next open. A rank's rows of
the per-rank view tables (`analysis.kept_parts`) are kept under the same tag.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import polars as pl

from htatui.trace import cache
from htatui.trace.model import RankTrace

StoredTable = Callable[[str], pl.DataFrame | None]
StoredRankTable = Callable[[str, int], pl.DataFrame | None]
KeepTables = Callable[[int, dict[str, pl.DataFrame]], None]


def tables_tag(trace: RankTrace) -> str:
    """What a rank's kept tables were made for: the tables' version, its rank number and time shift."""
    from htatui.analysis.views.ranks.tables import TABLES_VERSION

    return f"tables {TABLES_VERSION}|rank {trace.rank}|shift {trace.shift_us!r}"


def cached_rank_tables(
    ranks: dict[int, RankTrace], *, read: bool = True
) -> tuple[StoredTable | None, StoredRankTable | None, KeepTables | None]:
    """Readers of the job's kept tables (None without `read`) and the keeper that stores a rank's
    tables in its entry (all None when no rank is a cacheable local file). Nothing is read until a view asks: the
    readers give None when a rank has no tables of its tag, and the views make them."""
    local = {rank: trace for rank, trace in ranks.items() if isinstance(trace.path, Path) and trace.source_identity}
    if not local:
        return None, None, None

    def keep(rank: int, tables: dict[str, pl.DataFrame]) -> None:
        trace = local.get(rank)
        if trace is not None:
            cache.store_tables(trace.path, trace.source_identity, tables_tag(trace), tables)

    if len(local) != len(ranks) or not read:  # --no-cache reads none: it makes them again
        return None, None, keep
    lock = threading.Lock()
    found: dict[int, cache.CachedTables] = {}
    looked: list[bool] = []
    frames_read: dict[str, pl.DataFrame | None] = {}

    def entries() -> dict[int, cache.CachedTables] | None:
        # Looked up once, when a view first asks (the JSON records only): every rank's, or none.
        if not looked:
            looked.append(True)
            for rank, trace in local.items():
                entry = cache.cached_tables(trace.path, trace.source_identity, tables_tag(trace))
                if entry is None:
                    found.clear()
                    break
                found[rank] = entry
        return found or None

    def schema(name: str) -> pl.Schema:
        from htatui.analysis.views.ranks.tables import SCHEMAS

        return pl.Schema(SCHEMAS[name])

    def stored_table(name: str) -> pl.DataFrame | None:
        # Every rank's rows, read once; a part that cannot be read makes the views compute them again.
        with lock:
            kept = entries()
            if kept is None:
                return None
            if name not in frames_read:
                frames = [kept[rank].read(name) for rank in sorted(kept)]
                good = all(frame is not None and frame.schema == schema(name) for frame in frames)
                frames_read[name] = pl.concat([f for f in frames if f is not None], how="vertical") if good else None
            return frames_read[name]

    def stored_rank_table(name: str, rank: int) -> pl.DataFrame | None:
        with lock:
            kept = entries()
        entry = kept.get(rank) if kept is not None else None
        frame = entry.read(name) if entry is not None else None
        return frame if frame is not None and frame.schema == schema(name) else None

    return stored_table, stored_rank_table, keep


StoredPart = Callable[[int, str], pl.DataFrame | None]
KeepPart = Callable[[int, dict[str, pl.DataFrame]], None]


def cached_rank_parts(ranks: dict[int, RankTrace], *, read: bool = True) -> tuple[StoredPart | None, KeepPart | None]:
    """The reader (None without `read`) and keeper of the ranks' kept rows of per-rank view tables
    (`analysis.kept_parts`), under the same tag as their cross-rank tables; a rank that is not
    a cacheable local file has none and keeps none. None, None when no rank is one."""
    local = {rank: trace for rank, trace in ranks.items() if isinstance(trace.path, Path) and trace.source_identity}
    if not local:
        return None, None

    lock = threading.Lock()
    looked_up: dict[int, cache.CachedTables | None] = {}

    def stored_part(rank: int, name: str) -> pl.DataFrame | None:
        # The entry's record is read once for a table's rows and its sentence (again after a keep).
        trace = local.get(rank)
        if trace is None or not name.startswith(cache.PART_PREFIX):
            return None
        with lock:
            if rank not in looked_up:
                looked_up[rank] = cache.cached_tables(trace.path, trace.source_identity, tables_tag(trace))
            entry = looked_up[rank]
        return entry.read(name) if entry is not None else None

    def keep_part(rank: int, parts: dict[str, pl.DataFrame]) -> None:
        trace = local.get(rank)
        if trace is not None:
            cache.store_parts(trace.path, trace.source_identity, tables_tag(trace), parts)
            with lock:
                looked_up.pop(rank, None)

    return (stored_part if read else None), keep_part
