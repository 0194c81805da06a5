"""Across ranks: the rank × step matrix, stragglers on every backend, and the collectives.

Where ranks meet ("meeting points") are the collective calls: communication kernels when the
job has any (NCCL/RCCL/DeepEP…, by the communication rules), else the collectives' CPU ops
(`gloo:*`, `nccl:*`, `mpi:*`… record_function ranges), else the `c10d::*` ops. A call is
matched across ranks by (process group, collective kind, step, k): the k-th call of that kind
in that group inside ProfilerStep N on each rank. On the aligned time base, a rank *arrives*
at a call when its op starts; each rank waits `last arrival − own arrival` for it, and the
rank that arrived last delays the others by the median of their waits.

The straggler's *cause* is the phase (a top-level `record_function` range inside ProfilerStep,
GPU compute, or one kernel name) that is longer on it than the median of the other ranks, by
the most, over the steps where it was the last to arrive.

Corrected mode only: `stragglers` with `hta_compat` returns HTA 0.6.1's score table
(`steps.stragglers`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import polars as pl

from htatui.analysis.core.intervals import busy_time, merge_intervals
from htatui.analysis.core.kernel_types import COMMUNICATION, COMPUTATION, typed_gpu_events
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.names import shorten_name
from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.prepare import Prepared, chosen_ranks, each_rank, prepare
from htatui.analysis.views import steps as steps_view
from htatui.trace.kineto import C10D_COLLECTIVE, CPU_COLLECTIVE, PROFILER_STEP
from htatui.trace.model import TraceSet

KERNELS = "communication kernels"
CPU_OPS = "collective CPU ops"
C10D_OPS = "c10d CPU ops"


MATRIX_BASE: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "step": pl.Int64(),
    "step_us": pl.Float64(),
    "gpu_busy_us": pl.Float64(),
    "gpu_idle_us": pl.Float64(),
    "comm_us": pl.Float64(),
    "wait_us": pl.Float64(),
}
"""The fixed columns of the rank × step matrix; one `<phase>_us` column per CPU phase follows."""

STRAGGLER_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "is_straggler": pl.Boolean(),
    "steps": pl.Utf8(),
    "delay_us": pl.Float64(),
    "delay_pct": pl.Float64(),
    "calls_last": pl.Int64(),
    "cause": pl.Utf8(),
    "cause_phase": pl.Utf8(),
    "cause_excess_us": pl.Float64(),
    "cause_pct": pl.Float64(),
}
"""`is_straggler`: the rank held up at least one step most; `delay_pct`: its share of the job's
delay; `cause_pct`: the share of its delay its cause phase explains (at most 100)."""

VIEW_STRAGGLER_COLUMNS: dict[str, pl.DataType] = {**STRAGGLER_COLUMNS, "hta_late_starts": pl.Int64()}
"""The `stragglers` view: the analysis's columns and HTA's late-start score as one more signal."""

METHOD = "who the others waited for at collectives"
"""htatui's straggler method, named with every answer."""

EXPLAINS = 50.0
"""A phase is the cause when its excess explains at least this % of the delay ("most of it")."""

COLLECTIVE_COLUMNS: dict[str, pl.DataType] = {
    "pg": pl.Utf8(),
    "kind": pl.Utf8(),
    "ranks": pl.Int64(),
    "group_size": pl.Int64(),
    "calls": pl.Int64(),
    "msg_bytes": pl.Float64(),
    "total_bytes": pl.Float64(),
    "dur_us": pl.Float64(),
    "total_dur_us": pl.Float64(),
    "algbw_gbps": pl.Float64(),
    "busbw_gbps": pl.Float64(),
    "skew_mean_us": pl.Float64(),
    "skew_max_us": pl.Float64(),
}

STEP_STRAGGLER_COLUMNS: dict[str, pl.DataType] = {
    "step": pl.Int64(),
    "rank": pl.Int32(),
    "delay_us": pl.Float64(),
    "cause": pl.Utf8(),
    "cause_phase": pl.Utf8(),
    "cause_excess_us": pl.Float64(),
    "cause_pct": pl.Float64(),
}

PHASE_COLUMNS: dict[str, pl.DataType] = {
    "phase": pl.Utf8(),
    "rank_us": pl.Float64(),
    "others_median_us": pl.Float64(),
    "excess_us": pl.Float64(),
}

GPU_COMPUTE = "GPU compute"
OTHER_CPU_OPS = "other CPU ops"
MAX_CPU_PHASES = 12
"""CPU phases shown by name (by total time); the rest are summed as OTHER_CPU_OPS."""

DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "int": 4,
    "int32": 4,
    "uint32": 4,
    "double": 8,
    "float64": 8,
    "long": 8,
    "int64": 8,
    "uint64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "short": 2,
    "int16": 2,
    "uint16": 2,
    "byte": 1,
    "char": 1,
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "complexfloat": 8,
    "complexdouble": 16,
}
"""Bytes per element of the `dtype` arg of NCCL kernels (PyTorch's ScalarType names, any case)."""

# (substring of the lower-cased name without '_', kind): first match wins, so longer names first.
_KINDS = (
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("broadcast", "broadcast"),
    ("sendrecv", "send/recv"),
    ("send", "send/recv"),
    ("recv", "send/recv"),
    ("barrier", "barrier"),
    ("reduce", "reduce"),
    ("gather", "gather"),
    ("scatter", "scatter"),
)


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for a collective over n ranks."""
    if n <= 0:
        return float("nan")
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def collective_kind(name: str) -> str:
    """all_reduce, all_gather, … from a kernel or op name ('nccl:_all_gather_base', 'ncclDevKernel_AllReduce_…')."""
    text = re.sub(r"^(gloo|nccl|mpi|ucc|xccl|hccl|mccl|c10d):+", "", name, flags=re.IGNORECASE)
    squashed = text.lower().replace("_", "")
    for needle, kind in _KINDS:
        if needle in squashed:
            return kind
    return shorten_name(text)


@dataclass(frozen=True)
class RanksOptions(steps_view.StragglerOptions):
    """The Ranks views' knobs: whose phases to compare, plus HTA's straggler knobs (its late starts)."""

    straggler: int | None = knob(
        None,
        flag="--straggler",
        help="stragglers --phases: the rank whose phases to compare (default: the top straggler)",
        kind="int",
    )


@dataclass(frozen=True)
class RanksResult:
    """Everything the Ranks screen shows, and why a part is empty."""

    matrix: pl.DataFrame
    phases: pl.DataFrame
    """rank, step, phase, dur_us: CPU phases, GPU compute and kernel names (the cause candidates)."""
    calls: pl.DataFrame
    """rank, pg, kind, step, seq, ts, end, dur_us, msg_bytes, group_size, arrival_last_us, wait_us,
    exposed_wait_us."""
    stragglers: pl.DataFrame
    step_stragglers: pl.DataFrame
    """step, rank, delay_us, cause…: per step, the rank the others waited for most."""
    collectives: pl.DataFrame
    source: str | None
    message: str | None
    rank_count: int

    @property
    def frame(self) -> pl.DataFrame:
        return self.stragglers


# ---- meeting points --------------------------------------------------------------------------


def _dtype_bytes() -> pl.Expr:
    return (
        pl.col("msg_dtype")
        .cast(pl.Utf8)
        .str.to_lowercase()
        .str.replace(r"^(torch\.|at::)", "")
        .replace_strict(DTYPE_BYTES, default=None, return_dtype=pl.Int64)
    )


def _message_bytes() -> pl.Expr:
    """max(In, Out msg nelems) × dtype size (the total an all_gather/reduce_scatter moves), else In msg size."""
    nelems = pl.max_horizontal(pl.col("in_msg_nelems"), pl.col("out_msg_nelems"))
    return (nelems * _dtype_bytes()).cast(pl.Float64).fill_null(pl.col("in_msg_size").cast(pl.Float64))


def _kinds(names: pl.Series) -> dict[str, str]:
    return {name: collective_kind(name) for name in names.unique().drop_nulls().to_list()}


def meeting_points(events: pl.DataFrame, hta_compat: bool) -> tuple[pl.DataFrame, str | None]:
    """Every rank's collective calls (rank, pg, kind, step, seq, ts, end, dur_us, msg_bytes,
    group_size) from the best source the job has, and that source's name."""
    gpu = typed_gpu_events(
        events,
        hta_compat,
        "rank",
        "ts",
        "end",
        "dur",
        "iteration",
        "collective_name",
        "pg_name",
        "group_size",
        "in_msg_nelems",
        "out_msg_nelems",
        "in_msg_size",
        "msg_dtype",
    )
    comm = gpu.filter((pl.col("kind") == COMMUNICATION) & (pl.col("cat") == "kernel"))
    if comm.height:
        rows, source = comm, KERNELS
        label = pl.coalesce(pl.col("collective_name").cast(pl.Utf8), pl.col("name").cast(pl.Utf8))
    else:
        host = events.filter(pl.col("cat").cast(pl.Utf8).is_in(["user_annotation", "cpu_op"]))
        names = host["name"].cast(pl.Utf8).unique()
        cpu_names = names.filter(names.str.contains(CPU_COLLECTIVE))
        source = CPU_OPS
        if cpu_names.len() == 0:
            cpu_names = names.filter(names.str.contains(C10D_COLLECTIVE))
            source = C10D_OPS
        if cpu_names.len() == 0:
            return _empty_calls(), None
        rows = host.filter(pl.col("name").cast(pl.Utf8).is_in(cpu_names.implode()))
        label = pl.col("name").cast(pl.Utf8)
    labelled = rows.with_columns(_label=label)
    kinds = _kinds(labelled["_label"])
    calls = (
        labelled.select(
            "rank",
            pg=pl.col("pg_name").cast(pl.Utf8).fill_null(""),
            kind=pl.col("_label").replace_strict(kinds, default=None, return_dtype=pl.Utf8),
            step=pl.col("iteration"),
            ts="ts",
            end="end",
            dur_us="dur",
            msg_bytes=_message_bytes(),
            group_size="group_size",
        )
        .sort("rank", "ts")
        .with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "pg", "kind", "step"))
    )
    return calls, source


def _empty_calls() -> pl.DataFrame:
    return pl.DataFrame(
        schema={
            "rank": pl.Int32(),
            "pg": pl.Utf8(),
            "kind": pl.Utf8(),
            "step": pl.Int64(),
            "ts": pl.Float64(),
            "end": pl.Float64(),
            "dur_us": pl.Float64(),
            "msg_bytes": pl.Float64(),
            "group_size": pl.Int64(),
            "seq": pl.Int64(),
        }
    )


CALL_KEY = ["pg", "kind", "step", "seq"]


def with_waits(calls: pl.DataFrame) -> pl.DataFrame:
    """Each call's last arrival, how long this rank waited for it, and how many ranks made it."""
    return calls.with_columns(
        arrival_last_us=pl.col("ts").max().over(CALL_KEY),
        call_ranks=pl.len().over(CALL_KEY),
    ).with_columns(wait_us=pl.when(pl.col("call_ranks") > 1).then(pl.col("arrival_last_us") - pl.col("ts")))


def with_exposed_waits(calls: pl.DataFrame, gpu: pl.DataFrame) -> pl.DataFrame:
    """`exposed_wait_us`: the part of each call's wait during which the rank's own GPU did no
    other work (computation, copies, memsets).

    A rank waiting in a collective while its GPU still runs its own kernels loses nothing: with
    DDP's buckets the comm stream waits while backward goes on, and summing raw waits counted
    that time (on fixtures/demo, twice the straggler's real lag).
    """
    work = gpu.filter(pl.col("kind") != COMMUNICATION).select("rank", "ts", "end")
    busy = merge_intervals(work, ["rank"]).sort("rank", "ts")
    parts = []
    for (rank,), rank_calls in calls.with_row_index("_call").group_by(["rank"], maintain_order=True):
        rank_busy = busy.filter(pl.col("rank") == rank)
        starts = rank_calls["ts"].to_numpy()
        ends = rank_calls["arrival_last_us"].fill_null(rank_calls["ts"]).to_numpy()
        covered = _busy_before(rank_busy, ends) - _busy_before(rank_busy, starts)
        parts.append(rank_calls.select("_call", _covered=pl.Series(covered, dtype=pl.Float64)))
    covered = pl.concat(parts) if parts else pl.DataFrame(schema={"_call": pl.UInt32(), "_covered": pl.Float64()})
    return (
        calls.with_row_index("_call")
        .join(covered, on="_call", how="left")
        .with_columns(exposed_wait_us=(pl.col("wait_us") - pl.col("_covered").fill_null(0.0)).clip(lower_bound=0.0))
        .drop("_call", "_covered")
    )


def _busy_before(merged: pl.DataFrame, times: np.ndarray) -> np.ndarray:
    """For each time t, the busy time of `merged` (disjoint, sorted intervals) before t."""
    if merged.height == 0:
        return np.zeros(len(times))
    starts, ends = merged["ts"].to_numpy(), merged["end"].to_numpy()
    before = np.concatenate(([0.0], np.cumsum(ends - starts)))
    i = np.searchsorted(starts, times, side="right")  # intervals starting at or before t
    inside = np.clip(times - starts[np.maximum(i - 1, 0)], 0.0, (ends - starts)[np.maximum(i - 1, 0)])
    return np.where(i > 0, before[np.maximum(i - 1, 0)] + inside, 0.0)


def call_delays(calls: pl.DataFrame) -> pl.DataFrame:
    """Per matched call with ≥ 2 ranks: the last rank, its step, and the delay it caused (the
    median of the other ranks' exposed waits: the time their GPUs idled waiting for it)."""
    matched = calls.filter(pl.col("call_ranks") > 1)
    if matched.height == 0:
        return pl.DataFrame(
            schema={
                "pg": pl.Utf8(),
                "kind": pl.Utf8(),
                "step": pl.Int64(),
                "seq": pl.Int64(),
                "rank": pl.Int32(),
                "delay_us": pl.Float64(),
                "skew_us": pl.Float64(),
            }
        )
    # The last arrival; ties go to the lower rank so the result does not depend on row order.
    last = (
        matched.sort([*CALL_KEY, "ts", "rank"], descending=[False] * 4 + [True, False])
        .group_by(CALL_KEY, maintain_order=True)
        .agg(rank=pl.col("rank").first())
    )
    others = matched.join(last, on=CALL_KEY, suffix="_last").filter(pl.col("rank") != pl.col("rank_last"))
    delays = others.group_by(CALL_KEY).agg(delay_us=pl.col("exposed_wait_us").median(), skew_us=pl.col("wait_us").max())
    return last.join(delays, on=CALL_KEY).select(*CALL_KEY, "rank", "delay_us", "skew_us")


# ---- phases ----------------------------------------------------------------------------------


def cpu_phases(events: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, dur_us: the ProfilerStep's children on its own thread — record_function
    ranges such as data_loader, forward, backward, and operators outside any range. The
    MAX_CPU_PHASES names with the most time keep their name; the rest become OTHER_CPU_OPS."""
    host = events.filter(
        pl.col("cat").cast(pl.Utf8).is_in(["user_annotation", "cpu_op"]) & pl.col("iteration").is_not_null()
    )
    name = pl.col("name").cast(pl.Utf8)
    is_step = name.str.contains(PROFILER_STEP.pattern)
    step_threads = host.filter(is_step).select("rank", "pid", "tid").unique()
    inside = host.filter(~is_step).join(step_threads, on=["rank", "pid", "tid"], how="semi")
    if inside.height == 0:
        return pl.DataFrame(schema={"rank": pl.Int32(), "step": pl.Int64(), "phase": pl.Utf8(), "dur_us": pl.Float64()})
    # Sorted by start (longer first at equal starts), a range is top-level when it starts at or
    # after every earlier range of its step has ended.
    ordered = inside.sort(["rank", "pid", "tid", "iteration", "ts", "end"], descending=[False] * 5 + [True])
    group = ["rank", "pid", "tid", "iteration"]
    top = ordered.with_columns(_before=pl.col("end").cum_max().shift(1).over(group)).filter(
        pl.col("_before").is_null() | (pl.col("ts") >= pl.col("_before"))
    )
    per_name = top.group_by("rank", "iteration", name.alias("phase")).agg(dur_us=pl.col("dur").sum())
    # Eager loops without record_function have one phase per top-level operator: keep the big ones.
    kept = (
        per_name.group_by("phase")
        .agg(pl.col("dur_us").sum())
        .sort(["dur_us", "phase"], descending=[True, False])
        .head(MAX_CPU_PHASES)["phase"]
    )
    folded = pl.when(pl.col("phase").is_in(kept.implode())).then(pl.col("phase")).otherwise(pl.lit(OTHER_CPU_OPS))
    return (
        per_name.group_by("rank", "iteration", phase=folded).agg(pl.col("dur_us").sum()).rename({"iteration": "step"})
    )


def gpu_phases(gpu: pl.DataFrame) -> pl.DataFrame:
    """rank, step, phase, dur_us: GPU compute busy time and each compute kernel name's total time."""
    compute = gpu.filter((pl.col("kind") == COMPUTATION) & pl.col("iteration").is_not_null())
    busy = busy_time(compute, ["rank", "iteration"]).select(
        "rank", step="iteration", phase=pl.lit(GPU_COMPUTE), dur_us="busy_us"
    )
    names = compute["name"].cast(pl.Utf8).unique().to_list()
    short = {n: "kernel " + shorten_name(n) for n in names}
    kernels = compute.group_by(
        "rank", step="iteration", phase=pl.col("name").cast(pl.Utf8).replace_strict(short, return_dtype=pl.Utf8)
    ).agg(dur_us=pl.col("dur").sum())
    return pl.concat([busy, kernels], how="vertical_relaxed")


def phase_excess(phases: pl.DataFrame, rank: int, steps: list[int]) -> pl.DataFrame:
    """phase, rank_us, others_median_us, excess_us over `steps`: this rank's total per phase next
    to the median over the other ranks of theirs, sorted by excess (largest first)."""
    chosen = phases.filter(pl.col("step").is_in(pl.Series(steps, dtype=pl.Int64).implode()))
    ranks = chosen["rank"].unique()
    totals = chosen.group_by("rank", "phase").agg(dur_us=pl.col("dur_us").sum())
    # A rank without a phase spent 0 µs in it.
    grid = pl.DataFrame({"rank": ranks}).join(totals.select("phase").unique(), how="cross")
    full = grid.join(totals, on=["rank", "phase"], how="left").with_columns(pl.col("dur_us").fill_null(0.0))
    mine = full.filter(pl.col("rank") == rank).select("phase", rank_us="dur_us")
    others = full.filter(pl.col("rank") != rank).group_by("phase").agg(others_median_us=pl.col("dur_us").median())
    out = mine.join(others, on="phase", how="left").with_columns(
        excess_us=pl.col("rank_us") - pl.col("others_median_us")
    )
    # Ties: a named CPU phase or kernel before the GPU compute total (it says more).
    return (
        out.with_columns(_general=pl.col("phase") == GPU_COMPUTE)
        .sort(["excess_us", "_general", "phase"], descending=[True, False, False], nulls_last=True)
        .drop("_general")
        .select([pl.col(c).cast(t) for c, t in PHASE_COLUMNS.items()])
    )


# ---- the analysis ----------------------------------------------------------------------------


def _fmt_us(value: float) -> str:
    return f"{value:,.0f} µs" if abs(value) >= 10 else f"{value:,.1f} µs"


def analyse(traces: TraceSet, options: RanksOptions) -> RanksResult:
    """The rank × step matrix, the collective calls and their waits, stragglers and collectives.

    Made once per job and scope: the Ranks page and each of its report tables read the same result.
    """
    return memoised(traces, ("ranks.analyse", *selection_key(traces, options)), lambda: _analyse(traces, options))


def _analyse(traces: TraceSet, options: RanksOptions) -> RanksResult:
    prepared, step_table = _rank_inputs(traces, options)
    events = prepared.events
    rank_count = len(prepared.steps_used)
    step_table = step_table.filter("used")
    gpu = typed_gpu_events(events, options.hta_compat, "rank", "ts", "end", "dur", "iteration")
    calls, source = meeting_points(events, options.hta_compat)
    calls = with_exposed_waits(with_waits(_in_used_steps(calls, prepared.steps_used)), gpu)
    phases_cpu = _in_used_steps(cpu_phases(events), prepared.steps_used)
    gpu_steps = _in_used_steps(gpu_phases(gpu), prepared.steps_used)
    # group_by gives no row order: sorted, so the table and its ties read the same every time.
    phases = pl.concat([phases_cpu, gpu_steps], how="vertical_relaxed").sort("rank", "step", "phase")
    matrix = _matrix(step_table, gpu, calls, source, phases_cpu)
    delays = call_delays(calls)
    stragglers, message = _stragglers(delays, phases, rank_count, source)
    per_step = _per_step(delays, phases) if rank_count > 1 else pl.DataFrame(schema=STEP_STRAGGLER_COLUMNS)
    collectives = _collectives(calls, delays, traces)
    return RanksResult(matrix, phases, calls, stragglers, per_step, collectives, source, message, rank_count)


ANALYSE_READS = (
    *("rank", "index", "ph", "cat", "name", "pid", "tid", "ts", "dur", "end", "stream", "correlation", "iteration"),
    *("collective_name", "in_msg_nelems", "out_msg_nelems", "in_msg_size", "out_msg_size", "group_size"),
    *("pg_name", "msg_dtype"),
)
"""The event columns `analyse` reads (21 of 35); tests/analysis/test_ranks.py checks it against every column."""


def _rank_inputs(traces: TraceSet, options: RanksOptions) -> tuple[Prepared, pl.DataFrame]:
    """The chosen ranks' prepared events (ANALYSE_READS only) and their step table.

    Over ranks not read yet (a dataset) a rank at a time (`each_rank`), so a thousand-rank job
    holds these columns of every rank, not every event frame.
    """
    unread = [rank for rank in chosen_ranks(traces, options) if not traces.ranks[rank].loaded]
    if len(unread) < 2:
        return prepare(traces, options, columns=ANALYSE_READS), steps_view.compute(traces, _steps_options(options))

    def one_rank(part: TraceSet, alone: RanksOptions) -> tuple[Prepared, pl.DataFrame]:
        return prepare(part, alone, columns=ANALYSE_READS), steps_view.compute(part, _steps_options(alone))

    parts = each_rank(traces, options, one_rank)
    events = pl.concat([prepared.events for prepared, _ in parts], how="vertical")
    steps = {rank: rank_steps for prepared, _ in parts for rank, rank_steps in prepared.steps.items()}
    step_table = pl.concat([table for _, table in parts], how="vertical")
    return Prepared(events, steps, options.hta_compat), step_table


def _in_used_steps(frame: pl.DataFrame, steps_used: dict[int, list[int]]) -> pl.DataFrame:
    """Rows of the steps the last-step rule kept; a rank without steps keeps everything."""
    used = pl.DataFrame(
        [(rank, step) for rank, steps in steps_used.items() for step in steps],
        schema={"rank": pl.Int32(), "step": pl.Int64()},
        orient="row",
    )
    stepless = [rank for rank, steps in steps_used.items() if not steps]
    kept = frame.join(used, on=["rank", "step"], how="semi")
    return pl.concat([kept, frame.filter(pl.col("rank").is_in(stepless))]) if stepless else kept


def _steps_options(options: RanksOptions) -> steps_view.StepsOptions:
    return steps_view.StepsOptions(options.scope)


def _matrix(
    step_table: pl.DataFrame, gpu: pl.DataFrame, calls: pl.DataFrame, source: str | None, phases: pl.DataFrame
) -> pl.DataFrame:
    keys = ["rank", "step"]
    base = step_table.select("rank", "step", step_us="dur_us")
    by_step = gpu.filter(pl.col("iteration").is_not_null()).rename({"iteration": "step"})
    busy = busy_time(by_step, keys).rename({"busy_us": "gpu_busy_us"})
    if source == KERNELS:
        comm = busy_time(by_step.filter(pl.col("kind") == COMMUNICATION), keys)
    else:
        comm = busy_time(calls.filter(pl.col("step").is_not_null()), keys)
    waits = calls.group_by(keys).agg(wait_us=pl.col("wait_us").sum())
    out = (
        base.join(busy, on=keys, how="left")
        .join(comm.rename({"busy_us": "comm_us"}), on=keys, how="left")
        .join(waits, on=keys, how="left")
        .with_columns(
            pl.col("gpu_busy_us").fill_null(0.0),
            pl.col("comm_us").fill_null(0.0),
            pl.col("wait_us").fill_null(0.0),
        )
        .with_columns(gpu_idle_us=(pl.col("step_us") - pl.col("gpu_busy_us")).clip(lower_bound=0.0))
        .select([pl.col(c).cast(t) for c, t in MATRIX_BASE.items()])
    )
    if phases.height:
        # Phases in the order they first start is not known here; alphabetical keeps it stable.
        wide = phases.with_columns(phase=pl.col("phase") + "_us").pivot(
            on="phase", index=keys, values="dur_us", aggregate_function="sum", sort_columns=True
        )
        reserved = set(MATRIX_BASE)
        wide = wide.rename({c: f"phase {c}" for c in wide.columns if c in reserved and c not in keys})
        out = out.join(wide.with_columns(pl.col("rank").cast(pl.Int32)), on=keys, how="left")
        out = out.with_columns(pl.col(c).fill_null(0.0) for c in wide.columns if c not in keys)
    return out.sort(keys)


def _step_leaders(delays: pl.DataFrame) -> pl.DataFrame:
    """step, rank, delay_us: per step, the rank that made the others wait longest (delay > 0)."""
    per_step = delays.group_by("step", "rank").agg(delay_us=pl.col("delay_us").sum()).filter(pl.col("delay_us") > 0)
    return (
        per_step.sort(["step", "delay_us", "rank"], descending=[False, True, False], nulls_last=True)
        .group_by("step", maintain_order=True)
        .agg(pl.col("rank").first(), pl.col("delay_us").first())
        .sort("step")
    )


@dataclass(frozen=True)
class Cause:
    """What made a rank late: its phase with the most excess over the others' median, and the
    share of the delay that excess explains."""

    text: str
    phase: str | None = None
    excess_us: float | None = None
    pct: float | None = None


def _cause(phases: pl.DataFrame, rank: int, steps: list[int], delay_us: float) -> Cause:
    """The cause of `rank`'s `delay_us` over `steps`; "no phase explains this delay" when the
    phase with the most excess explains less than EXPLAINS % of it."""
    best = phase_excess(phases, rank, steps).filter(pl.col("excess_us") > 0).head(1)
    if best.height == 0:
        return Cause("no phase explains this delay (none is longer than on the other ranks)")
    phase, excess = str(best["phase"][0]), float(best["excess_us"][0])
    pct = min(100.0, 100.0 * excess / delay_us) if delay_us > 0 else None
    detail = (
        f"{phase} +{_fmt_us(excess)} ({_fmt_us(best['rank_us'][0])} vs median {_fmt_us(best['others_median_us'][0])})"
    )
    if pct is None or pct < EXPLAINS:
        share = "" if pct is None else f", {pct:.0f} % of it"
        return Cause(f"no phase explains this delay (largest: {detail}{share})", phase, excess, pct)
    return Cause(f"{detail}, {pct:.0f} % of the delay", phase, excess, pct)


def _per_step(delays: pl.DataFrame, phases: pl.DataFrame) -> pl.DataFrame:
    """step, rank, delay_us, cause…: each step's straggler and the phase that made it late."""
    rows = []
    for step_number, rank, delay in _step_leaders(delays).iter_rows():
        cause = _cause(phases, rank, [step_number], float(delay)) if step_number is not None else Cause("")
        rows.append(
            {
                "step": step_number,
                "rank": rank,
                "delay_us": float(delay),
                "cause": cause.text,
                "cause_phase": cause.phase,
                "cause_excess_us": cause.excess_us,
                "cause_pct": cause.pct,
            }
        )
    return pl.DataFrame(rows, schema=STEP_STRAGGLER_COLUMNS)


def _stragglers(
    delays: pl.DataFrame, phases: pl.DataFrame, rank_count: int, source: str | None
) -> tuple[pl.DataFrame, str | None]:
    empty = pl.DataFrame(schema=STRAGGLER_COLUMNS)
    if rank_count < 2:
        return empty, f"the job has {'one rank' if rank_count == 1 else 'no ranks'}: stragglers need two or more"
    if source is None:
        return empty, "no collectives found (no communication kernels, no gloo:/nccl: or c10d:: ops)"
    if delays.height == 0:
        return empty, f"no {source} matched across two or more ranks"
    # Per step, the rank that made the others wait longest is that step's straggler.
    step_top = _step_leaders(delays)
    totals = delays.group_by("rank").agg(delay_us=pl.col("delay_us").sum(), calls_last=pl.len())
    job_delay = float(totals.filter(pl.col("delay_us") > 0)["delay_us"].sum())
    rows = []
    for rank, delay, calls_last in totals.sort(["delay_us", "rank"], descending=[True, False]).iter_rows():
        if not delay or delay <= 0:
            continue
        its_steps = sorted(s for s in step_top.filter(pl.col("rank") == rank)["step"].to_list() if s is not None)
        # The cause is looked for in the steps it held up (or, if it led no step, where it was ever last).
        late_steps = its_steps or sorted(
            {s for s in delays.filter(pl.col("rank") == rank)["step"].to_list() if s is not None}
        )
        cause = _cause(phases, rank, late_steps, float(delay)) if late_steps else Cause("")
        rows.append(
            {
                "rank": rank,
                "is_straggler": bool(its_steps),
                "steps": ",".join(map(str, its_steps)) or None,
                "delay_us": float(delay),
                "delay_pct": 100.0 * float(delay) / job_delay,
                "calls_last": calls_last,
                "cause": cause.text,
                "cause_phase": cause.phase,
                "cause_excess_us": cause.excess_us,
                "cause_pct": cause.pct,
            }
        )
    frame = pl.DataFrame(rows, schema=STRAGGLER_COLUMNS) if rows else empty
    return frame, None if rows else f"no rank arrived late at the {source}"


def _collectives(calls: pl.DataFrame, delays: pl.DataFrame, traces: TraceSet) -> pl.DataFrame:
    if calls.height == 0:
        return pl.DataFrame(schema=COLLECTIVE_COLUMNS)
    world = _world_size(traces)
    per_kind = calls.group_by("pg", "kind").agg(
        ranks=pl.col("rank").n_unique().cast(pl.Int64),
        group_size=pl.col("group_size").max(),
        msg_bytes=pl.col("msg_bytes").mean(),
        total_bytes=pl.when(pl.col("msg_bytes").count() > 0).then(pl.col("msg_bytes").sum()),
        dur_us=pl.col("dur_us").mean(),
        total_dur_us=pl.col("dur_us").sum(),
    )
    per_rank_calls = (
        calls.group_by("pg", "kind", "rank")
        .agg(n=pl.len())
        .group_by("pg", "kind")
        .agg(calls=pl.col("n").max().cast(pl.Int64))
    )
    skew = delays.group_by("pg", "kind").agg(skew_mean_us=pl.col("skew_us").mean(), skew_max_us=pl.col("skew_us").max())
    out = (
        per_kind.join(per_rank_calls, on=["pg", "kind"])
        .join(skew, on=["pg", "kind"], how="left")
        .with_columns(group_size=pl.coalesce(pl.col("group_size"), pl.lit(world), pl.col("ranks")))
        .with_columns(algbw_gbps=pl.col("msg_bytes") / pl.col("dur_us") / 1e3)
    )
    factors = [busbw_factor(kind, int(n)) for kind, n in zip(out["kind"], out["group_size"], strict=True)]
    out = out.with_columns(busbw_gbps=pl.col("algbw_gbps") * pl.Series(factors, dtype=pl.Float64))
    return out.select([pl.col(c).cast(t) for c, t in COLLECTIVE_COLUMNS.items()]).sort("total_dur_us", descending=True)


def _world_size(traces: TraceSet) -> int | None:
    for rank in traces.ranks.values():
        value = (rank.meta.distributed_info or {}).get("world_size")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# ---- the report views ------------------------------------------------------------------------


def stragglers(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """The one straggler answer, its method named: who the others waited for at collectives and
    why, with HTA's late-start score beside it as one more signal (`hta_late_starts`). In compat
    mode, HTA 0.6.1's own table (its late-start method), named as such."""
    late = steps_view.stragglers(traces, options)
    if options.hta_compat:
        method = "method: HTA 0.6.1's late starts (per step, the ranks that start its most variable collective last)"
        return NotedTable(late.frame, f"{method}; {late.message}" if late.message else method)
    result = analyse(traces, options)
    scores = late.frame.filter(pl.col("straggler_score") > 0).select("rank", hta_late_starts="straggler_score")
    frame = (
        result.stragglers.join(scores, on="rank", how="full", coalesce=True)
        .with_columns(
            pl.col("is_straggler").fill_null(False),
            pl.col("delay_us", "delay_pct").fill_null(0.0),
            pl.col("calls_last").fill_null(0),
            pl.col("hta_late_starts").fill_null(0),
        )
        .sort(["delay_us", "hta_late_starts", "rank"], descending=[True, True, False])
        .select([pl.col(c).cast(t) for c, t in VIEW_STRAGGLER_COLUMNS.items()])
    )
    if result.message is not None:
        return NotedTable(frame, result.message)
    note = f"method: {METHOD} (meeting points: {result.source}); hta_late_starts: HTA's late-start score"
    return NotedTable(frame, f"{note} ({late.message})" if late.message else note)


def straggler_phases(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """phase, rank_us, others_median_us, excess_us: a straggler's phases against the other ranks'
    median over the steps it held up (`options.straggler`, by default the top straggler)."""
    result = analyse(traces, options)
    empty = pl.DataFrame(schema=PHASE_COLUMNS)
    if result.stragglers.height == 0:
        return NotedTable(empty, result.message or "no straggler")
    rank = options.straggler if options.straggler is not None else int(result.stragglers["rank"][0])
    row = result.stragglers.filter(pl.col("rank") == rank)
    if row.height == 0:
        return NotedTable(empty, f"rank {rank} made no other rank wait")
    steps = [int(s) for s in (row["steps"][0] or "").split(",") if s] or sorted(
        s for s in result.matrix["step"].unique().to_list() if s is not None
    )
    where = f"rank {rank} against the other ranks' median, steps {','.join(map(str, steps))}"
    return NotedTable(phase_excess(result.phases, rank, steps), where)


def straggler_steps(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """Per step: the rank the others waited for most, how long, and the phase that made it late."""
    result = analyse(traces, options)
    return NotedTable(result.step_stragglers, _with_source(result.message, result.source))


def rank_steps(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """The rank × step matrix: step, GPU busy/idle, comm and wait time, and one column per CPU phase."""
    result = analyse(traces, options)
    message = None if result.matrix.height else "no ProfilerStep markers on the chosen ranks"
    return NotedTable(result.matrix, message)


def collectives(traces: TraceSet, options: RanksOptions) -> NotedTable:
    """Per process group and kind: calls, message bytes, duration, algbw/busbw, cross-rank skew."""
    result = analyse(traces, options)
    if result.collectives.height == 0:
        return NotedTable(result.collectives, "no collectives found on the chosen ranks")
    note = None if result.rank_count > 1 else "one rank: cross-rank skew needs two or more"
    return NotedTable(result.collectives, _with_source(note, result.source))


def _with_source(message: str | None, source: str | None) -> str | None:
    if message is not None:
        return message
    return f"meeting points: {source}" if source else None
