"""The registry of views: the one place a view is named, with its options and every table it makes.

`report` prints any table here, the TUI's screens show tables from here (under the page that
groups them), and the diff compares the views marked `headline`. Adding a view is one analysis
module plus one `View(...)` entry below (docs/contributing-views.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol

import polars as pl

from htatui.analysis import diagnosis, kept_parts
from htatui.analysis.core import cancel
from htatui.analysis.core.columns import TableColumns
from htatui.analysis.core.kept import options_key
from htatui.analysis.core.memo import held, memoised, remember
from htatui.analysis.core.options import CommonOptions, NotedTable, OptionsT
from htatui.analysis.core.prepare import chosen_ranks, each_rank, with_job_steps
from htatui.analysis.core.scope import Scope
from htatui.analysis.core.stored import summary_rows
from htatui.analysis.memory import view as memory_view
from htatui.analysis.perf.frames import CATEGORY_SPEC
from htatui.analysis.views import annotations as user_annotations
from htatui.analysis.views import (
    critical_path,
    cupti,
    idle,
    kernels,
    launch,
    membw,
    modules,
    op_tree,
    ops,
    overlap,
    patterns,
    queue,
    ranks,
    steps,
    temporal,
)
from htatui.analysis.views.critical_path import columns as path_columns
from htatui.analysis.views.ranks.collectives import COLLECTIVE_SPEC
from htatui.analysis.views.ranks.matrix import MATRIX_SPEC
from htatui.analysis.views.ranks.phases import PHASE_SPEC
from htatui.analysis.views.ranks.stragglers import STEP_STRAGGLER_SPEC, VIEW_STRAGGLER_SPEC
from htatui.trace import TraceSet


class FrameWithMessage(Protocol):
    """A table that may come with a sentence saying why it is empty (e.g. stragglers)."""

    @property
    def frame(self) -> pl.DataFrame: ...

    @property
    def message(self) -> str | None: ...


TableResult = pl.DataFrame | FrameWithMessage

NO_GPU_WORK = "no GPU kernels, copies or memsets in the chosen steps"
NO_IDLE_GAP = "no gap between GPU kernels, copies or memsets in the chosen steps (no GPU work, or one op per stream)"
NO_MATCHED_LAUNCH = "no kernel launch matched to its GPU work (by correlation id) in the chosen steps"
NO_COPIES = "no memory copies or memsets in the chosen steps"
NO_ANNOTATIONS = (
    "no GPU user annotations in the chosen steps (record_function spans the profiler puts on the GPU "
    "timeline, gpu_user_annotation; htatui check counts them per rank)"
)
NO_STEPS = "no ProfilerStep in the trace (or none of the chosen steps)"


@dataclass(frozen=True)
class Table(Generic[OptionsT]):
    """One table of a view: `report --view V --NAME` prints it (the first table needs no flag)."""

    name: str
    compute: Callable[[TraceSet, OptionsT], TableResult]
    per_rank: bool = False
    """Each rank's rows depend on that rank alone and come in rank order (tests/analysis/test_registry.py
    checks it), so over a dataset `make_table` builds the table a rank at a time."""
    columns: TableColumns | None = None
    """What each column is (dtype, unit, label, importance, meaning): one declaration per column,
    in the view's module; tests/analysis/test_column_specs.py checks every column has one."""

    @property
    def about(self) -> str:
        """What the table holds: the first sentence of its compute function's docstring ("" when
        that sentence speaks of code, starting with a `name`)."""
        doc = " ".join((self.compute.__doc__ or "").split())
        return "" if doc.startswith("`") else doc.split(". ")[0].rstrip(".")

    rankless: str | None = None
    """Why a chosen rank can have no row (e.g. no GPU work): a table missing ranks says which and
    why, instead of leaving them out quietly (issue 22)."""
    stored: bool = False
    """Its compute answers from the job's stored summary rows when they hold (`core.stored.summary_rows`):
    then it is made whole, in one step, rather than a rank at a time."""

    @property
    def key_columns(self) -> tuple[str, ...]:
        """The columns the table exists for (its answer): never left out to fit a width."""
        return self.columns.key() if self.columns is not None else ()

    @property
    def id(self) -> str:
        """The table's name in kept answers' keys: its function and its name."""
        return f"{self.compute.__module__}.{self.compute.__qualname__}/{self.name}"


@dataclass(frozen=True)
class View(Generic[OptionsT]):
    """A view: its id (`report --view ID`), title, options class, and its tables, main one first."""

    id: str
    title: str
    options: type[OptionsT]
    tables: tuple[Table[OptionsT], ...]
    headline: bool = False
    """Compared by `htatui diff --summary` (analysis/diff/summary.py has its headline metrics)."""
    summary_tables: tuple[str, ...] = ()
    """What `report` prints when no table is asked for, in place of a main table too long to read
    (launch: one row per launch); `report --full` prints the main table."""

    @property
    def main(self) -> Table[OptionsT]:
        return self.tables[0]

    def table(self, name: str) -> Table[OptionsT]:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(f"view {self.id} has no table {name!r}")


@dataclass(frozen=True)
class PageTable:
    """One table a page shows: a view's registered table (`report --view VIEW --TABLE`)."""

    view: str
    table: str = "main"

    def __str__(self) -> str:
        return self.view if self.table == "main" else f"{self.view} --{self.table}"


@dataclass(frozen=True)
class Page:
    """A TUI screen: its mode id (the key order is the order here) and the registered tables it shows."""

    id: str
    title: str
    tables: tuple[PageTable, ...]
    numbered: bool = True
    """Whether a number key opens it (the Diagnosis page, which the app opens on, has a letter)."""

    @property
    def views(self) -> tuple[str, ...]:
        """The views of its tables, in order, once each."""
        return tuple(dict.fromkeys(table.view for table in self.tables))


def make_table(table: Table[OptionsT], traces: TraceSet, options: OptionsT) -> TableResult:
    """`table.compute`, kept on the job in memory (`memoised`, under the table and its options);
    a `per_rank` table over several ranks is made a rank at a time (`each_rank`), so memory holds
    one rank, not all, and a trace folder's ranks keep their rows on disk (`kept_parts`), read
    instead of the rank next time."""
    cancel.check()
    options = with_job_steps(traces, options)  # chosen once for the job, before any split by rank
    return memoised(traces, table_key(table, options), lambda: _made_table(table, traces, options))


def table_key(table: Table[Any], options: CommonOptions) -> tuple[str, str, str]:
    """What a table's answer is kept under in memory: the table and every option (the scope's too)."""
    return ("table", table.id, options_key(options))


def _made_table(table: Table[OptionsT], traces: TraceSet, options: OptionsT) -> TableResult:
    if not table.per_rank:
        result = table.compute(traces, options)
        return result if table.rankless is None else _noted_whole(table, result, chosen_ranks(traces, options))

    # A rank at a time whenever there are several: over loaded ranks too, so the ranks' columns
    # are never copied into one frame (a folder of 256 ranks held them twice).
    chosen = chosen_ranks(traces, options)
    if len(chosen) < 2 or (table.stored and summary_rows(traces, options) is not None):
        return joined_parts(table, [table.compute(traces, options)], chosen)
    if traces.captures:
        # Not kept with capture traces beside the ranks: the rows depend on them too.
        return joined_parts(table, each_rank(traces, options, table.compute), chosen)
    name = kept_parts.part_name(table.id, options)

    def build(alone: TraceSet, opts: OptionsT) -> TableResult:
        made: TableResult = kept_parts.kept_or_made(traces, alone, name, table.compute, opts)
        return made

    return joined_parts(table, each_rank(traces, options, build), chosen)


def joined_parts(table: Table[Any], parts: Sequence[TableResult], chosen: Sequence[int]) -> TableResult:
    """A per-rank table's parts joined in rank order (a rank may have columns of its own: its CUPTI
    counters), with each part's sentence once; the ranks with no row are named by `noted_rankless`."""
    frames: list[pl.DataFrame] = []
    messages: list[str] = []
    for part in parts:
        frame, message = frame_of(part)
        frames.append(frame)
        if message and message != table.rankless:
            messages.append(message)
    made = noted_rankless(table, pl.concat(frames, how="diagonal_relaxed"), chosen)
    if not messages:
        return made
    frame, message = frame_of(made)
    if frame.height == 0:
        message = None  # the parts say why the table is empty; the general sentence would not
    return NotedTable(frame, "; ".join(dict.fromkeys([*messages, *([message] if message else [])])))


def _noted_whole(table: Table[Any], result: TableResult, chosen: Sequence[int]) -> NotedTable:
    """A table made over all ranks at once, with its own sentence and the ranks it left out."""
    whole, message = frame_of(result)
    left_out = frame_of(noted_rankless(table, whole, chosen))[1]
    if message is None or left_out is None:
        return NotedTable(whole, message or left_out)
    # The table's own sentence stays; a rank left out is named first.
    return NotedTable(whole, message if whole.height == 0 else f"{left_out}; {message}")


def noted_rankless(table: Table[Any], frame: pl.DataFrame, chosen: Sequence[int]) -> TableResult:
    """`frame`, with a sentence naming the chosen ranks it has no row for and why (`table.rankless`)."""
    if table.rankless is None or "rank" not in frame.columns or not chosen:
        return frame
    # kernel-types writes its ranks as text (beside "all"): compared as text.
    present = {str(rank) for rank in frame["rank"].unique().to_list()}
    missing = [rank for rank in chosen if str(rank) not in present]
    if not missing:
        return frame
    if len(missing) == len(chosen):
        return NotedTable(frame, table.rankless)
    return NotedTable(frame, f"rank {', '.join(map(str, missing))} left out: {table.rankless}")


def _hip_noted(
    compute: Callable[[TraceSet, launch.LaunchOptions], pl.DataFrame],
) -> Callable[[TraceSet, launch.LaunchOptions], TableResult]:
    """A launch table that, empty in compat mode on a ROCm trace, says why: HTA 0.6.1 counts CUDA
    launch calls only."""

    def noted(traces: TraceSet, options: launch.LaunchOptions) -> TableResult:
        frame = compute(traces, options)
        why = launch.hip_in_compat(traces, options) if frame.height == 0 else None
        return NotedTable(frame, why) if why else frame

    noted.__name__, noted.__qualname__, noted.__doc__ = compute.__name__, compute.__qualname__, compute.__doc__
    noted.__module__ = compute.__module__
    return noted


_OUTLIER_ABOUT = {
    "short": "Launches whose GPU work ran shorter than the launch call (gpu < cpu ≤ the runtime cutoff).",
    "runtime": "Launch calls that ran longer than the runtime cutoff on the CPU.",
    "delay": "Launches whose GPU work waited longer than the delay cutoff to start.",
}


def _outlier_columns(answer: str) -> TableColumns:
    """The launch table's columns with the outlier list's own answer first among them."""
    return launch.SPEC.ranked("normal", "launch_delay_us").ranked("key", answer)


def _outliers(kind: launch.OutlierKind) -> Callable[[TraceSet, launch.LaunchOptions], pl.DataFrame]:
    def compute(traces: TraceSet, options: launch.LaunchOptions) -> pl.DataFrame:
        return launch.outliers(traces, options, kind)

    compute.__name__ = f"{kind}_outliers"
    compute.__doc__ = _OUTLIER_ABOUT[kind]
    return compute


def _read_table(traces: TraceSet) -> diagnosis.context.TableReader:
    """The diagnosis' reader: a registered table as `report` makes it (`make_table`)."""

    def read(view_id: str, table: str, scope: Scope, knobs: Mapping[str, Any]) -> NotedTable:
        view = BY_ID[view_id]
        return NotedTable(*frame_of(make_table(view.table(table), traces, view.options(scope=scope, **knobs))))

    return read


def _diagnosis_findings(traces: TraceSet, options: diagnosis.DiagnosisOptions) -> NotedTable:
    """What to fix first: each finding with the step time its fix would save, best first."""
    return diagnosis.findings(traces, options, _read_table(traces))


def _diagnosis_summary(traces: TraceSet, options: diagnosis.DiagnosisOptions) -> NotedTable:
    """The step the findings are shares of: its mean time, ranks, steps and what bounds it."""
    return diagnosis.summary(traces, options, _read_table(traces))


VIEWS: tuple[View[Any], ...] = (
    View(
        "diagnosis",
        "Diagnosis",
        diagnosis.DiagnosisOptions,
        (
            Table("main", _diagnosis_findings, columns=diagnosis.FINDING_SPEC),
            Table("summary", _diagnosis_summary, columns=diagnosis.SUMMARY_SPEC),
        ),
    ),
    View(
        "temporal",
        "Temporal",
        temporal.TemporalOptions,
        (Table("main", temporal.compute, per_rank=True, columns=temporal.SPEC, rankless=NO_GPU_WORK, stored=True),),
        headline=True,
    ),
    View(
        "idle",
        "Idle",
        idle.IdleOptions,
        (
            Table("main", idle.compute, per_rank=True, columns=idle.SPEC, rankless=NO_IDLE_GAP),
            Table("by-stream", idle.by_stream, per_rank=True, columns=idle.BY_STREAM_SPEC, rankless=NO_IDLE_GAP),
            Table("interval-stats", idle.interval_stats, per_rank=True, columns=idle.STATS_SPEC, rankless=NO_IDLE_GAP),
        ),
        headline=True,
    ),
    View(
        "kernel-types",
        "Kernel types",
        kernels.KernelTypesOptions,
        (Table("main", kernels.compute_types, columns=kernels.TYPES_SPEC, rankless=NO_GPU_WORK),),
        True,
    ),
    View(
        "kernels",
        "Kernels",
        kernels.KernelsOptions,
        (Table("main", kernels.compute, columns=kernels.KERNELS_SPEC, rankless=NO_GPU_WORK),),
    ),
    View(
        "kernel-spread",
        "Kernel spread",
        kernels.KernelSpreadOptions,
        (Table("main", kernels.spread, columns=kernels.SPREAD_SPEC, rankless=NO_GPU_WORK),),
    ),
    View(
        "overlap",
        "Overlap",
        overlap.OverlapOptions,
        (Table("main", overlap.table, columns=overlap.SPEC, rankless=NO_GPU_WORK),),
        headline=True,
    ),
    View(
        "launch",
        "Launch",
        launch.LaunchOptions,
        (
            Table(
                "main",
                _hip_noted(launch.compute),
                per_rank=True,
                columns=launch.SPEC,
                rankless=NO_MATCHED_LAUNCH,
            ),
            Table(
                "summary",
                _hip_noted(launch.summary),
                per_rank=True,
                columns=launch.SUMMARY_SPEC,
                rankless=NO_MATCHED_LAUNCH,
            ),
            Table("short-kernels", _outliers("short"), per_rank=True, columns=_outlier_columns("gpu_duration_us")),
            Table("runtime-outliers", _outliers("runtime"), per_rank=True, columns=_outlier_columns("cpu_duration_us")),
            Table("delay-outliers", _outliers("delay"), per_rank=True, columns=_outlier_columns("launch_delay_us")),
            Table("histograms", launch.histograms, columns=launch.HISTOGRAM_SPEC),
        ),
        headline=True,
        summary_tables=("summary", "short-kernels", "runtime-outliers", "delay-outliers"),
    ),
    View(
        "queue",
        "Queue length",
        queue.QueueOptions,
        (
            Table("main", queue.compute, per_rank=True, columns=queue.SPEC, rankless=NO_MATCHED_LAUNCH),
            Table("overview", queue.overview, per_rank=True, columns=queue.OVERVIEW_SPEC, rankless=NO_MATCHED_LAUNCH),
            Table("series", queue.series, per_rank=True, columns=queue.SERIES_SPEC, rankless=NO_MATCHED_LAUNCH),
            Table("blocked", queue.blocked, per_rank=True, columns=queue.BLOCKED_SPEC, rankless=NO_MATCHED_LAUNCH),
        ),
    ),
    View(
        "membw",
        "Memory bandwidth",
        membw.MemoryBandwidthOptions,
        (
            Table("main", membw.compute, per_rank=True, columns=membw.SPEC, rankless=NO_COPIES),
            Table("series", membw.series, per_rank=True, columns=membw.SERIES_SPEC, rankless=NO_COPIES),
        ),
    ),
    View(
        "steps",
        "Steps",
        steps.StepsOptions,
        (Table("main", steps.compute, per_rank=True, columns=steps.SPEC, rankless=NO_STEPS),),
    ),
    View(
        "late-starts",
        "Late starts (HTA's straggler method)",
        steps.StragglerOptions,
        (Table("main", ranks.late_starts, columns=steps.STRAGGLER_SPEC),),
    ),
    View(
        "stragglers",
        "Stragglers",
        ranks.RanksOptions,
        (
            Table("main", ranks.stragglers, columns=VIEW_STRAGGLER_SPEC),
            Table("per-step", ranks.straggler_steps, columns=STEP_STRAGGLER_SPEC),
            Table("phases", ranks.straggler_phases, columns=PHASE_SPEC),
        ),
    ),
    View("rank-steps", "Rank steps", ranks.RanksOptions, (Table("main", ranks.rank_steps, columns=MATRIX_SPEC),)),
    View(
        "collectives",
        "Collectives",
        ranks.RanksOptions,
        (Table("main", ranks.collectives, columns=COLLECTIVE_SPEC),),
    ),
    View(
        "annotations",
        "Annotations",
        user_annotations.AnnotationOptions,
        (
            Table(
                "main",
                user_annotations.table,
                per_rank=True,
                columns=user_annotations.SPEC,
                rankless=NO_ANNOTATIONS,
            ),
        ),
    ),
    View(
        "patterns",
        "Patterns",
        patterns.PatternsOptions,
        (
            Table("main", patterns.table, columns=patterns.SPEC),
            Table("operators", patterns.operators, columns=patterns.OPERATOR_SPEC),
        ),
    ),
    View(
        "ops",
        "Ops",
        ops.OpsOptions,
        (
            Table(
                "main",
                ops.main,
                per_rank=True,
                columns=ops.SPEC,
            ),
            Table("top-bars", ops.top, columns=ops.TOP_SPEC),
            Table("categories", ops.categories, columns=CATEGORY_SPEC),
        ),
    ),
    View(
        "op-tree",
        "Op tree",
        op_tree.OpTreeOptions,
        (Table("main", op_tree.table, columns=op_tree.SPEC),),
    ),
    View(
        "modules",
        "Modules",
        modules.ModulesOptions,
        (
            Table("main", modules.compute, columns=modules.INSTANCE_SPEC),
            Table("types", modules.types, columns=modules.TYPE_SPEC),
            Table("tree", modules.tree, columns=modules.TREE_SPEC),
        ),
    ),
    View(
        "cupti",
        "CUPTI counters",
        cupti.CuptiOptions,
        (
            Table("main", cupti.compute, per_rank=True, columns=cupti.KERNEL_SPEC, rankless=cupti.NO_RANGES),
            Table("by-op", cupti.by_op, per_rank=True, columns=cupti.OP_SPEC, rankless=cupti.NO_RANGES),
        ),
    ),
    View(
        "memory",
        "GPU memory",
        memory_view.MemoryOptions,
        (
            Table("main", memory_view.summary, columns=memory_view.SPECS["summary"]),
            Table("sites", memory_view.sites, columns=memory_view.SPECS["sites"]),
            Table("growth", memory_view.growth, columns=memory_view.SPECS["growth"]),
            Table("spans", memory_view.spans, columns=memory_view.SPECS["spans"]),
            Table("oom", memory_view.ooms, columns=memory_view.SPECS["oom"]),
            Table("series", memory_view.series, columns=memory_view.SPECS["series"]),
        ),
    ),
    View(
        "critical-path",
        "Critical path",
        critical_path.CriticalPathOptions,
        (
            Table("main", critical_path.compute, columns=path_columns.SUMMARY_SPEC),
            Table("edges", critical_path.edges, columns=path_columns.PATH_SPEC),
            Table("top-events", critical_path.top_events, columns=path_columns.TOP_SPEC),
            Table("job", critical_path.job, columns=path_columns.JOB_SPEC),
            Table("job-edges", critical_path.job_edges, columns=path_columns.PATH_SPEC),
            Table("what-if", critical_path.path_what_if, columns=path_columns.WHAT_IF_SPEC),
            Table("job-what-if", critical_path.job_what_if, columns=path_columns.WHAT_IF_SPEC),
            Table("straggler-what-if", critical_path.straggler_what_if, columns=path_columns.RANK_WHAT_IF_SPEC),
        ),
    ),
)

PAGES: tuple[Page, ...] = (
    Page("diagnosis", "Diagnosis", (PageTable("diagnosis", "summary"), PageTable("diagnosis")), numbered=False),
    Page("temporal", "Temporal", (PageTable("temporal"),)),
    Page("idle", "Idle", (PageTable("idle", "by-stream"), PageTable("idle", "interval-stats"))),
    Page("kernels", "Kernels", (PageTable("kernels"), PageTable("kernel-spread"), PageTable("kernel-types"))),
    Page("overlap", "Overlap", (PageTable("overlap"),)),
    Page(
        "launch",
        "Launch",
        (
            PageTable("launch", "summary"),
            PageTable("launch", "short-kernels"),
            PageTable("launch", "runtime-outliers"),
            PageTable("launch", "delay-outliers"),
            PageTable("launch", "histograms"),
        ),
    ),
    Page(
        "counters",
        "Counters",
        (
            PageTable("queue", "overview"),
            PageTable("membw"),
            PageTable("queue", "series"),
            PageTable("membw", "series"),
            PageTable("cupti"),
            PageTable("cupti", "by-op"),
        ),
    ),
    Page("ops", "Ops", (PageTable("ops"), PageTable("ops", "top-bars"), PageTable("op-tree"))),
    Page("patterns", "Patterns", (PageTable("patterns"),)),
    Page(
        "ranks",
        "Ranks",
        (
            PageTable("rank-steps"),
            PageTable("stragglers"),
            PageTable("stragglers", "per-step"),
            PageTable("stragglers", "phases"),
            PageTable("collectives"),
        ),
    ),
    Page(
        "memory",
        "Memory",
        (
            PageTable("memory"),
            PageTable("memory", "sites"),
            PageTable("memory", "oom"),
            PageTable("memory", "growth"),
            PageTable("memory", "spans"),
            PageTable("memory", "series"),
        ),
    ),
    Page("modules", "Modules", (PageTable("modules"), PageTable("modules", "types"), PageTable("modules", "tree"))),
    Page(
        "critical-path",
        "Critical path",
        (
            PageTable("critical-path"),
            PageTable("critical-path", "edges"),
            PageTable("critical-path", "top-events"),
            PageTable("critical-path", "what-if"),
            PageTable("critical-path", "job"),
            PageTable("critical-path", "job-edges"),
            PageTable("critical-path", "job-what-if"),
        ),
    ),
)
"""The TUI's screens in tab order (number key n opens the n-th numbered page)."""

BY_ID: dict[str, View[Any]] = {view.id: view for view in VIEWS}
PAGE_BY_ID: dict[str, Page] = {page.id: page for page in PAGES}


def page(page_id: str) -> Page:
    return PAGE_BY_ID[page_id]


def view(view_id: str) -> View[Any]:
    return BY_ID[view_id]


def make_page_tables(
    traces: TraceSet, tables: Sequence[PageTable], options: Mapping[str, Any]
) -> dict[PageTable, NotedTable]:
    """Each of a page's tables, made as `report` makes it with `options[view id]` (the scope and
    the view's knob values); the work between tables stops when the analysis is cancelled.

    Over several ranks, the page's per-rank tables are made together a rank at a time, so each
    rank is read once for all of them (a dataset's is dropped again), not once per table, and the
    ranks' columns are never copied into one frame.
    """
    # The job's common steps chosen once, as `make_table` does: the kept answers' keys match.
    options = {view_id: with_job_steps(traces, opts) for view_id, opts in options.items()}
    out: dict[PageTable, NotedTable] = {}
    for wanted in tables:
        found = held(traces, table_key(BY_ID[wanted.view].table(wanted.table), options[wanted.view]))
        if found is not None:
            out[wanted] = NotedTable(*frame_of(found))
    together = [w for w in tables if w not in out and BY_ID[w.view].table(w.table).per_rank]
    if len(together) > 1 and options:
        any_options = options[together[0].view]
        chosen = chosen_ranks(traces, any_options)
        if len(chosen) >= 2:
            made = [BY_ID[w.view].table(w.table) for w in together]

            def build(part: TraceSet, alone: CommonOptions) -> list[TableResult]:
                if traces.captures:  # the rows depend on the capture traces too: not kept
                    return [
                        table.compute(part, replace(options[w.view], scope=alone.scope))
                        for w, table in zip(together, made, strict=True)
                    ]
                return [
                    kept_parts.kept_or_made(
                        traces,
                        part,
                        kept_parts.part_name(table.id, options[w.view]),
                        table.compute,
                        replace(options[w.view], scope=alone.scope),
                    )
                    for w, table in zip(together, made, strict=True)
                ]

            parts = each_rank(traces, any_options, build)
            for index, (wanted, table) in enumerate(zip(together, made, strict=True)):
                joined = joined_parts(table, [part[index] for part in parts], chosen)
                remember(traces, table_key(table, options[wanted.view]), joined)
                out[wanted] = NotedTable(*frame_of(joined))
    for wanted in tables:
        if wanted not in out:
            view = BY_ID[wanted.view]
            frame, message = frame_of(make_table(view.table(wanted.table), traces, options[wanted.view]))
            out[wanted] = NotedTable(frame, message)
    return {wanted: out[wanted] for wanted in tables}


def frame_of(result: TableResult) -> tuple[pl.DataFrame, str | None]:
    """The table of a result and, when it has one, the sentence that explains it."""
    if isinstance(result, pl.DataFrame):
        return result, None
    return result.frame, result.message


def column_problems(view: View[Any], table: Table[Any], frame: pl.DataFrame) -> list[str]:
    """What a made table's columns lack against its declaration, each in one line that says where
    to add the missing line (a new table or column is given its spec at merge time)."""
    where = f"{view.id}{'' if table.name == 'main' else ' --' + table.name}"
    module = getattr(table.compute, "__module__", "its view's module")
    if table.columns is None:
        return [
            f"{where}: no column specification: declare a TableColumns in {module} and name it in its "
            f"Table(..., columns=...) in htatui/analysis/registry.py (docs/contributing-views.md)"
        ]
    problems = []
    for name, dtype in frame.schema.items():
        spec = table.columns.find(name)
        if spec is None:
            problems.append(
                f"{where}: column {name!r} ({dtype}) has no ColumnSpec: add "
                f'ColumnSpec({name!r}, pl.{dtype}(), "<what it means>") to its TableColumns ({module})'
            )
        elif spec.is_pattern and spec.dtype.is_numeric() and dtype.is_numeric():
            continue
        elif spec.dtype != dtype:
            problems.append(f"{where}: column {name!r} is {dtype} but its ColumnSpec says {spec.dtype}")
    return problems


def headline_views() -> tuple[View[Any], ...]:
    return tuple(v for v in VIEWS if v.headline)
