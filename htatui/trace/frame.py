"""The event frame's derived columns: each piece's own-row columns, then each row's ProfilerStep.

columns.py makes a piece's events into columns and calls `finish_rows` on each; the loader calls
`finish_pieces` once over the pieces joined.
"""

from __future__ import annotations

from itertools import accumulate

import polars as pl

from htatui.trace.kineto import DEVICE_CATS, is_device_row
from htatui.trace.model import DETAIL_SCHEMA, EVENT_SCHEMA
from htatui.trace.step_sources import is_step_row, numbered, step_source


def placeholder_rank() -> pl.Expr:
    """The `rank` every piece gets until the loader knows the rank: a constant column (no memory per row)."""
    return pl.lit(0, dtype=pl.Int32).alias("rank")


def finish_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The derived columns that need only their own row, and EVENT_SCHEMA's types but `iteration`.

    Applied to each decoded piece, so the text columns are Categorical (4 B a row, not 16) before
    the pieces add up, and nothing but `iteration` is derived over the whole frame.
    """
    return frame.with_columns(*_OWN_ROW_COLUMNS).select(_ROW_TYPES)


_OWN_ROW_COLUMNS = (
    placeholder_rank(),
    (pl.col("ts") + pl.col("dur")).alias("end"),
    # Flow ids only mean something on flow events; elsewhere `id` is unrelated.
    pl.when(pl.col("ph").is_in(["s", "f", "t"])).then(pl.col("flow_id")).alias("flow_id"),
    pl.when(pl.col("device").is_not_null())
    .then(pl.col("device"))
    .when(pl.col("cat").is_in(DEVICE_CATS))
    .then(pl.col("pid").cast(pl.Utf8).cast(pl.Int64, strict=False))
    .alias("device"),
)
# Made once: the expressions are the same for every piece (a few hundred µs a piece to build).
_ROW_TYPES = [pl.col(name).cast(dtype) for name, dtype in EVENT_SCHEMA.items() if name != "iteration"]


def finish_details(details: pl.DataFrame) -> pl.DataFrame:
    """A piece's detail rows (`index` and detail values) in DETAIL_SCHEMA's types, with the placeholder rank."""
    return details.with_columns(placeholder_rank()).select(_DETAIL_TYPES)


_DETAIL_TYPES = [pl.col(name).cast(dtype) for name, dtype in DETAIL_SCHEMA.items()]


def finish_pieces(frame: pl.DataFrame) -> pl.DataFrame:
    """`iteration` added to a frame of `finish_rows` pieces (steps and launches span pieces)."""
    return add_iterations(frame).select(list(EVENT_SCHEMA))


def add_iterations(frame: pl.DataFrame) -> pl.DataFrame:
    """Each event's step number, as HTA assigns it (docs/semantics-counters.md, steps), corrected.

    The steps are the ProfilerStep ranges, or where a rank has none a serving framework's
    iteration annotations or a user's `--steps-from` ranges (`step_sources.step_source`).

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
    source = step_source(cols)
    if source is None:
        return frame.with_columns(iteration=_chunked_like(pl.Series([None] * frame.height, dtype=pl.Int64), frame))
    steps = pl.concat(
        [
            piece.filter(is_step_row(piece, source)).select(step_ts=pl.col("ts"), step_end=pl.col("end"), name="name")
            for piece in pieces
        ]
    ).sort("step_ts", maintain_order=True)
    steps = steps.select("step_ts", "step_end", iteration=numbered(steps, source)).drop_nulls("iteration")
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
