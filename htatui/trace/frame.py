"""Typed events → one polars frame per rank, plus the metadata record and iterations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate
from operator import attrgetter
from typing import Any

import msgspec
import polars as pl

from htatui.trace.decode import (
    DEVICE_ARGS_DECODER,
    HOST_ARGS_DECODER,
    META_ARGS_DECODER,
    NO_ARGS,
    DeviceArgs,
    Event,
    HostArgs,
    TraceDoc,
)
from htatui.trace.kineto import (
    CATEGORY_ALIASES,
    DEVICE_ARG_CATS,
    DEVICE_CATS,
    GPU_ANNOTATION,
    HOST_ARG_CATS,
    is_device_row,
    step_number,
)
from htatui.trace.model import EVENT_SCHEMA, TraceMeta

_HOST_FIELDS = ("correlation", "stream", "external_id", "kernel")
_DEVICE_FIELDS = tuple(f for f in DeviceArgs.__struct_fields__)


def build_meta(doc: TraceDoc, events: list[Event]) -> TraceMeta:
    fractional_ts = float in set(map(type, map(attrgetter("ts"), events)))
    process_names: dict[str, str] = {}
    process_labels: dict[str, str] = {}
    thread_names: dict[tuple[str, str], str] = {}
    for event in events:
        if event.ph != "M" or not event.args:
            continue
        try:
            payload = META_ARGS_DECODER.decode(event.args)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        pid = str(event.pid)
        if event.name == "process_name" and payload.name is not None:
            process_names[pid] = str(payload.name)
        elif event.name == "process_labels" and payload.labels is not None:
            process_labels[pid] = str(payload.labels)
        elif event.name == "thread_name" and payload.name is not None:
            thread_names[(pid, str(event.tid))] = str(payload.name)
    base = doc.baseTimeNanoseconds
    return TraceMeta(
        schema_version=doc.schemaVersion if isinstance(doc.schemaVersion, int) else None,
        device_properties=tuple(doc.deviceProperties or ()),
        distributed_info=doc.distributedInfo,
        base_time_ns=int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None,
        display_time_unit=str(doc.displayTimeUnit) if doc.displayTimeUnit is not None else None,
        trace_name=str(doc.traceName) if doc.traceName is not None else None,
        process_names=process_names,
        process_labels=process_labels,
        thread_names=thread_names,
        fractional_ts=fractional_ts,
    )


def _ints(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Int64, strict=False)


def _floats(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Float64, strict=False)


def _texts(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Utf8, strict=False)


def _categories(values: Sequence[Any]) -> pl.Series:
    return pl.Series(values, dtype=pl.Categorical, strict=False)


def _dims(values: Sequence[Any]) -> pl.Series:
    """grid/block lists of a kernel as 'x,y,z' text."""
    return _texts([",".join(map(str, x)) if type(x) is list else None for x in values])


_DEVICE_COLUMNS: dict[str, tuple[str, Callable[[Sequence[Any]], pl.Series]]] = {
    "device": ("device", _ints),
    "bytes": ("nbytes", _ints),
    "memory_bw_gbps": ("memory_bw", _floats),
    "collective_name": ("collective_name", _texts),
    "in_msg_nelems": ("in_msg_nelems", _ints),
    "out_msg_nelems": ("out_msg_nelems", _ints),
    "in_msg_size": ("in_msg_size", _ints),
    "out_msg_size": ("out_msg_size", _ints),
    "group_size": ("group_size", _ints),
    "pg_name": ("pg_name", _texts),
    "msg_dtype": ("msg_dtype", _texts),
    "grid": ("grid", _dims),
    "block": ("block", _dims),
    "occupancy_pct": ("occupancy", _floats),
    "blocks_per_sm": ("blocks_per_sm", _floats),
    "warps_per_sm": ("warps_per_sm", _floats),
    "registers_per_thread": ("registers", _ints),
    "shared_memory": ("shared_memory", _ints),
    "wait_on_stream": ("wait_on_stream", _ints),
}


def _decode_args(events: list[Event], rows: list[int], decoder: msgspec.json.Decoder[Any], empty: Any) -> list[Any]:
    decode = decoder.decode
    out = []
    for i in rows:
        raw = events[i].args
        try:
            out.append(decode(raw) if raw else empty)
        except (msgspec.DecodeError, msgspec.ValidationError):
            out.append(empty)
    return out


def _lossy(name: str, values: list[Any], series: pl.Series) -> str | None:
    """A warning when converting `values` nulled some non-null value (e.g. an int ≥ 2**63)."""
    lost = series.null_count() - values.count(None)
    return f"{lost} value(s) of '{name}' did not fit a 64-bit number and were dropped" if lost else None


def _stream_ints(values: Sequence[Any]) -> pl.Series:
    # AMD runtime events carry hex strings ("0x0"); HTA treats them as no stream, and so do we.
    return _ints([v if type(v) is int else None for v in values])


def build_frame(all_events: list[Event], warnings: list[str] | None = None) -> pl.DataFrame:
    """All non-metadata events as typed columns, in file order; `index` is the file position.

    Values that do not fit their column (an integer wider than 64 bits, text where a number
    belongs) become null; one warning per column says so.
    """
    positions = [i for i, e in enumerate(all_events) if e.ph != "M"]
    events = all_events if len(positions) == len(all_events) else [all_events[i] for i in positions]
    cats = list(map(attrgetter("cat"), events))
    frame = pl.DataFrame(
        {
            "index": pl.Series(positions, dtype=pl.Int64),
            "ph": _categories(list(map(attrgetter("ph"), events))),
            "cat": _texts(cats).replace(CATEGORY_ALIASES).cast(pl.Categorical),
            "name": _categories(list(map(attrgetter("name"), events))),
            "pid": _categories(list(map(str, map(attrgetter("pid"), events)))),
            "tid": _categories(list(map(str, map(attrgetter("tid"), events)))),
            "ts": _floats(list(map(attrgetter("ts"), events))),
            "dur": _floats(list(map(attrgetter("dur"), events))),
            "flow_id": _ints(list(map(attrgetter("id"), events))),
        }
    )
    host_rows = [i for i, c in enumerate(cats) if c in HOST_ARG_CATS]
    device_rows = [i for i, c in enumerate(cats) if c in DEVICE_ARG_CATS]
    host = _decode_args(events, host_rows, HOST_ARGS_DECODER, HostArgs())
    device = _decode_args(events, device_rows, DEVICE_ARGS_DECODER, DeviceArgs())
    # Raw args point into the whole JSON buffer; dropping them lets the caller free it now.
    for event in all_events:
        event.args = NO_ARGS
    both: list[HostArgs | DeviceArgs] = [*device, *host]
    raw_columns: dict[str, list[Any]] = {
        "correlation": [a.correlation for a in both],
        "external_id": [a.external_id for a in both],
    } | {col: [getattr(a, field) for a in device] for col, (field, _) in _DEVICE_COLUMNS.items()}
    converters = {"correlation": _ints, "external_id": _ints} | {
        col: convert for col, (_, convert) in _DEVICE_COLUMNS.items()
    }
    converted = {col: converters[col](values) for col, values in raw_columns.items()}
    for col, values in raw_columns.items():
        message = _lossy(col, values, converted[col]) if converters[col] is not _texts else None
        if message and warnings is not None:
            warnings.append(message)
    args_frame = pl.DataFrame(
        {
            "_row": pl.Series(device_rows + host_rows, dtype=pl.UInt32),
            "stream": _stream_ints([a.stream for a in both]),
            "launched_kernel": _texts([None] * len(device) + [a.kernel for a in host]),
        }
        | {
            col: series if col in ("correlation", "external_id") else series.extend_constant(None, len(host))
            for col, series in converted.items()
        }
    )
    frame = frame.with_row_index("_row").join(args_frame, on="_row", how="left", maintain_order="left").drop("_row")
    return finish_frame(frame)


def finish_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """The columns every loader path derives the same way, in EVENT_SCHEMA order and types."""
    return finish_pieces(finish_rows(frame))


def finish_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The derived columns that need only their own row, and EVENT_SCHEMA's types but `iteration`.

    Applied to each decoded piece, so the text columns are Categorical (4 B a row, not 16) before
    the pieces add up, and nothing but `iteration` is derived over the whole frame.
    """
    frame = frame.with_columns(
        rank=pl.lit(0, dtype=pl.Int32),
        end=pl.col("ts") + pl.col("dur"),
        # Flow ids only mean something on flow events; elsewhere `id` is unrelated.
        flow_id=pl.when(pl.col("ph").is_in(["s", "f", "t"])).then(pl.col("flow_id")),
        device=pl.when(pl.col("device").is_not_null())
        .then(pl.col("device"))
        .when(pl.col("cat").is_in(DEVICE_CATS))
        .then(pl.col("pid").cast(pl.Utf8).cast(pl.Int64, strict=False)),
    )
    return frame.select([pl.col(name).cast(dtype) for name, dtype in EVENT_SCHEMA.items() if name != "iteration"])


def finish_pieces(frame: pl.DataFrame) -> pl.DataFrame:
    """`iteration` added to a frame of `finish_rows` pieces (steps and launches span pieces)."""
    return add_iterations(frame).select(list(EVENT_SCHEMA))


def add_iterations(frame: pl.DataFrame) -> pl.DataFrame:
    """Each event's ProfilerStep number, as HTA assigns it (docs/semantics-counters.md, steps), corrected.

    Host rows take the step whose host span [ts, end) holds their start; device rows with a
    correlation inherit the step of the host row with the same correlation id (on every stream,
    including the AMD default stream 0 that HTA leaves out). Device rows whose launch is not in
    the trace, and rows outside every step, have none. The GPU-side `gpu_user_annotation` copies
    of ProfilerStep are not step spans (HTA counts them: they start late and end early, so host
    rows near a step's end fell into the wrong step or none).
    """
    # Worked out a chunk at a time on the few columns it reads: over a frame joined from many
    # pieces, whole-frame expressions held several full-length temporaries (the loader's peak).
    cols = frame.select("ph", "name", "cat", "ts", "end", "correlation")
    pieces = _chunks(cols)
    steps = (
        pl.concat(
            [
                piece.filter((pl.col("ph") == "X") & (pl.col("cat") != GPU_ANNOTATION)).select(
                    step_ts=pl.col("ts"),
                    step_end=pl.col("end"),
                    iteration=step_number(pl.col("name").cast(pl.Utf8)),
                )
                for piece in pieces
            ]
        )
        .drop_nulls("iteration")
        .sort("step_ts")
    )
    if steps.height == 0:
        return frame.with_columns(iteration=_chunked_like(pl.Series([None] * frame.height, dtype=pl.Int64), frame))
    # Each piece's result in one chunk (polars may split its work): chunked like the frame.
    by_start = pl.concat([_by_start(piece, steps).rechunk() for piece in pieces], rechunk=False)
    is_device = is_device_row()
    host = ~is_device & pl.col("correlation").is_not_null() & pl.col("iteration").is_not_null()
    host_steps = (
        cols.select("cat", "correlation")
        .with_columns(iteration=by_start)
        .filter(host)
        .group_by("correlation")
        .agg(pl.col("iteration").first())
    )
    # One lookup over the whole column: replace_strict builds its table again for every chunk.
    inherited = (
        cols.get_column("correlation")
        .rechunk()
        .replace_strict(host_steps["correlation"], host_steps["iteration"], default=None, return_dtype=pl.Int64)
    )
    offsets = [0, *accumulate(piece.height for piece in pieces)]
    iteration = pl.concat(
        [
            piece.select(
                pl.when(is_device)
                .then(inherited.slice(offset, piece.height))
                .otherwise(by_start.slice(offset, piece.height))
            )
            .to_series()
            .rechunk()
            for piece, offset in zip(pieces, offsets, strict=False)
        ],
        rechunk=False,
    )
    return frame.with_columns(iteration=iteration)


def _chunks(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """The frame cut where its `ts` column's chunks end (zero-copy slices)."""
    lengths = frame.get_column("ts").chunk_lengths() or [0]
    offsets = [0, *accumulate(lengths)][:-1]
    return [frame.slice(offset, length) for offset, length in zip(offsets, lengths, strict=True)]


def _by_start(cols: pl.DataFrame, steps: pl.DataFrame) -> pl.Series:
    """The latest step starting at or before each event's start, if the event starts inside it."""
    position = steps["step_ts"].search_sorted(cols["ts"].fill_null(float("-inf")), side="right").cast(pl.Int64) - 1
    candidate = position.clip(0, steps.height - 1)
    return pl.DataFrame(
        {
            "hit": (position >= 0) & (cols["ts"] < steps["step_end"].gather(candidate)).fill_null(False),
            "step": steps["iteration"].gather(candidate),
        }
    ).select(pl.when(pl.col("hit")).then(pl.col("step")))["step"]


def _chunked_like(series: pl.Series, frame: pl.DataFrame) -> pl.Series:
    """`series` cut into the frame's chunks: a column chunked unlike the others makes the next
    expression over the frame copy every column to realign them."""
    lengths = frame.get_column("ts").chunk_lengths()
    if len(lengths) <= 1:
        return series
    offsets = [0, *accumulate(lengths)][:-1]
    return pl.concat(
        [series.slice(offset, length) for offset, length in zip(offsets, lengths, strict=True)], rechunk=False
    )
