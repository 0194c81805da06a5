"""The loaded job: one polars frame of events per rank plus a small metadata record."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from htatui.sources import SourcePath
from htatui.trace.errors import EventsUnavailable as EventsUnavailable  # raised by lazily read ranks

if TYPE_CHECKING:
    from htatui.trace.read import FileIdentity

# Where a rank number came from, in order of trust.
RANK_FROM_TRACE = "distributedInfo"
RANK_FROM_FILENAME = "filename"
RANK_FROM_ORDER = "order"


@dataclass(frozen=True)
class TraceMeta:
    """Top-level trace metadata and the labels carried by `ph: M` events."""

    schema_version: int | None = None
    device_properties: tuple[dict[str, Any], ...] = ()
    distributed_info: dict[str, Any] | None = None
    base_time_ns: int | None = None
    display_time_unit: str | None = None
    trace_name: str | None = None
    process_names: dict[str, str] = field(default_factory=dict)
    process_labels: dict[str, str] = field(default_factory=dict)
    thread_names: dict[tuple[str, str], str] = field(default_factory=dict)
    fractional_ts: bool = False
    """True when the file wrote timestamps as floats (ns-resolution Kineto); HTA rounds those."""

    @property
    def claimed_rank(self) -> int | None:
        """The rank written in `distributedInfo.rank`, if it is a whole number."""
        info = self.distributed_info or {}
        value = info.get("rank")
        if isinstance(value, bool):
            return None
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        # Ranks are stored as Int32; a negative or huge number is no rank.
        if isinstance(value, int) and 0 <= value < 2**31:
            return value
        return None

    @property
    def device_name(self) -> str:
        """A short description of the accelerator, e.g. 'NVIDIA A100-SXM4-40GB'."""
        names = sorted({str(p["name"]) for p in self.device_properties if isinstance(p, dict) and p.get("name")})
        if names:
            return ", ".join(names)
        backend = str((self.distributed_info or {}).get("backend", ""))
        if "mtia" in backend:
            return "MTIA"
        devices = [p for p in self.device_properties if isinstance(p, dict)]
        if not devices:
            return "unknown"
        # A wavefront of 64 is AMD's (NVIDIA's warps are 32): ROCm traces often leave names empty.
        kind = "ROCm GPU" if all(p.get("warpSize") == 64 for p in devices) else "GPU"
        return f"{kind} ×{len(devices)}, name not recorded"


class RankTrace:
    """One rank: its file, where its rank number came from, its events and metadata.

    `events.ts` is in µs on the job's common time base (see `htatui.trace.loader._align`);
    `shift_us` was added to the file's own `ts` values to get there. A rank read from a job
    dataset is given `load` instead of `events`: its frame is read the first time a view asks
    for it (and kept), so opening a job of many ranks reads none of them.
    """

    __slots__ = (
        "_details",
        "_events",
        "_figures",
        "_figures_read",
        "_load",
        "_load_details",
        "_lock",
        "meta",
        "path",
        "rank",
        "rank_source",
        "shift_us",
        "source_identity",
        "source_stamp",
        "warnings",
    )

    def __init__(
        self,
        rank: int,
        path: SourcePath,
        rank_source: str,
        events: pl.DataFrame | None = None,
        meta: TraceMeta | None = None,
        shift_us: float = 0.0,
        warnings: tuple[str, ...] = (),
        *,
        load: Callable[[], pl.DataFrame] | None = None,
        source_stamp: tuple[int, int] | None = None,
        source_identity: FileIdentity | None = None,
        figures: Callable[[], pl.DataFrame | None] | None = None,
        details: pl.DataFrame | None = None,
        load_details: Callable[[], pl.DataFrame] | None = None,
    ) -> None:
        if (events is None) == (load is None):
            raise TypeError("RankTrace takes either events or load")
        if details is not None and load_details is not None:
            raise TypeError("RankTrace takes either details or load_details")
        self.rank = rank
        self.path = path
        self.rank_source = rank_source
        self.meta = meta if meta is not None else TraceMeta()
        self.shift_us = shift_us
        self.warnings = warnings
        self._events = events
        self._load = load
        self._details = details if details is not None or load_details is not None else empty_details()
        self._load_details = load_details
        self._lock = threading.Lock()
        self._figures = figures
        self._figures_read: pl.DataFrame | None = None
        self.source_stamp = source_stamp
        """The source file's (size, mtime_ns) when a dataset ingested it: exports that re-read the
        source refuse a file changed since (its events would not be the stored ones)."""
        self.source_identity = source_identity
        """The trace file's identity (size, mtime, ctime, inode, device) taken before it was read,
        for a rank loaded from a local file (None for a pipe, a download or a dataset): exports
        that re-read the file refuse it when it changed since, as the app keeps a loaded job while
        its files may be edited."""

    @property
    def events(self) -> pl.DataFrame:
        """The rank's event frame, read now if it was not read yet (raises EventsUnavailable)."""
        frame = self._events
        if frame is None:
            with self._lock:  # two workers asking at once read the file once
                frame = self._events
                if frame is None:
                    assert self._load is not None
                    frame = self._events = self._load()
        return frame

    def stored_figures(self) -> pl.DataFrame | None:
        """The file's headline figures as parsing made them (`trace.figures.file_figures`, before
        this rank's shift), without reading the events: kept in its cache entry, or made when it
        was parsed now; None when neither holds (they are made from the events)."""
        if self._figures_read is None and self._figures is not None:
            self._figures_read = self._figures()  # one small row, asked for by several checks: read once
        return self._figures_read

    @property
    def details(self) -> pl.DataFrame:
        """The rank's detail table (DETAIL_SCHEMA), read now if it was not read yet, like `events`:
        join it to event rows with `with_details`."""
        frame = self._details
        if frame is None:
            with self._lock:
                frame = self._details
                if frame is None:
                    assert self._load_details is not None
                    frame = self._details = self._load_details()
        return frame

    @property
    def loaded(self) -> bool:
        """Whether the events are in memory (always, except for a dataset rank not yet asked for)."""
        return self._events is not None

    def unload(self) -> None:
        """Drop the events of a rank read on demand (read again when next asked for); no-op otherwise."""
        if self._load is not None:
            self._events = None
        if self._load_details is not None:
            self._details = None

    def with_events(self, events: pl.DataFrame) -> RankTrace:
        """The same rank with other events (e.g. only some steps' rows)."""
        return RankTrace(
            self.rank,
            self.path,
            self.rank_source,
            events,
            self.meta,
            self.shift_us,
            self.warnings,
            source_stamp=self.source_stamp,
            source_identity=self.source_identity,
            details=self._details,
            load_details=None if self._details is not None else self._load_details,
        )

    def __repr__(self) -> str:
        return f"RankTrace(rank={self.rank}, path={self.path!s}, loaded={self.loaded})"


@dataclass(frozen=True)
class LoadProblem:
    """A file that could not be loaded, and why, in one line."""

    path: SourcePath
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class KeptTables(Protocol):
    """A job's answers kept on disk, by name: read for some ranks, kept a rank at a time."""

    def read(self, name: str, ranks: Sequence[int]) -> pl.DataFrame | None:
        """The ranks' kept rows of `name`, in rank order; None when a rank has none (they are made)."""

    def keep(self, rank: int, tables: Mapping[str, pl.DataFrame]) -> None:
        """Keep one rank's rows of these tables (nothing, where nothing can be kept: a dataset)."""


@dataclass(frozen=True)
class TraceSet:
    """The loaded job: ranks in ascending order plus the files that were skipped."""

    ranks: dict[int, RankTrace]
    problems: tuple[LoadProblem, ...] = ()
    notes: tuple[str, ...] = ()
    summary: pl.DataFrame | None = field(default=None, compare=False, repr=False)
    """One row per rank with the default-option figures an ingest stored (`htatui.jobs.summary`),
    when the job is one dataset opened alone, or that a trace folder's cache entries keep (made by
    the parse workers) when each holds for the folder as loaded; views answer from it without
    reading any rank."""
    kept: KeptTables | None = field(default=None, compare=False, repr=False)
    """The job's answers kept on disk (a trace folder's parse-cache entries, a dataset's stored
    tables), by name: read before a table is made from the events, kept once it is
    (`analysis.core.kept` says under what key)."""
    captures: tuple[RankTrace, ...] = field(default=(), compare=False, repr=False)
    """Graph-capture traces loaded beside the ranks (a `capture_traces/` folder, files named
    `*capture*`, `--capture FILE`): where replayed graphs get their ops (`analysis.model.graph_replay`)."""
    derived: dict[Any, Any] = field(default_factory=dict, init=False, compare=False, repr=False)
    """What the analysis derives once per loaded job and reuses across views (the prepare cache,
    the tables made): the job's answers kept in memory, looked in before `kept`; it lives and
    dies with the job, and only the analysis layer reads or writes it."""

    @property
    def rank_ids(self) -> list[int]:
        return sorted(self.ranks)

    def events(self, ranks: list[int] | None = None) -> pl.DataFrame:
        """All events of the chosen ranks (all by default) in one frame with a `rank` column."""
        chosen = self.rank_ids if ranks is None else [r for r in ranks if r in self.ranks]
        frames = [self.ranks[r].events for r in chosen]
        if not frames:
            return empty_events()
        return pl.concat(frames, how="vertical")


def any_figures_kept(traces: TraceSet) -> bool:
    """Whether the job's ranks have their file figures at hand (a trace folder's do, from the
    parse or its cache entries; a dataset's do not), read for the first rank only."""
    return any(traces.ranks[rank].stored_figures() is not None for rank in traces.rank_ids[:1])


EVENT_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "ph": pl.Categorical(),
    "cat": pl.Categorical(),
    "name": pl.Categorical(),
    "pid": pl.Categorical(),
    "tid": pl.Categorical(),
    "ts": pl.Float64(),
    "dur": pl.Float64(),
    "end": pl.Float64(),
    "stream": pl.Int64(),
    "device": pl.Int64(),
    "correlation": pl.Int64(),
    "external_id": pl.Int64(),
    "flow_id": pl.Int64(),
    "iteration": pl.Int64(),
    "bytes": pl.Int64(),
    "memory_bw_gbps": pl.Float64(),
    "collective_name": pl.Categorical(),
    "wait_on_stream": pl.Int64(),
    "launched_kernel": pl.Categorical(),
}
"""Columns of every rank's event frame (µs floats for time; null where an event lacks a value).

Text is Categorical: polars keeps a 16-byte view per row of a String column even where it is
null, and the device-only text columns are null on most rows (4 bytes per row as Categorical).
The rarely read device details are kept apart, in the rank's detail table (DETAIL_SCHEMA)."""

DETAIL_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "index": pl.Int64(),
    "in_msg_nelems": pl.Int64(),
    "out_msg_nelems": pl.Int64(),
    "in_msg_size": pl.Int64(),
    "out_msg_size": pl.Int64(),
    "group_size": pl.Int64(),
    "pg_name": pl.Categorical(),
    "msg_dtype": pl.Categorical(),
    "grid": pl.Categorical(),
    "block": pl.Categorical(),
    "occupancy_pct": pl.Float64(),
    "blocks_per_sm": pl.Float64(),
    "warps_per_sm": pl.Float64(),
    "registers_per_thread": pl.Int64(),
    "shared_memory": pl.Int64(),
}
"""Columns of every rank's detail table: a collective kernel's message arguments and a kernel's
launch statistics, one row per event that has any (keyed by the event's `rank` and `index`).

Null on 84-100 % of the event rows and read by few views, they cost ~100 bytes a row in the
event frame; here they cost that only on the rows that carry them."""

DETAIL_COLUMNS = tuple(name for name in DETAIL_SCHEMA if name not in ("rank", "index"))
"""The detail values (DETAIL_SCHEMA without its key)."""


def empty_events() -> pl.DataFrame:
    return pl.DataFrame(schema=EVENT_SCHEMA)


def empty_details() -> pl.DataFrame:
    return pl.DataFrame(schema=DETAIL_SCHEMA)


def with_details(frame: pl.DataFrame, details: pl.DataFrame, columns: tuple[str, ...] | None = None) -> pl.DataFrame:
    """`frame` (event rows with `index`, and `rank` when it holds several ranks) with the detail
    columns of its rows joined on (null where a row has none), in its own row order.

    `details` is the rank's detail table (`RankTrace.details`), or several ranks' concatenated;
    `columns`: only these detail columns (all by default).
    """
    wanted = DETAIL_COLUMNS if columns is None else columns
    chosen = tuple(c for c in wanted if c in DETAIL_COLUMNS and c not in frame.columns)
    if not chosen:
        return frame
    keys = ["rank", "index"] if "rank" in frame.columns else ["index"]
    right = details.select(*keys, *(c for c in chosen if c not in keys))
    joined = frame.join(right, on=keys, how="left", maintain_order="left")
    # Cut as `frame` was: float sums over a column depend on its chunks, and the views' figures
    # must not change with where their columns came from.
    lengths = max((frame.get_column(name).chunk_lengths() for name in frame.columns), key=len, default=[])
    if len(lengths) <= 1:
        return joined
    offsets = [0, *accumulate(lengths)][:-1]
    return pl.concat(
        [joined.slice(offset, length) for offset, length in zip(offsets, lengths, strict=True)], rechunk=False
    )
