"""`htatui query`: polars SQL over named tables of a job, every one made for the same scope.

The tables are the job's own rows (`events`, `kernels`, `ops`), the steps, the step model's path
(`path`, the critical-path view's `job-edges`) and every registered view's table (`temporal`,
`idle_by_stream`, `critical_path_what_if` …), each declared column by column (`TableColumns`).
Only the tables a query names are made. docs/query.md lists them with their columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import polars as pl

from htatui.analysis.core.columns import RANK, ColumnSpec, TableColumns, derived_spec
from htatui.analysis.core.kernel_types import typed_gpu_events
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.prepare import prepare
from htatui.analysis.core.scope import Scope
from htatui.analysis.model import job_tree
from htatui.analysis.registry import VIEWS, Table, View, frame_of, make_table
from htatui.errors import HtatuiError
from htatui.trace import TraceSet
from htatui.trace.kineto import GPU_ACTIVITY_CATS


class QueryError(HtatuiError, ValueError):
    """A query that cannot run: one line saying why (bad SQL, an unknown table or column)."""


@dataclass(frozen=True)
class QueryTable:
    """A table a query can name: what it holds, its columns, and how it is made for a scope."""

    name: str
    about: str
    columns: TableColumns
    make: Callable[[TraceSet, Scope], pl.DataFrame]
    route: str = ""
    """`report`'s flags for a view's table (`--view idle --by-stream`); "" for the job's own rows."""


_TS = ColumnSpec("ts_us", pl.Float64(), "the start, on the job's common time base", "key")
_DUR = ColumnSpec("dur_us", pl.Float64(), "the duration", "key")
_END = ColumnSpec("end_us", pl.Float64(), "ts_us + dur_us")
_INDEX = ColumnSpec("index", pl.Int64(), "the event's position in its rank's trace file (with rank, its id)", "id")
_EVENT_STEP = ColumnSpec("step", pl.Int64(), "the ProfilerStep the event falls in (a GPU row: its launch's)")

EVENTS_SPEC = TableColumns(
    RANK,
    _INDEX,
    _EVENT_STEP,
    ColumnSpec("cat", pl.Utf8(), "the category (cpu_op, kernel, cuda_runtime, gpu_memcpy …)"),
    ColumnSpec("name", pl.Utf8(), "the event's name", "id"),
    ColumnSpec("pid", pl.Utf8(), "the process (or device) id as recorded", "low"),
    ColumnSpec("tid", pl.Utf8(), "the thread (or stream) id as recorded", "low"),
    _TS,
    _DUR,
    _END,
    ColumnSpec("stream", pl.Int64(), "a GPU row's stream"),
    ColumnSpec("device", pl.Int64(), "a GPU row's device", "low"),
    ColumnSpec("correlation", pl.Int64(), "joins a launch call to its GPU work", "low"),
    ColumnSpec("external_id", pl.Int64(), "joins an op to what it launched (the profiler's External id)", "low"),
    ColumnSpec("bytes", pl.Int64(), "bytes a copy or memset moved", "low", unit="B"),
    ColumnSpec("memory_bw_gbps", pl.Float64(), "a copy's bandwidth as recorded", "low"),
    ColumnSpec("collective_name", pl.Utf8(), "a collective's name from its args (allreduce …)", "low"),
)

KERNELS_SPEC = TableColumns(
    RANK,
    _INDEX,
    _EVENT_STEP,
    ColumnSpec("cat", pl.Utf8(), "kernel, gpu_memcpy or gpu_memset"),
    ColumnSpec("name", pl.Utf8(), "the kernel's (copy's, memset's) name", "id"),
    ColumnSpec("kernel_type", pl.Utf8(), "COMPUTATION, COMMUNICATION, MEMORY or OTHER"),
    ColumnSpec("stream", pl.Int64(), "the GPU stream it ran on"),
    _TS,
    _DUR,
    _END,
    ColumnSpec("correlation", pl.Int64(), "joins it to its launch call in events", "low"),
    ColumnSpec(
        "op_index", pl.Int64(), "the index of the op (in ops) that launched it, as key_averages counts it", "key"
    ),
)

OPS_SPEC = TableColumns(
    RANK,
    _INDEX,
    ColumnSpec("parent_index", pl.Int64(), "the index of the enclosing op (null at the top of a thread)"),
    ColumnSpec("depth", pl.Int64(), "levels below the top of its thread"),
    ColumnSpec("name", pl.Utf8(), "the op's (annotation's, runtime call's) name", "id"),
    ColumnSpec("kind", pl.Utf8(), "op, annotation, runtime, driver, kernel-launcher or memory"),
    _TS,
    _DUR,
    ColumnSpec("cpu_total_us", pl.Float64(), "its duration on the CPU"),
    ColumnSpec("cpu_self_us", pl.Float64(), "cpu_total_us minus its children's"),
    ColumnSpec("gpu_self_us", pl.Float64(), "Σ of the GPU work it launched itself", "key"),
    ColumnSpec("gpu_total_us", pl.Float64(), "Σ of the GPU work of it and everything beneath it"),
)


def _options(scope: Scope) -> CommonOptions:
    return CommonOptions(scope)


def events_table(traces: TraceSet, scope: Scope) -> pl.DataFrame:
    """The scope's complete events (ranks, steps), one row each."""
    names = [name for name in EVENTS_SPEC.names() if name not in ("step", "ts_us", "dur_us", "end_us")]
    found = prepare(traces, _options(scope), columns=(*names, "iteration", "ts", "dur", "end")).events
    return EVENTS_SPEC.conform(_renamed(found))


def kernels_table(traces: TraceSet, scope: Scope) -> pl.DataFrame:
    """The scope's GPU work (kernels, copies, memsets), typed, with the op that launched each."""
    options = _options(scope)
    reads = (
        "rank",
        "index",
        "iteration",
        "cat",
        "name",
        "collective_name",
        "stream",
        "ts",
        "dur",
        "end",
        "correlation",
    )
    events = prepare(traces, options, columns=reads).events
    gpu = typed_gpu_events(events, scope.hta_compat, scope.rules, *reads).filter(pl.col("cat").is_in(GPU_ACTIVITY_CATS))
    tree = job_tree.tree(traces, options)
    owners = tree.work.filter(pl.col("owner").is_not_null()).join(
        tree.events.select("rank", owner="pos", op_index="index"), on=["rank", "owner"], how="left"
    )
    typed = gpu.rename({"kind": "kernel_type"}).join(
        owners.select("rank", "index", "op_index"), on=["rank", "index"], how="left"
    )
    return KERNELS_SPEC.conform(_renamed(typed)).sort("rank", "ts_us", "index")


def ops_table(traces: TraceSet, scope: Scope) -> pl.DataFrame:
    """The profiler's event tree: one row per host event (op, annotation, runtime call …)."""
    tree = job_tree.tree(traces, _options(scope)).events
    parents = tree.select("rank", parent="pos", parent_index="index")
    return OPS_SPEC.conform(_renamed(tree.join(parents, on=["rank", "parent"], how="left"))).sort("rank", "ts_us")


def _renamed(frame: pl.DataFrame) -> pl.DataFrame:
    """The trace's names with their units (ts → ts_us), the step as `step`, text as text."""
    names = {"ts": "ts_us", "dur": "dur_us", "end": "end_us", "iteration": "step"}
    frame = frame.rename({old: new for old, new in names.items() if old in frame.columns})
    return frame.with_columns(pl.col(pl.Categorical).cast(pl.Utf8))


def sql_name(view: View[Any], table: Table[Any]) -> str:
    """A view's table as a query names it: 'temporal', 'idle_by_stream', 'critical_path_what_if'."""
    name = view.id if table.name == "main" else f"{view.id}_{table.name}"
    return RENAMED.get(name, name).replace("-", "_")


RENAMED = {"kernels": "kernels_by_name", "ops": "ops_by_name"}
"""Views whose main table would take a name the job's own rows have (`kernels`, `ops`)."""


def _view_maker(view: View[Any], table: Table[Any]) -> Callable[[TraceSet, Scope], pl.DataFrame]:
    def make(traces: TraceSet, scope: Scope) -> pl.DataFrame:
        return frame_of(make_table(table, traces, view.options(scope=scope)))[0]

    return make


def _catalog() -> dict[str, QueryTable]:
    tables = [
        QueryTable("events", "the scope's complete events, one row each", EVENTS_SPEC, events_table),
        QueryTable("kernels", "the scope's GPU work: kernels, copies, memsets", KERNELS_SPEC, kernels_table),
        QueryTable("ops", "the profiler's event tree: one row per host event", OPS_SPEC, ops_table),
    ]
    for view in VIEWS:
        for table in view.tables:
            if table.columns is None:
                continue
            flag = "" if table.name == "main" else f" --{table.name}"
            about = table.about or view.title
            route = f"--view {view.id}{flag}"
            tables.append(QueryTable(sql_name(view, table), about, table.columns, _view_maker(view, table), route))
    job_edges = next(t for t in tables if t.name == "critical_path_job_edges")
    tables.append(replace(job_edges, name="path", about="the step model's path through the job, edge by edge"))
    return {table.name: table for table in tables}


TABLES: dict[str, QueryTable] = _catalog()

_QUOTED = re.compile(r"'(?:[^']|'')*'")
_WORD = re.compile(r'"([^"]+)"|([A-Za-z_][A-Za-z0-9_]*)')


def named_tables(sql: str) -> list[str]:
    """The tables `sql` may read: each known table name it has as a word outside string literals."""
    words = {(quoted or bare).lower() for quoted, bare in _WORD.findall(_QUOTED.sub("''", sql))}
    return [name for name in TABLES if name in words]


def run_query(traces: TraceSet, sql: str, scope: Scope) -> pl.DataFrame:
    """`sql` over the tables it names, each made for `scope`; QueryError with one line when it cannot run."""
    if not sql.strip():
        raise QueryError("the query is empty: write SELECT … FROM a table (htatui query --tables lists them)")
    context = pl.SQLContext()
    for name in named_tables(sql):
        context.register(name, TABLES[name].make(traces, scope).lazy())
    try:
        return context.execute(sql, eager=True)
    except pl.exceptions.PolarsError as error:
        raise QueryError(_one_line(error)) from None


def _one_line(error: Exception) -> str:
    """polars' message, its first line, with an unknown table named as ours."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    unknown = re.fullmatch(r"relation '([^']*)' was not found", text)
    if unknown:
        return f"no table {unknown.group(1)!r} (htatui query --tables lists the {len(TABLES)} tables)"
    return text


def result_columns(result: pl.DataFrame, tables: list[str]) -> TableColumns:
    """A result's columns as the named tables declare them (a column keeps its table's label and
    unit when its name and dtype are that table's); others are labelled from their names."""
    specs = []
    for name, dtype in result.schema.items():
        found = next((spec for table in tables if (spec := TABLES[table].columns.find(name)) is not None), None)
        specs.append(found if found is not None and found.dtype == dtype else derived_spec(name, dtype))
    return TableColumns(*specs)
