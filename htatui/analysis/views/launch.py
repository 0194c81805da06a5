"""Kernel launch statistics: how long each launch call took on the CPU, how long its GPU work
ran, and how long the work waited to start (docs/semantics-counters.md, launch).

Corrected (default): every CUDA, driver, HIP and MTIA launch API counts, plus the async
memcpy/memset calls; a CUDA/HIP graph launch is one row whose GPU side spans its first kernel's
start to its last kernel's end. The delay is not clipped: a negative delay means the GPU work
started before the launch call returned. HTA-compatible mode reproduces HTA 0.6.1's
`get_cuda_kernel_launch_stats` (its three launch names plus the two memory calls, a
`stream == -1` / `stream != -1` join on correlation, delay clipped at 0).
docs/semantics-counters.md lists the differences.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare, rank_by_rank
from htatui.trace.kineto import (
    GPU_ACTIVITY_CATS,
    GRAPH_LAUNCH_APIS,
    KERNEL_LAUNCH_APIS,
    MEMORY_LAUNCH_APIS,
)
from htatui.trace.model import TraceSet

SPEC = TableColumns(
    RANK,
    ColumnSpec("correlation", pl.Int64(), "the correlation id joining the launch call to its GPU work", "low"),
    ColumnSpec("kernel", pl.Categorical(), "the GPU work's name (kernel, copy or memset)", "id"),
    ColumnSpec("cpu_duration_us", pl.Float64(), "how long the launch call ran on the CPU"),
    ColumnSpec("gpu_duration_us", pl.Float64(), "how long the GPU work ran"),
    ColumnSpec("launch_delay_us", pl.Float64(), "the GPU work's start minus the launch call's start", "key"),
)
"""`kernel` is Categorical, as the trace's names are: a row per launch, and kernel names run to
hundreds of bytes (as text, 54 of a real 1.6M-event rank's 62 MiB of launches)."""
COLUMNS = SPEC.schema

_PART = {"cpu": "launch call's CPU time", "gpu": "GPU work's duration", "delay": "launch delay"}
SUMMARY_SPEC = TableColumns(
    RANK,
    ColumnSpec("count", pl.Int64(), "launches matched to their GPU work"),
    ColumnSpec("short_count", pl.Int64(), "launches whose GPU work ran shorter than the call (short kernels)"),
    ColumnSpec("runtime_outlier_count", pl.Int64(), "launch calls longer than the runtime cutoff"),
    ColumnSpec("delay_outlier_count", pl.Int64(), "launches whose delay passed the delay cutoff"),
    *(
        ColumnSpec(
            f"{prefix}_{stat}_us",
            pl.Float64(),
            f"{'mean' if stat == 'mean' else stat} of the {_PART[prefix]}",
            "key" if prefix == "delay" and stat in ("mean", "p99") else "normal" if stat in ("mean", "p99") else "low",
        )
        for prefix in ("cpu", "gpu", "delay")
        for stat in ("mean", "p50", "p90", "p99")
    ),
)
SUMMARY_COLUMNS = SUMMARY_SPEC.schema

OutlierKind = Literal["short", "runtime", "delay"]
OUTLIER_KINDS: tuple[OutlierKind, ...] = ("short", "runtime", "delay")


@dataclass(frozen=True)
class LaunchOptions(CommonOptions):
    """Launch statistics knobs (HTA's defaults)."""

    runtime_cutoff_us: float = knob(
        50.0,
        flag="--runtime-cutoff",
        help="launch: runtime outlier cutoff, µs",
        kind="float",
        label="runtime cutoff (µs)",
        minimum=0,
    )
    """Launch calls longer than this are runtime outliers; short kernels need cpu ≤ this."""
    launch_delay_cutoff_us: float = knob(
        100.0,
        flag="--launch-delay-cutoff",
        help="launch: delay outlier cutoff, µs",
        kind="float",
        label="delay cutoff (µs)",
        minimum=0,
    )
    """Launches whose GPU work waited longer than this are launch-delay outliers."""
    include_memory_events: bool = True
    """Count the async memcpy/memset calls as launches too."""
    include_graph_launches: bool = True
    """Corrected mode only: one row per cudaGraphLaunch/hipGraphLaunch (HTA drops them)."""


HIP_IN_COMPAT = (
    "HTA 0.6.1 counts CUDA launch calls only (cudaLaunchKernel, cudaLaunchKernelExC, cudaMemcpyAsync, "
    "cudaMemsetAsync): this trace launches with HIP (hipLaunchKernel, …), so --hta-compat finds no launch; "
    "without --hta-compat they count"
)


def hip_in_compat(traces: TraceSet, options: LaunchOptions) -> str | None:
    """Why compat mode finds no launch on the chosen ranks, when it is that they launch with HIP."""
    if not options.hta_compat:
        return None
    names = prepare(traces, options, columns=("name",)).events["name"].unique().cast(pl.Utf8)
    hip = [name for name in (*KERNEL_LAUNCH_APIS, *MEMORY_LAUNCH_APIS) if name.startswith("hip")]
    return HIP_IN_COMPAT if names.is_in(hip).any() else None


def empty_frame() -> pl.DataFrame:
    return pl.DataFrame(schema=COLUMNS)


def launch_apis(options: LaunchOptions) -> tuple[str, ...]:
    """The host call names that count as launches under these options."""
    if options.hta_compat:
        return hta.KERNEL_LAUNCH_EVENTS + (hta.MEMORY_LAUNCH_EVENTS if options.include_memory_events else ())
    names = KERNEL_LAUNCH_APIS + (MEMORY_LAUNCH_APIS if options.include_memory_events else ())
    return names + (GRAPH_LAUNCH_APIS if options.include_graph_launches else ())


def compute(traces: TraceSet, options: LaunchOptions) -> pl.DataFrame:
    """One row per launch: rank, correlation, kernel, cpu/gpu duration and launch delay (µs).

    Made once per job and options and shared by the summary, outlier and histogram tables.
    """
    key = ("launch.compute", *selection_key(traces, options, "include_memory_events", "include_graph_launches"))
    return memoised(traces, key, lambda: _compute(traces, options))


def _compute(traces: TraceSet, options: LaunchOptions) -> pl.DataFrame:
    columns = ("rank", "correlation", "name", "cat", "stream", "ts", "end", "dur", "index")
    events = prepare(traces, options, columns=columns).events
    if events.height == 0:
        return empty_frame()
    frame = _compat(events, options) if options.hta_compat else _corrected(events, options)
    return frame.select([pl.col(name).cast(dtype) for name, dtype in COLUMNS.items()])


def _corrected(events: pl.DataFrame, options: LaunchOptions) -> pl.DataFrame:
    # Only rows with a correlation id can pair up; filter on the categoricals before any cast.
    linked = events.filter(pl.col("correlation").is_not_null()).select(
        "rank", "correlation", "name", "cat", "ts", "end", "dur", "index"
    )
    device_mask = pl.col("cat").is_in(GPU_ACTIVITY_CATS)
    host = linked.filter(pl.col("name").is_in(launch_apis(options)) & ~device_mask).select(
        "rank",
        "correlation",
        api=pl.col("name").cast(pl.Utf8),
        host_ts=pl.col("ts"),
        host_end=pl.col("end"),
        cpu_duration_us=pl.col("dur"),
        host_index=pl.col("index"),
    )
    if host.height == 0:
        return empty_frame()
    # All device work of one correlation id: one row for a plain launch, N for a graph.
    device = (
        linked.filter(device_mask)
        .join(host.select("rank", "correlation").unique(), on=["rank", "correlation"], how="semi")
        .sort("ts", "index")
        .group_by("rank", "correlation")
        .agg(
            gpu_ts=pl.col("ts").min(),
            gpu_end=pl.col("end").max(),
            first_dur=pl.col("dur").first(),
            first_name=pl.col("name").first(),
            n=pl.len(),
            n_kernels=(pl.col("cat") == "kernel").sum(),
        )
    )
    joined = host.join(device, on=["rank", "correlation"], how="inner")
    is_graph = pl.col("api").is_in(GRAPH_LAUNCH_APIS)
    graph_label = pl.format(
        "{} ({} {})",
        pl.col("api"),
        pl.col("n"),
        pl.when(pl.col("n_kernels") == pl.col("n")).then(pl.lit("kernels")).otherwise(pl.lit("GPU ops")),
    )
    return joined.with_columns(
        kernel=pl.when(is_graph).then(graph_label.cast(pl.Categorical)).otherwise(pl.col("first_name")),
        gpu_duration_us=pl.when(pl.col("n") == 1)
        .then(pl.col("first_dur"))
        .otherwise(pl.col("gpu_end") - pl.col("gpu_ts")),
        launch_delay_us=pl.col("gpu_ts") - pl.col("host_end"),
    ).sort("rank", "host_ts", "host_index")


def _compat(events: pl.DataFrame, options: LaunchOptions) -> pl.DataFrame:
    """HTA 0.6.1's cuda_kernel_launch_stats, per rank (docs/semantics-counters.md, launch).

    HTA fills a missing correlation with -1 and joins on it, so rows without one only pair up
    when a launch call itself lacks a correlation; otherwise they are left out up front.
    """
    correlation = pl.col("correlation").fill_null(-1)
    launched = (
        events.filter(pl.col("name").is_in(launch_apis(options))).select("rank", correlation=correlation).unique()
    )
    rows = events if (launched["correlation"] == -1).any() else events.filter(pl.col("correlation").is_not_null())
    rows = (
        rows.filter(pl.col("cat") != hta.TRACE_SPAN_CAT)
        .select("rank", "correlation", "name", "stream", "ts", "dur", "index")
        .with_columns(correlation=correlation, stream=pl.col("stream").fill_null(-1))
        .join(launched, on=["rank", "correlation"], how="semi")
    )
    cpu = rows.filter(pl.col("stream") == -1)
    gpu = rows.filter(pl.col("stream") != -1)
    joined = cpu.select("rank", "correlation", "ts", "dur", "index").join(
        gpu.select("rank", "correlation", gpu_ts="ts", gpu_dur="dur", kernel="name", gpu_index="index"),
        on=["rank", "correlation"],
        how="inner",
    )
    return joined.with_columns(
        cpu_duration_us=pl.col("dur"),
        gpu_duration_us=pl.col("gpu_dur"),
        launch_delay_us=(pl.col("gpu_ts") - pl.col("ts") - pl.col("dur")).clip(lower_bound=0.0),
    ).sort("rank", "ts", "index", "gpu_index")


def outlier_mask(options: LaunchOptions, kind: OutlierKind) -> pl.Expr:
    """Which rows of `compute` belong to one of HTA's three plots (docs/semantics-counters.md, launch)."""
    cpu, gpu, delay = pl.col("cpu_duration_us"), pl.col("gpu_duration_us"), pl.col("launch_delay_us")
    if kind == "short":
        return (cpu <= options.runtime_cutoff_us) & (gpu < cpu)
    if kind == "runtime":
        return cpu > options.runtime_cutoff_us
    if kind == "delay":
        return delay > options.launch_delay_cutoff_us
    raise ValueError(f"unknown outlier kind {kind!r}; expected one of {', '.join(OUTLIER_KINDS)}")


def select_outliers(frame: pl.DataFrame, options: LaunchOptions, kind: OutlierKind) -> pl.DataFrame:
    """The rows of an already computed launch frame that fall in one outlier list."""
    return frame.filter(outlier_mask(options, kind))


def outliers(traces: TraceSet, options: LaunchOptions, kind: OutlierKind) -> pl.DataFrame:
    """Rows of one outlier list: 'short' (gpu < cpu ≤ runtime cutoff), 'runtime' (cpu > runtime
    cutoff) or 'delay' (launch delay > delay cutoff); same columns as `compute`."""
    return select_outliers(compute(traces, options), options, kind)


def summarize(frame: pl.DataFrame, options: LaunchOptions) -> pl.DataFrame:
    """Per-rank counts, outlier counts, means and p50/p90/p99 of an already computed frame."""
    if frame.height == 0:
        return pl.DataFrame(schema=SUMMARY_COLUMNS)
    stats: list[pl.Expr] = [
        pl.len().alias("count"),
        outlier_mask(options, "short").sum().alias("short_count"),
        outlier_mask(options, "runtime").sum().alias("runtime_outlier_count"),
        outlier_mask(options, "delay").sum().alias("delay_outlier_count"),
    ]
    for prefix, column in (
        ("cpu", "cpu_duration_us"),
        ("gpu", "gpu_duration_us"),
        ("delay", "launch_delay_us"),
    ):
        stats.append(pl.col(column).mean().alias(f"{prefix}_mean_us"))
        for q in (50, 90, 99):
            stats.append(pl.col(column).quantile(q / 100, interpolation="linear").alias(f"{prefix}_p{q}_us"))
    summary = frame.group_by("rank").agg(stats)
    return summary.sort("rank").select([pl.col(name).cast(dtype) for name, dtype in SUMMARY_COLUMNS.items()])


def summary(traces: TraceSet, options: LaunchOptions) -> pl.DataFrame:
    """Per rank: launch count, short-kernel / runtime-outlier / delay-outlier counts, and the
    mean, p50, p90 and p99 of cpu duration, gpu duration and launch delay (µs)."""
    return summarize(compute(traces, options), options)


HISTOGRAM_METRICS = ("launch_delay_us", "cpu_duration_us", "gpu_duration_us")
HISTOGRAM_BINS = 30
HISTOGRAM_SPEC = TableColumns(
    ColumnSpec("metric", pl.Utf8(), "what is binned: launch_delay_us, cpu_duration_us or gpu_duration_us", "id"),
    ColumnSpec("bin", pl.Int64(), "the bin's number, from 0 (equal-width bins over the metric's range)", "id"),
    ColumnSpec("bin_center_us", pl.Float64(), "the middle of the bin", "key"),
    ColumnSpec("count", pl.Int64(), "launches in the bin", "key"),
)
HISTOGRAM_COLUMNS = HISTOGRAM_SPEC.schema


def histograms_of(frame: pl.DataFrame, bins: int = HISTOGRAM_BINS) -> pl.DataFrame:
    """metric, bin, bin_center_us, count: equal-width bins over each metric's finite range.

    A metric whose values are all equal is one bin at that value; one with none has no rows.
    """
    rows: dict[str, list[object]] = {name: [] for name in HISTOGRAM_COLUMNS}
    for metric in HISTOGRAM_METRICS:
        values = frame[metric].drop_nulls() if metric in frame.columns else pl.Series(dtype=pl.Float64)
        finite = values.filter(values.is_finite())
        if finite.len() == 0:
            continue
        low, high = float(finite.min()), float(finite.max())  # type: ignore[arg-type]
        if high <= low:
            centres, counts = [low], [finite.len()]
        else:
            width = (high - low) / bins
            index = ((finite - low) / width).floor().clip(0, bins - 1).cast(pl.Int64)
            found = index.value_counts().sort(index.name)
            by_bin = dict(zip(found[index.name].to_list(), found["count"].to_list(), strict=True))
            centres = [low + (i + 0.5) * width for i in range(bins)]
            counts = [by_bin.get(i, 0) for i in range(bins)]
        for number, (centre, count) in enumerate(zip(centres, counts, strict=True)):
            rows["metric"].append(metric)
            rows["bin"].append(number)
            rows["bin_center_us"].append(centre)
            rows["count"].append(count)
    return pl.DataFrame(rows, schema=HISTOGRAM_COLUMNS)


def histograms(traces: TraceSet, options: LaunchOptions) -> pl.DataFrame:
    """The Launch screen's histograms of launch delay, CPU call time and GPU time (`histograms_of`);
    over a dataset the launches are gathered a rank at a time, and only the binned columns of
    each are kept (every column of every launch of 1,024 ranks took 2.4 GB)."""

    def metrics(part: TraceSet, part_options: LaunchOptions) -> pl.DataFrame:
        frame = compute(part, part_options)
        return frame.select([name for name in HISTOGRAM_METRICS if name in frame.columns])

    return histograms_of(rank_by_rank(traces, options, metrics))
