"""`htatui check PATH…`: what a job's traces can answer, what is odd in them, and which views will be empty.

Exit code 0 when nothing is odd, 1 with findings (warnings), 2 when nothing usable loads, so a CI
job can gate on it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from htatui.cli.errors import fail

CLEAN, WARNINGS, UNUSABLE = 0, 1, 2


def add_check_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    format_flag: Callable[[argparse.ArgumentParser], None],
    load: Callable[..., Any],
) -> None:
    check = sub.add_parser(
        "check",
        help="what the traces can answer, what is odd in them, which views will be empty (exit 0/1/2)",
        description="A health report of a trace folder, dataset or URL: per rank what each analysis can use, "
        "what is odd (and why numbers may mislead), and which views will be empty or approximate. "
        "Exit code: 0 clean, 1 warnings, 2 unusable.",
    )
    load_flags(check)
    format_flag(check)
    check.add_argument(
        "--quick",
        action="store_true",
        help="skip the checks that read every event (overlapping kernels, clocks) and the re-read for shapes",
    )
    check.set_defaults(run=lambda args: run_check(args, load))


def run_check(args: argparse.Namespace, load: Callable[..., Any]) -> int:
    import orjson

    from htatui.analysis.health import capabilities, findings, view_notes
    from htatui.cli.args import rules_from_args
    from htatui.text.render import render_frame
    from htatui.trace import LoadError

    rules = rules_from_args(args)
    try:
        traces = load(list(args.paths), not args.no_cache, show_warnings=False)
    except LoadError as exc:
        return fail(exc)
    table = capabilities(traces, read_shapes=not args.quick, rules=rules)
    found = findings(traces, table, thorough=not args.quick, rules=rules)
    notes = view_notes(table)
    problems = [str(problem) for problem in traces.problems]
    status = WARNINGS if found.height or problems else CLEAN
    if args.format == "json":
        report = {
            "status": ("clean", "warnings", "unusable")[status],
            "ranks": table.to_dicts(),
            "findings": found.to_dicts(),
            "skipped": problems,
            "views": notes,
        }
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
        return status
    render_frame(table, args.format, title="htatui check: what each rank can answer", wide=args.wide)
    if args.format == "csv":
        return status
    for problem in problems:
        print(f"skipped {problem}")
    if found.height:
        render_frame(found, "table", title="what is odd", wide=args.wide)
    else:
        print("nothing odd found" + (" (--quick: overlaps and clocks not checked)" if args.quick else ""))
    for note in notes:
        print(f"view: {note}")
    return status
