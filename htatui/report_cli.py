"""`htatui report --view VIEW` and `htatui export …`: the views' CLI faces.

A view is named once in VIEWS (options class, functions); an option field becomes a flag when
OPTION_FLAGS names it, and a flag given to a view without that field is refused.
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
    """A view: its options class and functions as 'module:name' paths, and its extra tables."""

    options: str
    function: str
    tables: dict[str, str] = field(default_factory=dict)


def _resolve(path: str) -> Any:
    module, name = path.split(":")
    return getattr(importlib.import_module(module), name)


_A = "htatui.analysis."
_SELF = "htatui.report_cli:"
VIEWS: dict[str, ViewSpec] = {
    "temporal": ViewSpec(_A + "temporal:TemporalOptions", _A + "temporal:compute"),
    "idle": ViewSpec(_A + "idle:IdleOptions", _A + "idle:compute", {"interval-stats": _A + "idle:interval_stats"}),
    "kernel-types": ViewSpec(_A + "kernels:KernelTypesOptions", _A + "kernels:compute_types"),
    "kernels": ViewSpec(_A + "kernels:KernelsOptions", _A + "kernels:compute"),
    "kernel-spread": ViewSpec(_A + "kernels:KernelSpreadOptions", _A + "kernels:spread"),
    "overlap": ViewSpec(_A + "overlap:OverlapOptions", _A + "overlap:compute"),
    "launch": ViewSpec(
        _A + "launch:LaunchOptions",
        _A + "launch:compute",
        {
            "summary": _A + "launch:summary",
            "short-kernels": _SELF + "short_kernels",
            "runtime-outliers": _SELF + "runtime_outliers",
            "delay-outliers": _SELF + "delay_outliers",
        },
    ),
    "queue": ViewSpec(
        _A + "queue:QueueOptions",
        _A + "queue:compute",
        {"series": _A + "queue:series", "blocked": _A + "queue:blocked"},
    ),
    "membw": ViewSpec(_A + "membw:MemoryBandwidthOptions", _A + "membw:compute", {"series": _A + "membw:series"}),
    "steps": ViewSpec(_A + "steps:StepsOptions", _A + "steps:compute"),
    "stragglers": ViewSpec(_A + "steps:StragglerOptions", _A + "steps:stragglers"),
    "annotations": ViewSpec(_A + "annotations:AnnotationOptions", _A + "annotations:compute"),
    "patterns": ViewSpec(_A + "patterns:PatternsOptions", _A + "patterns:compute"),
    "ops": ViewSpec(_A + "ops:OpsOptions", _A + "ops:compute"),
}


def short_kernels(traces: Any, options: Any) -> pl.DataFrame:
    return _resolve(_A + "launch:outliers")(traces, options, "short")  # type: ignore[no-any-return]


def runtime_outliers(traces: Any, options: Any) -> pl.DataFrame:
    return _resolve(_A + "launch:outliers")(traces, options, "runtime")  # type: ignore[no-any-return]


def delay_outliers(traces: Any, options: Any) -> pl.DataFrame:
    return _resolve(_A + "launch:outliers")(traces, options, "delay")  # type: ignore[no-any-return]


@dataclass(frozen=True)
class OptionFlag:
    flag: str
    field: str
    kind: Callable[[str], Any]
    help: str


def _int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


OPTION_FLAGS: list[OptionFlag] = [
    OptionFlag(
        "--consecutive-kernel-delay", "consecutive_kernel_delay_us", float, "idle: kernel_wait threshold, µs (30)"
    ),
    OptionFlag("--streams", "streams", _int_tuple, "idle: only these streams, e.g. 7,20"),
    OptionFlag("--top", "top_k", int, "kernels/kernel-spread/patterns: how many names to keep"),
    OptionFlag("--duration-ratio", "duration_ratio", float, "kernels: HTA's cumulative-time quantile (0.8)"),
    OptionFlag("--runtime-cutoff", "runtime_cutoff_us", float, "launch: runtime outlier cutoff, µs (50)"),
    OptionFlag("--launch-delay-cutoff", "launch_delay_cutoff_us", float, "launch: delay outlier cutoff, µs (100)"),
    OptionFlag("--max-queue-length", "max_queue_length", int, "queue: length counted as full (1024)"),
    OptionFlag("--operator", "operator", str, "patterns: operator name to look under (aten::linear)"),
    OptionFlag("--min-len", "min_len", int, "patterns: minimum kernels under the operator (3)"),
    OptionFlag("--rank", "rank", int, "patterns: the rank to mine (first rank)"),
    OptionFlag("--sort-by", "sort_by", str, "ops: column to sort by, descending (gpu_self_us)"),
    OptionFlag("--num-candidates", "num_candidates", int, "stragglers: how many ranks to name (2)"),
]


def _view_options(spec: ViewSpec) -> type[Any]:
    return _resolve(spec.options)  # type: ignore[no-any-return]


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
        flag
        for s in VIEWS.values()
        for flag in s.tables
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
    options = options_class(ranks=ranks, hta_compat=args.hta_compat, include_last_step=args.include_last_step, **values)
    result = _resolve(spec.tables[chosen[0]] if chosen else spec.function)(traces, options)
    frame = result if isinstance(result, pl.DataFrame) else result.frame
    message = None if isinstance(result, pl.DataFrame) else getattr(result, "message", None)
    if message:
        print(f"htatui: {message}", file=sys.stderr)
    title = f"{args.view}{' ' + chosen[0] if chosen else ''}"
    render_frame(frame, args.format, title=title, wide=getattr(args, "wide", False))
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
