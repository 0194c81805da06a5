"""`htatui diagnose PATH…`: what to fix first, each finding with the step time its fix would save.

The findings of `report --view diagnosis`, written out in full (table), or its table as CSV and
JSON. Exit code 0 when no finding would save at least `--fail-pct` % of the step (the predicted
saving, else the most its change could save), 1 when one would, 2 when nothing usable loads or an
option or rules file is wrong: a gate for a profiled smoke test.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htatui.cli.args import add_scope_flags
from htatui.cli.errors import fail

CLEAN, FOUND, UNUSABLE = 0, 1, 2

FAIL_PCT = 5.0
"""A finding counts for the exit code when it would save at least this share of the step."""


def add_diagnose_parser(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    format_flag: Callable[[argparse.ArgumentParser], None],
    load: Callable[..., Any],
) -> None:
    diagnose = sub.add_parser(
        "diagnose",
        help="what to fix first: findings ranked by the step time each fix would save (exit 0/1/2)",
        description="Rules over the job's views (docs/diagnosis/): each finding says what is wrong, where, "
        "its evidence and the page and row that show it, the change to make and the step time it would save. "
        "Exit code: 0 none would save --fail-pct of the step, 1 one would, 2 unusable input.",
    )
    load_flags(diagnose)
    format_flag(diagnose)
    add_scope_flags(diagnose)
    diagnose.add_argument(
        "--fail-pct",
        type=float,
        default=FAIL_PCT,
        metavar="PCT",
        help=f"exit 1 when a finding would save at least this %% of the step ({FAIL_PCT:g})",
    )
    diagnose.add_argument(
        "--diagnosis-rules", action="append", type=Path, default=[], help="extra or changed rule thresholds (TOML)"
    )
    diagnose.add_argument(
        "--comm-rules", action="append", type=Path, default=[], help="extra communication-kernel rules (TOML)"
    )
    diagnose.set_defaults(run=lambda args: run_diagnose(args, load))


def run_diagnose(args: argparse.Namespace, load: Callable[..., Any]) -> int:
    import orjson
    import polars as pl

    from htatui.analysis.core.comm_rules import CommRulesError
    from htatui.analysis.core.describe import describe_scope, missing_steps
    from htatui.analysis.diagnosis import DiagnosisOptions, DiagnosisRulesError
    from htatui.analysis.registry import BY_ID, frame_of, make_table
    from htatui.cli.args import scope_from_args
    from htatui.text.render import render_frame
    from htatui.trace import LoadError

    try:
        scope = scope_from_args(args)  # the rules files too
    except (argparse.ArgumentTypeError, DiagnosisRulesError, CommRulesError) as exc:
        return fail(str(exc))
    try:
        traces = load(list(args.paths), not args.no_cache, rules=scope.rules)
    except LoadError as exc:
        return fail(str(exc))
    missing = [rank for rank in scope.ranks or () if rank not in traces.ranks]
    if missing:
        return fail(f"rank {missing[0]} is not in the traces (ranks: {', '.join(map(str, traces.rank_ids))})")
    options = DiagnosisOptions(scope)
    problem = missing_steps(traces, options)
    if problem:
        return fail(problem)
    view = BY_ID["diagnosis"]
    found, message = frame_of(make_table(view.main, traces, options))
    summary = frame_of(make_table(view.table("summary"), traces, options))[0]
    gain = pl.coalesce("saved_pct", "estimate_pct")
    status = FOUND if found.height and found.select((gain >= args.fail_pct).any()).item() else CLEAN
    if args.format == "json":
        report = {
            "status": ("clean", "findings")[status],
            "fail_pct": args.fail_pct,
            "summary": summary.to_dicts()[0] if summary.height else None,
            "findings": found.to_dicts(),
        }
        sys.stdout.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY).decode() + "\n")
        return status
    if args.format == "csv":
        render_frame(found, "csv")
        return status
    names = " ".join(getattr(path, "name", "") or str(path) for path in args.paths)
    _print_findings(found, summary, f"htatui diagnose {names} · {describe_scope(traces, options)}", message)
    if status == FOUND:
        print(f"\n{_over(found, args.fail_pct)} would save {args.fail_pct:g} % of the step or more: exit 1")
    return status


def _over(found: Any, fail_pct: float) -> str:
    import polars as pl

    count = int(found.select((pl.coalesce("saved_pct", "estimate_pct") >= fail_pct).sum()).item())
    return f"{count} finding{'s' if count != 1 else ''}"


def _print_findings(found: Any, summary: Any, title: str, message: str | None) -> None:
    """Each finding in full, best first, under the step line."""
    from htatui.analysis.registry import PAGE_BY_ID
    from htatui.text.diagnosis import finding_lines, step_line

    print(title)
    line = step_line(summary)
    if line:
        print(line)
    if found.height == 0:
        print(message or "nothing found")
        return
    for number, row in enumerate(found.iter_rows(named=True), start=1):
        page = PAGE_BY_ID[row["page"]].title if row["page"] in PAGE_BY_ID else str(row["page"])
        print(f"\n{number}. {row['what']}  [{row['rule']}]")
        for text in finding_lines(row, page):
            print(f"   {text}")
