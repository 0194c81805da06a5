"""`htatui query JOB "SELECT …"` and `htatui export parquet JOB -o DIR`: the job's named tables
(htatui/analysis/query.py, docs/query.md) through polars SQL, or written out for a notebook."""

from __future__ import annotations

import argparse
import io
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from htatui.cli.args import add_scope_flags
from htatui.cli.errors import fail

if TYPE_CHECKING:
    import polars as pl

    from htatui.analysis.core.columns import TableColumns

QUERY_FORMATS = ("table", "csv", "json", "parquet")
TABLE_ROWS = 200
"""Rows a query's table shows unless --top says otherwise (CSV, JSON and Parquet hold every row)."""


def add_query_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    query = sub.add_parser(
        "query",
        help="polars SQL over the job's named tables (events, kernels, ops, steps, path, every view's)",
        description="Run SQL over a job's tables: htatui query JOB \"SELECT name, SUM(dur_us) FROM kernels GROUP BY "
        'name". Every table is made for the scope (--ranks, --steps, --hta-compat); only the tables the query '
        "names are made. `htatui query --tables` lists them, `--tables NAME` one table's columns (docs/query.md).",
    )
    load_flags(query)
    # The SQL is the last word after the paths: argparse hands every word to PATH, so PATH keeps
    # its words as written (a path's type would turn "1//2" into "1/2") and the run splits them.
    paths = next(action for action in query._actions if action.dest == "paths")
    paths.type, paths.metavar = None, "JOB… SQL"
    paths.help = "the job's trace folder(s), file(s) or URLs, then the query (polars SQL)"
    add_tables_flag(query)
    query.add_argument(
        "--format", choices=QUERY_FORMATS, default="table", help="output format (default: table; parquet needs -o)"
    )
    query.add_argument("--wide", action="store_true", help="every column, even past the terminal's width")
    query.add_argument(
        "--top", type=_top, default=TABLE_ROWS, help=f"rows a table shows: a number or all (default {TABLE_ROWS})"
    )
    query.add_argument("-o", "--out", type=Path, default=None, help="write the result to this file")
    query.add_argument("--force", action="store_true", help="overwrite an existing output file")
    add_scope_flags(query)
    query.set_defaults(run=lambda args: run_query_command(args, load))


def add_tables_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--tables",
        action=_ListTables,
        nargs="?",
        const="",
        metavar="NAME",
        help="list the tables a query can name (with NAME: that table's columns: label, unit, meaning) and exit",
    )


class _ListTables(argparse.Action):
    """`--tables [NAME]`: print the catalog (or a table's columns) and exit, needing no job."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any, *_: Any) -> None:
        parser.exit(print_tables(str(values or ""), "table"))


def _top(text: str) -> int | None:
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"--top: expected a number of rows (1 or more) or all, got {text!r}")
    return value


def run_query_command(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.query import QueryError, named_tables, result_columns, run_query
    from htatui.cli.args import scope_from_args
    from htatui.sources import path_or_url
    from htatui.trace import LoadError

    if len(args.paths) < 2:
        return fail('query: give a job and a query: htatui query JOB "SELECT … FROM kernels"')
    *words, args.sql = args.paths
    try:
        args.paths = [path_or_url(word) for word in words]
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    if args.format == "parquet" and args.out is None and sys.stdout.isatty():
        return fail("query: --format parquet writes binary: give -o FILE or send stdout to a file")
    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        return fail(str(exc))
    try:
        result = run_query(traces, args.sql, scope)
    except QueryError as exc:
        return fail(f"query: {exc}")
    columns = result_columns(result, named_tables(args.sql))
    if args.out is not None:
        return _write_result(result, args, traces, columns)
    if args.format == "parquet":
        sys.stdout.buffer.write(_parquet_bytes(result))
        return 0
    _print(result, args.format, args, columns)
    return 0


def _print(result: pl.DataFrame, fmt: str, args: argparse.Namespace, columns: TableColumns) -> None:
    from htatui.text.render import render_frame

    shown, title = result, f"query · {result.height:,} rows"
    if fmt == "table" and args.top is not None and result.height > args.top:
        shown = result.head(args.top)
        title += f" · the first {args.top:,} (--top all, or --format csv, for every row)"
    render_frame(shown, fmt, title=title, wide=args.wide, columns=columns)  # type: ignore[arg-type]


def _parquet_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()


def _write_result(result: pl.DataFrame, args: argparse.Namespace, traces: Any, columns: TableColumns) -> int:
    from htatui.analysis.export.traces import ExportError, ExportExistsError, check_out_dir, output_path, write_atomic
    from htatui.text.render import csv_text, json_rows

    target = Path(args.out).expanduser()
    try:
        place = output_path(check_out_dir(target.parent), target.name, traces, args.force)
        if args.format == "parquet":
            payload = _parquet_bytes(result)
        elif args.format == "json":
            import orjson

            payload = orjson.dumps(json_rows(result, columns), option=orjson.OPT_INDENT_2) + b"\n"
        else:  # a table written to a file is its CSV
            payload = csv_text(result, columns).encode()
        write_atomic(place, payload, args.force)
    except ExportExistsError as exc:
        return fail(f"{exc} (pass --force to overwrite)")
    except ExportError as exc:
        return fail(str(exc))
    print(place)
    return 0


def print_tables(name: str, fmt: str) -> int:
    """`--tables`: every table a query can name, or one table's columns (name, label, type, meaning)."""
    import polars as pl

    from htatui.analysis.query import TABLES
    from htatui.text.render import render_frame

    if name:
        table = TABLES.get(name)
        if table is None:
            return fail(f"query: no table {name!r} (htatui query --tables lists the {len(TABLES)} tables)")
        title = f"{name}: {table.about}"
        render_frame(columns_frame(table.columns), fmt, title=title, columns=COLUMNS_COLUMNS)  # type: ignore[arg-type]
        return 0
    frame = pl.DataFrame(
        {
            "table": list(TABLES),
            "holds": [table.about for table in TABLES.values()],
            "report": [table.route for table in TABLES.values()],
        }
    )
    title = f"{len(TABLES)} tables (htatui query --tables NAME: its columns)"
    render_frame(frame, fmt, title=title, columns=CATALOG_COLUMNS)  # type: ignore[arg-type]
    return 0


def _catalog_columns() -> tuple[TableColumns, TableColumns]:
    import polars as pl

    from htatui.analysis.core.columns import ColumnSpec, TableColumns

    text = pl.Utf8()
    catalog = TableColumns(
        ColumnSpec("table", text, "the name a query gives it", "id"),
        ColumnSpec("holds", text, "what its rows are", "key", sentence=True),
        ColumnSpec("report", text, "the report flags that print it", "low"),
    )
    columns = TableColumns(
        ColumnSpec("column", text, "the column's name", "id"),
        ColumnSpec("label", text, "its header in report and the app", "low"),
        ColumnSpec("type", text, "its polars dtype"),
        ColumnSpec("unit", text, "its unit"),
        ColumnSpec("importance", text, "id, key, normal or low: what a narrow table keeps", "low"),
        ColumnSpec("meaning", text, "what it holds", "key", sentence=True),
    )
    return catalog, columns


CATALOG_COLUMNS, COLUMNS_COLUMNS = _catalog_columns()


def columns_frame(columns: TableColumns) -> pl.DataFrame:
    """A table's declared columns as a table: name, label, type, unit, importance, meaning."""
    import polars as pl

    return pl.DataFrame(
        {
            "column": [spec.name for spec in columns.specs],
            "label": [spec.header() for spec in columns.specs],
            "type": [str(spec.dtype) for spec in columns.specs],
            "unit": [spec.shown_unit for spec in columns.specs],
            "importance": [spec.importance for spec in columns.specs],
            "meaning": [spec.meaning for spec in columns.specs],
        }
    )


# ---- export parquet -----------------------------------------------------------------------------
def add_parquet_command(
    kinds: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    parser = kinds.add_parser(
        "parquet", help="write the job's named tables (htatui query --tables) as Parquet files, one a table"
    )
    load_flags(parser)
    parser.add_argument("-o", "--out", type=Path, required=True, help="output folder (it must exist)")
    parser.add_argument(
        "--only", default=None, metavar="TABLES", help="these tables only, e.g. kernels,ops,temporal (default: all)"
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing files")
    add_scope_flags(parser)
    parser.set_defaults(run=lambda args: run_parquet(args, load))


def run_parquet(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.export.traces import ExportError, ExportExistsError, check_out_dir, output_path, write_atomic
    from htatui.analysis.query import TABLES
    from htatui.cli.args import scope_from_args
    from htatui.trace import LoadError

    names = list(TABLES) if args.only is None else [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = [name for name in names if name not in TABLES]
    if unknown or not names:
        return fail(f"export parquet: no table {unknown[0] if unknown else ''!r} (htatui query --tables lists them)")
    try:
        scope = scope_from_args(args)
        traces = load(list(args.paths), not args.no_cache)
        folder = check_out_dir(args.out)
        # Every target is checked before any is written: a refused export leaves the folder as it was.
        targets = {name: output_path(folder, f"{name}.parquet", traces, args.force) for name in names}
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    except LoadError as exc:
        return fail(str(exc))
    except ExportExistsError as exc:
        return fail(f"{exc} (pass --force to overwrite)")
    except ExportError as exc:
        return fail(str(exc))
    for name, target in targets.items():
        frame = TABLES[name].make(traces, scope)
        write_atomic(target, _parquet_bytes(frame), args.force)
        print(target)
    print(f"htatui: wrote {len(targets)} tables to {folder}", file=sys.stderr)
    return 0


def tables_markdown() -> str:
    """docs/query.md's list of tables and their columns, from their declarations."""
    from htatui.analysis.query import TABLES

    lines: list[str] = []
    for table in TABLES.values():
        route = f" (`report {table.route}`)" if table.route else ""
        lines += ["", f"### `{table.name}`", "", f"{table.about}{route}.", ""]
        lines += ["| column | unit | meaning |", "|---|---|---|"]
        for spec in table.columns.specs:
            meaning = spec.meaning.replace("|", "\\|")
            lines.append(f"| `{spec.name}` | {spec.shown_unit} | {meaning} |")
    return "\n".join(lines).lstrip("\n") + "\n"
