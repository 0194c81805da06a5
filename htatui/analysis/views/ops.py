"""The operator table of `prof.key_averages().table(...)`, from the trace (no HTA counterpart).

Per rank and row name, the rows key_averages lists for the host: operators, user annotations
(`ProfilerStep#N` listed as `ProfilerStep*`), runtime and driver calls and Triton launchers,
each with its `kind`; optionally the device rows too (kernels, copies, memsets, GPU
annotations). Counts and times follow the profiler's own event tree (`op_events`): self CPU =
duration minus the children's, GPU self = the work it launched itself, GPU total = its subtree's.
docs/semantics-ops.md has the rules. Like every view, the table covers the scope's steps;
`--steps all` keeps every event, as key_averages does. HTA-compatible mode applies HTA's ns
rounding and last-step filter before the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import rank_by_rank
from htatui.analysis.model import graph_replay, op_events
from htatui.analysis.model.job_tree import tree
from htatui.analysis.model.op_events import DEVICE_KINDS, HOST_KINDS
from htatui.analysis.perf import frames as perf
from htatui.analysis.perf import roofline
from htatui.analysis.perf import table as perf_table
from htatui.analysis.perf.table import (
    CALL_FIGURES,
    MODEL_COLUMNS,
    MODEL_SPEC,
    NO_CALL_FIGURES,
    TYPES_COLUMN,
    WORK_KINDS,
)
from htatui.trace.kineto import MEMORY_EVENT
from htatui.trace.model import TraceSet
from htatui.trace.op_args import CALL_ARGS_SCHEMA, read_call_args

OP_KIND = ColumnSpec("kind", pl.Utf8(), "op, annotation, runtime, driver, kernel-launcher, or a device row's kind")
BASE_SPEC = TableColumns(
    RANK,
    ColumnSpec("name", pl.Utf8(), "the row's name (ProfilerStep#N listed as ProfilerStep*)", "id"),
    OP_KIND,
    ColumnSpec("input_dims", pl.Utf8(), "--group-by shape: the calls' input shapes as recorded", sentence=True),
    ColumnSpec(TYPES_COLUMN, pl.Utf8(), "--group-by shape --flops: the inputs' dtypes, short (bf16,bf16,-)", "low"),
    ColumnSpec("count", pl.Int64(), "calls of the row's name (and shapes)"),
    ColumnSpec("cpu_total_us", pl.Float64(), "Σ of the calls' durations on the CPU", "key"),
    ColumnSpec("cpu_self_us", pl.Float64(), "cpu_total_us minus the time in child events"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ of the GPU work the calls launched themselves", "key"),
    ColumnSpec("gpu_total_us", pl.Float64(), "Σ of the GPU work launched by the calls and everything beneath them"),
)
COLUMNS = {name: dtype for name, dtype in BASE_SPEC.schema.items() if name not in ("input_dims", TYPES_COLUMN)}


@dataclass(frozen=True)
class OpsOptions(CommonOptions):
    """Operator-table knobs."""

    sort_by: str = knob("gpu_self_us", flag="--sort-by", help="ops: column to sort by, descending", kind="text")
    """Any column of the table; rows are sorted within each rank."""
    descending: bool = True
    top_k: int | None = knob(None, flag="--top", help="how many names (ops: per rank) to keep", kind="int")
    """Keep the first `top_k` rows of each rank; None = all (`--top`)."""
    kinds: str = knob("host", flag="--kinds", help="ops: host, all, or e.g. op,annotation,kernel", kind="text")
    """Which rows: "host" (what key_averages lists for the CPU), "all" (device rows too), or
    a comma list of kinds (op, annotation, runtime, driver, kernel-launcher, kernel, memcpy,
    memset, gpu-annotation)."""
    group_by: str = knob("name", flag="--group-by", help="ops: name or shape (needs record_shapes)", kind="text")
    """"name" (key_averages()) or "shape" (key_averages(group_by_input_shape=True)): one row per
    (name, kind, input shapes), with an `input_dims` column; needs a trace recorded with
    record_shapes=True (else every row's shapes are "[]")."""
    flops: bool = knob(False, flag="--flops", help="ops: add flops, TFLOP/s and GB/s columns", kind="switch")
    """Add `flop_count` (the profiler's with_flops estimate, summed), `tflop_per_s` (that over the
    row's GPU total time) and `gb_per_s` (bytes over time, for copies and memsets). With
    group_by="shape", also the performance model's columns (`MODEL_COLUMNS`): FLOPs and bytes per
    call from the input shapes, and where the device is known the roofline
    (docs/semantics-perf-model.md)."""


GROUPS = ("name", "shape")
SHAPE_COLUMN = "input_dims"
RATE_SPEC = TableColumns(
    ColumnSpec(
        "flop_count", pl.Float64(), "--flops: Σ of the calls' FLOPs (the profiler's, or the model's)", label="FLOP"
    ),
    ColumnSpec("tflop_per_s", pl.Float64(), "--flops: FLOPs over the GPU time", "key", unit="TFLOP/s", label="TFLOP/s"),
    ColumnSpec("gb_per_s", pl.Float64(), "--flops: bytes over time, for copies and memsets", unit="GB/s", label="GB/s"),
)
RATE_COLUMNS = RATE_SPEC.schema
SPEC = BASE_SPEC + RATE_SPEC + MODEL_SPEC
"""Every column the ops table can have; `columns(options)` picks those the options ask for."""


def modelled(options: OpsOptions) -> bool:
    """Whether the table carries the performance model's columns."""
    return options.flops and options.group_by == "shape"


def columns(options: OpsOptions) -> dict[str, pl.DataType]:
    """The table's columns for these options: COLUMNS, `input_dims` after `kind` when grouped by
    shape, the rate columns at the end with `flops`, then the model's columns when both."""
    names = list(COLUMNS)
    out = dict(COLUMNS)
    if options.group_by == "shape":
        names.insert(names.index("kind") + 1, SHAPE_COLUMN)
        out[SHAPE_COLUMN] = pl.Utf8()
    if modelled(options):
        names.insert(names.index(SHAPE_COLUMN) + 1, TYPES_COLUMN)
        out[TYPES_COLUMN] = pl.Utf8()
    if options.flops:
        names.extend(RATE_COLUMNS)
        out |= RATE_COLUMNS
    if modelled(options):
        names.extend(MODEL_COLUMNS)
        out |= MODEL_COLUMNS
    return {name: out[name] for name in names}


def chosen_kinds(kinds: str) -> tuple[str, ...]:
    """The kinds a `kinds` option names; ValueError for an unknown one."""
    known = (*HOST_KINDS, *DEVICE_KINDS)
    chosen: list[str] = []
    for part in (p.strip() for p in kinds.split(",")):
        if part == "host":
            chosen.extend(HOST_KINDS)
        elif part == "all":
            chosen.extend(known)
        elif part in known:
            chosen.append(part)
        elif part:
            raise ValueError(f"kinds must be host, all or some of {', '.join(known)}; got {part!r}")
    return tuple(dict.fromkeys(chosen)) or HOST_KINDS


def instances(traces: TraceSet, options: CommonOptions) -> pl.DataFrame:
    """One row per host event of the profiler's tree: `op_events.EVENT_SCHEMA`."""
    return tree(traces, options).events


def main(traces: TraceSet, options: OpsOptions) -> NotedTable:
    """Per rank and operator: calls, CPU time and GPU time (by input shape with --group-by shape;
    rates with --flops; the roofline with both). With the roofline, a sentence gives each rank's
    coverage (the share of GPU time the model covers) and any op arguments dropped as no GPU can
    produce them; the table is `compute`'s."""
    made = _table(traces, tree(traces, options), options)
    return NotedTable(made.frame, made.message)


def compute(traces: TraceSet, options: OpsOptions) -> pl.DataFrame:
    """rank, name, kind, count, cpu_total_us, cpu_self_us, gpu_self_us, gpu_total_us per (rank,
    name, kind) (and input shapes with group_by="shape"; rates with flops=True), sorted within
    each rank by `sort_by` (ties by name, kind), first `top_k` per rank."""
    return table(traces, tree(traces, options), options)


def table(traces: TraceSet, built: op_events.OpEvents, options: OpsOptions) -> pl.DataFrame:
    """`compute` from an already built tree (`traces` is read again only for shapes/flops)."""
    return _table(traces, built, options).frame


def _table(traces: TraceSet, built: op_events.OpEvents, options: OpsOptions) -> NotedTable:
    schema = columns(options)
    if options.group_by not in GROUPS:
        raise ValueError(f"group_by must be one of {', '.join(GROUPS)}; got {options.group_by!r}")
    if options.sort_by not in schema:
        raise ValueError(f"sort_by must be one of {', '.join(schema)}; got {options.sort_by!r}")
    kinds = chosen_kinds(options.kinds)
    # Without the performance model only these columns are read: the filter copies them alone.
    read = ("rank", "index", "name", "kind", "cpu_total_us", "cpu_self_us", "gpu_self_us", "gpu_total_us")
    events = built.events if modelled(options) else built.events.select(read)
    # Names stay codes through the grouping (host rows and device rows alike): the table's
    # rows are made text at the end.
    # The model reads every op (its coverage is of all the GPU time), whichever kinds are listed.
    read_kinds = (*kinds, *perf_table.MODELLED_KINDS) if modelled(options) else kinds
    host = events.filter(pl.col("kind").is_in(read_kinds))
    notes: list[str] = []
    if options.group_by == "shape" or options.flops:
        args = _op_args(traces, host)
        host = host.join(args, on=["rank", "index"], how="left")
        if modelled(options):
            for rank in args["rank"].unique().sort().to_list():
                dropped = perf_table.dropped_args_note(traces.ranks[rank].path, args.filter(pl.col("rank") == rank))
                notes.extend([dropped] if dropped else [])
    else:
        host = host.with_columns(input_dims=pl.lit(None, pl.Utf8), flops=pl.lit(None, pl.Float64))
    if modelled(options):
        host = perf_table.with_call_figures(traces, built.events, built.work, host)
        for rank in built.work["rank"].unique().sort().to_list():
            covered = perf_table.coverage_note(
                rank,
                host.filter(pl.col("rank") == rank),
                built.work.filter(pl.col("rank") == rank),
                options.scope.rules,
            )
            notes.extend([covered] if covered else [])
        host = host.filter(pl.col("kind").is_in(kinds))
    else:
        host = host.with_columns(NO_CALL_FIGURES)
    host = host.select(
        "rank",
        "name",
        "kind",
        "input_dims",
        "cpu_total_us",
        "cpu_self_us",
        "gpu_self_us",
        "gpu_total_us",
        "flops",
        *CALL_FIGURES,
        bytes=pl.lit(None, pl.Int64),
    )
    device = built.work.filter(pl.col("kind").is_in(kinds)).select(
        "rank",
        "name",
        "kind",
        input_dims=pl.lit(None, pl.Utf8),
        cpu_total_us=pl.lit(0.0),
        cpu_self_us=pl.lit(0.0),
        gpu_self_us="dur",
        gpu_total_us="dur",
        flops=pl.lit(None, pl.Float64),
        **{name: pl.lit(None, dtype) for name, dtype in CALL_FIGURES.items()},
        bytes="bytes",
    )
    memory = built.loose_memory.filter(pl.lit(op_events.MEMORY_KIND in kinds)).select(
        "rank",
        name=pl.lit(MEMORY_EVENT),
        kind=pl.lit(op_events.MEMORY_KIND),
        input_dims=pl.lit(None, pl.Utf8),
        count=pl.col("count"),
    )
    rows = pl.concat([host, device], how="vertical").with_columns(pl.col("input_dims").fill_null("[]"))
    if rows.height == 0 and memory.height == 0:
        return NotedTable(pl.DataFrame(schema=schema), "; ".join(notes) or None)
    keys = ["rank", "name", "kind"] + ([SHAPE_COLUMN] if options.group_by == "shape" else [])
    keys += [TYPES_COLUMN] if modelled(options) else []
    table = rows.group_by(keys, maintain_order=True).agg(
        *(roofline.row_figures() if modelled(options) else []),
        count=pl.len(),
        cpu_total_us=pl.col("cpu_total_us").sum(),
        cpu_self_us=pl.col("cpu_self_us").sum(),
        gpu_self_us=pl.col("gpu_self_us").sum(),
        gpu_total_us=pl.col("gpu_total_us").sum(),
        # A row's flops are known when its calls carry them (null sums stay null).
        flop_count=pl.when(pl.col("flops").is_not_null().any()).then(pl.col("flops").sum()),
        bytes=pl.when(pl.col("bytes").is_not_null().any()).then(pl.col("bytes").sum()),
    )
    table = table.with_columns(
        # flops / µs = Mflop/s; ÷ 1e6 → TFLOP/s. bytes / µs = MB/s; ÷ 1e3 → GB/s.
        tflop_per_s=pl.when((pl.col("flop_count") > 0) & (pl.col("gpu_total_us") > 0)).then(
            pl.col("flop_count") / pl.col("gpu_total_us") / 1e6
        ),
        gb_per_s=pl.when((pl.col("bytes") > 0) & (pl.col("gpu_total_us") > 0)).then(
            pl.col("bytes") / pl.col("gpu_total_us") / 1e3
        ),
    )
    if modelled(options):
        table = perf_table.model_columns(traces, table, options.scope.rules)
    if memory.height:
        # The profiler's "[memory]" row: its loose instants, no time, no shapes.
        expanded = memory.select(
            "rank", "name", "kind", input_dims=pl.lit("[]"), count=pl.col("count").cast(pl.Int64)
        ).with_columns(
            cpu_total_us=pl.lit(0.0),
            cpu_self_us=pl.lit(0.0),
            gpu_self_us=pl.lit(0.0),
            gpu_total_us=pl.lit(0.0),
            flop_count=pl.lit(None, pl.Float64),
            bytes=pl.lit(None, pl.Int64),
            tflop_per_s=pl.lit(None, pl.Float64),
            gb_per_s=pl.lit(None, pl.Float64),
        )
        if modelled(options):
            expanded = expanded.with_columns(
                [pl.lit(None, dtype).alias(name) for name, dtype in MODEL_COLUMNS.items()]
            ).with_columns(model=pl.lit(perf.NO_MODEL), category=pl.lit("other"))
        if TYPES_COLUMN not in expanded.columns and TYPES_COLUMN in table.columns:
            expanded = expanded.with_columns(pl.lit(None, pl.Utf8).alias(TYPES_COLUMN))
        table = pl.concat([table, expanded.select(table.columns)], how="vertical_relaxed")
    ordered = _order(table, options).select([pl.col(name).cast(dtype) for name, dtype in schema.items()])
    return NotedTable(ordered, "; ".join(notes) or None)


def _op_args(traces: TraceSet, host: pl.DataFrame) -> pl.DataFrame:
    """Input shapes and flops of the host events of `host`'s ranks, read from their files (and
    of a replayed graph's ops, from its capture trace)."""
    frames = []
    for rank in host["rank"].unique().sort().to_list():
        args = read_call_args(traces.ranks[rank].path)
        frames.append(args.select(pl.lit(rank, pl.Int32).alias("rank"), *_ARG_COLUMNS))
        for k, capture in graph_replay.captures_of(traces, rank):
            shifted = read_call_args(capture.path).with_columns(
                index=pl.col("index") + (k + 1) * graph_replay.CAPTURE_INDEX_STEP
            )
            frames.append(shifted.select(pl.lit(rank, pl.Int32).alias("rank"), *_ARG_COLUMNS))
    if not frames:
        return pl.DataFrame(schema={"rank": pl.Int32(), **{c: CALL_ARGS_SCHEMA[c] for c in _ARG_COLUMNS}})
    return pl.concat(frames, how="vertical")


_ARG_COLUMNS = ("index", "input_dims", "flops", "dims_json", "types_json", "strides_json", "concrete_json", "dropped")


def _order(table: pl.DataFrame, options: OpsOptions) -> pl.DataFrame:
    ties = [c for c in ("name", "kind", SHAPE_COLUMN) if c != options.sort_by and c in table.columns]
    keys = ["rank", options.sort_by, *ties]
    order = [False, options.descending] + [False] * len(ties)
    if options.sort_by == "rank":
        keys, order = ["rank", *ties], [options.descending] + [False] * len(ties)
    table = table.sort(keys, descending=order, nulls_last=True)
    if options.top_k is not None:
        table = table.filter(pl.int_range(pl.len()).over("rank") < max(options.top_k, 0))
    return table


TOP_SPEC = TableColumns(
    ColumnSpec("name", pl.Utf8(), "an op that launched GPU work itself", "id"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ over the chosen ranks of the GPU work it launched itself", "key"),
)
TOP_COLUMNS = TOP_SPEC.schema


def top_by_gpu_self(table: pl.DataFrame, n: int = 10) -> pl.DataFrame:
    """name, gpu_self_us: the `n` rows of an ops table with the most self GPU time, summed over
    its ranks (names that launched no GPU work are left out; ties by name)."""
    if table.height == 0:
        return pl.DataFrame(schema=TOP_COLUMNS)
    top = (
        table.group_by("name")
        .agg(pl.col("gpu_self_us").sum())
        .filter(pl.col("gpu_self_us") > 0)
        .sort(["gpu_self_us", "name"], descending=[True, False])
        .head(n)
    )
    return top.select([pl.col(name).cast(dtype) for name, dtype in TOP_COLUMNS.items()])


def top(traces: TraceSet, options: OpsOptions) -> pl.DataFrame:
    """The Ops screen's bars: `top_by_gpu_self` of the ops table over the chosen ranks (over a
    dataset made a rank at a time, so the ranks' op trees are not held together)."""
    return top_by_gpu_self(rank_by_rank(traces, options, compute))


def categories(traces: TraceSet, options: OpsOptions) -> pl.DataFrame:
    """rank, category, count, gpu_time_us, gpu_time_pct: where each rank's device time goes by op
    family (GEMM, attention, conv, elementwise, norm, reduce, other; `perf.category_summary`).
    Categories come from op names alone, so a trace without shapes still gets this table."""
    built = tree(traces, options)
    work = built.work.filter(pl.col("kind").is_in(WORK_KINDS))
    return perf.category_summary(built.events, work)
