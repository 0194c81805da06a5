"""The rows a step graph is made of: one rank's host events and device work in a time window.

Kept: host events (every complete event that is not device-side: ops, annotations, Python
functions, runtime and driver calls) with a duration > 0 that overlap the window, and device
work (kernels, copies, memsets) with a duration > 0 that overlaps it or whose launching call
does. Each device row is paired with its launching call by correlation id (`launch`, the row of
the call; −1 when the call is not kept), and each launching call with its device row.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.model.callstack import DEVICE_SIDE_CATS
from htatui.trace.kineto import GPU_ACTIVITY_CATS

READS = ("index", "ph", "cat", "name", "pid", "tid", "ts", "dur", "end", "stream", "correlation", "collective_name")
"""The event columns a step graph reads."""

ROW_SCHEMA: dict[str, pl.DataType] = {
    "row": pl.Int64(),
    "index": pl.Int64(),
    "cat": pl.Utf8(),
    "name": pl.Utf8(),
    "pid": pl.Utf8(),
    "tid": pl.Utf8(),
    "ts": pl.Float64(),
    "end": pl.Float64(),
    "on_device": pl.Boolean(),
    "lane": pl.Utf8(),
    "launch": pl.Int64(),
    "collective_name": pl.Utf8(),
}
"""One kept row: its place (`row`) and file `index`, category and name as text, its thread or
stream (`lane`: "pid/tid" on the host, "device/stream" on a GPU), its span, and for device work
the row of its launching call (`launch`, −1 when none is kept)."""


def window_rows(events: pl.DataFrame, low_us: float, high_us: float) -> pl.DataFrame:
    """The rows of one rank's `events` (READS) that a graph of [low_us, high_us] is built from (ROW_SCHEMA).

    Rows are in (time, file index) order; `row` numbers them.
    """
    cat = pl.col("cat").cast(pl.Utf8)
    complete = (pl.col("ph") == "X") if "ph" in events.columns else pl.lit(True)
    spans = events.filter(complete & (pl.col("dur") > 0) & pl.col("ts").is_not_null()).select(
        "index",
        cat.alias("cat"),
        pl.col("name").cast(pl.Utf8),
        pl.col("pid").cast(pl.Utf8),
        pl.col("tid").cast(pl.Utf8),
        "ts",
        "end",
        "stream",
        "correlation",
        pl.col("collective_name").cast(pl.Utf8)
        if "collective_name" in events.columns
        else pl.lit(None, pl.Utf8).alias("collective_name"),
    )
    overlaps = (pl.col("end") > low_us) & (pl.col("ts") < high_us)
    device = spans.filter(pl.col("cat").is_in(GPU_ACTIVITY_CATS))
    host = spans.filter(~pl.col("cat").is_in(DEVICE_SIDE_CATS))
    calls = host.filter(pl.col("correlation").is_not_null() & pl.col("cat").is_in(["cuda_runtime", "cuda_driver"]))
    # A correlation id names one call: its first in file order.
    calls = calls.sort("index").unique("correlation", keep="first", maintain_order=True)
    launch_inside = calls.filter(pl.col("ts").is_between(low_us, high_us)).select("correlation", _inside=pl.lit(True))
    device = device.join(launch_inside, on="correlation", how="left").filter(
        overlaps | pl.col("_inside").fill_null(False)
    )
    kept_host = host.filter(overlaps)
    rows = pl.concat(
        [
            kept_host.with_columns(on_device=pl.lit(False), lane=pl.col("pid") + "/" + pl.col("tid")),
            device.drop("_inside").with_columns(
                on_device=pl.lit(True),
                lane=pl.col("pid") + "/" + pl.col("stream").cast(pl.Utf8).fill_null("?"),
            ),
        ],
        how="vertical",
    ).sort("ts", "index")
    rows = rows.with_columns(row=pl.int_range(pl.len(), dtype=pl.Int64))
    # Each device row's launching call among the kept rows (by correlation; the call's first row).
    kept_calls = rows.filter(~pl.col("on_device") & pl.col("correlation").is_not_null())
    kept_calls = kept_calls.filter(pl.col("cat").is_in(["cuda_runtime", "cuda_driver"]))
    kept_calls = kept_calls.sort("index").unique("correlation", keep="first", maintain_order=True)
    links = kept_calls.select("correlation", launch="row")
    on_device = rows.filter("on_device").join(links, on="correlation", how="left")
    on_host = rows.filter(~pl.col("on_device")).with_columns(launch=pl.lit(None, dtype=pl.Int64))
    joined = pl.concat([on_device, on_host], how="vertical_relaxed").sort("row")
    return joined.select(
        [pl.col(c).fill_null(-1).cast(t) if c == "launch" else pl.col(c).cast(t) for c, t in ROW_SCHEMA.items()]
    )
