"""GPU memory over time, what is live at the peak, allocator state, OOMs and growth (docs/semantics-memory.md).

Input is a `MemoryRecording` (htatui/trace/memory_recording.py). Allocations are paired with their
frees by address into live intervals `[start_seq, end_seq)` in event order; a block is live at
event `s` when `start_seq <= s < end_seq`. Blocks that exist before the recording (active in the
snapshot's segments but not live at the end of its trace, or freed without being allocated in
it) are live from the start (`start_seq = -1`), the convention of PyTorch's memory viewer.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.units import byte_size
from htatui.trace.memory_recording import BEFORE_RECORDING_SITE, UNKNOWN_SITE, MemoryRecording

LEAK_MIN_POINTS = 3
"""Growth is only judged over at least this many step points."""

FALLBACK_WINDOWS = 8
"""Without steps or annotations, the local minimum of each of this many equal time windows is used."""

FALLBACK_MIN_EVENTS = 8
"""…when each window would hold at least this many events on average (fewer say nothing about growth)."""

INTERVAL_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "addr": pl.Int64(),
    "size_bytes": pl.Int64(),
    "site": pl.Utf8(),
    "start_seq": pl.Int64(),
    "end_seq": pl.Int64(),
}

SERIES_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "seq": pl.Int64(),
    "time_us": pl.Float64(),
    "allocated_bytes": pl.Int64(),
    "reserved_bytes": pl.Int64(),
}

SUMMARY_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "peak_bytes": pl.Int64(),
    "peak_time_us": pl.Float64(),
    "peak_seq": pl.Int64(),
    "end_bytes": pl.Int64(),
    "reserved_peak_bytes": pl.Int64(),
    "start_bytes": pl.Int64(),
    "live_blocks_at_peak": pl.Int64(),
    "events": pl.Int64(),
}

SITES_SCHEMA: dict[str, pl.DataType] = {
    "site": pl.Utf8(),
    "bytes": pl.Int64(),
    "count": pl.Int64(),
    "share_pct": pl.Float64(),
}

_ALLOC = "alloc"
_FREE = "free_completed"
_NEVER = 2**62


@dataclass(frozen=True)
class MemoryAnalysis:
    """Everything the memory command and screen show, computed once per recording."""

    recording: MemoryRecording
    intervals: pl.DataFrame
    series: pl.DataFrame
    summary: pl.DataFrame

    def sites_at_peak(self, device: str, top: int | None = None) -> pl.DataFrame:
        row = self.summary.filter(pl.col("device") == device)
        if row.height == 0:
            return pl.DataFrame(schema=SITES_SCHEMA)
        return sites_at(self, device, int(row["peak_seq"][0]), top)


def analyse(recording: MemoryRecording) -> MemoryAnalysis:
    intervals = live_intervals(recording)
    series = memory_series(recording, intervals)
    return MemoryAnalysis(recording, intervals, series, _summary(series, intervals))


def live_intervals(recording: MemoryRecording) -> pl.DataFrame:
    """One row per allocation: its size, site and the events that opened and closed it."""
    if recording.kind in ("timeline", "raw_timeline"):
        return pl.DataFrame(schema=INTERVAL_SCHEMA)
    events = recording.events.filter(pl.col("action").is_in([_ALLOC, _FREE]) & pl.col("addr").is_not_null())
    first_alloc = (
        events.filter(pl.col("action") == _ALLOC).group_by("device", "addr").agg(first_alloc_seq=pl.col("seq").min())
    )
    events = events.join(first_alloc, on=["device", "addr"], how="left")
    is_free = pl.col("action") == _FREE
    orphan = is_free & (pl.col("first_alloc_seq").is_null() | (pl.col("seq") < pl.col("first_alloc_seq")))
    events = events.with_columns(orphan=orphan)
    numbered = events.filter(~pl.col("orphan")).with_columns(
        k=pl.col("seq").rank("ordinal").over("device", "addr", "action").cast(pl.Int64)
    )
    allocs = numbered.filter(pl.col("action") == _ALLOC).select(
        "device", "addr", "k", "size_bytes", "site", start_seq="seq"
    )
    frees = numbered.filter(pl.col("action") == _FREE).select("device", "addr", "k", end_seq="seq")
    paired = allocs.join(frees, on=["device", "addr", "k"], how="left").drop("k")
    orphans = events.filter(pl.col("orphan")).select(
        "device",
        "addr",
        "size_bytes",
        site=pl.lit(BEFORE_RECORDING_SITE),
        start_seq=pl.lit(-1, dtype=pl.Int64),
        end_seq="seq",
    )
    parts = [paired.select(list(INTERVAL_SCHEMA)), orphans.select(list(INTERVAL_SCHEMA))]
    if recording.kind == "snapshot":
        parts.append(_preexisting_blocks(recording, paired))
    else:
        parts.append(_preexisting_total(recording, orphans))
    return pl.concat([p.cast(INTERVAL_SCHEMA) for p in parts]).sort("device", "start_seq", maintain_order=True)  # type: ignore[arg-type]


def _preexisting_blocks(recording: MemoryRecording, paired: pl.DataFrame) -> pl.DataFrame:
    """Active blocks of the snapshot that the trace does not leave live: allocated before it began."""
    live_at_end = paired.filter(pl.col("end_seq").is_null()).select("device", addr="addr")
    blocks = recording.blocks.filter(pl.col("active")).join(
        live_at_end, left_on=["device", "address"], right_on=["device", "addr"], how="anti"
    )
    return blocks.select(
        "device",
        addr="address",
        size_bytes="size_bytes",
        site=pl.when(pl.col("site").is_null() | (pl.col("site") == UNKNOWN_SITE))
        .then(pl.lit(BEFORE_RECORDING_SITE))
        .otherwise(pl.col("site")),
        start_seq=pl.lit(-1, dtype=pl.Int64),
        end_seq=pl.lit(None, dtype=pl.Int64),
    )


def _preexisting_total(recording: MemoryRecording, orphans: pl.DataFrame) -> pl.DataFrame:
    """For traces, memory the first event's reported total already held, less what is later freed unpaired."""
    first = (
        recording.events.filter(pl.col("allocated_bytes").is_not_null())
        .sort("seq")
        .group_by("device", maintain_order=True)
        .first()
        .select(
            "device",
            before=pl.col("allocated_bytes")
            - pl.when(pl.col("action") == _ALLOC).then(pl.col("size_bytes")).otherwise(-pl.col("size_bytes")),
        )
    )
    freed = orphans.group_by("device").agg(freed=pl.col("size_bytes").sum())
    rest = first.join(freed, on="device", how="left").with_columns(
        size_bytes=pl.col("before") - pl.col("freed").fill_null(0)
    )
    return rest.filter(pl.col("size_bytes") > 0).select(
        "device",
        addr=pl.lit(None, dtype=pl.Int64),
        size_bytes="size_bytes",
        site=pl.lit(BEFORE_RECORDING_SITE),
        start_seq=pl.lit(-1, dtype=pl.Int64),
        end_seq=pl.lit(None, dtype=pl.Int64),
    )


def memory_series(recording: MemoryRecording, intervals: pl.DataFrame) -> pl.DataFrame:
    """Allocated (and reserved where known) bytes after each event, per device."""
    events = recording.events
    if recording.kind != "snapshot":
        return events.select(
            "device",
            "seq",
            "time_us",
            pl.col("allocated_bytes"),
            pl.col("reserved_bytes").forward_fill().over("device"),
        ).cast(SERIES_SCHEMA)  # type: ignore[arg-type]
    starts = intervals.filter(pl.col("start_seq") >= 0).select("device", seq="start_seq", delta=pl.col("size_bytes"))
    ends = intervals.filter(pl.col("end_seq").is_not_null()).select(
        "device", seq="end_seq", delta=-pl.col("size_bytes")
    )
    baseline = intervals.filter(pl.col("start_seq") < 0).group_by("device").agg(base=pl.col("size_bytes").sum())
    deltas = pl.concat([starts, ends]).group_by("device", "seq").agg(pl.col("delta").sum())
    segment_delta = (
        pl.when(pl.col("action").is_in(["segment_alloc", "segment_map"]))
        .then(pl.col("size_bytes"))
        .when(pl.col("action").is_in(["segment_free", "segment_unmap"]))
        .then(-pl.col("size_bytes"))
        .otherwise(0)
    )
    frame = (
        events.select("device", "seq", "time_us", seg_delta=segment_delta)
        .join(deltas, on=["device", "seq"], how="left")
        .join(baseline, on="device", how="left")
        .sort("device", "seq")
    )
    reserved_end = recording.segments.group_by("device").agg(reserved_end=pl.col("total_size_bytes").sum())
    frame = frame.join(reserved_end, on="device", how="left").with_columns(
        allocated_bytes=pl.col("base").fill_null(0) + pl.col("delta").fill_null(0).cum_sum().over("device"),
        # The snapshot's segments are the state after the last event, so the start is the end less every change.
        reserved_bytes=pl.col("reserved_end")
        - pl.col("seg_delta").sum().over("device")
        + pl.col("seg_delta").cum_sum().over("device"),
    )
    series = frame.select(list(SERIES_SCHEMA)).cast(SERIES_SCHEMA)  # type: ignore[arg-type]
    # A snapshot without history (or a device without any) still has a state: one point before time.
    silent = (
        reserved_end.join(events.select("device").unique(), on="device", how="anti")
        .join(baseline, on="device", how="left")
        .select(
            "device",
            seq=pl.lit(-1, dtype=pl.Int64),
            time_us=pl.lit(None, dtype=pl.Float64),
            allocated_bytes=pl.col("base").fill_null(0),
            reserved_bytes="reserved_end",
        )
    )
    return pl.concat([series, silent.cast(SERIES_SCHEMA)]) if silent.height else series  # type: ignore[arg-type]


def _summary(series: pl.DataFrame, intervals: pl.DataFrame) -> pl.DataFrame:
    if series.height == 0:
        return pl.DataFrame(schema=SUMMARY_SCHEMA)
    per_device = (
        series.sort("device", "seq")
        .group_by("device", maintain_order=True)
        .agg(
            peak_bytes=pl.col("allocated_bytes").max(),
            peak_time_us=pl.col("time_us").get(pl.col("allocated_bytes").arg_max()),
            peak_seq=pl.col("seq").get(pl.col("allocated_bytes").arg_max()),
            end_bytes=pl.col("allocated_bytes").last(),
            reserved_peak_bytes=pl.col("reserved_bytes").max(),
            start_bytes=pl.col("allocated_bytes").first(),
            events=(pl.col("seq") >= 0).sum(),
        )
    )
    live = (
        intervals.join(per_device.select("device", "peak_seq"), on="device")
        .filter(_live_at(pl.col("peak_seq")))
        .group_by("device")
        .agg(live_blocks_at_peak=pl.len())
    )
    return (
        per_device.join(live, on="device", how="left")
        .with_columns(pl.col("live_blocks_at_peak").fill_null(0))
        .select(list(SUMMARY_SCHEMA))
        .cast(SUMMARY_SCHEMA)  # type: ignore[arg-type]
        .sort("device")
    )


def _live_at(seq: pl.Expr) -> pl.Expr:
    return (pl.col("start_seq") <= seq) & (pl.col("end_seq").fill_null(_NEVER) > seq)


def sites_at(analysis: MemoryAnalysis, device: str, seq: int, top: int | None = None) -> pl.DataFrame:
    """Live bytes by allocation site on `device` just after event `seq`, largest first."""
    recording = analysis.recording
    if recording.kind in ("timeline", "raw_timeline"):
        rows = recording.categories.filter((pl.col("seq") == seq) & (pl.col("bytes") != 0)).select(
            site="category", bytes="bytes", count=pl.lit(None, dtype=pl.Int64)
        )
    else:
        rows = (
            analysis.intervals.filter((pl.col("device") == device) & _live_at(pl.lit(seq)))
            .group_by("site")
            .agg(bytes=pl.col("size_bytes").sum(), count=pl.len())
        )
    total = rows["bytes"].sum()
    rows = rows.with_columns(share_pct=pl.col("bytes") * 100.0 / total if total else pl.lit(0.0)).sort(
        ["bytes", "site"], descending=[True, False]
    )
    rows = rows.cast(SITES_SCHEMA).select(list(SITES_SCHEMA))  # type: ignore[arg-type]
    return rows.head(top) if top else rows


ALLOCATOR_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "stream": pl.Int64(),
    "segments": pl.Int64(),
    "reserved_bytes": pl.Int64(),
    "allocated_bytes": pl.Int64(),
    "inactive_bytes": pl.Int64(),
    "largest_free_bytes": pl.Int64(),
    "fragmentation_pct": pl.Float64(),
}


def allocator_state(recording: MemoryRecording) -> pl.DataFrame:
    """Segments per device and stream when the snapshot was taken; inactive = cached but unused."""
    if recording.segments.height == 0:
        return pl.DataFrame(schema=ALLOCATOR_SCHEMA)
    free = (
        recording.blocks.filter(~pl.col("active"))
        .group_by("device", "stream")
        .agg(inactive_bytes=pl.col("size_bytes").sum(), largest_free_bytes=pl.col("size_bytes").max())
    )
    state = (
        recording.segments.group_by("device", "stream")
        .agg(
            segments=pl.len(),
            reserved_bytes=pl.col("total_size_bytes").sum(),
            allocated_bytes=pl.col("allocated_bytes").sum(),
        )
        .join(free, on=["device", "stream"], how="left", nulls_equal=True)
        .with_columns(pl.col("inactive_bytes", "largest_free_bytes").fill_null(0))
        .with_columns(
            fragmentation_pct=pl.when(pl.col("reserved_bytes") > 0)
            .then(pl.col("inactive_bytes") * 100.0 / pl.col("reserved_bytes"))
            .otherwise(0.0)
        )
    )
    return state.select(list(ALLOCATOR_SCHEMA)).cast(ALLOCATOR_SCHEMA).sort("device", "stream")  # type: ignore[arg-type]


OOM_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "seq": pl.Int64(),
    "time_us": pl.Float64(),
    "requested_bytes": pl.Int64(),
    "device_free_bytes": pl.Int64(),
    "live_bytes": pl.Int64(),
    "reserved_bytes": pl.Int64(),
    "top_site": pl.Utf8(),
}


def ooms(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Out-of-memory entries of the history: when, bytes asked, device free, what was live (by site: oom_sites)."""
    events = analysis.recording.events.filter(pl.col("action") == "oom")
    rows = []
    for event in events.iter_rows(named=True):
        sites = sites_at(analysis, event["device"], event["seq"])
        state = analysis.series.filter((pl.col("device") == event["device"]) & (pl.col("seq") == event["seq"]))
        rows.append(
            {
                "device": event["device"],
                "seq": event["seq"],
                "time_us": event["time_us"],
                "requested_bytes": event["size_bytes"],
                "device_free_bytes": event["device_free_bytes"],
                "live_bytes": int(sites["bytes"].sum()),
                "reserved_bytes": state["reserved_bytes"][0] if state.height else None,
                "top_site": sites["site"][0] if sites.height else None,
            }
        )
    return pl.DataFrame(rows, schema=OOM_SCHEMA)


GROWTH_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "point": pl.Utf8(),
    "time_us": pl.Float64(),
    "live_bytes": pl.Int64(),
    "growth_bytes": pl.Int64(),
}


@dataclass(frozen=True)
class Growth:
    """Live bytes at the same point of each step; `leaking` when they rise at every step."""

    points: pl.DataFrame
    leaking: dict[str, bool]
    growing_sites: dict[str, pl.DataFrame]
    basis: str


def growth(analysis: MemoryAnalysis) -> Growth:
    """Live bytes at the start of each step (ProfilerStep, else the most repeated annotation, else local minima).

    A device is flagged as probably leaking when there are at least LEAK_MIN_POINTS points and the
    live bytes rise from each point to the next; the growing sites are those whose live bytes are
    larger at the last point than at the first.
    """
    point_rows = []
    leaking: dict[str, bool] = {}
    growing: dict[str, pl.DataFrame] = {}
    basis = "ProfilerStep starts"
    for device in analysis.summary["device"].to_list():
        series = analysis.series.filter(pl.col("device") == device).sort("seq")
        if series.height == 0:
            continue
        steps, basis = _step_points(spans_of(analysis.recording, device))
        if steps.height:
            names = steps["name"].to_list()
            times = steps["start_us"].to_list()
            index = series["time_us"].search_sorted(pl.Series(times, dtype=pl.Float64), side="left").cast(pl.Int64) - 1
            picked = [(n, t, int(i)) for n, t, i in zip(names, times, index.to_list(), strict=True)]
            label_basis = basis
        else:
            picked = _local_minima(series)
            label_basis = "local minima"
        initial = initial_bytes(analysis, device)
        values = [int(series["allocated_bytes"][i]) if i >= 0 else initial for _, _, i in picked]
        for position, ((name, time_us, _), value) in enumerate(zip(picked, values, strict=True)):
            previous = values[position - 1] if position else None
            point_rows.append(
                {
                    "device": device,
                    "point": name,
                    "time_us": time_us,
                    "live_bytes": value,
                    "growth_bytes": None if previous is None else value - previous,
                }
            )
        leaking[device] = len(values) >= LEAK_MIN_POINTS and all(
            b > a for a, b in zip(values, values[1:], strict=False)
        )
        if len(picked) >= 2:
            first = sites_at(analysis, device, _seq_at(series, picked[0][2]))
            last = sites_at(analysis, device, _seq_at(series, picked[-1][2]))
            growing[device] = _site_changes(first, last).filter(pl.col("delta_bytes") > 0)
        basis = label_basis
    return Growth(pl.DataFrame(point_rows, schema=GROWTH_SCHEMA), leaking, growing, basis)


def spans_of(recording: MemoryRecording, device: str) -> pl.DataFrame:
    """The spans that apply to `device` (those of its rank, or of the whole recording)."""
    spans = recording.spans
    return spans.filter(pl.col("device").is_null() | (pl.col("device") == device))


def _step_points(spans: pl.DataFrame) -> tuple[pl.DataFrame, str]:
    """ProfilerSteps; without them, the most repeated annotation (ties: the first name)."""
    steps = spans.filter(pl.col("kind") == "step")
    if steps.height or spans.height == 0:
        return steps, "ProfilerStep starts"
    counts = spans.group_by("name").agg(n=pl.len()).sort(["n", "name"], descending=[True, False])
    name = counts["name"][0]
    return spans.filter(pl.col("name") == name), f"starts of {name}"


def _seq_at(series: pl.DataFrame, index: int) -> int:
    """The event number at a row of the series; before the first row, -1 (the state before recording)."""
    return int(series["seq"][index]) if index >= 0 else -1


def initial_bytes(analysis: MemoryAnalysis, device: str) -> int:
    """Bytes live before the first event: what existed before recording (for timelines, the first sample)."""
    if analysis.recording.kind in ("timeline", "raw_timeline"):
        first = analysis.series.filter(pl.col("device") == device)["allocated_bytes"]
        return int(first[0]) if first.len() else 0
    before = analysis.intervals.filter((pl.col("device") == device) & (pl.col("start_seq") < 0))
    return int(before["size_bytes"].sum())


def _local_minima(series: pl.DataFrame) -> list[tuple[str, float, int]]:
    """The lowest point of each of FALLBACK_WINDOWS equal time windows (a step's trough, roughly)."""
    times = series["time_us"]
    start, end = times.min(), times.max()
    if start is None or end is None or series.height < FALLBACK_WINDOWS * FALLBACK_MIN_EVENTS:
        return []
    width = (float(end) - float(start)) / FALLBACK_WINDOWS or 1.0  # type: ignore[arg-type]
    windowed = series.with_row_index("i").with_columns(
        window=((pl.col("time_us") - float(start)) / width).floor().clip(0, FALLBACK_WINDOWS - 1).cast(pl.Int64)  # type: ignore[arg-type]
    )
    minima = windowed.group_by("window", maintain_order=True).agg(
        i=pl.col("i").get(pl.col("allocated_bytes").arg_min()),
        time_us=pl.col("time_us").get(pl.col("allocated_bytes").arg_min()),
    )
    return [(f"window {w + 1}", t, int(i)) for w, i, t in minima.sort("window").iter_rows()]


COMPARE_SCHEMA: dict[str, pl.DataType] = {
    "site": pl.Utf8(),
    "bytes_a": pl.Int64(),
    "bytes_b": pl.Int64(),
    "delta_bytes": pl.Int64(),
    "count_a": pl.Int64(),
    "count_b": pl.Int64(),
    "status": pl.Utf8(),
}


def _site_changes(a: pl.DataFrame, b: pl.DataFrame) -> pl.DataFrame:
    joined = a.select("site", bytes_a="bytes", count_a="count").join(
        b.select("site", bytes_b="bytes", count_b="count"), on="site", how="full", coalesce=True
    )
    joined = joined.with_columns(pl.col("bytes_a", "bytes_b", "count_a", "count_b").fill_null(0)).with_columns(
        delta_bytes=pl.col("bytes_b") - pl.col("bytes_a"),
        status=pl.when(pl.col("bytes_a") == 0)
        .then(pl.lit("new"))
        .when(pl.col("bytes_b") == 0)
        .then(pl.lit("gone"))
        .when(pl.col("bytes_b") > pl.col("bytes_a"))
        .then(pl.lit("grew"))
        .when(pl.col("bytes_b") < pl.col("bytes_a"))
        .then(pl.lit("shrank"))
        .otherwise(pl.lit("same")),
    )
    return (
        joined.select(list(COMPARE_SCHEMA))
        .cast(COMPARE_SCHEMA)  # type: ignore[arg-type]
        .sort(["delta_bytes", "site"], descending=[True, False])
    )


def end_sites(analysis: MemoryAnalysis, device: str) -> pl.DataFrame:
    """Live bytes by site after the last event (for a snapshot: its active blocks)."""
    row = analysis.summary.filter(pl.col("device") == device)
    if row.height == 0:
        return pl.DataFrame(schema=SITES_SCHEMA)
    last = analysis.series.filter(pl.col("device") == device)["seq"].max()
    return sites_at(analysis, device, int(last))  # type: ignore[arg-type]


def compare_sites(a: MemoryAnalysis, b: MemoryAnalysis) -> pl.DataFrame:
    """Sites live at the end of A and of B, per device both have: what appeared, grew, shrank or went."""
    frames = []
    for device in sorted(set(a.summary["device"]) & set(b.summary["device"])):
        frames.append(_site_changes(end_sites(a, device), end_sites(b, device)).with_columns(device=pl.lit(device)))
    if not frames:
        return pl.DataFrame(schema={"device": pl.Utf8(), **COMPARE_SCHEMA})
    return pl.concat(frames).select("device", *COMPARE_SCHEMA)


SEGMENT_COMPARE_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "stream": pl.Int64(),
    "segments_a": pl.Int64(),
    "segments_b": pl.Int64(),
    "reserved_a_bytes": pl.Int64(),
    "reserved_b_bytes": pl.Int64(),
    "new_segments": pl.Int64(),
    "delta_reserved_bytes": pl.Int64(),
}


def compare_segments(a: MemoryRecording, b: MemoryRecording) -> pl.DataFrame:
    """Segments per device and stream in A and B; `new_segments` counts B's addresses A did not have."""
    keys = ["device", "stream"]

    def totals(segments: pl.DataFrame, suffix: str) -> pl.DataFrame:
        return segments.group_by(keys).agg(
            pl.len().alias(f"segments_{suffix}"), pl.col("total_size_bytes").sum().alias(f"reserved_{suffix}_bytes")
        )

    new = (
        b.segments.join(a.segments.select("device", "address"), on=["device", "address"], how="anti")
        .group_by(keys)
        .agg(new_segments=pl.len())
    )
    joined = (
        totals(a.segments, "a")
        .join(totals(b.segments, "b"), on=keys, how="full", coalesce=True, nulls_equal=True)
        .join(new, on=keys, how="left", nulls_equal=True)
        .with_columns(pl.exclude(keys).fill_null(0))
        .with_columns(delta_reserved_bytes=pl.col("reserved_b_bytes") - pl.col("reserved_a_bytes"))
    )
    return joined.select(list(SEGMENT_COMPARE_SCHEMA)).cast(SEGMENT_COMPARE_SCHEMA).sort(keys)  # type: ignore[arg-type]


SPAN_PEAK_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "kind": pl.Utf8(),
    "name": pl.Utf8(),
    "start_us": pl.Float64(),
    "dur_us": pl.Float64(),
    "start_bytes": pl.Int64(),
    "peak_bytes": pl.Int64(),
    "end_bytes": pl.Int64(),
}


def span_peaks(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Peak allocated bytes inside each ProfilerStep and each top-level annotation (forward, backward, …)."""
    rows = []
    for device in analysis.summary["device"].to_list():
        series = analysis.series.filter(pl.col("device") == device).sort("seq")
        times = series["time_us"]
        values = series["allocated_bytes"]
        spans = spans_of(analysis.recording, device).select("kind", "name", "start_us", "end_us")
        for kind, name, start, end in spans.iter_rows():
            lo = int(times.search_sorted(start, side="left"))
            hi = int(times.search_sorted(end, side="right"))
            before = int(values[lo - 1]) if lo > 0 else initial_bytes(analysis, device)
            inside = values.slice(lo, max(hi - lo, 0))
            peak = max(before, int(inside.max())) if inside.len() else before  # type: ignore[arg-type]
            after = int(values[hi - 1]) if hi > 0 else before
            rows.append(
                {
                    "device": device,
                    "kind": kind,
                    "name": name,
                    "start_us": start,
                    "dur_us": end - start,
                    "start_bytes": before,
                    "peak_bytes": peak,
                    "end_bytes": after,
                }
            )
    return pl.DataFrame(rows, schema=SPAN_PEAK_SCHEMA)


ALLOCATOR_ROUND_BYTES = 512
"""The caching allocator rounds every block up to a multiple of 512 B (kMinBlockSize; with
roundup_power2_divisions unset): torch.cuda.memory_allocated() counts these rounded sizes."""

ALLOCATED_SCHEMA: dict[str, pl.DataType] = {
    "device": pl.Utf8(),
    "allocator_peak_bytes": pl.Int64(),
    "allocator_end_bytes": pl.Int64(),
}


def allocator_allocated(analysis: MemoryAnalysis) -> pl.DataFrame:
    """Per device, the figures torch.cuda.max_memory_allocated() and memory_allocated() report:
    the same replay as `series` with each block rounded up as the allocator rounds it.

    Requested sizes (the memory viewer's convention, `peak_bytes`) are a little smaller. A large
    block the allocator did not split can be bigger still, so over a snapshot's history this is a
    floor; its end equals the segments' allocated_size when every block was split (as in the
    shared MLP snapshot: 2,485,587,456 B). A trace's or timeline's events already carry the
    allocator's figure: there it is the series itself."""
    if analysis.recording.kind != "snapshot":
        rows = analysis.summary.select("device", allocator_peak_bytes="peak_bytes", allocator_end_bytes="end_bytes")
        return rows.cast(ALLOCATED_SCHEMA)  # type: ignore[arg-type]
    step = ALLOCATOR_ROUND_BYTES
    rounded = analysis.intervals.with_columns(
        size_bytes=((pl.col("size_bytes") + step - 1) // step * step).clip(lower_bound=step)
    )
    series = memory_series(analysis.recording, rounded)
    frame = (
        series.sort("device", "seq")
        .group_by("device", maintain_order=True)
        .agg(
            allocator_peak_bytes=pl.col("allocated_bytes").max(),
            allocator_end_bytes=pl.col("allocated_bytes").last(),
        )
        .sort("device")
    )
    return frame.cast(ALLOCATED_SCHEMA)  # type: ignore[arg-type]


def oom_reason(analysis: MemoryAnalysis, oom: dict[str, object]) -> str | None:
    """Why an out-of-memory row (of `ooms`) failed, from what the recording holds; None when the
    device's free memory is not recorded.

    More free on the device than asked: a cap stopped the allocator (the per-process memory
    fraction) rather than the device. Less free, but enough cached free in this process's own
    segments: fragmentation (no free block big enough). Neither: the device was full, the rest held
    by other processes or the CUDA context (a snapshot does not hold the device's total)."""
    asked, free = oom.get("requested_bytes"), oom.get("device_free_bytes")
    reserved, live = oom.get("reserved_bytes"), oom.get("live_bytes")
    if not isinstance(asked, int) or not isinstance(free, int):
        return None
    if free >= asked:
        return (
            f"the device had {byte_size(free)} free, more than asked: a cap stopped the allocator, most likely "
            "the per-process memory fraction (torch.cuda.set_per_process_memory_fraction)"
        )
    cached = reserved - live if isinstance(reserved, int) and isinstance(live, int) else None
    if cached is not None and cached + free >= asked:
        largest = allocator_state(analysis.recording).filter(pl.col("device") == oom.get("device"))
        biggest = largest["largest_free_bytes"].max() if largest.height else None
        at_snapshot = f" (largest at the snapshot {byte_size(biggest)})" if isinstance(biggest, int) else ""
        return (
            f"fragmentation: {byte_size(cached)} cached free in this process's segments, but no free block big "
            f"enough{at_snapshot}; expandable_segments:True or max_split_size_mb in PYTORCH_CUDA_ALLOC_CONF help"
        )
    held = f"; this process held {byte_size(reserved)}" if isinstance(reserved, int) else ""
    return f"the device was full{held}, the rest by other processes or the CUDA context"
