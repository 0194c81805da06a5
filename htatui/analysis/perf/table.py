"""The ops table's performance-model columns (`report --view ops --group-by shape --flops`):
per call figures, dtype and rates, and per grouped row the roofline against the rank's device.

Called by `htatui/analysis/views/ops.py`; the formulas are in the family modules, the per-call
frame work in `frames.py`, the rows and roofs in `roofline.py`, the rules in
docs/semantics-perf-model.md.
"""

from __future__ import annotations

import polars as pl

from htatui.analysis.core.columns import ColumnSpec, TableColumns
from htatui.analysis.core.comm_rules import comm_rules
from htatui.analysis.core.rules import Rules
from htatui.analysis.perf import frames, roofline
from htatui.analysis.perf.dtypes import short_types
from htatui.analysis.perf.peaks import Device, device_from_properties
from htatui.trace.model import TraceSet
from htatui.trace.plausible import dropped_note

MODEL_SPEC = TableColumns(
    ColumnSpec("category", pl.Utf8(), "the op's family: GEMM, attention, conv, elementwise, norm, reduce, other"),
    ColumnSpec("model", pl.Utf8(), "the formula its FLOPs and bytes come from, profiler, or none"),
    ColumnSpec("dtype", pl.Utf8(), "the dtype the row is measured in (matrix work: its kernels'; vector: its inputs')"),
    ColumnSpec("unit", pl.Utf8(), "matrix (tensor cores: GEMM, conv, attention) or vector units", "low"),
    ColumnSpec("gpu_calls", pl.Int64(), "the calls counted (those not nested in a call of the same row)"),
    ColumnSpec("gflop", pl.Float64(), "FLOPs per counted call (mean) / 1e9", label="GFLOP"),
    ColumnSpec(
        "bytes_moved", pl.Float64(), "bytes read and written per counted call (mean)", unit="B", label="bytes B"
    ),
    ColumnSpec("flop_per_byte", pl.Float64(), "arithmetic intensity: FLOPs / bytes", label="FLOP/B"),
    ColumnSpec("busy_incl_us", pl.Float64(), "Σ over the counted calls of the GPU busy time of the work they launched"),
    ColumnSpec("tb_per_s", pl.Float64(), "Σ bytes over busy_incl_us", unit="TB/s", label="TB/s"),
    ColumnSpec(
        "mean_tflop_per_s",
        pl.Float64(),
        "mean of the calls' own TFLOP/s (TraceLens's TFLOPS/s_mean)",
        "low",
        unit="TFLOP/s",
        label="mean TFLOP/s",
    ),
    ColumnSpec(
        "mean_tb_per_s",
        pl.Float64(),
        "mean of the calls' own TB/s (TraceLens's TB/s_mean)",
        "low",
        unit="TB/s",
        label="mean TB/s",
    ),
    ColumnSpec(
        "pct_of_peak",
        pl.Float64(),
        "TFLOP/s over the roof at its intensity: min(peak, intensity × bandwidth)",
        "key",
        unit="%",
        label="% of peak",
    ),
    ColumnSpec("bound", pl.Utf8(), "compute when the intensity is past the ridge point, else memory", "key"),
    ColumnSpec("flag", pl.Utf8(), "why a row stands above its roof: cache-resident (L2 explains it) or model?", "key"),
    ColumnSpec(
        "headroom_us", pl.Float64(), "GPU time the row would not take at the roof: busy_incl_us × (1 − pct_of_peak/100)"
    ),
    ColumnSpec(
        "peak_tflop_per_s",
        pl.Float64(),
        "the device's compute roof for the row's dtype and unit",
        "low",
        unit="TFLOP/s",
        label="peak TFLOP/s",
    ),
    ColumnSpec("memory_tb_per_s", pl.Float64(), "the device's memory roof", "low", unit="TB/s", label="memory TB/s"),
)
MODEL_COLUMNS = MODEL_SPEC.schema
"""The performance model's columns, after the ops table's rate columns; there `tflop_per_s` is
the row's FLOPs over its busy time (`roofline.row_figures`). Names are stable: the diagnosis reads them."""

TYPES_COLUMN = "input_types"
"""The row key's dtypes, after `input_dims` in the model's table ("bf16,bf16,-")."""

CALL_FIGURES: dict[str, pl.DataType] = {
    "model": pl.Utf8(),
    "category": pl.Utf8(),
    "unit": pl.Utf8(),
    "call_flops": pl.Float64(),
    "call_bytes": pl.Float64(),
    "dtype": pl.Utf8(),
    "busy_us": pl.Float64(),
    "nested": pl.Boolean(),
    "call_tflop_per_s": pl.Float64(),
    "call_tb_per_s": pl.Float64(),
    TYPES_COLUMN: pl.Utf8(),
}
"""Per call, the performance model's figures (null outside --group-by shape --flops)."""
NO_CALL_FIGURES = [pl.lit(None, dtype).alias(name) for name, dtype in CALL_FIGURES.items()]

MODELLED_KINDS = ("op", "kernel-launcher")
"""The host rows the model reads arguments of (op_events' kinds: ops and inductor's launchers)."""

WORK_KINDS = ("kernel", "memcpy", "memset")
"""The device rows that are GPU work (GPU annotations are spans, not work)."""


def with_call_figures(traces: TraceSet, events: pl.DataFrame, work: pl.DataFrame, host: pl.DataFrame) -> pl.DataFrame:
    """Each host event of `host` (the op tree's rows joined with op_args' JSON arguments) with its
    model figures (`frames.with_estimates`), the busy time and dtype of the work its subtree
    launched, whether it runs inside a call of its own row, and its achieved rates (ops only;
    other kinds get nulls). `events` and `work` are the op tree's host and device frames."""
    # Ops, and the cpu_ops that launch a Triton kernel themselves (inductor's launchers).
    modelled = pl.col("kind").is_in(MODELLED_KINDS)
    ops = host.filter(modelled)
    rest = host.filter(~modelled).with_columns(NO_CALL_FIGURES)
    if ops.height == 0:
        return rest
    types = ops.select("types_json").unique()
    types = types.with_columns(
        pl.Series(TYPES_COLUMN, [short_types(t) for t in types["types_json"].to_list()], pl.Utf8)
    )
    ops = frames.with_estimates(ops).join(types, on="types_json", how="left", nulls_equal=True)
    figured = ops.filter(pl.col("call_flops").is_not_null() | pl.col("call_bytes").is_not_null())
    spans = frames.work_dtypes(work_spans(traces, work), figured)
    busy = frames.busy_per_call(events, spans, figured)
    key = ["name", "input_dims", TYPES_COLUMN]
    nested = frames.nested_in_row(events, figured, key)
    ops = (
        ops.join(busy, on=["rank", "pos"], how="left")
        .join(nested, on=["rank", "pos"], how="left")
        .with_columns(
            # Matrix work computes in the dtype its kernels name; vector work in its inputs'.
            dtype=pl.when(pl.col("unit") == "matrix")
            .then(pl.coalesce("kernel_dtype", "input_dtype"))
            .otherwise(pl.coalesce("input_dtype", "kernel_dtype")),
        )
        .with_columns(frames.per_call_rates())
        .drop("kernel_dtype", "input_dtype")
    )
    return pl.concat([ops, rest.select(ops.columns)], how="vertical_relaxed")


def work_spans(traces: TraceSet, work: pl.DataFrame) -> pl.DataFrame:
    """rank, owner, name, ts, end, dur of the launched device work (the tree keeps durations, not
    starts: the starts are read from each rank's event frame by file position)."""
    launched = work.filter(pl.col("kind").is_in(WORK_KINDS) & pl.col("owner").is_not_null())
    parts = []
    for rank in launched["rank"].unique().sort().to_list():
        starts = traces.ranks[rank].events.select(pl.lit(rank, pl.Int32).alias("rank"), "index", "ts")
        parts.append(launched.filter(pl.col("rank") == rank).join(starts, on=["rank", "index"], how="inner"))
    if not parts:
        return pl.DataFrame(
            schema={
                "rank": pl.Int32(),
                "owner": pl.Int64(),
                "name": pl.Utf8(),
                "ts": pl.Float64(),
                "end": pl.Float64(),
                "dur": pl.Float64(),
            }
        )
    spans = pl.concat(parts, how="vertical")
    return spans.select(
        "rank", "owner", pl.col("name").cast(pl.Utf8), "ts", end=pl.col("ts") + pl.col("dur"), dur="dur"
    )


def device_of(traces: TraceSet, rank: int, rules: Rules) -> Device | None:
    """The rank's device in the peak table (the user's peaks files in `rules` first), from its
    trace's `deviceProperties` (by name; a device with no name by its SM count, architecture and
    memory)."""
    for props in traces.ranks[rank].meta.device_properties:
        found = device_from_properties(props, rules)
        if found is not None:
            return found
    return None


def model_columns(traces: TraceSet, table: pl.DataFrame, rules: Rules) -> pl.DataFrame:
    """The grouped table's model columns (after `roofline.row_figures`): flop_count and
    tflop_per_s from the model (or the profiler), the roofline from the rank's device; rows with
    no formula say "none"."""
    devices = {rank: device_of(traces, rank, rules) for rank in table["rank"].unique().to_list()}
    table = table.with_columns(
        flop_count=pl.coalesce("call_flop_count", "flop_count"),
        tflop_per_s=pl.coalesce("model_tflop_per_s", "tflop_per_s"),
        model=pl.col("model").fill_null(frames.NO_MODEL),
        category=pl.col("category").fill_null("other"),
    ).drop("call_flop_count", "model_tflop_per_s")
    return roofline.roofline(table, devices).with_columns(roofline.headroom())


def coverage_note(rank: int, events: pl.DataFrame, work: pl.DataFrame, rules: Rules) -> str | None:
    """ "coverage: rank R N % of T ms GPU time modelled": the device time (kernels, copies,
    memsets) launched by ops with a figure, over the device time launched by any host event in
    the trace; work no event launched (kernels from before the profiler's CPU side started) is
    named apart. Collectives (the communication rules' kernels) are left out: the network bounds
    them, not the roofline."""
    comm = comm_rules(rules).regex
    name = pl.col("name").cast(pl.Utf8)
    device = work.filter(pl.col("kind").is_in(WORK_KINDS) & ~name.str.contains(comm).fill_null(False))
    launched = device.filter(pl.col("owner").is_not_null())
    total = float(launched["dur"].sum() or 0.0)
    orphan = float(device["dur"].sum() or 0.0) - total
    apart = f" ({orphan / 1e3:,.1f} ms more launched by no op in the trace)" if orphan > 0 else ""
    if total <= 0:
        return f"coverage: rank {rank}: no GPU time launched by an op{apart}" if orphan > 0 else None
    modelled = events.filter(pl.col("call_flops").is_not_null() | pl.col("call_bytes").is_not_null())
    covered = launched.join(modelled.select("rank", pl.col("pos").alias("owner")), on=["rank", "owner"], how="semi")
    share = 100.0 * float(covered["dur"].sum() or 0.0) / total
    return f"coverage: rank {rank} {share:.1f} % of {total / 1e3:,.1f} ms GPU time modelled{apart}"


def dropped_args_note(path: object, args: pl.DataFrame) -> str | None:
    """One sentence naming the file and how many op arguments were dropped, per field."""
    if "dropped" not in args.columns:
        return None
    fields = args["dropped"].drop_nulls().str.split(",").explode().value_counts()
    counts = {str(f): int(n) for f, n in fields.iter_rows()}
    return dropped_note(str(path), counts)
