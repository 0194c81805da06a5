"""The events one critical path reads: a rank's rows in an annotation's window, HTA's way.

The window is the annotation instance's span (the `instance`-th event, in time order, whose name
contains `annotation`; empty: the whole trace). Kept: host rows that start inside it with a
duration > 0, device rows whose launching call starts inside it with a duration > 0, and every
"Stream Wait Event" (HTA 0.6.1's `critical_path_analysis` clipping).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.errors import HtatuiError
from htatui.trace.kineto import DEVICE_CATS, GPU_ANNOTATION

STREAM_WAIT_EVENT = "Stream Wait Event"

COLUMNS = (
    "rank",
    "index",
    "cat",
    "name",
    "pid",
    "tid",
    "ts",
    "dur",
    "end",
    "stream",
    "correlation",
    "wait_on_stream",
    "collective_name",
    # What the meeting points of a job's ranks read (views/ranks/meeting.py).
    "iteration",
    "pg_name",
    "group_size",
    "in_msg_nelems",
    "out_msg_nelems",
    "in_msg_size",
    "msg_dtype",
)
"""What the graph reads of each row."""


class WindowError(HtatuiError, ValueError):
    """The annotation or its instance is not in the rank's trace."""


@dataclass(frozen=True)
class Window:
    """The window's bounds (µs) and the rows it keeps (in file order), with derived columns.

    `hstream`: the row's stream, −1 on host rows (HTA's `stream`); `partner`: the row of the
    other side of the row's correlation (a device row's launching call, a call's device row), −1
    when none; `row`: the row's position in `events`.
    """

    start_us: float
    end_us: float
    events: pl.DataFrame
    full: pl.DataFrame


def with_partners(events: pl.DataFrame) -> pl.DataFrame:
    """`row`, `hstream` and `partner` (see `Window`) over a rank's rows in file order."""
    cat = pl.col("cat").cast(pl.Utf8)
    framed = events.sort("index").with_columns(
        row=pl.int_range(pl.len(), dtype=pl.Int64),
        hstream=pl.when(cat.is_in(DEVICE_CATS)).then(pl.col("stream").fill_null(-1)).otherwise(-1),
    )
    linked = framed.filter(pl.col("correlation").is_not_null() & (pl.col("correlation") >= 0))
    host = linked.filter(pl.col("hstream") == -1).filter(cat.is_in(["cuda_runtime", "cuda_driver"]))
    device = linked.filter(pl.col("hstream") != -1)
    # One partner per row: the first in file order (a correlation id names one call and its work).
    host_first = host.group_by("correlation").agg(pl.col("row").min().alias("partner"))
    device_first = device.group_by("correlation").agg(pl.col("row").min().alias("partner"))
    # Event and context syncs have no stream (−1) but are device rows waiting on a host call.
    device_side = (pl.col("hstream") != -1) | pl.col("name").cast(pl.Utf8).is_in(hta.DEVICE_SYNCS)
    # A row without a category is null here: on the host side, or neither filter below keeps it.
    framed = framed.with_columns(device_side=(device_side & cat.is_in(DEVICE_CATS)).fill_null(False))
    on_device = framed.filter(pl.col("device_side")).join(host_first, on="correlation", how="left")
    on_host = framed.filter(~pl.col("device_side")).join(device_first, on="correlation", how="left")
    # A host row's partner is a device row only when it is a runtime/driver call.
    on_host = on_host.with_columns(partner=pl.when(cat.is_in(["cuda_runtime", "cuda_driver"])).then(pl.col("partner")))
    return (
        pl.concat([on_device, on_host], how="vertical")
        .sort("row")
        .with_columns(partner=pl.col("partner").fill_null(-1))
    )


def annotation_span(events: pl.DataFrame, annotation: str, instance: int, hta_compat: bool) -> tuple[float, float]:
    """The span of the `instance`-th event whose name contains `annotation` (whole trace when empty).

    Default: the host's events in time order. Compat: HTA's table order — the device rows first,
    then the host rows (GPU-side `gpu_user_annotation` copies among them), each in file order — so
    a name that kernels contain too ("forward") counts the kernels first.
    """
    if annotation == "":
        low, high = events.select(pl.col("ts").min().fill_null(0.0), pl.col("end").max().fill_null(0.0)).row(0)
        return float(low), float(high)
    named = events.filter(
        pl.col("name").cast(pl.Utf8).str.contains(annotation, literal=True) & pl.col("dur").is_not_null()
    )
    if hta_compat:
        found = named.sort(pl.col("hstream") == -1, "index").select("ts", "end")
    else:
        on_host = named.filter((pl.col("hstream") == -1) & (pl.col("cat").cast(pl.Utf8) != GPU_ANNOTATION))
        found = on_host.sort("ts", "index").select("ts", "end")
    if found.height == 0:
        raise WindowError(f"no event's name contains {annotation!r}")
    if not 0 <= instance < found.height:
        raise WindowError(f"{annotation!r} has {found.height} instance(s); --instance {instance} is not one")
    return float(found["ts"][instance]), float(found["end"][instance])


def clip(events: pl.DataFrame, annotation: str, instance: int, hta_compat: bool) -> Window:
    """The rows HTA's critical path reads for this annotation instance (see the module docstring)."""
    full = with_partners(events.select(COLUMNS))
    start, end = annotation_span(full, annotation, instance, hta_compat)
    inside = pl.col("ts").is_between(start, end) & (pl.col("dur") > 0)
    host_keep = (pl.col("hstream") == -1) & inside
    launched = full.select(
        pl.col("row").alias("partner"), launch_inside=inside.fill_null(False), launch_ts=pl.col("ts")
    )
    with_launch = full.join(launched, on="partner", how="left").sort("row")
    device_keep = (pl.col("hstream") != -1) & (
        pl.col("launch_inside").fill_null(False) | (pl.col("name").cast(pl.Utf8) == STREAM_WAIT_EVENT)
    )
    kept = with_launch.filter((host_keep | device_keep).fill_null(False))
    return Window(start_us=start, end_us=end, events=kept, full=with_launch)
