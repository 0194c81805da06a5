"""A rank's events binned into terminal cells: CPU thread rows, GPU stream rows, counter rows.

`build_index` runs once per rank (the first draw): it types every event, gives host events a
nesting depth, and merges each row's busy time per type into sorted intervals with a running
total. `bin_window` then answers any window in O(rows × cells × log n): the busy time of a type
up to time t is one binary search into that running total, so a cell's coverage is the
difference at its two edges, whatever the number of events under it. A cell shows the type that
covers most of it; its shade is the fraction of the cell that is busy.

Times are µs on the job's common time base, the one of the views' `start_us` columns. The event
under a cell, its details and links live in `timeline_events`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from htatui.analysis.core.kernel_types import COMMUNICATION, COMPUTATION, MEMORY, kernel_type
from htatui.analysis.core.memo import memoised
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope
from htatui.analysis.views import membw, queue
from htatui.errors import HtatuiError
from htatui.trace.kineto import DRIVER_CATS, GPU_ACTIVITY_CATS, RUNTIME_CATS
from htatui.trace.model import TraceSet
from htatui.trace.step_sources import step_spans

THREAD = "thread"
STREAM = "stream"
COUNTER = "counter"

COMPUTE = "compute"
COMM = "communication"
MEMCPY = "memcpy"
MEMSET = "memset"
OTHER = "other"
OP = "op"
ANNOTATION = "annotation"
RUNTIME = "runtime"

GLYPHS: dict[str, str] = {
    COMPUTE: "C",
    COMM: "N",
    MEMCPY: "M",
    MEMSET: "S",
    OTHER: "X",
    OP: "O",
    ANNOTATION: "A",
    RUNTIME: "R",
}
"""One letter per cell type: upper case when at least half the cell is busy, lower case below."""
STREAM_IDLE = "."
THREAD_IDLE = " "
SPARK = "▁▂▃▄▅▆▇█"
FULL_SHADE = 0.5

COUNTER_KINDS = ("queue", "membw")
ROW_KINDS = ("threads", "streams", *COUNTER_KINDS)
DEFAULT_ROWS = ("threads", "streams")

_HOST_TYPES = {"cpu_op": OP, "user_annotation": ANNOTATION, **dict.fromkeys((*RUNTIME_CATS, *DRIVER_CATS), RUNTIME)}
"""Host categories drawn on thread rows (python_function stacks are left out: too deep)."""


class TimelineError(HtatuiError, ValueError):
    """A window or width that cannot be drawn; the message is one line."""


@dataclass(frozen=True)
class TimelineOptions:
    """Which rows to draw: CPU nesting depth shown per thread, and the row kinds."""

    max_depth: int = 2
    """Thread rows per thread: depth 0 (top-level ops and annotations) to max_depth − 1."""
    rows: tuple[str, ...] = DEFAULT_ROWS
    rules: Rules = SHIPPED_RULES
    """The rules the GPU rows are typed by (the scope's: communication or compute)."""


@dataclass(frozen=True)
class RowSpec:
    """One drawn row: a CPU thread at one nesting depth, a GPU stream, or a counter."""

    rank: int
    kind: str
    key: int
    depth: int = 0
    counter: str = ""
    """Counter rows: the row kind that asked for them (queue, membw)."""
    name: str = ""
    """Counter rows: the label ("queue s7", "bw Memcpy HtoD")."""

    @property
    def label(self) -> str:
        if self.kind == STREAM:
            return f"stream {self.key}"
        if self.kind == COUNTER:
            return self.name
        return f"thread {self.key}" + (f" +{self.depth}" if self.depth else "")


@dataclass(frozen=True)
class TimelineRow:
    """A row binned over a window: per cell the busiest type (None = idle) and busy fraction;
    counter rows carry the per-cell maximum value instead."""

    spec: RowSpec
    types: list[str | None]
    fractions: list[float]
    values: list[float | None] = field(default_factory=list)


_BIN_SCHEMA: dict[str, pl.DataType] = {
    "row": pl.Int64(),
    "cell": pl.Int64(),
    "type": pl.Utf8(),
    "busy": pl.Float64(),
    "top": pl.Float64(),
}


@dataclass
class _Coverage:
    """Every (row, type)'s merged busy intervals in one table, laid end to end on one axis.

    Group g's times are stored as (t − origin) + g × span, so the groups follow each other in
    one sorted column and a single binary search answers every (group, cell edge) at once; the
    busy time up to t is `before` (busy time of the group's earlier intervals) plus the part of
    the interval found that lies before t.
    """

    groups: pl.DataFrame
    """gid, row, type (gid = position)."""
    starts: pl.Series
    ends: pl.Series
    before: pl.Series
    gid: pl.Series
    origin: float
    span: float

    @classmethod
    def build(cls, events: pl.DataFrame, first_us: float, last_us: float) -> _Coverage:
        """From the index's events (sorted by row, start, file index): those with a duration,
        merged per (row, type) as `merge_intervals` merges them (a new interval where one starts
        after the running end; touching ones merge), with numpy on a few columns, group by group.
        """
        timed = events.filter(pl.col("dur") > 0).select("row", "type", "ts", "end")
        # Stable, as merge_intervals' sort: equal starts keep the events' order.
        order = np.lexsort((timed["ts"].to_numpy(), timed["type"].to_physical().to_numpy(), timed["row"].to_numpy()))
        row = timed["row"].to_numpy()[order]
        code = timed["type"].to_physical().to_numpy()[order]
        bounds = np.concatenate(([0], np.flatnonzero((row[1:] != row[:-1]) | (code[1:] != code[:-1])) + 1, [len(row)]))
        if len(row) == 0:
            bounds = np.zeros(1, dtype=np.int64)
        del row, code
        heads = order[bounds[:-1]]
        groups = pl.DataFrame(
            {
                "gid": pl.Series(np.arange(len(heads), dtype=np.int64)),
                "row": timed["row"].gather(heads),
                "type": timed["type"].gather(heads),
            }
        )
        ts = timed["ts"].to_numpy()[order]
        end = timed["end"].to_numpy()[order]
        del timed, order
        # The merged intervals are written into arrays of the events' length (there are at most as
        # many), not gathered in lists and joined: numpy's buffers are not polars', so each copy
        # held at once adds to the page's peak.
        all_ts, all_end, before = np.empty(len(ts)), np.empty(len(ts)), np.empty(len(ts))
        gids = np.empty(len(ts), dtype=np.int32)
        at = 0
        for group, (low, high) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
            starts, ends = ts[low:high], end[low:high]
            opens = np.ones(high - low, dtype=bool)
            opens[1:] = starts[1:] > np.maximum.accumulate(ends)[:-1]
            first = np.flatnonzero(opens)
            merged = slice(at, at + len(first))
            all_ts[merged] = np.minimum.reduceat(starts, first)
            all_end[merged] = np.maximum.reduceat(ends, first)
            length = all_end[merged] - all_ts[merged]
            before[merged] = np.cumsum(length) - length
            gids[merged] = group
            at += len(first)
        del ts, end
        all_ts, all_end, before, gids = all_ts[:at], all_end[:at], before[:at], gids[:at]
        origin = min(first_us, float(all_ts.min()) if len(all_ts) else first_us) - 1.0
        top = max(last_us, float(all_end.max()) if len(all_end) else last_us) + 1.0
        span = top - origin
        offset = gids.astype(np.float64)
        offset *= span
        # In place, in the order `(t − origin) + offset` is written: the same floats.
        all_ts -= origin
        all_ts += offset
        all_end -= origin
        all_end += offset
        del offset
        return cls(
            groups=groups,
            starts=pl.Series("s", all_ts),
            ends=pl.Series("e", all_end),
            before=pl.Series("before", before),
            gid=pl.Series("gid", gids),  # a group number: 4 bytes an interval
            origin=origin,
            span=span,
        )

    def bin(self, rows: list[int], edges: pl.Series) -> pl.DataFrame:
        """row, cell, type (the busiest), busy (fraction of the cell, all types), top (the
        busiest type's fraction) for every cell of the `rows` that have busy intervals."""
        chosen = self.groups.filter(pl.col("row").is_in(pl.Series(rows, dtype=pl.Int64).implode()))
        if chosen.height == 0 or self.starts.len() == 0:
            return pl.DataFrame(schema=_BIN_SCHEMA)
        cells = edges.len() - 1
        width = float(edges[1] - edges[0])
        local = pl.DataFrame(
            {
                "edge": pl.int_range(0, cells + 1, dtype=pl.Int64, eager=True),
                "t": (edges - self.origin).clip(0.0, self.span),
            }
        )
        queries = (
            chosen.select("gid")
            .join(local, how="cross")
            .sort("gid", "edge")
            .with_columns(q=pl.col("t") + pl.col("gid").cast(pl.Float64) * self.span)
        )
        position = self.starts.search_sorted(queries["q"], side="right").cast(pl.Int64) - 1
        clipped = position.clip(0, self.starts.len() - 1)
        found = queries.with_columns(
            pos=position,
            s=self.starts.gather(clipped),
            e=self.ends.gather(clipped),
            b=self.before.gather(clipped),
            g=self.gid.gather(clipped),
        )
        busy = (
            pl.when((pl.col("pos") >= 0) & (pl.col("g") == pl.col("gid")))
            .then(pl.col("b") + pl.min_horizontal(pl.col("q"), pl.col("e")) - pl.col("s"))
            .otherwise(0.0)
        )
        fractions = (
            found.with_columns(busy=busy)
            .with_columns(frac=pl.col("busy").diff().over("gid") / width)
            .filter(pl.col("edge") > 0)
            .join(chosen, on="gid", how="left")
            .select("row", "type", cell=pl.col("edge") - 1, frac="frac")
            .sort("row", "cell", "type")
        )
        return (
            fractions.group_by("row", "cell", maintain_order=True)
            .agg(
                type=pl.col("type").sort_by("frac", descending=True, maintain_order=True).first(),
                busy=pl.col("frac").sum().clip(0.0, 1.0),
                top=pl.col("frac").max(),
            )
            .select(list(_BIN_SCHEMA))
        )


_LOOKUP_COLUMNS = ("index", "name", "cat", "tid", "stream", "correlation", "external_id")
"""What an event shows under the cursor, or is followed by to its launch and kernels: read from
the rank's own columns by `source` when asked for (`RankIndex.looked_up`), not copied per event."""


@dataclass
class RankIndex:
    """What one rank's timeline needs, computed once: rows, typed events, coverage, steps."""

    rank: int
    rows: list[RowSpec]
    events: pl.DataFrame
    """kind, key, type, ts, end, dur, depth, row and `source` (the event's row in `lookups`),
    by row, start and file index; `looked_up` adds the event's other columns."""
    coverage: _Coverage
    """The merged busy intervals of every (row, type)."""
    steps: pl.DataFrame
    """step, start_us, end_us in time order."""
    counters: dict[int, pl.DataFrame] = field(default_factory=dict)
    """Counter row → ts_us, value (a step series)."""
    counters_added: set[str] = field(default_factory=set)
    first_us: float = 0.0
    last_us: float = 0.0
    lookups: pl.DataFrame = field(default_factory=lambda: pl.DataFrame(schema=dict.fromkeys(_LOOKUP_COLUMNS)))
    """The rank's own columns an event shows (`_LOOKUP_COLUMNS`: the loaded frame's, not a copy)."""

    def lookup(self, column: str, events: pl.DataFrame) -> pl.Series:
        """One looked-up column for rows of `events` (rows of `self.events`), in their order."""
        return self.lookups[column].gather(events["source"])

    def looked_up(self, events: pl.DataFrame) -> pl.DataFrame:
        """Rows of `self.events` with every event column (`_EVENT_COLUMNS`), in their order."""
        found = self.lookups.select(pl.all().gather(events["source"]))
        return pl.concat([events.drop("source"), found], how="horizontal").select(_EVENT_COLUMNS)


_TYPED_COLUMNS = ("ph", "cat", "name", "collective_name", "tid", "stream", "ts", "end", "dur", "index")
"""What `_typed_events` reads of a rank's events to type, place and nest them."""

KIND = pl.Enum(sorted((THREAD, STREAM)))
TYPE = pl.Enum(sorted(GLYPHS))
"""The index's `kind` and `type` columns: a byte a row instead of a text; the categories in
text order, so sorting by them sorts as the texts did."""


def _typed_events(events: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """Complete events drawn on the timeline: `source` (the row in `events`), their row kind
    (`KIND`), key and cell type (`TYPE`), times and file index.

    Types and thread numbers are worked out once per distinct (cat, name) and tid, then joined:
    the name rules are regexes, and a big rank has few distinct names but a million rows.
    """
    cat = pl.col("cat").cast(pl.Utf8)
    is_gpu = cat.is_in(GPU_ACTIVITY_CATS)
    gpu_type = (
        pl.when(cat == "gpu_memset")
        .then(pl.lit(MEMSET))
        .otherwise(
            pl.col("_kernel_type").replace_strict(
                {MEMORY: MEMCPY, COMMUNICATION: COMM, COMPUTATION: COMPUTE}, default=OTHER
            )
        )
    )
    # The columns typed, placed or nested only: the others are gathered for the kept rows at the end.
    chosen = (
        events.select(_TYPED_COLUMNS)
        .with_row_index("source")
        .filter(
            (pl.col("ph") == "X")
            & pl.col("ts").is_not_null()
            & pl.col("dur").is_not_null()
            & (pl.col("dur") >= 0)
            & pl.col("cat").is_in([*GPU_ACTIVITY_CATS, *_HOST_TYPES])
        )
        .drop("ph")
    )
    types = (
        chosen.select("cat", "name", "collective_name")
        .unique()
        .with_columns(_kernel_type=kernel_type(False, rules))
        .with_columns(
            kind=pl.when(is_gpu).then(pl.lit(STREAM)).otherwise(pl.lit(THREAD)).cast(KIND),
            type=pl.when(is_gpu).then(gpu_type).otherwise(cat.replace_strict(_HOST_TYPES, default=OP)).cast(TYPE),
        )
        .drop("_kernel_type")
    )
    threads = chosen.select("tid").unique().with_columns(_tid=pl.col("tid").cast(pl.Utf8).cast(pl.Int64, strict=False))
    # Joined on the key columns alone (a join copies every column it carries), then set beside them.
    found = (
        chosen.select("cat", "name", "collective_name", "tid")
        .join(types, on=["cat", "name", "collective_name"], how="left", nulls_equal=True, maintain_order="left")
        .join(threads, on="tid", how="left", maintain_order="left")
    )
    joined = chosen.with_columns(found.select("kind", "type", "_tid"))
    del chosen, found
    return joined.select(
        "source",
        "kind",
        key=pl.when(pl.col("kind") == STREAM)
        .then(pl.col("stream").fill_null(pl.col("_tid")).fill_null(-1))
        .otherwise(pl.col("_tid").fill_null(-1)),
        type="type",
        ts=pl.col("ts"),
        end=pl.col("end").fill_null(pl.col("ts") + pl.col("dur")),
        dur=pl.col("dur"),
        index=pl.col("index"),
    )


def _depths(host: pl.DataFrame) -> pl.DataFrame:
    """Nesting depth of each host event within its thread: how many events are still open at
    its start (those that started before it, in (ts, longest first) order, minus those ended)."""
    parts = []
    for part in host.sort(["key", "ts", "dur", "index"], descending=[False, False, True, False]).partition_by(
        "key", maintain_order=True
    ):
        ends = part["end"].sort()
        ended = ends.search_sorted(part["ts"], side="right").cast(pl.Int64)
        started = pl.int_range(0, part.height, dtype=pl.Int64, eager=True)
        parts.append(part.with_columns(depth=(started - ended).clip(0, None)))
    if not parts:
        return host.with_columns(depth=pl.lit(0, dtype=pl.Int64))
    return pl.concat(parts)


_EVENT_COLUMNS = ("kind", "key", "type", "ts", "end", "dur", *_LOOKUP_COLUMNS, "depth", "row")
"""An event's columns as `RankIndex.looked_up` gives them."""


def _placed_events(raw: pl.DataFrame, rules: Rules) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(rows, events): each drawn row's kind, key and depth in row order (threads, then streams),
    and the drawn events with their `row`, by row, start and file index.

    Typed, nested and sorted on the few columns that place an event (the others are looked up
    by `source` when asked for), and each step's frame is dropped when the next is made, so
    building holds about one narrow copy of the events at a time.
    """
    typed = _typed_events(raw, rules)
    host = _depths(typed.filter(pl.col("kind") == THREAD))
    device = typed.filter(pl.col("kind") == STREAM).with_columns(depth=pl.lit(0, dtype=pl.Int64))
    del typed
    both = pl.concat([host, device.select(host.columns)])
    del host, device
    keys = (
        both.select("kind", "key", "depth")
        .unique()
        .sort((pl.col("kind") == STREAM).cast(pl.Int8), "key", "depth")
        .with_row_index("row")
        .with_columns(pl.col("row").cast(pl.Int64))
    )
    placed = both.join(keys, on=["kind", "key", "depth"], how="left").sort("row", "ts", "index")
    del both
    events = placed.select(
        "kind",
        "key",
        "type",
        "ts",
        "end",
        "dur",
        pl.col("depth").cast(pl.Int32),
        "row",
        pl.col("source").cast(pl.UInt32),
    )
    return keys.select("kind", "key", "depth"), events


def _profiler_steps(events: pl.DataFrame) -> pl.DataFrame:
    """step, start_us, end_us of the rank's host ProfilerStep spans, by start."""
    spans = step_spans(events).unique("step", keep="first", maintain_order=True)
    return spans.select("step", start_us="ts", end_us="end")


def build_index(traces: TraceSet, rank: int, rules: Rules = SHIPPED_RULES) -> RankIndex:
    """Type (by the communication rules in `rules`), nest and merge one rank's events, kept on
    the loaded job (`TraceSet.derived`) until a face drops it (the app's timeline does when it is left)."""
    if rank not in traces.ranks:
        raise TimelineError(f"rank {rank} is not in the traces (ranks: {', '.join(map(str, traces.rank_ids))})")
    return memoised(traces, ("timeline.index", rank, rules), lambda: _build_index(traces, rank, rules))


def _build_index(traces: TraceSet, rank: int, rules: Rules) -> RankIndex:
    raw = traces.ranks[rank].events
    keys, events = _placed_events(raw, rules)
    rows = [RowSpec(rank, str(k), int(key), int(d)) for k, key, d in keys.iter_rows()]
    timed = raw.select("ph", "ts", "dur").filter(pl.col("ph") == "X")
    first = timed["ts"].min()
    last = (timed["ts"] + timed["dur"].fill_null(0.0)).max()
    first_us = float(first) if isinstance(first, (int, float)) else 0.0
    last_us = float(last) if isinstance(last, (int, float)) else 0.0
    return RankIndex(
        rank=rank,
        rows=rows,
        events=events,
        coverage=_Coverage.build(events, first_us, last_us),
        steps=_profiler_steps(raw),
        first_us=first_us,
        last_us=last_us,
        lookups=raw.select(_LOOKUP_COLUMNS),
    )


def counter_rows(traces: TraceSet, index: RankIndex, kind: str) -> list[RowSpec]:
    """Add `index`'s counter rows of one kind (once) and return them: the launch-queue length
    per stream (`queue`) or the memory bandwidth in use per copy kind (`membw`), both as the
    views compute them (corrected mode, last step dropped)."""
    if kind not in index.counters_added:
        index.counters_added.add(kind)
        if kind == "queue":
            series = queue.series(traces, queue.QueueOptions(Scope(ranks=(index.rank,))))
            for (stream,), part in series.sort("stream", "ts_us").group_by(["stream"], maintain_order=True):
                spec = RowSpec(index.rank, COUNTER, int(str(stream)), counter=kind, name=f"queue s{stream}")
                index.rows.append(spec)
                index.counters[len(index.rows) - 1] = part.select(
                    "ts_us", value=pl.col("queue_length").cast(pl.Float64)
                )
        elif kind == "membw":
            series = membw.series(traces, membw.MemoryBandwidthOptions(Scope(ranks=(index.rank,))))
            for (copy,), part in series.sort("copy_kind", "ts_us").group_by(["copy_kind"], maintain_order=True):
                spec = RowSpec(index.rank, COUNTER, -1, counter=kind, name=f"bw {copy}")
                index.rows.append(spec)
                index.counters[len(index.rows) - 1] = part.select("ts_us", value=pl.col("memory_bw_gbps"))
    return [index.rows[i] for i in sorted(index.counters) if index.rows[i].counter == kind]


def visible_rows(traces: TraceSet, index: RankIndex, options: TimelineOptions) -> list[int]:
    """Row numbers of `index` to draw, in order: threads (by depth), streams, then counters."""
    unknown = [r for r in options.rows if r not in ROW_KINDS]
    if unknown:
        raise TimelineError(f"unknown row kind {unknown[0]!r}; choose from {', '.join(ROW_KINDS)}")
    for kind in COUNTER_KINDS:
        if kind in options.rows:
            counter_rows(traces, index, kind)
    out: list[int] = []
    for i, spec in enumerate(index.rows):
        if spec.kind == THREAD and "threads" in options.rows and spec.depth < options.max_depth:
            out.append(i)
        elif spec.kind == STREAM and "streams" in options.rows:
            out.append(i)
        elif spec.kind == COUNTER and spec.counter in options.rows:
            out.append(i)
    return out


def cell_edges(start_us: float, end_us: float, cells: int) -> pl.Series:
    """The cells + 1 edges of a window (cell i is [edge i, edge i + 1))."""
    if cells < 1:
        raise TimelineError(f"need at least one cell, got {cells}")
    if not (math.isfinite(start_us) and math.isfinite(end_us)):
        raise TimelineError(f"--start and --end must be finite numbers of µs, got {start_us:g} and {end_us:g}")
    if end_us <= start_us:
        raise TimelineError(f"the window [{start_us:g}, {end_us:g}) µs is empty: --end must be after --start")
    step = (end_us - start_us) / cells
    return pl.int_range(0, cells + 1, eager=True).cast(pl.Float64) * step + start_us


def bin_rows(index: RankIndex, rows: list[int], edges: pl.Series) -> list[TimelineRow]:
    """Rows of one rank over the cells between `edges`, in one pass over all of them: per cell
    the type covering most of it (None when idle) and the busy fraction."""
    cells = edges.len() - 1
    plain = [row for row in rows if index.rows[row].kind != COUNTER]
    binned = index.coverage.bin(plain, edges)
    by_row: dict[int, tuple[list[str | None], list[float]]] = {}
    if binned.height:
        types = binned["type"].to_list()
        busy = binned["busy"].to_list()
        top = binned["top"].to_list()
        for block, row in enumerate(binned["row"].unique(maintain_order=True).to_list()):
            low, high = block * cells, (block + 1) * cells
            by_row[int(row)] = (
                [t if v > 0 else None for t, v in zip(types[low:high], top[low:high], strict=True)],
                busy[low:high],
            )
    out: list[TimelineRow] = []
    for row in rows:
        spec = index.rows[row]
        if spec.kind == COUNTER:
            out.append(_bin_counter(spec, index.counters[row], edges))
        elif row in by_row:
            out.append(TimelineRow(spec, *by_row[row]))
        else:
            out.append(TimelineRow(spec, [None] * cells, [0.0] * cells))
    return out


def _bin_counter(spec: RowSpec, series: pl.DataFrame, edges: pl.Series) -> TimelineRow:
    """Per cell the largest value the step series takes inside it (None before its first point)."""
    cells = edges.len() - 1
    start, end = float(edges[0]), float(edges[-1])
    ts = series["ts_us"]
    position = ts.search_sorted(edges.slice(0, cells), side="right").cast(pl.Int64) - 1
    at_start = pl.DataFrame({"pos": position, "v": series["value"].gather(position.clip(0, max(ts.len() - 1, 0)))})
    held = at_start.select(pl.when(pl.col("pos") >= 0).then(pl.col("v"))).to_series()
    step = (end - start) / cells
    inside = (
        series.filter((pl.col("ts_us") >= start) & (pl.col("ts_us") < end))
        .group_by(cell=((pl.col("ts_us") - start) / step).floor().cast(pl.Int64).clip(0, cells - 1))
        .agg(peak=pl.col("value").max())
    )
    frame = (
        pl.DataFrame({"cell": pl.int_range(0, cells, dtype=pl.Int64, eager=True), "held": held})
        .join(inside, on="cell", how="left")
        .sort("cell")
        .select(value=pl.max_horizontal("held", "peak"))
    )
    values = frame["value"].to_list()
    return TimelineRow(spec, [None] * cells, [0.0] * cells, values)


def bin_window(
    traces: TraceSet,
    ranks: list[int],
    start_us: float,
    end_us: float,
    cells: int,
    options: TimelineOptions | None = None,
) -> list[TimelineRow]:
    """Every visible row of every chosen rank (stacked in rank order) binned into `cells`."""
    chosen = options or TimelineOptions()
    edges = cell_edges(start_us, end_us, cells)
    out: list[TimelineRow] = []
    for rank in ranks:
        index = build_index(traces, rank, chosen.rules)
        out.extend(bin_rows(index, visible_rows(traces, index, chosen), edges))
    return out
