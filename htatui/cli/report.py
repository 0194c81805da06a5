"""`htatui report --view VIEW` and `htatui export …`: the views' CLI faces.

Views and their tables come from the registry (htatui/analysis/registry.py); every knob field of a
view's options (htatui/analysis/core/knobs.py) becomes a flag, its default read from the dataclass, and
a flag given to a view without that field is refused.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from htatui.analysis.core.knobs import Kind, Knob, knobs_of, parse
from htatui.analysis.registry import BY_ID, VIEWS, View, frame_of, make_table
from htatui.cli.args import Parser, add_scope_flags
from htatui.cli.errors import fail
from htatui.text.render import render_frame


@dataclass(frozen=True)
class OptionFlag:
    """One `report` flag: the option field it sets, how it parses, and its help with the defaults."""

    flag: str
    field: str
    kind: Kind
    help: str


def _option_flags() -> list[OptionFlag]:
    """Every knob of every view once, by flag; help names the views and their defaults (a flag
    views use for different things says each: `--rank` mines patterns and follows a path)."""
    by_flag: dict[str, tuple[str, Knob, list[str], dict[str, str], dict[str, list[str]]]] = {}
    for view in VIEWS:
        defaults = {f.name: f.default for f in dataclasses.fields(view.options)}
        for name, spec in knobs_of(view.options).items():
            field_name, _spec, views_with, shown, helps = by_flag.setdefault(spec.flag, (name, spec, [], {}, {}))
            if field_name != name:
                raise ValueError(f"{spec.flag} names two option fields ({field_name}, {name})")
            views_with.append(view.id)
            helps.setdefault(spec.help, []).append(view.id)
            default = defaults[name]
            if default is not None and spec.kind != "switch":
                shown.setdefault(str(default), view.id)
    flags = []
    for flag, (field_name, spec, views_with, shown, helps) in by_flag.items():
        if len(helps) > 1:
            text = "; ".join(_named(help_text, ids) for help_text, ids in helps.items())
        else:
            text = _named(spec.help, views_with)
        if len(shown) == 1:
            text += f" ({next(iter(shown))})"
        elif shown:
            text += " (" + ", ".join(f"{view_id} {value}" for value, view_id in shown.items()) + ")"
        flags.append(OptionFlag(flag, field_name, spec.kind, text))
    return flags


def _named(help_text: str, views: list[str]) -> str:
    """A knob's help led by the views it belongs to, unless it names them itself ("idle: …")."""
    return help_text if VIEW_PREFIX.match(help_text) else f"{'/'.join(views)}: {help_text}"


VIEW_PREFIX = re.compile(r"^[a-z-]+(/[a-z-]+)*( --[a-z-]+)?: ")


OPTION_FLAGS: list[OptionFlag] = _option_flags()

SUMMARY_ROWS = 20
"""Rows of each outlier table `report` prints by default (the largest by its key column)."""

TABLE_ROWS = 1_000
"""Rows of a table `report` prints by default in table format (CSV and JSON hold every row):
the job's critical path alone has a row per kernel. `--top N` or `--top all` says otherwise."""

ROWS_FIELD = "top_k"
"""The option field `--top` sets; on a view without one, `--top` is how many rows to print."""

ROWS_HELP = "how many rows to print (all: every row; default: 1,000 in table format, all in CSV and JSON)"


def _parser_of(kind: Kind) -> Callable[[str], Any]:
    def parser(text: str) -> Any:
        return parse(kind, text)

    parser.__name__ = {"ints": "integer list", "text": "text"}.get(kind, kind)  # argparse's "invalid int value"
    return parser


def _short(text: str, limit: int = 110) -> str:
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + " …"


def _escaped(text: str) -> str:
    """Help text as argparse reads it (it formats help with %)."""
    return text.replace("%", "%%")


def _table_help(view: View[Any], name: str, columns: bool = False) -> str:
    about = view.table(name).about
    text = f"print the {name} table of {view.id}" + (f": {_short(about)}" if about else "")
    return text + (_columns_help(view, name) if columns else "")


def _columns_help(view: View[Any], name: str) -> str:
    """A table's columns as its spec declares them, for one view's help (the answer marked *)."""
    declared = view.table(name).columns
    if declared is None:
        return ""
    from htatui.analysis.query import sql_name

    names = ", ".join(f"{spec.name}*" if spec.importance == "key" else spec.name for spec in declared.specs)
    marked = " (* marks the answer)" if declared.key() else ""
    listing = f"htatui query --tables {sql_name(view, view.table(name))}"
    return f". Columns{marked}: {names}; {listing} says what each means"


def _add_view_flags(parser: argparse.ArgumentParser, views: tuple[View[Any], ...], columns: bool = False) -> None:
    """Each view's table flags and knobs in a group of its own (a flag two views share is listed
    under the first, its help naming both); `report --view X --help` lists X's alone."""
    table_flags: dict[str, list[View[Any]]] = {}
    for view in views:
        for table in view.tables[1:]:
            table_flags.setdefault(table.name, []).append(view)
    done: set[str] = set()
    for view in views:
        about = f": {_short(view.main.about)}" if view.main.about else ""
        about += _columns_help(view, "main") if columns else ""
        if view.summary_tables:
            listed = ", ".join(view.summary_tables)
            text = f"without a table flag, prints the tables {listed} (--full: its main table{about})"
        else:
            text = f"without a table flag, prints its main table{about}"
        group = parser.add_argument_group(f"--view {view.id} ({view.title})", text)
        for table in view.tables[1:]:
            if table.name in done:
                continue
            done.add(table.name)
            owners = table_flags[table.name]
            text = "; ".join(_table_help(owner, table.name, columns) for owner in owners)
            group.add_argument(f"--{table.name}", action="store_true", help=_escaped(text))
        if view.summary_tables and "full" not in done:
            done.add("full")
            group.add_argument(
                "--full", action="store_true", help=_escaped(f"print the main table of {view.id}{about}")
            )
        # A knob not given leaves no attribute (SUPPRESS), so a value of None ("--top all") is a value.
        for option in OPTION_FLAGS:
            if option.flag in done or option.field not in {f.name for f in dataclasses.fields(view.options)}:
                continue
            done.add(option.flag)
            if option.kind == "switch":  # present = True
                group.add_argument(
                    option.flag,
                    dest=option.field,
                    action="store_const",
                    const=True,
                    default=argparse.SUPPRESS,
                    help=option.help,
                )
                continue
            group.add_argument(
                option.flag,
                dest=option.field,
                type=_parser_of(option.kind),
                default=argparse.SUPPRESS,
                help=option.help,
            )


AddFlags = Callable[[argparse.ArgumentParser], None]


class _ViewHelp(argparse.Action):
    """`--help`: with `--view X` given before it, only X's tables and options; else every view's."""

    def __init__(self, option_strings: list[str], dest: str, common: tuple[AddFlags, ...], **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=kwargs.get("help"))
        self.common = common

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, *_: Any) -> None:
        view_id = getattr(namespace, "view", None)
        if view_id in BY_ID:
            alone = Parser(prog=parser.prog, add_help=False)
            parser = _report_parser(alone, (BY_ID[view_id],), self.common, columns=True)
        parser.print_help()
        parser.exit()


def _report_parser(
    report: argparse.ArgumentParser, views: tuple[View[Any], ...], common: tuple[AddFlags, ...], columns: bool = False
) -> argparse.ArgumentParser:
    """`report`'s flags: help, the load and format flags (`common`), the view, the scope, then each view's."""
    report.add_argument(
        "-h", "--help", action=_ViewHelp, common=common, help="this help; after --view X, X's tables and options"
    )
    for add in common:
        add(report)
    report.add_argument("--view", required=True, choices=sorted(BY_ID), help="which view to print")
    add_scope_flags(report)
    report.add_argument(
        "--comm-rules", action="append", type=Path, default=[], help="extra communication-kernel rules (TOML)"
    )
    report.add_argument(
        "--device-peaks", action="append", type=Path, default=[], help="extra device peaks for --flops (TOML)"
    )
    report.add_argument(
        "--diagnosis-rules", action="append", type=Path, default=[], help="extra or changed diagnosis thresholds (TOML)"
    )
    _add_view_flags(report, views, columns)
    top = report._option_string_actions.get("--top")
    if top is None:  # `report --view X --help` for a view without its own top-k
        report.add_argument(
            "--top", dest=ROWS_FIELD, type=_parser_of("int"), default=argparse.SUPPRESS, help=_escaped(ROWS_HELP)
        )
    else:
        top.help = _escaped(f"{top.help}; every other view: {ROWS_HELP}")
    return report


def add_report_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    format_flag: Callable[[argparse.ArgumentParser], None],
    load: Callable[..., Any],
) -> None:
    report = sub.add_parser(
        "report",
        help="print one analysis view as a table, CSV or JSON",
        description="Print one view's table. Each view's table flags and options are listed under it; "
        "`report --view X --help` lists X's alone.",
        add_help=False,
    )
    _report_parser(report, VIEWS, (load_flags, format_flag))
    report.set_defaults(run=lambda args: run_report(args, load))


def run_report(args: argparse.Namespace, load: Callable[..., Any]) -> int:
    from htatui.analysis.core.describe import describe_scope, missing_steps
    from htatui.cli.args import scope_from_args

    view: View[Any] = BY_ID[args.view]
    own = {table.name for table in view.tables[1:]}
    chosen = [name for name in own if getattr(args, name.replace("-", "_"), False)]
    other_tables = sorted(
        {table.name for v in VIEWS for table in v.tables[1:]} - own - {"main"},
    )
    other_tables = [name for name in other_tables if getattr(args, name.replace("-", "_"), False)]
    if other_tables:
        return fail(f"--{other_tables[0]} does not apply to --view {args.view}")
    options_class = view.options
    names = {f.name for f in dataclasses.fields(options_class)}
    values: dict[str, Any] = {}
    rows_given = hasattr(args, ROWS_FIELD)
    rows: int | None = getattr(args, ROWS_FIELD, None) if ROWS_FIELD not in names else None
    if rows is not None and rows < 1:
        return fail(f"--top needs 1 or more rows, or all (got {rows})")
    for option in OPTION_FLAGS:
        if not hasattr(args, option.field) or option.field == ROWS_FIELD and ROWS_FIELD not in names:
            continue
        value = getattr(args, option.field)
        if option.field not in names:
            return fail(f"{option.flag} does not apply to --view {args.view}")
        values[option.field] = value
    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        return fail(exc)
    ranks = scope.ranks
    from htatui.analysis.core.comm_rules import CommRulesError

    # A refused rules file (read with the scope's rules) or trace raises an HtatuiError that main() prints.
    traces = load(list(args.paths), not args.no_cache, notes_below=args.format == "table", rules=scope.rules)
    if ranks is not None:
        missing = [r for r in ranks if r not in traces.ranks]
        if missing:
            have = ", ".join(map(str, traces.rank_ids))
            return fail(f"rank {missing[0]} is not in the traces (ranks: {have})")
    options = options_class(scope=scope, **values)
    steps_problem = missing_steps(traces, options)
    if steps_problem:
        return fail(f"{steps_problem}")
    full = bool(getattr(args, "full", False))
    if full and (chosen or not view.summary_tables):
        return fail(f"--full does not apply to --view {args.view}{' --' + chosen[0] if chosen else ''}")
    if chosen or full or not view.summary_tables:
        table_names = [chosen[0] if chosen else "main"]
    elif args.format == "table":
        table_names = list(view.summary_tables)
    else:  # CSV and JSON hold one table: the first summary
        table_names = [view.summary_tables[0]]
    from htatui.cli.info import load_notes

    notes = load_notes(traces)
    scope_text = describe_scope(traces, options)
    for index, name in enumerate(table_names):
        table = view.table(name)
        try:
            result = make_table(table, traces, options)
        except CommRulesError as exc:
            return fail(exc)
        except ValueError as exc:  # an option value the view refuses (e.g. an unknown column)
            return fail(f"--view {args.view}: {exc}")
        frame, message = frame_of(result)
        if message and frame.height:
            print(f"htatui: {message}", file=sys.stderr)
        elif message and args.format != "table":
            print(f"htatui: {message}", file=sys.stderr)
        title = f"{args.view}{'' if name == 'main' else ' ' + name} · {scope_text}"
        if index == 0 and notes:
            title += f" ({len(notes)} note{'s' if len(notes) > 1 else ''}, listed below)"
        table_notes = list(notes) if index == len(table_names) - 1 else []
        if len(table_names) > 1 and index > 0 and frame.height > SUMMARY_ROWS:
            title += f" · the {SUMMARY_ROWS} largest of {frame.height:,} (--{name} prints all)"
            if table.key_columns:
                frame = frame.sort(table.key_columns[0], descending=True, nulls_last=True)
            frame = frame.head(SUMMARY_ROWS)
        else:
            cap = rows if rows_given else TABLE_ROWS if args.format == "table" else None
            if cap is not None and frame.height > cap:
                title += f" · the first {cap:,} of {frame.height:,} rows"
                table_notes.insert(0, f"{frame.height - cap:,} more rows left out (--top all prints every row)")
                frame = frame.head(cap)
        render_frame(
            frame,
            args.format,
            title=title,
            wide=getattr(args, "wide", False),
            columns=table.columns,
            empty_message=message,
            notes=table_notes,
        )
    return 0


def add_export_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    """`export counters` / `export patterns` are registered by htatui.analysis.export.traces's CLI face."""
    from htatui.cli.export import add_export_commands

    add_export_commands(sub, load_flags, load)
