"""`htatui export critical-path`: a rank's trace with its critical path marked (HTA's overlay)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htatui.cli.args import add_scope_flags
from htatui.cli.errors import fail


def add_critical_path_command(
    kinds: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    parser = kinds.add_parser(
        "critical-path", help="mark a rank's critical path in a copy of its trace (args.critical, flow arrows)"
    )
    load_flags(parser)
    parser.add_argument("--rank", type=int, required=True, help="rank whose path to mark")
    parser.add_argument("--annotation", default="", help="window = an event whose name contains this (default: steps)")
    parser.add_argument("--instance", type=int, default=0, help="which of those events, from 0")
    parser.add_argument(
        "--only-critical",
        action="store_true",
        help="keep only the path's complete events (and annotations), as HTA's only_show_critical_events",
    )
    parser.add_argument(
        "--job",
        action="store_true",
        help="mark the job's path (the ranks joined at their collectives, as report --job-edges) where it "
        "runs through --rank, instead of the rank's own path",
    )
    parser.add_argument("-o", "--out", type=Path, required=True, help="output file (.json, or .json.gz for gzip)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing output file")
    add_scope_flags(parser, ranks=False)
    parser.set_defaults(run=lambda args: run_critical_path(args, load))


def run_critical_path(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.export.critical_path import export_critical_path
    from htatui.analysis.export.traces import ExportError, ExportExistsError
    from htatui.analysis.views.critical_path import CriticalPathOptions
    from htatui.cli.args import scope_from_args
    from htatui.trace import LoadError

    if args.instance < 0:
        return fail(f"--instance {args.instance}: must be 0 or more")
    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        return fail(str(exc))
    try:
        traces = load(list(args.paths), not args.no_cache)
    except LoadError as exc:
        return fail(str(exc))
    if args.rank not in traces.ranks:
        return fail(f"rank {args.rank} is not in the traces (loaded: {', '.join(map(str, traces.rank_ids))})")
    # The job's path joins every rank of the scope; a rank's own path needs that rank alone.
    options = CriticalPathOptions(
        scope.with_ranks(None if args.job else (args.rank,)),
        rank=args.rank,
        annotation=args.annotation,
        instance=args.instance,
    )
    try:
        path, marked, arrows = export_critical_path(
            traces, options, args.out, force=args.force, only_critical=args.only_critical, job=args.job
        )
    except ExportExistsError as exc:
        return fail(f"{exc} (pass --force to overwrite)")
    except ExportError as exc:
        return fail(str(exc))
    print(path)
    if args.job:
        print(f"htatui: marked {marked} events of the job's path on rank {args.rank}", file=sys.stderr)
    else:
        print(f"htatui: marked {marked} events on rank {args.rank}'s path, {arrows} arrows", file=sys.stderr)
    return 0
