"""`htatui diff BASE TEST`: compare two jobs per kernel/op name, or their headline views.

With `--format` (or when stdout is not a terminal) the table is printed; otherwise the side-by-side
diff screen opens. Which ranks and steps were compared goes to stderr.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from htatui.cli.args import add_load_option_flags, add_scope_flags
from htatui.cli.errors import fail
from htatui.sources import SourcePath, path_or_url

if TYPE_CHECKING:
    from htatui.analysis.core.columns import Importance, TableColumns

STEPS_HELP = (
    "steps to compare: default (the steps both sides count in every view, each rank's last step left out; "
    "'common' says the same), all (each side's whole trace), or steps like 3, 2-4"
)


def add_diff_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    diff = sub.add_parser(
        "diff",
        help="compare two jobs: kernels and ops that got slower, appeared or vanished",
        description="Compare a baseline job (BASE) with a changed one (TEST). Without --format the "
        "side-by-side screen opens (when stdout is a terminal).",
    )
    diff.add_argument("base", type=path_or_url, metavar="BASE_PATH", help="baseline trace folder or file (or URL)")
    diff.add_argument("test", type=path_or_url, metavar="TEST_PATH", help="changed trace folder or file (or URL)")
    diff.add_argument(
        "--rank",
        type=int,
        default=None,
        help="compare this rank on both sides (default: every rank, averaged; --hta-compat: the first rank)",
    )
    diff.add_argument("--test-rank", type=int, default=None, help="use this rank on the test side instead")
    diff.add_argument(
        "--by",
        choices=("all", "kernel", "op"),
        default="all",
        help="compare kernels, CPU ops, or both (default)",
    )
    diff.add_argument("--short-names", action="store_true", help="fold template and argument lists of names")
    diff.add_argument("--summary", action="store_true", help="compare the headline views instead of names")
    diff.add_argument(
        "--format", choices=("table", "csv", "json"), default=None, help="print instead of opening the screen"
    )
    diff.add_argument("--wide", action="store_true", help="every table column, even past the terminal's width")
    add_scope_flags(diff, ranks=False)
    add_load_option_flags(diff)
    diff.add_argument(
        "--noise-pct",
        type=float,
        default=5.0,
        help="changes within this %% of the base total are 'unchanged' (5)",
    )
    diff.add_argument("--noise-us", type=float, default=2.0, help="changes within this many µs are 'unchanged' (2)")
    diff.add_argument("--no-cache", action="store_true", help="parse the traces again, ignoring the cache")
    diff.add_argument(
        "--fail-if",
        action="append",
        default=[],
        metavar="THRESHOLD",
        help="exit 1 when the change breaks it: METRIC>CHANGE (also >= < <=), CHANGE relative with %%, e.g. "
        "'step_us>+5%%', 'kernels.sum_us>+10%%', 'temporal.idle_us>+100'; metrics: step_us, kernels.sum_us, "
        "kernels.count and diff --summary's as VIEW.METRIC; prints one line per broken threshold",
    )
    diff.set_defaults(run=run_diff)


def options_from_args(args: argparse.Namespace) -> Any:
    from htatui.analysis.diff.compare import DiffOptions
    from htatui.cli.args import scope_from_args

    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        raise ValueError(str(exc)) from None
    return DiffOptions(
        scope,
        rank=args.rank,
        test_rank=args.test_rank,
        by=args.by,
        short_names=args.short_names,
        noise_pct=args.noise_pct,
        noise_us=args.noise_us,
    )


def _say(message: str) -> None:
    """A note on stderr (the sides chosen, a load's notes), apart from the table on stdout."""
    print(f"htatui: {message}", file=sys.stderr)


def _load_side(path: SourcePath, label: str, use_cache: bool) -> Any:
    from htatui.jobs.load import load_traces

    traces = load_traces([path], use_cache=use_cache)
    for note in traces.notes:
        _say(f"note ({label}): {note}")
    for problem in traces.problems:
        _say(f"skipped ({label}) {problem}")
    return traces


def run_diff(args: argparse.Namespace) -> int:
    from htatui.trace import LoadError

    for label, path in (("base", args.base), ("test", args.test)):
        if isinstance(path, Path) and not path.exists():
            return fail(f"{path}: no such file or folder ({label})")
    try:
        options = options_from_args(args)
    except ValueError as exc:
        return fail(str(exc))
    if args.fail_if:
        return _gate(args, options)
    fmt = args.format
    if fmt is None and sys.stdout.isatty():
        from htatui.tui.diff_app import run_diff_app

        return int(run_diff_app(args.base, args.test, options, use_cache=not args.no_cache))
    try:
        base = _load_side(args.base, "base", not args.no_cache)
        test = _load_side(args.test, "test", not args.no_cache)
    except LoadError as exc:
        return fail(str(exc))
    from htatui.analysis.diff import compare as diff
    from htatui.analysis.diff import summary as diff_summary

    try:
        selection = diff.select_sides(base, test, options)
        if args.summary:
            frame = diff_summary.summary(base, test, options)
            title = "htatui diff --summary"
        else:
            frame = diff.compare(base, test, options).frame
            title = "htatui diff"
    except ValueError as exc:
        return fail(str(exc))
    for line in selection.description.splitlines():
        _say(line)
    _render(whole_counts(frame), fmt or "table", title, wide=args.wide)
    return 0


def _gate(args: argparse.Namespace, options: Any) -> int:
    """`--fail-if`: one line per broken threshold on stdout, exit 1 when any is; 2 when one cannot be read."""
    from htatui.analysis.diff import gate
    from htatui.analysis.diff.compare import select_sides
    from htatui.trace import LoadError

    try:
        thresholds = [gate.parse_threshold(text) for text in args.fail_if]
    except gate.ThresholdError as exc:
        return fail(str(exc))
    try:
        base = _load_side(args.base, "base", not args.no_cache)
        test = _load_side(args.test, "test", not args.no_cache)
        selection = select_sides(base, test, options)
        for line in selection.description.splitlines():
            _say(line)
        verdicts = gate.judge(thresholds, gate.metric_values(base, test, selection))
    except (LoadError, ValueError) as exc:
        return fail(str(exc))
    broken = [verdict for verdict in verdicts if verdict.broken]
    for verdict in broken:
        print(verdict.line())
    if not broken:
        _say(
            f"{len(verdicts)} threshold{'s' if len(verdicts) > 1 else ''} held: "
            + "; ".join(v.line() for v in verdicts)
        )
    return 1 if broken else 0


def whole_counts(frame: Any) -> Any:
    """Count columns as integers when every count is whole (190, not 190.00 or 190.0)."""
    import polars as pl

    for name in frame.columns:
        column = frame[name]
        if name.endswith("count") and column.dtype.is_float():
            values = column.drop_nulls()
            if values.is_finite().all() and (values == values.round(0)).all():
                frame = frame.with_columns(pl.col(name).cast(pl.Int64))
    return frame


def _render(frame: Any, fmt: str, title: str, *, wide: bool = False) -> None:
    from htatui.text.render import render_frame

    render_frame(frame, fmt, title=title, wide=wide, columns=_diff_columns(frame))  # type: ignore[arg-type]


_DIFF_IMPORTANCE: dict[str, Importance] = {
    "view": "id",
    "metric": "id",
    "delta_us": "key",
    "status": "key",
    "delta": "key",
    "test_total_us": "normal",
    "base_total_us": "normal",
    "delta_pct": "normal",
}
"""What a narrow diff keeps: the change and its verdict; the counts go first."""


def _diff_columns(frame: Any) -> TableColumns:
    from htatui.analysis.core.columns import ColumnSpec, TableColumns, derived_spec

    return TableColumns(
        *(
            ColumnSpec(name, dtype, "", _DIFF_IMPORTANCE[name])
            if name in _DIFF_IMPORTANCE
            else replace(derived_spec(name, dtype), importance="id" if name == "name" else "low")
            for name, dtype in frame.schema.items()
        )
    )
