"""HTA 0.6.1's choices, kept in one place: what `--hta-compat` reproduces of them.

An HTA upgrade is edits here: the call names it counts as launches, its selectors of GPU rows
(S1, S2, S3 of docs/semantics-breakdowns.md), its name-only kernel typing, its thresholds.
The views keep their compat *algorithms* (another computation over these rows, e.g. launch's
`_compat`), and call these for every choice HTA makes that a corrected view makes otherwise;
docs/layout.md lists what is left in the views and why.
"""

from __future__ import annotations

import polars as pl

from htatui.trace.kineto import GPU_ACTIVITY_CATS, MTIA_LAUNCH
from htatui.trace.step_sources import step_spans

# ---- call names ------------------------------------------------------------------------------

RUNTIME_LAUNCH_EVENTS = (
    "cudaLaunchKernel",
    "cudaLaunchKernelExC",
    "cuLaunchKernel",
    "cuLaunchKernelEx",
    "cudaMemcpyAsync",
    "cudaMemsetAsync",
    MTIA_LAUNCH,
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "hipMemcpyAsync",
    "hipMemsetAsync",
    "hipMemcpyWithStream",
)
"""HTA's 12 runtime launch events (`TraceSymbolTable.get_runtime_launch_events_mask`): the calls
that enqueue device work, for the launch queue and the critical path's launch edges."""

KERNEL_LAUNCH_EVENTS = ("cudaLaunchKernel", "cudaLaunchKernelExC", MTIA_LAUNCH)
"""The launches HTA's kernel-launch statistics count (`get_cuda_kernel_launch_stats`)."""

MEMORY_LAUNCH_EVENTS = ("cudaMemcpyAsync", "cudaMemsetAsync")
"""The copies and memsets those statistics add with `include_memory_events`."""

CUPTI_LAUNCH_PREFIX = "cudaLaunchKernel"
"""HTA's CUPTI counter analysis pairs a range with the `cuda_runtime` row whose name starts so."""

LOCK_CALLS = ("cudaHostAlloc", "cudaLaunchKernel", "cudaMemcpyAsync")
"""The calls HTA's critical path says take the CUDA runtime's lock: one makes progress at a time."""

# ---- thresholds ------------------------------------------------------------------------------

KERNEL_KERNEL_DELAY_THRESHOLD_US = 1500.0
"""HTA's critical path: a longer gap before a kernel means a dependency the trace does not show
(no kernel-kernel edge)."""

# ---- selectors of GPU rows -------------------------------------------------------------------

TRACE_SPAN_CAT = "Trace"
"""The category of the profiler's whole-trace span, which HTA's frames leave out of every selector."""

IDLE_CATS = GPU_ACTIVITY_CATS
"""Selector S3: the categories HTA's idle time counts (capitalised aliases folded at load)."""


def on_stream() -> pl.Expr:
    """Selector S1 without its category test: a row with a stream other than -1."""
    return pl.col("stream").is_not_null() & (pl.col("stream") != -1)


def gpu_rows(events: pl.DataFrame) -> pl.DataFrame:
    """Selector S1: HTA's GPU rows, every row on a stream but the "Trace" span (so CUDA syncs
    and GPU annotations count as GPU work, as HTA counts them)."""
    return events.filter(on_stream() & (pl.col("cat") != TRACE_SPAN_CAT))


DEVICE_SYNCS = ("Event Sync", "Context Sync")
"""The CUDA syncs HTA takes for device rows (selector S2), though the profiler puts them on no stream."""


def device_row() -> pl.Expr:
    """Selector S2, HTA's 'GPU kernel' rows: stream and correlation ≥ 0, or a CUDA event or
    context sync; the rest are host rows."""
    # Categorical is_in matches as the text would, without a text copy of the column.
    on_device = (pl.col("stream").fill_null(-1) >= 0) & (pl.col("correlation").fill_null(-1) >= 0)
    return on_device | pl.col("name").is_in(DEVICE_SYNCS)


def linked_device_row() -> pl.Expr:
    """The device rows HTA's `get_cpu_gpu_correlation` links to their launch: a stream > 0
    (syncs included)."""
    return pl.col("stream").fill_null(-1) > 0


# ---- the last step ---------------------------------------------------------------------------


def last_step_cutoff(events: pl.DataFrame, *, include_last_step: bool) -> pl.Expr | None:
    """HTA's last-step cut-off for host rows (hta-reference B.6): a row is kept when it starts
    before the latest ProfilerStep row starts (GPU-side copies included: HTA's quirk) or, with
    `include_last_step`, by its end; None with fewer than two steps (nothing is dropped).
    `events` needs ph, cat, name, ts, end."""
    spans = step_spans(events, with_gpu_copies=True)
    if spans["step"].n_unique() < 2:
        return None
    return pl.col("ts") <= spans["end"].max() if include_last_step else pl.col("ts") < spans["ts"].max()


def last_step_mask(events: pl.DataFrame, *, include_last_step: bool) -> pl.Expr:
    """HTA 0.6.1's last-step filter as a row mask over complete events: host rows by
    `last_step_cutoff`, device rows (S2) only when a kept host row has their correlation."""
    x = pl.col("ph") == "X"
    cutoff = last_step_cutoff(events, include_last_step=include_last_step)
    if cutoff is None:
        return x
    device = device_row()
    kept = events.filter(x & ~device & cutoff)["correlation"].drop_nulls().unique()
    # One mask keeps file order: host rows by time, device rows by their launch's correlation.
    return x & pl.when(device).then(pl.col("correlation").is_in(kept.implode())).otherwise(cutoff)


# ---- rounding ------------------------------------------------------------------------------------


def ns_rounded(events: pl.DataFrame) -> pl.DataFrame:
    """HTA's ns rounding of a trace with fractional µs (docs/semantics.md, time rounding): ceil
    the start, floor the end, dur = end − start."""
    return events.with_columns(ts=pl.col("ts").ceil(), end=pl.col("end").floor()).with_columns(
        dur=pl.col("end") - pl.col("ts")
    )


def rounded(expr: pl.Expr, decimals: int) -> pl.Expr:
    """pandas' / numpy's ``round(x, n)``, which HTA applies to its outputs.

    polars' half-to-even ``round(n)`` gives numpy's results bit for bit (checked on 1.3 M
    values incl. exact halves); ``(x·10ⁿ).round() / 10ⁿ`` does not, because polars divides by
    a scalar as a multiplication by its reciprocal (207 / 10 → 20.700000000000003).
    """
    return expr.round(decimals, mode="half_to_even")


def outputs_rounded(frame: pl.DataFrame, hta_compat: bool, decimals: int, *columns: str) -> pl.DataFrame:
    """`frame` with `columns` rounded to `decimals` as HTA rounds its outputs in compat mode;
    as it is otherwise (htatui keeps full precision and leaves rounding to the display)."""
    return frame.with_columns(rounded(pl.col(c), decimals) for c in columns) if hta_compat else frame


# ---- kernel typing -----------------------------------------------------------------------------


def name_type(name: pl.Expr, communication: str, memory: str, computation: str, other: str) -> pl.Expr:
    """HTA's name-only typing of a GPU row (`hta.common.types`), quirks included: `hip*` is
    communication, any name holding "dma" or "Sync" is not computation; `name` as text, the
    four kinds as the caller spells them."""
    comm = (
        name.str.starts_with("nccl")
        | name.str.starts_with("hip")
        | name.str.starts_with("hccl")
        | name.str.contains("ncclKernel", literal=True)
    )
    copy = (
        name.str.starts_with("Memcpy")
        | name.str.starts_with("hipMemcpy")
        | name.str.starts_with("Memset")
        | name.str.starts_with("hipMemset")
        | name.str.starts_with("dma")
    )
    not_compute = (
        name.str.starts_with("nccl")
        | name.str.contains("Memcpy", literal=True)
        | name.str.contains("Memset", literal=True)
        | name.str.contains("dma", literal=True)
        | name.str.contains("Sync", literal=True)
        | name.str.starts_with("Stream Wait Event")
        | (name.str.starts_with("cuda") & name.str.contains("LaunchKernel", literal=True))
        | name.str.contains(
            r"^(runFunction|hip|job_exe|packet|pe_exe|cpum_exe_subgraph|hccl|collective_subgraph_execution)"
        )
    )
    return (
        pl.when(comm)
        .then(pl.lit(communication))
        .when(copy)
        .then(pl.lit(memory))
        .when(~not_compute)
        .then(pl.lit(computation))
        .otherwise(pl.lit(other))
    )
