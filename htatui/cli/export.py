"""`htatui export counters|patterns`: write augmented copies of the traces, never over inputs."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from htatui.cli.args import add_scope_flags
from htatui.cli.errors import fail

DEFAULT_OUT = Path("htatui-export")


def add_export_commands(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    load_flags: Callable[[argparse.ArgumentParser], None],
    load: Callable[[list[Path], bool], Any],
) -> None:
    export = sub.add_parser(
        "export", help="write traces augmented with counters or patterns, or the job's tables as Parquet"
    )
    kinds = export.add_subparsers(
        dest="export_kind", metavar="{counters,patterns,slice,critical-path,parquet}", required=True
    )
    counters = kinds.add_parser("counters", help="add Queue Length and memory-bandwidth counter events (HTA format)")
    patterns = kinds.add_parser("patterns", help="mark the frequent kernel sequences under an operator")
    for parser in (counters, patterns):
        load_flags(parser)
        parser.add_argument(
            "-o", "--out", type=Path, default=DEFAULT_OUT, help=f"output folder (default: ./{DEFAULT_OUT})"
        )
        parser.add_argument("--force", action="store_true", help="overwrite existing output files")
        add_scope_flags(parser, ranks=parser is counters)
    patterns.add_argument("--operator", default="aten::linear", help="operator name to look under")
    patterns.add_argument("--min-len", type=int, default=3, help="minimum kernels under the operator")
    patterns.add_argument("--top", type=int, default=5, help="how many patterns to mark")
    patterns.add_argument("--rank", type=int, default=None, help="rank to mine (default: the first)")
    from htatui.cli.timeline import add_slice_command

    add_slice_command(kinds, load_flags, load)
    from htatui.cli.export_critical_path import add_critical_path_command

    add_critical_path_command(kinds, load_flags, load)
    from htatui.cli.query import add_parquet_command

    add_parquet_command(kinds, load_flags, load)
    counters.set_defaults(run=lambda args: _run(args, load))
    patterns.set_defaults(run=lambda args: _run(args, load))


def _run(args: argparse.Namespace, load: Callable[[list[Path], bool], Any]) -> int:
    from htatui.analysis.core.options import CommonOptions
    from htatui.analysis.export.traces import ExportExistsError, export_counters, export_patterns
    from htatui.analysis.views.patterns import PatternsOptions
    from htatui.cli.args import scope_from_args

    try:
        scope = scope_from_args(args)
    except argparse.ArgumentTypeError as exc:
        return fail(exc)
    traces = load(list(args.paths), not args.no_cache)  # a LoadError is main()'s to print
    chosen = list(scope.ranks) if scope.ranks is not None else traces.rank_ids
    missing = [r for r in chosen if r not in traces.ranks]
    if missing:
        return fail(f"rank {missing[0]} is not in the traces")
    out_dir: Path = args.out
    if out_dir == DEFAULT_OUT:
        out_dir.mkdir(exist_ok=True)
    try:
        if args.export_kind == "counters":
            options = CommonOptions(scope.with_ranks(None))
            written = export_counters(traces, chosen, out_dir, force=args.force, options=options)
        else:
            pattern_options = PatternsOptions(
                scope, operator=args.operator, min_len=args.min_len, top_k=args.top, rank=args.rank
            )
            written = [export_patterns(traces, pattern_options, out_dir, force=args.force)]
    except ExportExistsError as exc:
        return fail(f"{exc} (pass --force to overwrite)")
    for path in written:
        print(path)
    return 0
