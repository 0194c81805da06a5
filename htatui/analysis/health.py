"""What a job's traces can answer, and what is odd in them: `htatui check`, and the notes every face shows.

`capabilities` lists per rank what each analysis can use (steps, ranks and world size, GPU work,
communication kernels or CPU collectives, GPU annotations, input shapes and flops, Python stacks,
memory events, CUPTI counter ranges). `findings` names what is odd, rank by rank: the load's own
warnings (events dropped or repeated), a rank without steps or GPU work among ranks that have
them, kernels overlapping on one stream, a rank whose clock disagrees with the others' at the
collectives. `view_notes` says which views will be empty or approximate, and why.
docs/input-safety.md lists every check.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import polars as pl

from htatui.analysis.core.comm_rules import is_cpu_collective
from htatui.analysis.core.describe import scope_steps
from htatui.analysis.core.kernel_types import COMMUNICATION, kernel_type
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.ranges import format_ranges
from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.analysis.core.scope import Scope, Steps, ragged, rank_steps
from htatui.analysis.views import ranks as ranks_view
from htatui.trace.errors import EventsUnavailable
from htatui.trace.figures import OVERLAP_MIN_US, early_launches, file_figures, overlap_summary, valid_figures
from htatui.trace.kineto import GPU_ACTIVITY_CATS, GPU_ANNOTATION
from htatui.trace.model import TraceSet, any_figures_kept

CAPABILITY_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "file": pl.Utf8(),
    "events": pl.Int64(),
    "steps": pl.Utf8(),
    "world_size": pl.Int64(),
    "gpu_rows": pl.Int64(),
    "comm_kernels": pl.Int64(),
    "nccl_names": pl.Utf8(),
    "cpu_collectives": pl.Int64(),
    "gpu_annotations": pl.Int64(),
    "python_frames": pl.Int64(),
    "memory_events": pl.Int64(),
    "cupti_ranges": pl.Int64(),
    "input_shapes": pl.Int64(),
    "flops": pl.Int64(),
}
"""Per rank: counts of what each analysis reads (0: the trace has none); `input_shapes` and
`flops` count host ops with them (null when the file could not be read again for them);
`nccl_names` says how its NCCL kernels are named (NCCL_OLD, NCCL_NEW, both, or "")."""

NCCL_OLD, NCCL_NEW = "ncclKernel_*", "ncclDevKernel_*"
"""NCCL's kernel names before 2.19 and since: HTA 0.6.1's late-start method looks for the first only."""

FINDING_COLUMNS: dict[str, pl.DataType] = {
    "rank": pl.Int32(),
    "file": pl.Utf8(),
    "kind": pl.Utf8(),
    "message": pl.Utf8(),
}


@dataclass(frozen=True)
class Finding:
    """Something odd in one rank's trace (rank None: the whole job), in one sentence."""

    rank: int | None
    file: str
    kind: str
    message: str


def capabilities(traces: TraceSet, *, read_shapes: bool = True, rules: Rules = SHIPPED_RULES) -> pl.DataFrame:
    """One row per rank (CAPABILITY_COLUMNS), collectives by the communication rules in `rules`.
    `read_shapes` reads each file again for its ops' input shapes and flops (the frame does not
    keep them)."""
    from htatui.trace.op_args import OpArgsError, read_op_args

    rows = []
    for rank in traces.rank_ids:
        trace = traces.ranks[rank]
        events = trace.events
        cat, name = pl.col("cat"), pl.col("name").cast(pl.Utf8)
        host = cat.is_in(["user_annotation", "cpu_op"])
        counts = events.select(
            gpu_rows=cat.is_in(list(GPU_ACTIVITY_CATS)).sum(),
            gpu_annotations=(cat == GPU_ANNOTATION).sum(),
            python_frames=(cat == "python_function").sum(),
            memory_events=(name == "[memory]").sum(),
            cupti_ranges=(cat == "cuda_profiler_range").sum(),
            cpu_collectives=(host & is_cpu_collective(rules)).sum(),
        ).row(0, named=True)
        kernels = events.filter(cat == "kernel").select("cat", "name", "collective_name")
        comm = int(kernels.select((kernel_type(False, rules) == COMMUNICATION).sum()).item()) if kernels.height else 0
        kernel_name = kernels["name"].cast(pl.Utf8)
        nccl = [kind for kind in (NCCL_OLD, NCCL_NEW) if kernel_name.str.starts_with(kind[:-1]).any()]
        steps = rank_steps(events.select("ph", "cat", "name", "ts", "end", "dur"), Scope(steps=Steps("all"))).available
        world = (trace.meta.distributed_info or {}).get("world_size")
        shapes: int | None = None
        flops: int | None = None
        if read_shapes:
            try:
                op_args = read_op_args(trace.path)
            except OpArgsError:
                pass
            else:
                shapes = int(op_args.select((pl.col("input_dims").fill_null("[]") != "[]").sum()).item())
                flops = int(op_args["flops"].drop_nulls().len())
        rows.append(
            {
                "rank": rank,
                "file": trace.path.name,
                "events": events.height,
                "steps": _steps_text(steps),
                "world_size": world if isinstance(world, int) and not isinstance(world, bool) else None,
                **counts,
                "comm_kernels": comm,
                "nccl_names": " + ".join(nccl),
                "input_shapes": shapes,
                "flops": flops,
            }
        )
    return pl.DataFrame(rows, schema=CAPABILITY_COLUMNS)


def _steps_text(steps: tuple[int, ...]) -> str:
    return format_ranges(steps, separator=",", empty="")


def findings(
    traces: TraceSet, table: pl.DataFrame, *, thorough: bool = True, rules: Rules = SHIPPED_RULES
) -> pl.DataFrame:
    """What is odd (FINDING_COLUMNS), from the job and its `capabilities` table. `thorough` adds
    the checks that read every event: kernels overlapping on a stream, clocks that disagree
    (collectives by the rules in `rules`)."""
    found = [*_load_warnings(traces), *_missing_among_ranks(table), *_nccl_name_drift(table), *_ragged_steps(traces)]
    if thorough:
        found += [*_stream_overlaps(traces), *_clock_offsets(traces, rules), *_kernels_before_launch(traces)]
        found += [*_collective_mismatches(traces, rules), *_critical_path_cycles(traces, rules)]
    return pl.DataFrame([vars(f) for f in found], schema=FINDING_COLUMNS)


def _ragged_steps(traces: TraceSet) -> list[Finding]:
    """Ranks without a step the default scope chooses on the others (one step short)."""
    steps = scope_steps(traces, CommonOptions())
    missing = ragged(steps)
    if not missing:
        return []
    used = sorted({s for r in steps.values() for s in r.used})
    measured = f"the views measure every rank over steps {format_ranges(used, separator=',')}"
    if len({r.used for r in steps.values() if r.available}) > 1:
        measured = "the ranks share no step, so each is measured over its own and cross-rank numbers mix steps"
    return [
        Finding(
            rank,
            traces.ranks[rank].path.name,
            "ragged steps",
            f"has no step {format_ranges(lacks, separator=',')} to count while other ranks do "
            f"(its steps {format_ranges(steps[rank].available, separator=',')}): {measured}",
        )
        for rank, lacks in missing.items()
    ]


def _kernels_before_launch(traces: TraceSet) -> list[Finding]:
    """GPU work that starts before the call that launched it (`figures.early_launches`)."""
    out = []
    for rank in traces.rank_ids:
        early = early_launches(traces.ranks[rank].events)
        if early.height:
            most = float(early["lead_us"].max())  # type: ignore[arg-type]
            out.append(_early_finding(rank, traces.ranks[rank].path.name, early.height, most))
    return out


def _early_finding(rank: int, file: str, count: int, most_us: float) -> Finding:
    return Finding(
        rank,
        file,
        "kernel before launch",
        f"{count} kernel(s), copies or memsets start before the call that launched them (by up to "
        f"{most_us:,.3f} µs): host and device clocks disagree; launch delays and the critical path "
        "through them cannot be trusted",
    )


def _collective_mismatches(traces: TraceSet, rules: Rules) -> list[Finding]:
    """Ranks whose collective calls in a process group's step are more or fewer than the others'."""
    if len(traces.rank_ids) < 2:
        return []
    mismatched = ranks_view.analyse(traces, ranks_view.RanksOptions(Scope(rules=rules))).mismatched
    if mismatched is None or mismatched.height == 0:
        return []
    out = []
    for (rank,), rows in mismatched.group_by(["rank"], maintain_order=True):
        where = "; ".join(
            f"{'process group ' + repr(pg) if pg else 'the collectives'}, step {step}: {calls} call(s)"
            + (f" where the others made {usual}" if usual is not None else " (no count is the usual one)")
            for pg, step, calls, usual in rows.select("pg", "step", "calls", "usual").iter_rows()
        )
        out.append(
            Finding(
                int(rank),
                traces.ranks[int(rank)].path.name,
                "collective counts",
                f"{where}: pairing its calls by order would match different calls, so the cross-rank views "
                "(collectives, stragglers, the job's critical path) leave them out",
            )
        )
    return out


def _critical_path_cycles(traces: TraceSet, rules: Rules) -> list[Finding]:
    """A rank (or the job) whose critical-path graph has a cycle: no path can be found."""
    from htatui.analysis.registry import BY_ID, frame_of, make_table

    view = BY_ID["critical-path"]
    options = view.options(scope=Scope(rules=rules))
    out = []
    for rank in traces.rank_ids:
        _, message = frame_of(make_table(view.main, traces, dataclasses.replace(options, rank=rank)))
        if message and "cycle" in message:
            out.append(Finding(rank, traces.ranks[rank].path.name, "critical-path cycle", message))
    if not out and len(traces.rank_ids) > 1:
        _, message = frame_of(make_table(view.table("job-edges"), traces, options))
        if message and "cycle" in message:
            out.append(Finding(None, "", "critical-path cycle", message))
    return out


def _load_warnings(traces: TraceSet) -> list[Finding]:
    # How ranks were numbered matters only when there are several of them.
    out = [Finding(None, "", "load", note) for note in traces.notes] if len(traces.rank_ids) > 1 else []
    for rank in traces.rank_ids:
        trace = traces.ranks[rank]
        out += [Finding(rank, trace.path.name, "load", warning) for warning in trace.warnings]
    return out


def _missing_among_ranks(table: pl.DataFrame) -> list[Finding]:
    """A rank without what the other ranks have (steps, GPU work), or a job without any GPU work."""
    out: list[Finding] = []
    if table.height and table["gpu_rows"].sum() == 0:
        out.append(
            Finding(None, "", "no GPU work", "no rank has GPU kernels, copies or memsets: the GPU views are empty")
        )
    for column, kind, what in (
        ("steps", "no steps", "no ProfilerStep while other ranks have them: the cross-rank views leave it out"),
        ("gpu_rows", "no GPU work", "no GPU kernels, copies or memsets while other ranks have them (a CPU-only rank)"),
    ):
        has = table[column].cast(pl.Utf8).fill_null("") != "" if column == "steps" else table[column] > 0
        if has.any() and not has.all():
            for rank, file in table.filter(~has).select("rank", "file").iter_rows():
                out.append(Finding(rank, file, kind, what))
    return out


def _nccl_name_drift(table: pl.DataFrame) -> list[Finding]:
    """Ranks whose NCCL kernels are named otherwise than the other ranks' (different NCCL versions
    in one job): htatui matches collectives by kind, but per-name tables split them."""
    named = table.filter(pl.col("nccl_names") != "")
    if named["nccl_names"].n_unique() < 2:
        return []
    usual = named["nccl_names"].mode().sort()[0]
    return [
        Finding(
            rank,
            file,
            "NCCL names",
            f"its NCCL kernels are named {names} while most ranks' are {usual}: the ranks ran different NCCL "
            "versions; collectives still match by kind, but kernels and kernel-spread list them apart "
            f"and HTA's late starts sees only {NCCL_OLD}",
        )
        for rank, file, names in named.filter(pl.col("nccl_names") != usual).select("rank", "file", "nccl_names").rows()
    ]


def quick_findings(traces: TraceSet, rules: Rules = SHIPPED_RULES) -> list[Finding]:
    """The findings every face shows at load, without reading a dataset's ranks: a rank without
    steps or GPU work among ranks that have them (from the stored summary when there is one),
    and, when the events are in memory, kernels overlapping on a stream and ranks whose clock
    disagrees with the others' at the collectives (a dataset's are left to `htatui check`)."""
    summary = traces.summary
    # A trace folder's figures say more (overlapping kernels, early launches) than its summary.
    if summary is not None and summary.height == len(traces.rank_ids) and not any_figures_kept(traces):
        table = summary.select(
            "rank",
            file=pl.col("file"),
            steps=pl.col("iterations").list.len().cast(pl.Utf8).replace("0", ""),
            gpu_rows=pl.col("streams"),
        )
    else:
        # A folder opened from the cache keeps its ranks unread: each is read, looked at and
        # dropped again, so the findings hold while memory holds one rank.
        rows = []
        overlaps: list[Finding] = []
        all_read = all(traces.ranks[rank].loaded for rank in traces.rank_ids)
        # A few ranks held unread (a folder, cold or cached) have their clocks looked at as each
        # is read here; many are left to `check` and the cross-rank views (below).
        clock_parts: list[tuple[pl.DataFrame, dict[int, list[int]]]] | None
        clock_parts = [] if 2 <= len(traces.rank_ids) <= CLOCK_RANKS_AT_LOAD and not all_read else None
        for rank in traces.rank_ids:
            trace = traces.ranks[rank]
            was_read = trace.loaded
            # What is looked at here is the rank's figures (`trace.figures`): kept in its cache
            # entry for an unread rank (made from these events when parsed), so it stays unread
            # until a view asks for it, unless its clock is to be looked at too.
            kept = valid_figures(trace.stored_figures()) if not was_read and clock_parts is None else None
            if kept is None:
                try:
                    events = trace.events
                except EventsUnavailable:
                    continue
            row = (kept if kept is not None else file_figures(events)).row(0, named=True)
            rows.append(
                {
                    "rank": rank,
                    "file": trace.path.name,
                    "steps": "yes" if row["steps_by_start"] else "",
                    "gpu_rows": row["gpu_rows"],
                }
            )
            if row["overlap_kernels"]:
                overlaps.append(
                    _overlap_finding(
                        rank, trace.path.name, row["overlap_kernels"], row["overlap_streams"], row["overlap_us"]
                    )
                )
            if row["early_kernels"]:
                overlaps.append(_early_finding(rank, trace.path.name, row["early_kernels"], row["early_us"]))
            if kept is not None:
                continue
            if clock_parts is not None:
                clock_parts.append(ranks_view.rank_clock_calls(TraceSet(ranks={rank: trace}), _clock_options(rules)))
            if not was_read:
                trace.unload()
        table = pl.DataFrame(
            rows, schema={"rank": pl.Int32(), "file": pl.Utf8(), "steps": pl.Utf8(), "gpu_rows": pl.Int64()}
        )
        # Overlapping kernels are cheap to look for (16 ms on 216k events). Clocks (0.33 s on 8
        # ranks of 200k events, whose load took 16 s) when every rank is in memory, or from the
        # calls found above on a few unread ranks: more ranks left unread (a big folder, like a
        # dataset) are left to `check` and the cross-rank views, which name a realigned clock themselves.
        if clock_parts:
            clocks = _clock_findings(traces, ranks_view.clocks_of_parts(clock_parts))
        else:
            clocks = _clock_offsets(traces, rules) if all_read else []
        return [*_missing_among_ranks(table), *overlaps, *clocks]
    return _missing_among_ranks(table)


def finding_line(finding: Finding) -> str:
    """One finding as the line the faces print: 'rank 2 (rank-2.json): no ProfilerStep …'."""
    if finding.rank is None:
        return finding.message
    return f"rank {finding.rank} ({finding.file}): {finding.message}"


def load_notes(traces: TraceSet, rules: Rules = SHIPPED_RULES) -> tuple[str, ...]:
    """What loading noted, each file's warnings, and `quick_findings` under `rules`, a line each
    (the app's N)."""
    lines = list(traces.notes)
    for rank in traces.rank_ids:
        trace = traces.ranks[rank]
        lines += [f"{trace.path.name}: {warning}" for warning in trace.warnings]
    return (*lines, *(finding_line(f) for f in quick_findings(traces, rules)))


def _stream_overlaps(traces: TraceSet) -> list[Finding]:
    """Kernels that start long before the kernel before them on their stream has ended."""
    return [
        finding
        for rank in traces.rank_ids
        for finding in _rank_overlaps(rank, traces.ranks[rank].path.name, traces.ranks[rank].events)
    ]


def _rank_overlaps(rank: int, file: str, events: pl.DataFrame) -> list[Finding]:
    """`_stream_overlaps` of one rank's events."""
    kernels, streams, overlap_us = overlap_summary(events)
    return [_overlap_finding(rank, file, kernels, streams, overlap_us)] if kernels else []


def _overlap_finding(rank: int, file: str, kernels: int, streams: str, overlap_us: float) -> Finding:
    return Finding(
        rank,
        file,
        "overlapping kernels",
        f"{kernels} kernel(s) start more than {OVERLAP_MIN_US:g} µs (and half their length) before "
        f"the kernel before them on stream {streams} ends ({overlap_us:,.0f} µs in all): "
        "a merged or broken trace; busy and compute times count them once, kernel sums twice",
    )


def _clock_offsets(traces: TraceSet, rules: Rules) -> list[Finding]:
    """Ranks whose collective calls end far from where the other ranks' end (a clock of their
    own); the cross-rank views realign them by that offset (`ranks.meeting.skewed_clocks`)."""
    if len(traces.rank_ids) < 2:
        return []
    return _clock_findings(traces, ranks_view.clock_offsets(traces, _clock_options(rules)))


CLOCK_RANKS_AT_LOAD = 32
"""Up to this many unread ranks have their clocks compared at load (~20 ms a 13 MB rank)."""


def _clock_options(rules: Rules) -> ranks_view.RanksOptions:
    """The clocks are compared over every step."""
    return ranks_view.RanksOptions(Scope(steps=Steps("all"), rules=rules))


def _clock_findings(traces: TraceSet, clocks: pl.DataFrame) -> list[Finding]:
    return [
        Finding(
            rank,
            traces.ranks[rank].path.name,
            "clock",
            f"its {count} collective calls end {offset:+,.0f} µs from the other ranks' (median): its clock "
            "disagrees; waits, stragglers, the rank × step matrix and collectives' skew realign it by that "
            "offset, HTA's late starts and the timeline cannot be trusted across ranks",
        )
        for rank, offset, count in clocks.select("rank", "offset_us", "calls").iter_rows()
    ]


def view_notes(table: pl.DataFrame) -> list[str]:
    """Which views will be empty or approximate on this job, and why (from `capabilities`)."""
    notes: list[str] = []
    ranks = table.height
    if ranks and table["gpu_rows"].sum() == 0:
        notes.append("temporal, idle, kernels, overlap, launch, counters: empty (no GPU work on any rank)")
    if ranks and table["comm_kernels"].sum() == 0:
        notes.append("overlap: undefined (no communication kernels); late-starts (HTA's method): empty")
        if table["cpu_collectives"].sum() == 0:
            notes.append(
                "stragglers, collectives: empty (no communication kernels and no CPU collectives by the rules)"
            )
    if ranks < 2:
        notes.append("stragglers, late-starts: empty (one rank); collectives: no cross-rank skew")
    elif ranks and (table["nccl_names"] == NCCL_NEW).all():
        notes.append(
            f"late-starts --hta-compat: empty (HTA 0.6.1 looks for {NCCL_OLD} kernels; these are {NCCL_NEW}, "
            "NCCL >= 2.19); htatui's own late-starts and stragglers find them"
        )
    if ranks and (table["steps"].fill_null("") == "").all():
        notes.append("steps, rank-steps: empty; every view counts the whole trace (no ProfilerStep)")
    shapes = table["input_shapes"]
    if ranks and shapes.null_count() < ranks and shapes.fill_null(0).sum() == 0:
        notes.append("ops --group-by shape: every shape is [] (recorded without record_shapes=True)")
    if ranks and table["memory_events"].sum() == 0:
        notes.append("the Memory page: not shown (no [memory] events: profile_memory=True records them)")
    return notes
