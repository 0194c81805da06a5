"""Where ranks meet: every rank's collective calls, matched across ranks, and who waited for whom.

The meeting points are the communication kernels when the job has any (NCCL/RCCL/DeepEP…, by the
communication rules), else the CPU collectives of the rules' "range" tier (`gloo:*`, `nccl:*`…
record_function ranges, vLLM's `_C::shm_*` ops, a user's own), else those of the "c10d" tier
(the `c10d::*` ops). A call is matched across ranks by (process group, collective kind,
step, k): the k-th call of that kind in that group inside ProfilerStep N on each rank. A rank
*arrives* at a call when its op starts; it waits `last arrival − own arrival`, and the rank that
arrived last delays the others by the median of their exposed waits (their GPU idle meanwhile).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

import polars as pl

from htatui.analysis.core.comm_rules import cpu_collective, cpu_collective_names, kind_from_name
from htatui.analysis.core.kernel_types import COMMUNICATION, typed_gpu_events
from htatui.analysis.core.names import shorten_name
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.views.ranks.op_bytes import OP_BYTES_SCHEMA, launched_under

if TYPE_CHECKING:  # numpy is imported where it runs: a cached `info` reads this package without it
    import numpy as np

KERNELS = "communication kernels"


CPU_OPS = "collective CPU ops"


C10D_OPS = "c10d CPU ops"


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


def busbw_factor(kind: str, n: int) -> float:
    """nccl-tests' bus-bandwidth factor for a collective over n ranks."""
    if n <= 0:
        return float("nan")
    if kind == "all_reduce":
        return 2.0 * (n - 1) / n
    if kind in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def collective_kind(name: str, rules: Rules = SHIPPED_RULES) -> str:
    """all_reduce, all_gather, … from a kernel or op name ('nccl:_all_gather_base', 'ncclDevKernel_AllReduce_…');
    a CPU collective's by its host rule (which may name the kind)."""
    found = cpu_collective(name, rules)
    if found is not None:
        return found.kind
    text = re.sub(r"^(gloo|nccl|mpi|ucc|xccl|hccl|mccl|c10d):+", "", name, flags=re.IGNORECASE)
    return kind_from_name(name) or shorten_name(text)


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


def _kinds(names: pl.Series, rules: Rules) -> dict[str, str]:
    return {name: collective_kind(name, rules) for name in names.unique().drop_nulls().to_list()}


OpBytesOf = Callable[[list[int]], pl.DataFrame]
"""The ranks → rank, index, op_bytes of their collective host ops (op_bytes.op_bytes, read from the files)."""


SOURCES = (KERNELS, CPU_OPS, C10D_OPS)
"""The meeting-point sources, best first: a job uses the first any of its ranks has."""


def meeting_points(
    events: pl.DataFrame, hta_compat: bool, rules: Rules, op_bytes_of: OpBytesOf | None = None
) -> tuple[pl.DataFrame, str | None]:
    """Every rank's collective calls (rank, pg, kind, step, seq, ts, end, dur_us, msg_bytes,
    bytes_derived, group_size) from the best source the job has, and that source's name.

    A call without message args takes its bytes from its host ops' input shapes when
    `op_bytes_of` is given (`bytes_derived` true)."""
    for source in SOURCES:
        calls = source_calls(events, hta_compat, rules, source, op_bytes_of)
        if calls.height:
            return calls, source
    return _empty_calls(), None


def best_source(calls: pl.DataFrame) -> tuple[pl.DataFrame, str | None]:
    """`calls` of every source (a `source` column) → those of the best source any rank has, and its name."""
    for source in SOURCES:
        chosen = calls.filter(pl.col("source") == source)
        if chosen.height:
            return chosen.drop("source"), source
    return _empty_calls(), None


def source_calls(
    events: pl.DataFrame, hta_compat: bool, rules: Rules, source: str, op_bytes_of: OpBytesOf | None
) -> pl.DataFrame:
    """The ranks' collective calls seen from one source (empty when they have none), by the
    communication rules in `rules`: each rank's rows depend on that rank alone, so a rank at a
    time gives the same calls."""
    if source == KERNELS:
        gpu = typed_gpu_events(
            events,
            hta_compat,
            rules,
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
            "index",
            "correlation",
        )
        rows = gpu.filter((pl.col("kind") == COMMUNICATION) & (pl.col("cat") == "kernel"))
        label = pl.coalesce(pl.col("collective_name").cast(pl.Utf8), pl.col("name").cast(pl.Utf8))
    else:
        host = events.filter(pl.col("cat").cast(pl.Utf8).is_in(["user_annotation", "cpu_op"]))
        chosen = cpu_collective_names(host["name"].unique(), rules, "range" if source == CPU_OPS else "c10d")
        rows = host.filter(pl.col("name").cast(pl.Utf8).is_in(chosen.implode()))
        label = pl.col("name").cast(pl.Utf8)
    if rows.height == 0:
        return _empty_calls()
    labelled = rows.with_columns(_label=label, _args_bytes=_message_bytes())
    labelled = labelled.with_columns(_op_bytes=_op_bytes(labelled, events, source, op_bytes_of))
    kinds = _kinds(labelled["_label"], rules)
    return (
        labelled.select(
            "rank",
            pg=pl.col("pg_name").cast(pl.Utf8).fill_null(""),
            kind=pl.col("_label").replace_strict(kinds, default=None, return_dtype=pl.Utf8),
            step=pl.col("iteration"),
            ts="ts",
            end="end",
            dur_us="dur",
            msg_bytes=pl.coalesce("_args_bytes", "_op_bytes"),
            bytes_derived=pl.col("_args_bytes").is_null() & pl.col("_op_bytes").is_not_null(),
            group_size="group_size",
        )
        .sort("rank", "ts")
        .with_columns(seq=pl.int_range(pl.len(), dtype=pl.Int64).over("rank", "pg", "kind", "step"))
    )


def _op_bytes(rows: pl.DataFrame, events: pl.DataFrame, source: str, op_bytes_of: OpBytesOf | None) -> pl.Series:
    """Per row, the bytes its host ops' input shapes give where its own args give none (else null):
    a kernel's from the ops around its launch, a CPU op's from itself."""
    missing = rows.filter(pl.col("_args_bytes").is_null())
    if op_bytes_of is None or missing.height == 0:
        return pl.Series("_op_bytes", [None] * rows.height, dtype=pl.Float64)
    ops = op_bytes_of(missing["rank"].unique().sort().to_list()).select(OP_BYTES_SCHEMA.keys())
    if source == KERNELS:
        found = launched_under(events, missing.filter(pl.col("correlation").is_not_null()), ops)
        keyed = rows.select("rank", "correlation").join(
            found, on=["rank", "correlation"], how="left", maintain_order="left"
        )
    else:
        keyed = rows.select("rank", "index").join(ops, on=["rank", "index"], how="left", maintain_order="left")
    return keyed["op_bytes"].alias("_op_bytes")


CALL_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pg": pl.Utf8(),
    "kind": pl.Utf8(),
    "step": pl.Int64(),
    "ts": pl.Float64(),
    "end": pl.Float64(),
    "dur_us": pl.Float64(),
    "msg_bytes": pl.Float64(),
    "bytes_derived": pl.Boolean(),
    "group_size": pl.Int64(),
    "seq": pl.Int64(),
}
"""A collective call's columns, whatever its source (the stored `calls` table adds `source`)."""


def _empty_calls() -> pl.DataFrame:
    return pl.DataFrame(schema=CALL_SCHEMA)


CALL_KEY = ["pg", "kind", "step", "seq"]


MISMATCH_SCHEMA: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "pg": pl.Utf8(),
    "step": pl.Int64(),
    "calls": pl.UInt32(),
    "usual": pl.UInt32(),
}


def mismatched_counts(calls: pl.DataFrame) -> pl.DataFrame:
    """rank, pg, step, calls, usual: a rank whose number of calls in a process group's step differs
    from the group's usual count (the count most of its ranks made; null when no count is most
    common, and then every rank of the group is listed). Matching the k-th call of each rank pairs
    such calls wrongly (two allreduces a step on one rank, one on the other): they are left out.

    A group's ranks are those with a call in it in any step; one with none in a step made 0.
    """
    if calls.height == 0:
        return pl.DataFrame(schema=MISMATCH_SCHEMA)
    keys = ["pg", "step", "rank"]
    counts = calls.group_by(keys).agg(calls=pl.len())
    grid = calls.select("pg", "rank").unique().join(calls.select("pg", "step").unique(), on="pg")
    counts = grid.join(counts, on=keys, how="left", nulls_equal=True).with_columns(pl.col("calls").fill_null(0))
    often = counts.group_by("pg", "step", "calls").agg(ranks=pl.len())
    usual = (
        often.filter(pl.col("ranks") == pl.col("ranks").max().over("pg", "step"))
        .group_by("pg", "step")
        .agg(usual=pl.when(pl.len() == 1).then(pl.col("calls").first()))
    )
    return (
        counts.join(usual, on=["pg", "step"], nulls_equal=True)
        .filter(pl.col("usual").is_null() | (pl.col("calls") != pl.col("usual")))
        .select([pl.col(c).cast(t) for c, t in MISMATCH_SCHEMA.items()])
        .sort("pg", "step", "rank", nulls_last=True)
    )


def without_mismatched(calls: pl.DataFrame, mismatched: pl.DataFrame | None = None) -> pl.DataFrame:
    """`calls` less those of each rank and process-group step whose counts differ (`mismatched_counts`)."""
    mismatched = mismatched_counts(calls) if mismatched is None else mismatched
    if mismatched.height == 0:
        return calls
    return calls.join(mismatched.select("rank", "pg", "step"), on=["rank", "pg", "step"], how="anti", nulls_equal=True)


def mismatch_note(mismatched: pl.DataFrame | None) -> str | None:
    """One sentence naming the ranks left out of a group's step, for the cross-rank views and `check`."""
    if mismatched is None or mismatched.height == 0:
        return None
    parts = []
    for (pg, step), rows in mismatched.group_by(["pg", "step"], maintain_order=True):
        where = f"process group {pg!r}" if pg else "the collectives"
        usual = rows["usual"][0]
        counts = ", ".join(
            f"rank {rank} made {calls} call{'' if calls == 1 else 's'}"
            for rank, calls in rows.select("rank", "calls").iter_rows()
        )
        if usual is None:
            parts.append(f"{where}, step {step}: {counts}: no count is the usual one, none paired")
        else:
            parts.append(f"{where}, step {step}: {counts} where the others made {usual}: left out of the pairing")
    return "collective counts differ: " + "; ".join(parts)


def with_waits(calls: pl.DataFrame) -> pl.DataFrame:
    """Each call's last arrival, how long this rank waited for it, and how many ranks made it."""
    return calls.with_columns(
        arrival_last_us=pl.col("ts").max().over(CALL_KEY),
        call_ranks=pl.len().over(CALL_KEY),
    ).with_columns(wait_us=pl.when(pl.col("call_ranks") > 1).then(pl.col("arrival_last_us") - pl.col("ts")))


def with_exposed_waits(calls: pl.DataFrame, busy_of: Callable[[int], pl.DataFrame]) -> pl.DataFrame:
    """`exposed_wait_us`: the part of each call's wait during which the rank's own GPU did no
    other work (computation, copies, memsets): `busy_of(rank)` is that work's merged intervals
    (rank, ts, end) on that rank, read a rank at a time.

    A rank waiting in a collective while its GPU still runs its own kernels loses nothing: with
    DDP's buckets the comm stream waits while backward goes on, and summing raw waits counted
    that time (on fixtures/demo, twice the straggler's real lag).
    """
    parts = []
    for (rank,), rank_calls in calls.with_row_index("_call").group_by(["rank"], maintain_order=True):
        rank_busy = busy_of(int(rank)).sort("ts")
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
    import numpy as np

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


CLOCK_MIN_US = 1000.0
"""A rank whose collective calls end this much (and more than twice their median length) away
from the other ranks' has a clock of its own (separate hosts, no clock sync)."""


def skewed_clocks(calls: pl.DataFrame) -> pl.DataFrame:
    """rank, offset_us, calls, dur_us: the ranks whose clock disagrees with the others'.

    A collective ends at about the same moment on every rank (none finishes before the last one
    arrived), so the median over a rank's matched calls of (its end − the calls' median end) is
    its clock's offset; stragglers arrive late but end with the others. Only offsets past
    CLOCK_MIN_US and twice the calls' median length count, so ordinary jitter is left alone.
    """
    columns = {"rank": pl.Int32(), "offset_us": pl.Float64(), "calls": pl.UInt32(), "dur_us": pl.Float64()}
    if calls.height == 0:
        return pl.DataFrame(schema=columns)
    matched = calls.with_columns(_n=pl.len().over(CALL_KEY)).filter(pl.col("_n") > 1)
    offsets = (
        matched.with_columns(_offset=pl.col("end") - pl.col("end").median().over(CALL_KEY))
        .group_by("rank")
        .agg(offset_us=pl.col("_offset").median(), calls=pl.len(), dur_us=pl.col("dur_us").median())
        .sort("rank")
    )
    limit = pl.max_horizontal(pl.lit(CLOCK_MIN_US), 2 * pl.col("dur_us").fill_null(0.0))
    return offsets.filter(pl.col("offset_us").abs() > limit).select([pl.col(c).cast(t) for c, t in columns.items()])


def realigned(frame: pl.DataFrame, offsets: pl.DataFrame) -> pl.DataFrame:
    """`frame` (rank, ts, end) with each skewed rank's times moved by minus its clock offset."""
    if offsets.height == 0:
        return frame
    shift = pl.col("rank").replace_strict(
        offsets["rank"].to_list(), offsets["offset_us"].to_list(), default=0.0, return_dtype=pl.Float64
    )
    return frame.with_columns(ts=pl.col("ts") - shift, end=pl.col("end") - shift)
