"""Command line: `htatui PATH…` opens the app; `info`, `diagnose`, `report`, `export`, `diff` run headless.

Textual is imported only when the app opens, after `--color` has set TEXTUAL_COLOR_SYSTEM.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from htatui import __version__
from htatui.cli.args import Parser, add_load_option_flags, add_scope_flags, scope_from_args, use_load_options
from htatui.cli.errors import REFUSED, fail
from htatui.errors import HtatuiError
from htatui.sources import SourcePath, is_url, path_or_url
from htatui.trace.workers import Terminated, catch_termination, restore_handlers

if TYPE_CHECKING:
    from rich.console import Console

    from htatui.analysis.core.rules import Rules
    from htatui.trace import LoadProgress, TraceSet
    from htatui.trace.fetch import DownloadProgress

SUBCOMMANDS = ("info", "check", "diagnose", "report", "query", "export", "diff", "timeline", "memory", "ingest")


def _load(
    paths: Sequence[SourcePath],
    use_cache: bool,
    show_warnings: bool = True,
    *,
    notes_below: bool = False,
    rules: Rules | None = None,
) -> TraceSet:
    """Load with a progress bar on stderr (when it is a terminal); notes, problems and (unless
    the output shows them, as info's does) each file's warnings to stderr. `notes_below`: the
    command's table lists the notes and skipped files under it, so stderr does not say them
    again (issue 38 #6: report printed a load note twice in a terminal). `rules`: the command's
    (None: those the environment names), which the warnings' collectives are found by.

    Without the cache (--no-cache) every file is parsed again and its cache entry refreshed.
    """
    from htatui.jobs.load import load_traces

    if sys.stderr.isatty():
        from rich.filesize import decimal
        from rich.progress import BarColumn, Progress, TaskID, TextColumn

        with Progress(
            TextColumn("{task.fields[what]}"),
            BarColumn(),
            TextColumn("{task.fields[amount]}"),
            TextColumn("{task.description}"),
            transient=True,
            console=_stderr_console(),
        ) as bar:
            task = bar.add_task("", total=None, what="loading traces", amount="")
            download_task: list[TaskID] = []

            def report(update: LoadProgress) -> None:
                amount = f"{update.done}/{update.total}"
                if update.bytes_total:
                    # Inside one file: how much of its JSON is decoded.
                    amount += f" · {decimal(update.bytes_done)} of {decimal(update.bytes_total)}"
                bar.update(task, total=update.total, completed=update.done, description=update.path.name, amount=amount)

            def report_bytes(update: DownloadProgress) -> None:
                # Remote files missing from the cache are downloaded first: progress in bytes.
                if not download_task:
                    download_task.append(bar.add_task("", total=None, what="downloading   ", amount=""))
                amount = f"{decimal(update.done_bytes)} of {decimal(update.total_bytes)}"
                total = update.total_bytes or None
                name = update.path.name
                bar.update(download_task[0], total=total, completed=update.done_bytes, description=name, amount=amount)

            traces = load_traces(
                paths,
                use_cache=use_cache,
                refresh_cache=not use_cache,
                progress=report,
                download_progress=report_bytes,
            )
    else:
        traces = load_traces(paths, use_cache=use_cache, refresh_cache=not use_cache)
    for note in () if notes_below else traces.notes:
        print(f"htatui: note: {note}", file=sys.stderr)
    for problem in () if notes_below else traces.problems:
        print(f"htatui: skipped {problem}", file=sys.stderr)
    if show_warnings:
        from htatui.analysis.health import finding_line, quick_findings

        for rank_trace in traces.ranks.values():
            for warning in rank_trace.warnings:
                print(f"htatui: warning: {rank_trace.path}: {warning}", file=sys.stderr)
        if rules is None:
            from htatui.analysis.core.rules import from_settings

            rules = from_settings(os.environ)
        for finding in quick_findings(traces, rules):
            print(f"htatui: warning: {finding_line(finding)}", file=sys.stderr)
    return traces


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True)


def _common_load_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=path_or_url,
        metavar="PATH",
        help="trace folder(s) or file(s), or URLs (s3://, gs://, https://)",
    )
    parser.add_argument("--no-cache", action="store_true", help="parse again and refresh the cache entries")
    parser.add_argument(
        "--jobs",
        type=_worker_count,
        default=None,
        metavar="N",
        help=(
            "processes that decode traces: one file each (default: every core),"
            " or the pieces of a lone big file (default: up to 8)"
        ),
    )
    add_load_option_flags(parser)


def _worker_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of processes, 1 or more, got {text!r}")
    return count


def _use_jobs(args: argparse.Namespace) -> None:
    """`--jobs N` for every load in this process and its workers (read by trace.loader.default_workers)."""
    if getattr(args, "jobs", None):
        os.environ["HTATUI_JOBS"] = str(args.jobs)


def _format_flag(parser: argparse.ArgumentParser) -> None:
    from htatui.text.render import FORMATS

    parser.add_argument("--format", choices=FORMATS, default="table", help="output format (default: table)")
    parser.add_argument("--wide", action="store_true", help="every column, even past the terminal's width")


def _run_info(args: argparse.Namespace) -> int:
    import polars as pl

    from htatui.cli.info import TIMINGS_TITLE, folded_for_table, info_frame, load_notes, timings_frame
    from htatui.text.render import render_frame
    from htatui.trace import LoadError
    from htatui.trace.discover import job_folders

    jobs = [job for path in args.paths for job in job_folders(path)]
    frames = []
    timings = []
    notes: list[str] = []
    failed = False
    for job in jobs:
        try:
            traces = _load([job], not args.no_cache, show_warnings=False, notes_below=args.format == "table")
        except LoadError as exc:
            fail(exc)
            failed = True
            continue
        frame = info_frame(traces)
        notes += load_notes(traces)
        if len(jobs) > 1:
            frame = frame.insert_column(0, pl.lit(job.name).alias("job"))
        frames.append(frame)
        if args.timings:
            timings.append(timings_frame(traces).insert_column(0, pl.lit(job.name).alias("job")))
    if frames:
        frame = pl.concat(frames, how="diagonal")
        said: list[str] = []
        if args.format == "table" and not args.wide:
            frame, said, warnings = folded_for_table(frame)
            notes = [*warnings, *notes]
        counted = f" ({len(notes)} note{'s' if len(notes) > 1 else ''}, listed below)" if notes else ""
        title = " · ".join([f"htatui info{counted}", *said])
        render_frame(frame, args.format, title=title, wide=args.wide, notes=notes)
    if timings:
        together = pl.concat(timings)
        render_frame(
            together if len(jobs) > 1 else together.drop("job"), args.format, title=TIMINGS_TITLE, wide=args.wide
        )
    return REFUSED if failed else 0


SUBCOMMAND_HELP = {
    "info": "per-rank summary of the traces",
    "check": "what the traces can answer, what is odd in them, which views will be empty (exit 0/1/2)",
    "diagnose": "what to fix first: findings ranked by the step time each fix would save (exit 0/1/2)",
    "report": "print one analysis view as a table, CSV or JSON",
    "query": "polars SQL over the job's named tables (events, kernels, ops, steps, path, every view's)",
    "export": "write traces augmented with counters or patterns, or the job's tables as Parquet",
    "timeline": "print a rank's timeline over a time window as text",
    "diff": "compare two jobs: kernels and ops that got slower, appeared or vanished",
    "memory": "GPU memory: peak, live blocks by allocation site, allocator state, OOMs, leaks",
    "ingest": "parse trace files once into a dataset folder that every command opens fast",
}
"""Each subcommand's line in `htatui --help`, the same as its parser's help (tests/test_import_hygiene.py checks)."""


def _build_parser(built: Sequence[str] = SUBCOMMANDS) -> argparse.ArgumentParser:
    """The top-level parser; only the subcommands in `built` get their whole parser.

    Building a subcommand's parser imports its module (report's imports every view, and so polars);
    the others are listed by name and help only, so `--version` and `--help` import nothing heavy.
    """
    parser = Parser(
        prog="htatui",
        description="Find bottlenecks in PyTorch Profiler traces: `htatui PATH…` opens the app; "
        "subcommands print the same numbers headless.",
    )
    parser.add_argument("--version", action="version", version=f"htatui {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{" + ",".join(SUBCOMMANDS) + "}")
    for name in ("info", "check", "diagnose", "report", "query", "export", "timeline", "diff", "memory", "ingest"):
        if name in built:
            _add_subcommand(sub, name)
        else:
            sub.add_parser(name, help=SUBCOMMAND_HELP[name])
    return parser


def _add_subcommand(sub: argparse._SubParsersAction, name: str) -> None:  # type: ignore[type-arg]
    if name == "info":
        info = sub.add_parser("info", help=SUBCOMMAND_HELP["info"])
        _common_load_flags(info)
        _format_flag(info)
        info.add_argument(
            "--timings",
            action="store_true",
            help="also print where each file's load went: CPU seconds of gunzip, decode, framing, checks, cache write",
        )
        info.set_defaults(run=_run_info)
    elif name == "check":
        from htatui.cli.check import add_check_parser

        add_check_parser(sub, _common_load_flags, _format_flag, _load)
    elif name == "diagnose":
        from htatui.cli.diagnose import add_diagnose_parser

        add_diagnose_parser(sub, _common_load_flags, _format_flag, _load)
    elif name == "report":
        from htatui.cli.report import add_report_parser

        add_report_parser(sub, _common_load_flags, _format_flag, _load)
    elif name == "query":
        from htatui.cli.query import add_query_parser

        add_query_parser(sub, _common_load_flags, _load)
    elif name == "export":
        from htatui.cli.report import add_export_parser

        add_export_parser(sub, _common_load_flags, _load)
    elif name == "timeline":
        from htatui.cli.timeline import add_timeline_parser

        add_timeline_parser(sub, _common_load_flags, _load)
    elif name == "diff":
        from htatui.cli.diff import add_diff_parser

        add_diff_parser(sub)
    elif name == "memory":
        from htatui.cli.memory import add_memory_parser

        add_memory_parser(sub, _load)
    elif name == "ingest":
        from htatui.cli.ingest import add_ingest_parser

        add_ingest_parser(sub)


def _build_app_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="htatui", description="Open the htatui app over a job's traces.")
    parser.add_argument("--version", action="version", version=f"htatui {__version__}")
    _common_load_flags(parser)
    parser.add_argument("--theme", default=None, help="theme name (see themes/; default htatui-dark)")
    parser.add_argument(
        "--color",
        choices=("auto", "truecolor", "256", "16"),
        default="auto",
        help="colour system (default: detect; 256 is right for most SSH sessions)",
    )
    add_scope_flags(parser, ranks=False)
    parser.add_argument("--screenshot", type=Path, metavar="DIR", help="save an SVG of every screen and exit")
    return parser


_COLOR_SYSTEMS = {"truecolor": "truecolor", "256": "256", "16": "standard"}


def _looks_like_subcommand(word: str) -> bool:
    """True for a bare word that names no file: `htatui query DIR` is a mistyped subcommand, not paths."""
    if not word or word.startswith("-") or is_url(word) or "/" in word or "." in word:
        return False
    return not os.path.lexists(word)


def _missing_paths(paths: Sequence[SourcePath]) -> list[Path]:
    return [path for path in paths if isinstance(path, Path) and not os.path.lexists(path)]


def _has_terminal() -> bool:
    """The app draws on stdout and reads keys from stdin: both must be a terminal."""
    try:
        return sys.stdin.isatty() and sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _run_app(argv: Sequence[str]) -> int:
    if argv and _looks_like_subcommand(argv[0]):
        # argparse's own error: the word, the list of commands, exit 2.
        _build_parser(built=()).parse_args(argv[:1])
    args = _build_app_parser().parse_args(argv)
    missing = _missing_paths(args.paths)
    if missing:
        return fail(f"{missing[0]}: no such file or folder")
    if args.screenshot is None and not _has_terminal():
        return fail(
            "the app needs a terminal (stdin and stdout); without one use `htatui report PATH` (or info, check)"
        )
    _use_jobs(args)
    problem = use_load_options(args)
    if problem:
        return fail(problem)
    if args.color != "auto":
        os.environ["TEXTUAL_COLOR_SYSTEM"] = _COLOR_SYSTEMS[args.color]
    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    if len(args.paths) == 1 and isinstance(args.paths[0], Path):
        from htatui.trace.memory_inputs import looks_like_snapshot

        if looks_like_snapshot(args.paths[0]):
            from htatui.tui.memory_app import run_memory_app

            return run_memory_app(args.paths[0], theme=args.theme)
    from htatui.tui.run import run_app

    code = run_app(
        list(args.paths),
        theme=args.theme,
        use_cache=not args.no_cache,
        hta_compat=scope.hta_compat,
        steps=scope.steps,
        rules=scope.rules,
        screenshot_dir=args.screenshot,
    )
    if code == 130:
        # Cancelled: a file may still be parsing in a thread that cannot be interrupted; leave now.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)
    return code


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    replaced = catch_termination()
    try:
        if argv and argv[0] in SUBCOMMANDS or not argv or argv[0] in ("-h", "--help", "--version"):
            # Only the named subcommand's parser is built: its imports are the command's own.
            parser = _build_parser(built=argv[:1] if argv and argv[0] in SUBCOMMANDS else ())
            args = parser.parse_args(argv)
            _use_jobs(args)
            problem = use_load_options(args)
            if problem:
                return fail(problem)
            if not getattr(args, "run", None):
                parser.print_help()
                return 0
            return int(args.run(args))
        return _run_app(argv)
    except KeyboardInterrupt:
        return 130
    except Terminated as exc:
        return 128 + exc.signum  # what a shell reports for a process the signal ended
    except HtatuiError as exc:  # refused input a runner did not report itself, e.g. a dataset rank gone bad
        return fail(exc)
    except BrokenPipeError as exc:
        if _stdout_closed():
            # The reader went away (`htatui report … | head`): nothing is wrong, and nothing more to say.
            _silence_stdout()
            return 0
        return fail(f"broken pipe ({exc.strerror or exc}); worker processes may have failed to start")
    finally:
        restore_handlers(replaced)


def _stdout_closed() -> bool:
    """True when stdout is a pipe whose reader has gone (poll reports an error on it)."""
    import select

    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):
        return False


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that the interpreter's final flush does not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (AttributeError, OSError, ValueError):
        pass
