"""The ops table's performance-model columns (`report --view ops --group-by shape --flops`):
per call figures and rates, and per grouped row the roofline against the rank's device.

Called by `htatui/analysis/views/ops.py`; the formulas are in the family modules, the frame
work in `frames.py`, the rules in docs/semantics-perf-model.md.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.analysis.perf import frames
from htatui.analysis.perf.peaks import Device, find_device
from htatui.trace.model import TraceSet

MODEL_SPEC = TableColumns(
    ColumnSpec("category", pl.Utf8(), "the op's family: gemm, attention, conv, elementwise, norm, reduce, other"),
    ColumnSpec("model", pl.Utf8(), "the formula its FLOPs and bytes come from, profiler, or none"),
    ColumnSpec("gflop", pl.Float64(), "FLOPs per call (mean over the row's calls) / 1e9", label="GFLOP"),
    ColumnSpec("bytes_moved", pl.Float64(), "bytes read and written per call (mean)", unit="B", label="bytes B"),
    ColumnSpec("flop_per_byte", pl.Float64(), "arithmetic intensity: FLOPs / bytes", label="FLOP/B"),
    ColumnSpec("tb_per_s", pl.Float64(), "bytes moved over the calls' GPU busy time", unit="TB/s", label="TB/s"),
    ColumnSpec(
        "pct_of_peak",
        pl.Float64(),
        "TFLOP/s over the roof at its intensity: min(peak, intensity × bandwidth)",
        "key",
        unit="%",
        label="% of peak",
    ),
    ColumnSpec("bound", pl.Utf8(), "compute when the intensity is past the ridge point, else memory", "key"),
    ColumnSpec(
        "headroom_us", pl.Float64(), "GPU time the row would not take at the roof: gpu_total_us × (1 − pct_of_peak/100)"
    ),
    ColumnSpec(
        "peak_tflop_per_s",
        pl.Float64(),
        "the device's compute roof for the op's dtype",
        "low",
        unit="TFLOP/s",
        label="peak TFLOP/s",
    ),
    ColumnSpec("memory_tb_per_s", pl.Float64(), "the device's memory roof", "low", unit="TB/s", label="memory TB/s"),
)
MODEL_COLUMNS = MODEL_SPEC.schema
"""The performance model's columns, after the ops table's rate columns; there `tflop_per_s` is
the mean over calls of the model's FLOPs over each call's GPU busy time."""

CALL_FIGURES: dict[str, pl.DataType] = {
    "model": pl.Utf8(),
    "category": pl.Utf8(),
    "call_flops": pl.Float64(),
    "call_bytes": pl.Float64(),
    "peak_dtype": pl.Utf8(),
    "call_tflop_per_s": pl.Float64(),
    "call_tb_per_s": pl.Float64(),
}
"""Per call, the performance model's figures (null outside --group-by shape --flops)."""
NO_CALL_FIGURES = [pl.lit(None, dtype).alias(name) for name, dtype in CALL_FIGURES.items()]

WORK_KINDS = ("kernel", "memcpy", "memset")
"""The device rows that are GPU work (GPU annotations are spans, not work)."""


def with_call_figures(traces: TraceSet, events: pl.DataFrame, work: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    """Each host event of `host` (the op tree's rows joined with op_args' JSON arguments) with its
    model figures (`frames.with_estimates`) and its achieved rates over the GPU busy time of the
    work its subtree launched (ops only; other kinds get nulls). `events` and `work` are the op
    tree's host and device frames."""
    ops = host.filter(pl.col("kind") == "op")
    rest = host.filter(pl.col("kind") != "op").with_columns(NO_CALL_FIGURES)
    if ops.height == 0:
        return rest
    ops = frames.with_estimates(ops)
    figured = ops.filter(pl.col("call_flops").is_not_null() | pl.col("call_bytes").is_not_null())
    busy = frames.busy_per_call(events, work_spans(traces, work), figured)
    ops = ops.join(busy, on=["rank", "pos"], how="left").with_columns(frames.per_call_rates()).drop("busy_us")
    return pl.concat([ops, rest.select(ops.columns)], how="vertical_relaxed")


def work_spans(traces: TraceSet, work: pl.DataFrame) -> pl.DataFrame:
    """rank, owner, ts, end of the launched device work (the tree keeps durations, not starts:
    the starts are read from each rank's event frame by file position)."""
    launched = work.filter(pl.col("kind").is_in(WORK_KINDS) & pl.col("owner").is_not_null())
    parts = []
    for rank in launched["rank"].unique().sort().to_list():
        starts = traces.ranks[rank].events.select(pl.lit(rank, pl.Int32).alias("rank"), "index", "ts")
        parts.append(launched.filter(pl.col("rank") == rank).join(starts, on=["rank", "index"], how="inner"))
    if not parts:
        return pl.DataFrame(schema={"rank": pl.Int32(), "owner": pl.Int64(), "ts": pl.Float64(), "end": pl.Float64()})
    spans = pl.concat(parts, how="vertical")
    return spans.select("rank", "owner", "ts", end=pl.col("ts") + pl.col("dur"))


def device_of(traces: TraceSet, rank: int) -> Device | None:
    """The rank's device in the peak table, from its trace's `deviceProperties` (name, numSms)."""
    for props in traces.ranks[rank].meta.device_properties:
        sms = props.get("numSms")
        found = find_device(str(props.get("name", "")), sms if isinstance(sms, int) else None)
        if found is not None:
            return found
    return None


def model_columns(traces: TraceSet, table: pl.DataFrame) -> pl.DataFrame:
    """The grouped table's model columns (after `frames.row_means`): flop_count and tflop_per_s
    from the model (or the profiler), the roofline from the rank's device; rows with no formula
    say "none"."""
    devices = {rank: device_of(traces, rank) for rank in table["rank"].unique().to_list()}
    table = table.with_columns(
        flop_count=pl.coalesce("call_flop_count", "flop_count"),
        tflop_per_s=pl.col("mean_tflop_per_s"),
        model=pl.col("model").fill_null(frames.NO_MODEL),
        category=pl.col("category").fill_null("other"),
    ).drop("call_flop_count", "mean_tflop_per_s")
    return frames.roofline(table, devices).drop("peak_dtype").with_columns(frames.headroom())
