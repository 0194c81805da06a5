"""`htatui report --view VIEW` and `htatui export …`: the views' CLI faces.

A view is named once in VIEWS (module, options class, functions); its option fields become
flags automatically when a flag of the same field name is declared in OPTION_FLAGS.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from htatui.report import render_frame


@dataclass(frozen=True)
class ViewSpec:
    """Where a view lives and which secondary tables its flags select."""

    module: str
    options: str
    function: str = "compute"
    tables: dict[str, str] = field(default_factory=dict)
    help: str = ""


VIEWS: dict[str, ViewSpec] = {}


@dataclass(frozen=True)
class OptionFlag:
    flag: str
    field: str
    kind: Callable[[str], Any]
    help: str


def _int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


OPTION_FLAGS: list[OptionFlag] = []


def register(name: str, spec: ViewSpec) -> None:
    VIEWS[name] = spec


def _view_options(spec: ViewSpec) -> type[Any]:
    return getattr(importlib.import_module(spec.module), spec.options)  # type: ignore[no-any-return]


def add_report_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    format_flag: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    report = sub.add_parser("report", help="print one analysis view as a table, CSV or JSON")
    load_flags(report)
    format_flag(report)
    report.add_argument("--view", required=True, choices=sorted(VIEWS), help="which view to print")
    report.add_argument("--ranks", default="all", help="ranks to analyse: all (default) or e.g. 0,3")
    report.add_argument("--hta-compat", action="store_true", help="reproduce HTA 0.6.1's numbers and quirks")
    report.add_argument("--include-last-step", action="store_true", help="keep the last ProfilerStep")
    tables = sorted({flag for spec in VIEWS.values() for flag in spec.tables})
    for flag in tables:
        report.add_argument(f"--{flag}", action="store_true", help=f"print the {flag} table of the view")
    for option in OPTION_FLAGS:
        report.add_argument(option.flag, dest=option.field, type=option.kind, default=None, help=option.help)
    report.set_defaults(run=lambda args: run_report(args, load))


def run_report(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.cli import parse_ranks
    from htatui.trace import LoadError

    spec = VIEWS[args.view]
    chosen = [flag for flag in spec.tables if getattr(args, flag.replace("-", "_"), False)]
    other_tables = [
        flag for s in VIEWS.values() for flag in s.tables
        if flag not in spec.tables and getattr(args, flag.replace("-", "_"), False)
    ]
    if other_tables:
        print(f"htatui: --{other_tables[0]} does not apply to --view {args.view}", file=sys.stderr)
        return 2
    options_class = _view_options(spec)
    names = {f.name for f in dataclasses.fields(options_class)}
    values: dict[str, Any] = {}
    for option in OPTION_FLAGS:
        value = getattr(args, option.field, None)
        if value is None:
            continue
        if option.field not in names:
            print(f"htatui: {option.flag} does not apply to --view {args.view}", file=sys.stderr)
            return 2
        values[option.field] = value
    try:
        ranks = parse_ranks(args.ranks)
    except argparse.ArgumentTypeError as exc:
        print(f"htatui: {exc}", file=sys.stderr)
        return 2
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        print(f"htatui: {exc}", file=sys.stderr)
        return 2
    if ranks is not None:
        missing = [r for r in ranks if r not in traces.ranks]
        if missing:
            have = ", ".join(map(str, traces.rank_ids))
            print(f"htatui: rank {missing[0]} is not in the traces (ranks: {have})", file=sys.stderr)
            return 2
    options = options_class(
        ranks=ranks, hta_compat=args.hta_compat, include_last_step=args.include_last_step, **values
    )
    module = importlib.import_module(spec.module)
    function_name = spec.tables[chosen[0]] if chosen else spec.function
    result = getattr(module, function_name)(traces, options)
    frame = result if isinstance(result, pl.DataFrame) else result.frame
    message = None if isinstance(result, pl.DataFrame) else getattr(result, "message", None)
    if message:
        print(f"htatui: {message}", file=sys.stderr)
    title = f"{args.view}{' ' + chosen[0] if chosen else ''}"
    render_frame(frame, args.format, title=title)
    return 0


def add_export_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    """`export counters` / `export patterns` are registered by htatui.analysis.export's CLI face."""
    try:
        from htatui.export_cli import add_export_commands
    except ImportError:
        return
    add_export_commands(sub, load_flags, load)
