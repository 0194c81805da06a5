"""Frequent CUDA kernel sequences launched under an operator (docs/semantics-patterns-ops-export.md, patterns).

For one rank: the candidates are the host events whose name contains `operator`; the roots are
the candidates at the smallest call-stack depth among all candidates that have at least
`min_len` kernels beneath them. A root's pattern is its name followed by the names of the GPU
work it launched (through runtime calls nested under it), in start order, joined with "|". The
table counts the roots per pattern with their summed GPU work time and summed root duration,
most frequent first (ties by pattern text).

Call stacks come from `htatui.analysis.model.callstack` (with the backward thread linked under the
main thread's "## backward ##" annotation, as HTA's CallGraph does). Default: the GPU work is
kernels, copies and memsets on any stream, and only host events are candidates. HTA-compatible
mode uses HTA's selectors (host = no stream; GPU rows = any row with a stream > 0, syncs
included; device rows whose name contains `operator` also count as candidates, and rows that
are on no call stack have depth −1). docs/semantics-patterns-ops-export.md lists the differences.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from htatui.analysis.core import hta
from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns
from htatui.analysis.core.knobs import knob
from htatui.analysis.core.memo import memoised, selection_key
from htatui.analysis.core.options import CommonOptions, NotedTable
from htatui.analysis.core.prepare import chosen_ranks, prepare
from htatui.analysis.model import callstack, job_tree
from htatui.analysis.model.op_events import HOST_KINDS
from htatui.trace.model import TraceSet

SPEC = TableColumns(
    ColumnSpec(
        "pattern", pl.Utf8(), "the sequence of GPU operations under one call of the operator", "id", sentence=True
    ),
    ColumnSpec("count", pl.Int64(), "calls of the operator whose GPU work was this sequence", "key"),
    ColumnSpec("gpu_sum_us", pl.Float64(), "Σ of the GPU time of those sequences", "key"),
    ColumnSpec("cpu_sum_us", pl.Float64(), "Σ of the operator calls' CPU time"),
)
COLUMNS = SPEC.schema

INDICES_COLUMNS: dict[str, pl.DataType] = {
    "pattern": pl.Utf8(),
    "count": pl.Int64(),
    "indices": pl.List(pl.Int64()),
}


@dataclass(frozen=True)
class PatternsOptions(CommonOptions):
    """Frequent-kernel-sequence knobs (HTA's defaults)."""

    operator: str = knob("aten::linear", flag="--operator", help="patterns: operator name to look under", kind="text")
    """Roots are host events whose name contains this text (case-sensitive)."""
    min_len: int = knob(
        3, flag="--min-len", help="patterns: minimum kernels under the operator", kind="int", label="min ops", minimum=1
    )
    """A root needs at least this many GPU operations beneath it."""
    top_k: int | None = knob(5, flag="--top", help="how many names to keep", kind="int", label="top-k", minimum=1)
    """How many patterns to show and to overlay in the export; None = all."""
    rank: int | None = knob(None, flag="--rank", help="patterns: rank to mine (default: the first)", kind="int")
    """The rank to analyse; None = the first of the selected ranks."""


def chosen_rank(traces: TraceSet, options: PatternsOptions) -> int | None:
    """The rank the view analyses: `options.rank`, else the first selected rank."""
    if options.rank is not None:
        return options.rank if options.rank in traces.ranks else None
    selected = chosen_ranks(traces, options)
    return selected[0] if selected else None


_STACK_READS = ("rank", "index", "ph", "pid", "tid", "cat", "name", "ts", "dur", "end", "correlation", "stream")
"""What the call stacks, the device links and the compat candidates read of the events."""

_MATCH_READS = ("pos", "index", "name", "dur", "depth", "thread", "top", "link")
"""What the matching reads of a call stack (`_find_roots`, `callstack.ancestor_at_depth`)."""
_COMPAT_READS = ("index", "cat", "name", "dur")
"""What HTA-compatible matching reads of the events (`_find_roots`, `_gpu_roots`)."""

_ROOT_COLUMNS: dict[str, pl.DataType] = {
    "root": pl.Int64(),
    "index": pl.Int64(),
    "pattern": pl.Utf8(),
    "gpu_us": pl.Float64(),
    "dur": pl.Float64(),
}
"""One row per operator instance (a root): its kernel-name pattern, kernel time and own duration."""


def _stack(traces: TraceSet, options: CommonOptions) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(events, call stacks, device links) of one rank: made once per job and selection, so a
    new operator or minimum length only redoes the matching."""

    def make() -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
        events = prepare(traces, options, columns=_STACK_READS).events
        stack = callstack.build(events, options.hta_compat, link_backward=True)
        links = callstack.device_links(events, stack, options.hta_compat)
        # Kept while the page shows: only what the matching reads (the events only in compat,
        # for its GPU candidates), a third of the whole on a million events.
        kept = events.select(_COMPAT_READS) if options.hta_compat else events.select(_COMPAT_READS).clear()
        return kept, stack.select(_MATCH_READS), links

    return memoised(traces, ("patterns.stack", *selection_key(traces, options)), make)


def _roots(traces: TraceSet, options: PatternsOptions) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(roots, host members, GPU members): the roots with their pattern, kernel time and
    duration; every host event beneath a root and every GPU row a root launched, with its root.
    Shared by `compute` and `pattern_indices` (one per job and options)."""
    key = ("patterns.roots", *selection_key(traces, options, "operator", "min_len", "rank"))
    return memoised(traces, key, lambda: _find_roots(traces, options))


def _find_roots(traces: TraceSet, options: PatternsOptions) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    empty_roots = pl.DataFrame(schema=_ROOT_COLUMNS)
    empty_members = pl.DataFrame(schema={"root": pl.Int64(), "index": pl.Int64()})
    rank = chosen_rank(traces, options)
    if rank is None or not options.operator:
        return empty_roots, empty_members, empty_members
    compat = options.hta_compat
    events, stack, links = _stack(traces, _with_rank(options, rank))
    if stack.height == 0:
        return empty_roots, empty_members, empty_members
    contains = pl.col("name").cast(pl.Utf8).str.contains(options.operator, literal=True)
    host_candidates = stack.filter(contains).select("pos", "depth")
    depths = host_candidates["depth"].to_list()
    gpu_candidates = pl.DataFrame(schema={"index": pl.Int64(), "depth": pl.Int64()})
    if compat:
        # HTA's candidates are every row of its frame whose name contains the operator: a
        # linked GPU row sits one below its launch call; rows on no call stack have depth −1.
        linked_depth = links.join(stack.select(host_pos="pos", host_depth="depth"), on="host_pos", how="left")
        all_rows = events.filter((pl.col("cat").cast(pl.Utf8).fill_null("") != hta.TRACE_SPAN_CAT) & contains)
        gpu_candidates = (
            all_rows.select("index")
            .join(linked_depth.select("index", depth=pl.col("host_depth") + 1), on="index", how="left")
            .join(stack.select("index", on_stack=pl.lit(True)), on="index", how="left")
            .filter(pl.col("on_stack").is_null())
            .select("index", depth=pl.col("depth").fill_null(-1))
        )
        depths += gpu_candidates["depth"].to_list()
    if not depths:
        return empty_roots, empty_members, empty_members
    min_depth = min(depths)
    anc = callstack.ancestor_at_depth(stack, min_depth) if min_depth >= 0 else None
    if anc is None:
        host_members = pl.DataFrame(schema={"root": pl.Int64(), "pos": pl.Int64(), "index": pl.Int64()})
    else:
        host_members = stack.select("pos", "index", root=anc).drop_nulls("root")
    gpu = links.join(host_members.select("root", host_pos="pos"), on="host_pos", how="inner")
    roots = host_candidates.filter(pl.col("depth") == min_depth).select(root="pos")
    roots = roots.join(stack.select(root="pos", index="index", root_name="name", dur="dur"), on="root", how="left")
    kernels = gpu.join(roots.select("root"), on="root", how="semi").sort("root", "ts", "index")
    per_root = kernels.group_by("root").agg(n=pl.len(), names=pl.col("name").cast(pl.Utf8), gpu_us=pl.col("dur").sum())
    roots = roots.join(per_root, on="root", how="left").with_columns(
        n=pl.col("n").fill_null(0), gpu_us=pl.col("gpu_us").fill_null(0.0)
    )
    roots = roots.filter(pl.col("n") >= options.min_len).with_columns(
        pattern=pl.concat_list(
            pl.col("root_name").cast(pl.Utf8), pl.col("names").fill_null(pl.lit([], dtype=pl.List(pl.Utf8)))
        ).list.join("|")
    )
    roots = roots.select("root", "index", "pattern", "gpu_us", "dur")
    if compat and gpu_candidates.height:
        roots = pl.concat(
            [roots, _gpu_roots(events, links, gpu_candidates, min_depth, options.min_len)], how="vertical"
        )
    host_out = host_members.join(roots.select("root"), on="root", how="semi").select("root", "index")
    gpu_out = kernels.join(roots.select("root"), on="root", how="semi").select("root", "index")
    return roots, host_out, gpu_out


def _gpu_roots(
    events: pl.DataFrame, links: pl.DataFrame, candidates: pl.DataFrame, min_depth: int, min_len: int
) -> pl.DataFrame:
    """HTA compat: a linked GPU row at the minimum depth counts one kernel (itself); its
    pattern is its name twice (root name + its own kernel). Roots get negative ids."""
    if min_len > 1:
        return pl.DataFrame(schema=_ROOT_COLUMNS)
    rows = candidates.filter(pl.col("depth") == min_depth).join(
        events.select("index", "name", "dur"), on="index", how="left"
    )
    linked = rows.join(links.select("index"), on="index", how="semi")
    unlinked = rows.join(links.select("index"), on="index", how="anti")
    parts = [
        linked.select(
            root=-1 - pl.col("index"),
            index="index",
            pattern=pl.concat_str(pl.col("name").cast(pl.Utf8), pl.lit("|"), pl.col("name").cast(pl.Utf8)),
            gpu_us="dur",
            dur="dur",
        )
    ]
    if min_len <= 0:
        parts.append(
            unlinked.select(
                root=-1 - pl.col("index"),
                index="index",
                pattern=pl.col("name").cast(pl.Utf8),
                gpu_us=pl.lit(0.0),
                dur="dur",
            )
        )
    return pl.concat(parts, how="vertical").select(
        pl.col("root").cast(pl.Int64),
        pl.col("index").cast(pl.Int64),
        pl.col("pattern").cast(pl.Utf8),
        pl.col("gpu_us").cast(pl.Float64),
        pl.col("dur").cast(pl.Float64),
    )


def _with_rank(options: PatternsOptions, rank: int) -> CommonOptions:
    return CommonOptions(options.scope.with_ranks((rank,)))


def _table(roots: pl.DataFrame) -> pl.DataFrame:
    return (
        roots.group_by("pattern")
        .agg(count=pl.len(), gpu_sum_us=pl.col("gpu_us").sum(), cpu_sum_us=pl.col("dur").sum())
        .sort(["count", "pattern"], descending=[True, False])
    )


def _typed(frame: pl.DataFrame, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    return frame.select([pl.col(name).cast(dtype) for name, dtype in schema.items()])


def compute(traces: TraceSet, options: PatternsOptions) -> pl.DataFrame:
    """pattern, count, gpu_sum_us, cpu_sum_us for the chosen rank: the `top_k` most frequent
    patterns (all with top_k=None), by count descending then pattern text."""
    roots, _, _ = _roots(traces, options)
    if roots.height == 0:
        return pl.DataFrame(schema=COLUMNS)
    table = _table(roots)
    if options.top_k is not None:
        table = table.head(max(options.top_k, 0))
    return _typed(table, COLUMNS)


def table(traces: TraceSet, options: PatternsOptions) -> NotedTable:
    """`compute`, with the rank it is about; when nothing matched, why, and the operators to try."""
    rank = chosen_rank(traces, options)
    if rank is None:
        return NotedTable(pl.DataFrame(schema=COLUMNS), "none of the chosen ranks is loaded")
    frame = compute(traces, options)
    if frame.height:
        return NotedTable(frame, f"rank {rank}")
    # The operator just tried matched nothing: suggest only others (it was among them before).
    names = operators(traces, options, count=8)["name"].to_list()
    suggestions = [name for name in names if not options.operator or options.operator not in name][:4]
    message = (
        f"no call of an operator matching {options.operator!r} launched {options.min_len} or more GPU "
        f"operations on rank {rank}"
    )
    return NotedTable(frame, message + (f". Frequent here: {', '.join(suggestions)}" if suggestions else ""))


def pattern_indices(traces: TraceSet, options: PatternsOptions) -> pl.DataFrame:
    """For each of the `top_k` patterns (as in `compute`): pattern, count and `indices`, the
    file positions (`index`) of every event involved — the roots, the host events beneath them
    and the GPU work they launched — sorted ascending. Used by the overlay export."""
    roots, host, gpu = _roots(traces, options)
    if roots.height == 0:
        return pl.DataFrame(schema=INDICES_COLUMNS)
    table = _table(roots)
    if options.top_k is not None:
        table = table.head(max(options.top_k, 0))
    members = pl.concat([roots.select("root", "index"), host, gpu], how="vertical").join(
        roots.select("root", "pattern"), on="root", how="left"
    )
    grouped = members.group_by("pattern").agg(indices=pl.col("index").unique().sort())
    out = table.select("pattern", "count").join(grouped, on="pattern", how="left", maintain_order="left")
    return _typed(out, INDICES_COLUMNS)


OPERATOR_SPEC = TableColumns(
    RANK,
    ColumnSpec("name", pl.Utf8(), "an operator that launches GPU work (its own or beneath it)", "id"),
    ColumnSpec("count", pl.Int64(), "its calls on the rank", "key"),
)
OPERATOR_COLUMNS = OPERATOR_SPEC.schema


def operators(traces: TraceSet, options: PatternsOptions, count: int = 4) -> pl.DataFrame:
    """rank, name, count: the chosen rank's most called operators that launch GPU work (their own
    or beneath them), ProfilerSteps aside; what the Patterns screen suggests when nothing matched."""
    rank = chosen_rank(traces, options)
    if rank is None:
        return pl.DataFrame(schema=OPERATOR_COLUMNS)
    events = job_tree.tree(traces, CommonOptions(options.scope.with_ranks((rank,)))).events
    # The ops table's host rows (name, kind) that launched GPU work, counted by name.
    rows = (
        events.filter(pl.col("kind").is_in(HOST_KINDS))
        .group_by("name", "kind")
        .agg(count=pl.len(), gpu_total_us=pl.col("gpu_total_us").sum())
        .with_columns(pl.col("name").cast(pl.Utf8))
    )
    names = (
        rows.filter((pl.col("gpu_total_us") > 0) & ~pl.col("name").str.starts_with("ProfilerStep"))
        .group_by("name")
        .agg(pl.col("count").sum())
        .sort(["count", "name"], descending=[True, False])
        .head(count)
        .with_columns(rank=pl.lit(rank))
    )
    return names.select([pl.col(name).cast(dtype) for name, dtype in OPERATOR_COLUMNS.items()])
