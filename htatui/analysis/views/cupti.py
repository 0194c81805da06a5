"""CUPTI range-profiler counters attributed to the operators that launched each kernel
(docs/semantics-counters.md, cupti).

A trace recorded with the CUPTI range profiler has one `cuda_profiler_range` event per counted
kernel, its args the counter values, and no kernel events: a range carries no correlation id, so
it is tied to its launch by position, as HTA 0.6.1's `get_cupti_counter_data_with_operators`
does: the k-th range by start time was launched by the k-th kernel launch by start time. When
the two counts differ the pairing is unknown and the rank is left out (HTA skips it too). The
launch's enclosing `cpu_op`s, outermost first, are the op stack.

Derived figures: FLOPs from the SASS floating-point instruction counters (FMA counts twice, add
and mul once; HTA's `CUDA_SASS_INSTRUCTION_COUNTER_FLOPS`), per precision and in all, and the
achieved rate over the range's duration.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.rules import Rules
from htatui.analysis.model import callstack
from htatui.analysis.perf.peaks import MAX_TFLOPS
from htatui.analysis.perf.table import device_of
from htatui.trace.counter_args import PROFILER_RANGE_CAT, CounterArgsError, read_counter_args
from htatui.trace.kineto import KERNEL_LAUNCH_APIS
from htatui.trace.model import TraceSet
from htatui.trace.plausible import CLOCK_RESOLUTION_US, dropped_note

SASS_FLOP_COUNTERS: dict[str, tuple[str, int]] = {
    f"smsp__sass_thread_inst_executed_op_{prefix}{op}_pred_on.sum": (precision, 2 if op == "fma" else 1)
    for prefix, precision in (("h", "fp16"), ("f", "fp32"), ("d", "fp64"))
    for op in ("fma", "mul", "add")
}
"""Each SASS instruction counter that counts floating-point work: its precision and FLOPs per
thread instruction (an FMA is a multiply and an add)."""

PRECISIONS = ("fp16", "fp32", "fp64")

_FLOPS = (
    ColumnSpec("flop", pl.Float64(), "FLOPs derived from the counters (an FMA counts two)", label="FLOP"),
    ColumnSpec("tflop_per_s", pl.Float64(), "flop over dur_us", "key", unit="TFLOP/s", label="TFLOP/s"),
    *(
        ColumnSpec(f"flop_{precision}", pl.Float64(), f"the {precision} part of flop", "low", label=f"{precision} FLOP")
        for precision in PRECISIONS
    ),
)
_COUNTER = ColumnSpec("*", pl.Int64(), "a CUPTI counter as recorded, under its metric name", "low")
KERNEL_SPEC = TableColumns(
    RANK,
    ColumnSpec("kernel", pl.Utf8(), "the counted kernel's name", "id"),
    ColumnSpec("top_level_op", pl.Utf8(), "the outermost cpu_op that launched it", "low"),
    ColumnSpec("bottom_level_op", pl.Utf8(), "the innermost cpu_op that launched it"),
    ColumnSpec("op_stack", pl.Utf8(), "the enclosing cpu_ops, outermost first, joined by ' > '", "low"),
    ColumnSpec("dur_us", pl.Float64(), "the profiler range's length", "key"),
    *_FLOPS,
    ColumnSpec("ts_us", pl.Float64(), "the range's start", "low"),
    ColumnSpec("index", pl.Int64(), "the range's position in the trace file", "low"),
    ColumnSpec("launch_index", pl.Int64(), "the paired launch's position in the trace file", "low"),
    _COUNTER,
)
KERNEL_COLUMNS = KERNEL_SPEC.schema
"""The fixed columns of the per-kernel table; each counter recorded follows as its own column,
under its metric name. `dur_us` is the profiler range's length; `index`/`launch_index` the file
positions of the range and of the launch paired with it; `op_stack` the enclosing cpu_ops,
outermost first, joined by ' > '."""

OP_SPEC = TableColumns(
    RANK,
    ColumnSpec("op", pl.Utf8(), "the innermost cpu_op of the counted kernels", "id"),
    ColumnSpec("kernels", pl.Int64(), "kernels counted under it"),
    ColumnSpec("dur_us", pl.Float64(), "Σ of their ranges' lengths", "key"),
    *_FLOPS,
    _COUNTER,
)
OP_COLUMNS = OP_SPEC.schema
"""The fixed columns of the per-op table (one row per innermost op); summed counters follow."""

STACK_SEPARATOR = " > "


@dataclass(frozen=True)
class CuptiOptions(CommonOptions):
    """CUPTI counter knobs (none beyond the common ones)."""


@dataclass(frozen=True)
class _Counted:
    frame: pl.DataFrame
    counters: tuple[str, ...]
    message: str | None


NO_RANGES = "no cuda_profiler_range events (CUPTI range profiler)"
"""Why a rank has no row: it recorded no CUPTI counter ranges."""


def compute(traces: TraceSet, options: CuptiOptions) -> NotedTable:
    """One row per counted kernel: its name, the op stack that launched it, derived FLOPs and
    rate, and every counter as recorded."""
    counted = _counted(traces, options)
    return NotedTable(counted.frame, counted.message)


def by_op(traces: TraceSet, options: CuptiOptions) -> NotedTable:
    """Per rank and innermost op: kernels counted, range time, FLOPs and rate, counters summed."""
    counted = _counted(traces, options)
    schema = {**OP_COLUMNS, **{name: counted.frame.schema[name] for name in counted.counters}}
    if counted.frame.height == 0:
        return NotedTable(pl.DataFrame(schema=schema), counted.message)
    summed = ["dur_us", "flop", *(f"flop_{p}" for p in PRECISIONS), *counted.counters]
    table = (
        counted.frame.with_columns(op=pl.col("bottom_level_op"))
        .group_by("rank", "op")
        .agg(
            # A sum over no values is null, not 0: a counter nobody recorded stays unknown.
            *[pl.when(pl.col(c).count() > 0).then(pl.col(c).sum()).alias(c) for c in summed],
            kernels=pl.len().cast(pl.Int64),
        )
        .with_columns(tflop_per_s=_tflop_per_s())
    )
    ordered = table.sort(["rank", "flop", "op"], descending=[False, True, False], nulls_last=True)
    return NotedTable(ordered.select([pl.col(n).cast(t) for n, t in schema.items()]), counted.message)


def _tflop_per_s() -> pl.Expr:
    # No rate over a range the clock cannot tell from nothing (plausible.measurable).
    return pl.when(pl.col("dur_us") > CLOCK_RESOLUTION_US).then(pl.col("flop") / pl.col("dur_us") / 1e6)


def _counted(traces: TraceSet, options: CuptiOptions) -> _Counted:
    """The per-kernel rows, made once per job and scope for both tables."""
    return memoised(traces, ("cupti.counted", *selection_key(traces, options)), lambda: _count(traces, options))


def _count(traces: TraceSet, options: CuptiOptions) -> _Counted:
    # Most traces have no counted kernels: asked of two columns first, so the whole frame in
    # scope (every column copied) is made only when there are some.
    kinds = prepare(traces, options, columns=("cat", "ph")).events
    if kinds.filter((pl.col("cat") == PROFILER_RANGE_CAT) & (pl.col("ph") == "X")).height == 0:
        return _Counted(pl.DataFrame(schema=KERNEL_COLUMNS), (), NO_RANGES)
    del kinds
    prepared = prepare(traces, options)
    frames: list[pl.DataFrame] = []
    notes: list[str] = []
    for rank in sorted(prepared.steps):
        events = prepared.events.filter(pl.col("rank") == rank)
        ranges = events.filter((pl.col("cat") == PROFILER_RANGE_CAT) & (pl.col("ph") == "X"))
        if ranges.height == 0:
            continue
        launches = _launches(events, options.hta_compat)
        collapsed = _collapsed_starts(ranges)
        if launches.height != ranges.height:
            left_out = f"rank {rank} left out: {ranges.height} counted kernels but {launches.height} kernel launches"
            notes.append(left_out + (f" ({collapsed})" if collapsed else ""))
            continue
        path = traces.ranks[rank].path
        if collapsed:
            notes.append(f"rank {rank}: {collapsed}, paired with the launches in file order")
        try:
            counters = read_counter_args(path)
        except CounterArgsError as exc:
            notes.append(str(exc))
            continue
        dropped = dropped_note(f"rank {rank} ({path})", counters.dropped)
        short = ranges.filter(pl.col("dur") <= CLOCK_RESOLUTION_US).height
        notes.extend([dropped] if dropped else [])
        if short:
            notes.append(
                f"rank {rank}: {short:,} ranges of {CLOCK_RESOLUTION_US * 1000:g} ns or less "
                "(the clock's resolution): no rate"
            )
        rows = _rank_rows(events, ranges, launches, counters.frame, options.hta_compat)
        # No counter can report more FLOPs than the device's units can do in the range.
        roof = _highest_roof(traces, rank, options.scope.rules)
        beyond = rows.filter(pl.col("tflop_per_s") > roof).height
        if beyond:
            notes.append(
                f"rank {rank}: {beyond:,} kernels' counters give more than {roof:g} TFLOP/s "
                f"({'the device' if roof < MAX_TFLOPS else 'any device'}'s highest roof): no rate"
            )
            rows = rows.with_columns(tflop_per_s=pl.when(pl.col("tflop_per_s") <= roof).then(pl.col("tflop_per_s")))
        frames.append(rows)
    if not frames:
        empty = pl.DataFrame(schema=KERNEL_COLUMNS)
        return _Counted(empty, (), "; ".join(notes) or NO_RANGES)
    table = pl.concat(frames, how="diagonal_relaxed")
    counter_names = tuple(c for c in table.columns if c not in KERNEL_COLUMNS)
    ordered = table.select(*KERNEL_COLUMNS, *counter_names).sort("rank", "ts_us", "index")
    return _Counted(ordered, counter_names, "; ".join(notes) or None)


def _highest_roof(traces: TraceSet, rank: int, rules: Rules) -> float:
    """The highest TFLOP/s of the rank's device (matrix or vector, any dtype), or MAX_TFLOPS."""
    device = device_of(traces, rank, rules)
    figures = [*device.matrix.values(), *device.vector.values()] if device is not None else []
    return max(figures, default=MAX_TFLOPS)


def _collapsed_starts(ranges: pl.DataFrame) -> str | None:
    """Words for ranges that share start times (a profiler that wrote one `ts` for all of them):
    their order, and so the pairing by position, is the file's, not the clock's."""
    distinct = ranges["ts"].n_unique()
    if distinct == ranges.height:
        return None
    if distinct == 1:
        return f"the {ranges.height} ranges collapsed to one ts ({ranges['ts'][0]:,.3f} µs)"
    return f"the {ranges.height} ranges start at only {distinct} distinct ts"


def _launches(events: pl.DataFrame, hta_compat: bool) -> pl.DataFrame:
    """The rank's kernel launches, by start. Compat: HTA's `cuda_runtime` rows whose name starts
    with cudaLaunchKernel; default: every kernel launch API (runtime or driver)."""
    name = pl.col("name").cast(pl.Utf8)
    if hta_compat:
        chosen = pl.col("cat").cast(pl.Utf8).str.starts_with("cuda_runtime") & name.str.starts_with(
            hta.CUPTI_LAUNCH_PREFIX
        )
    else:
        chosen = name.is_in(KERNEL_LAUNCH_APIS) & pl.col("cat").cast(pl.Utf8).is_in(["cuda_runtime", "cuda_driver"])
    return events.filter(chosen & (pl.col("ph") == "X")).sort("ts", "index")


def _rank_rows(
    events: pl.DataFrame, ranges: pl.DataFrame, launches: pl.DataFrame, counters: pl.DataFrame, hta_compat: bool
) -> pl.DataFrame:
    ranges = ranges.sort("ts", "index")
    stacks = _op_stacks(events, launches["index"], hta_compat)
    rows = pl.DataFrame(
        {
            "rank": ranges["rank"],
            "kernel": ranges["name"].cast(pl.Utf8),
            "op_stack_list": stacks,
            "dur_us": ranges["dur"],
            "ts_us": ranges["ts"],
            "index": ranges["index"],
            "launch_index": launches["index"],
        }
    ).with_columns(
        top_level_op=pl.col("op_stack_list").list.first(),
        bottom_level_op=pl.col("op_stack_list").list.last(),
        op_stack=pl.col("op_stack_list").list.join(STACK_SEPARATOR),
    )
    rows = rows.join(counters, on="index", how="left", maintain_order="left")
    rows = rows.drop("op_stack_list").with_columns(_flop_columns(counters.columns))
    return rows.with_columns(tflop_per_s=_tflop_per_s())


def _flop_columns(columns: list[str]) -> list[pl.Expr]:
    """flop_fp16/32/64 and flop from the SASS counters present (null when none of a precision is)."""
    present = [name for name in SASS_FLOP_COUNTERS if name in columns]

    # A kernel none of whose FLOP counters is known (all missing or dropped) has unknown FLOPs, not 0.
    known = pl.any_horizontal([pl.col(n).is_not_null() for n in present]) if present else pl.lit(False)

    def flops(names: list[str], alias: str) -> pl.Expr:
        if not names:
            return pl.lit(None, pl.Float64).alias(alias)
        summed = pl.sum_horizontal([pl.col(n).cast(pl.Float64) * SASS_FLOP_COUNTERS[n][1] for n in names])
        return pl.when(known).then(summed).alias(alias)

    by_precision = [
        flops([n for n in present if SASS_FLOP_COUNTERS[n][0] == precision], f"flop_{precision}")
        for precision in PRECISIONS
    ]
    return [*by_precision, flops(present, "flop")]


def _op_stacks(events: pl.DataFrame, launch_index: pl.Series, hta_compat: bool) -> pl.Series:
    """For each launch (by file position), the names of its enclosing cpu_ops, outermost first;
    a backward thread's stack continues on the main thread (HTA's CallGraph links them)."""
    stack = callstack.build(events, hta_compat=hta_compat, link_backward=True)
    pos_of = dict(zip(stack["index"].to_list(), stack["pos"].to_list(), strict=True))
    parent = stack["parent"].to_list()
    link = stack["link"].to_list()
    is_op = (stack["cat"].cast(pl.Utf8) == "cpu_op").to_list()
    names = stack["name"].cast(pl.Utf8).to_list()
    out: list[list[str]] = []
    for index in launch_index.to_list():
        ops: list[str] = []
        at = pos_of.get(index)
        while at is not None:
            up = parent[at] if parent[at] is not None else link[at]
            if up is not None and is_op[up]:
                ops.append(names[up])
            at = up
        out.append(ops[::-1])
    return pl.Series("op_stack_list", out, dtype=pl.List(pl.Utf8))
