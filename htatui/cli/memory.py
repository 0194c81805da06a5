"""`htatui memory PATH [PATH2]`: where the GPU memory goes, from a snapshot, a job's traces or a memory timeline.

One PATH: per device the peak and what was live at it by allocation site, the allocator state,
OOMs, growth across steps and the peak per step/annotation. Two PATHs: the sites live at the end
of each and the segments, compared (A → B). A job (a trace folder or file, a dataset, a URL) is
read as `report` reads it, for the scope's ranks and steps: its tables are `report --view
memory`'s (analysis/memory/view.py). Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from htatui.cli.args import add_scope_flags, scope_from_args
from htatui.cli.errors import fail
from htatui.sources import SourcePath, path_or_url

if TYPE_CHECKING:
    import polars as pl

    from htatui.analysis.memory.usage import MemoryAnalysis
    from htatui.analysis.memory.view import MemoryOptions
    from htatui.trace import TraceSet

TABLES = ("sites", "summary", "allocator", "oom", "growth", "spans", "series")
REGISTERED = {
    "summary": "main",
    "sites": "sites",
    "oom": "oom",
    "growth": "growth",
    "spans": "spans",
    "series": "series",
}
"""`--table` names and the `report --view memory` tables they are (allocator: snapshots only)."""


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_memory_parser(sub: argparse._SubParsersAction, load: Callable[[list[SourcePath], bool], Any]) -> None:  # type: ignore[type-arg]
    memory = sub.add_parser(
        "memory",
        help="GPU memory: peak, live blocks by allocation site, allocator state, OOMs, leaks",
        description="Read a CUDA memory snapshot (torch.cuda.memory._dump_snapshot), a job whose traces were "
        "recorded with profile_memory=True (a folder, a file, a dataset or a URL: the tables of `report --view "
        "memory`, for the scope's ranks and steps), or an export_memory_timeline file. With a second "
        "path, compare the two (what appeared or grew from PATH to PATH2). Snapshots are read "
        "without running code: a pickle that names any class or function is refused.",
    )
    memory.add_argument(
        "path", type=path_or_url, metavar="PATH", help="snapshot .pickle, trace folder/file/URL, or memory timeline"
    )
    memory.add_argument(
        "path2", type=path_or_url, nargs="?", metavar="PATH2", help="a second recording to compare with PATH"
    )
    memory.add_argument("--top", type=_positive_int, default=10, help="sites to list per device (10)")
    memory.add_argument("--format", choices=("table", "csv", "json"), default="table", help="output format (table)")
    memory.add_argument(
        "--table",
        choices=TABLES,
        default=None,
        help="print only this table (csv defaults to sites; json defaults to one object per device)",
    )
    memory.add_argument("--device", default=None, help="only this device (e.g. cuda:0)")
    memory.add_argument("--wide", action="store_true", help="every column, even past the terminal's width")
    memory.add_argument(
        "--site", default=None, metavar="TEXT", help="print the full frames of the sites whose name contains TEXT"
    )
    memory.add_argument("--no-cache", action="store_true", help="a job: parse again and refresh the cache entries")
    add_scope_flags(memory)
    memory.set_defaults(run=lambda args: run_memory(args, load))


@dataclass(frozen=True)
class Opened:
    """What PATH holds: a recording's analysis, and for a job, the job and the view's options."""

    analysis: MemoryAnalysis
    traces: TraceSet | None = None
    options: MemoryOptions | None = None


def _open(args: argparse.Namespace, path: SourcePath, load: Callable[[list[SourcePath], bool], Any]) -> Opened:
    """A snapshot or a timeline (a file, or a folder holding one) is read alone; anything else is a job."""
    from htatui.analysis.memory.job import NO_MEMORY_EVENTS, job_analysis
    from htatui.analysis.memory.usage import analyse
    from htatui.analysis.memory.view import MemoryOptions
    from htatui.trace.memory_inputs import MemoryInputError, holds_recording, read_memory

    if isinstance(path, Path) and holds_recording(path):
        return Opened(analyse(read_memory(path)))
    traces = load([path], not args.no_cache)
    options = MemoryOptions(scope=scope_from_args(args), top_k=args.top)
    analysis = job_analysis(traces, options)
    if analysis is None:
        raise MemoryInputError(f"{path}: {NO_MEMORY_EVENTS}")
    return Opened(analysis, traces, options)


def run_memory(args: argparse.Namespace, load: Callable[[list[SourcePath], bool], Any]) -> int:
    from htatui.trace import LoadError
    from htatui.trace.memory_inputs import MemoryInputError

    try:
        opened = _open(args, args.path, load)
        second = _open(args, args.path2, load).analysis if args.path2 is not None else None
    except (MemoryInputError, LoadError, argparse.ArgumentTypeError) as exc:
        return fail(str(exc))
    first = opened.analysis
    devices = first.summary["device"].to_list()
    if args.device is not None:
        if args.device not in devices:
            return fail(f"{args.path}: no device {args.device} (it has {', '.join(devices) or 'none'})")
        devices = [args.device]
    if args.site is not None:
        return _print_frames(first, args.site)
    if second is not None:
        return _print_comparison(first, second, args)
    if args.format == "json" and args.table is None:
        payload = [device_report(first, device, args.top) for device in devices]
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    from htatui.text.render import render_frame

    if args.format != "table":
        render_frame(table(opened, args.table or "sites", devices, args.top), args.format)
        return 0
    if args.table is not None:
        chosen = readable(table(opened, args.table, devices, args.top), _start_us(first))
        title = f"{args.table} (GiB/MiB; times in ms from the first event)"
        render_frame(chosen, "table", title=title, wide=args.wide)
        return 0
    _print_all(first, devices, args.top, args.wide)
    return 0


def table(opened: Opened, name: str, devices: list[str], top: int) -> pl.DataFrame:
    """One of TABLES for the chosen devices, each row naming its device: for a job, the table
    `report --view memory` makes; for a recording, the same table made from it."""
    import polars as pl

    from htatui.analysis.memory import tables

    if opened.traces is not None and opened.options is not None and name in REGISTERED:
        from htatui.analysis.registry import frame_of, make_table, view

        made = frame_of(make_table(view("memory").table(REGISTERED[name]), opened.traces, opened.options))[0]
        return made.filter(pl.col("device").is_in(devices))
    analysis = opened.analysis
    makers: dict[str, Callable[[MemoryAnalysis], pl.DataFrame]] = {
        "summary": tables.summary_table,
        "sites": lambda analysis: tables.sites_table(analysis, top),
        "allocator": tables.allocator_table,
        "oom": tables.oom_table,
        "growth": tables.growth_table,
        "spans": tables.spans_table,
        "series": tables.series_table,
    }
    return makers[name](analysis).filter(pl.col("device").is_in(devices))


TIME_COLUMNS = ("time_us", "start_us", "end_us")
"""Columns that are instants (made relative to the recording's first event); other `_us` are durations."""


def readable(frame: pl.DataFrame, start_us: float | None) -> pl.DataFrame:
    """A memory table for people: bytes in GiB (MiB when a column stays under 1 GiB), instants in ms
    from the recording's first event, durations in ms. CSV and JSON keep exact bytes and µs."""
    import polars as pl

    columns = []
    for name, dtype in frame.schema.items():
        column = pl.col(name)
        if (name == "bytes" or name.endswith("_bytes") or name.startswith("bytes_")) and dtype.is_numeric():
            stem = "size" if name == "bytes" else name.removesuffix("_bytes").removeprefix("bytes_")
            biggest = frame[name].abs().max()
            gib = isinstance(biggest, int | float) and biggest >= 2**30
            columns.append((column / (2**30 if gib else 2**20)).alias(f"{stem}_{'gib' if gib else 'mib'}"))
        elif name.endswith("_us") and dtype.is_float():
            instant = name in TIME_COLUMNS or name.endswith("_time_us")
            origin = start_us if instant and start_us is not None else 0.0
            columns.append(((column - origin) / 1000.0).alias(name.removesuffix("_us") + "_ms"))
        else:
            columns.append(column)
    return frame.select(columns)


def _start_us(analysis: MemoryAnalysis) -> float | None:
    value = analysis.recording.events["time_us"].min()
    return float(value) if isinstance(value, int | float) else None


def device_report(analysis: MemoryAnalysis, device: str, top: int) -> dict[str, Any]:
    """The `--format json` object for one device."""
    import polars as pl

    from htatui.analysis.memory import tables
    from htatui.analysis.memory import usage as memory

    summary = tables.summary_table(analysis).filter(pl.col("device") == device).to_dicts()[0]
    growth = memory.growth(analysis)
    on_device = pl.col("device") == device
    growing = growth.growing_sites.get(device)
    return {
        "device": device,
        "source": str(analysis.recording.path),
        "kind": analysis.recording.kind,
        **{k: v for k, v in summary.items() if k != "device"},
        "sites": analysis.sites_at_peak(device, top).to_dicts(),
        "allocator": memory.allocator_state(analysis.recording).filter(on_device).drop("device").to_dicts(),
        "ooms": [
            {
                **row,
                "why": memory.oom_reason(analysis, {**row, "device": device}),
                "sites": memory.sites_at(analysis, device, row["seq"], top).to_dicts(),
            }
            for row in memory.ooms(analysis).filter(on_device).drop("device").to_dicts()
        ],
        "growth_basis": growth.basis,
        "growth": growth.points.filter(on_device).drop("device").to_dicts(),
        "leak_suspected": growth.leaking.get(device, False),
        "growing_sites": [] if growing is None else growing.head(top).to_dicts(),
        "spans": memory.span_peaks(analysis).filter(on_device).drop("device").to_dicts(),
    }


def _print_all(analysis: MemoryAnalysis, devices: list[str], top: int, wide: bool = False) -> None:
    import polars as pl

    from htatui.analysis.core.units import byte_size
    from htatui.analysis.memory import tables
    from htatui.analysis.memory import usage as memory
    from htatui.text.render import render_frame

    recording = analysis.recording
    start = _start_us(analysis)

    def show(frame: pl.DataFrame, title: str) -> None:
        render_frame(readable(frame, start), "table", title=title, wide=wide)

    print(f"{recording.path} ({recording.kind.replace('_', ' ')}; sizes in GiB/MiB, times in ms from its first event)")
    show(tables.summary_table(analysis).filter(pl.col("device").is_in(devices)), "Memory per device")
    if recording.kind == "snapshot":
        print(
            "peak/end: requested sizes (the memory viewer's convention); allocator peak/end: rounded as the "
            "caching allocator rounds blocks, what torch.cuda.max_memory_allocated()/memory_allocated() report"
        )
    else:
        print("peak/end: the allocator's own figures, as the recording's memory events report them")
    growth = memory.growth(analysis)
    for device in devices:
        show(analysis.sites_at_peak(device, top), f"{device}: live at the peak, by site")
        ooms = memory.ooms(analysis).filter(pl.col("device") == device)
        for row in ooms.iter_rows(named=True):
            when = (row["time_us"] - start) / 1000.0 if row["time_us"] is not None and start is not None else None
            free = row["device_free_bytes"]
            why = memory.oom_reason(analysis, row)
            show(
                memory.sites_at(analysis, device, row["seq"], top),
                f"{device}: OUT OF MEMORY{f' at {when:,.3f} ms' if when is not None else ''}: "
                f"asked {byte_size(row['requested_bytes'])}, device free {byte_size(free)}"
                f"{f'; {why}' if why else ''}. Live by site",
            )
        if device in growth.leaking:
            verdict = "live memory rises at every step: probable leak" if growth.leaking[device] else "no steady growth"
            show(growth.points.filter(pl.col("device") == device), f"{device}: live at {growth.basis} ({verdict})")
            growing = growth.growing_sites.get(device)
            if growth.leaking[device] and growing is not None and growing.height:
                show(growing.head(top), f"{device}: sites that grew (first → last step)")
    allocator = memory.allocator_state(recording).filter(pl.col("device").is_in(devices))
    if allocator.height:
        show(allocator, "Allocator state at the snapshot (per stream)")
    spans = memory.span_peaks(analysis).filter(pl.col("device").is_in(devices))
    if spans.height:
        show(spans, "Peak per step and top-level annotation")


def _print_frames(analysis: MemoryAnalysis, text: str) -> int:
    stacks = {site: frames for site, frames in analysis.recording.stacks.items() if text in site}
    if not stacks:
        return fail(f"{analysis.recording.path}: no site contains {text!r}")
    for site, frames in stacks.items():
        print(site)
        for frame in frames:
            print(f"    {frame}")
    return 0


def _print_comparison(a: MemoryAnalysis, b: MemoryAnalysis, args: argparse.Namespace) -> int:
    from htatui.analysis.memory import usage as memory
    from htatui.text.render import render_frame

    sites = memory.compare_sites(a, b)
    segments = memory.compare_segments(a.recording, b.recording)
    if args.device is not None:
        import polars as pl

        sites = sites.filter(pl.col("device") == args.device)
        segments = segments.filter(pl.col("device") == args.device)
    if sites.height == 0 and segments.height == 0:
        return fail(f"{args.path} and {args.path2} have no device in common")
    if args.format == "json" and args.table is None:
        payload = {"sites": sites.to_dicts(), "segments": segments.to_dicts()}
        sys.stdout.write(orjson.dumps(payload, option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    if args.format != "table":
        render_frame(segments if args.table == "allocator" else sites, args.format)
        return 0
    title = f"Live at the end, by site: {args.path} → {args.path2}"
    render_frame(readable(sites, None), "table", title=title, wide=args.wide)
    if segments.height:
        render_frame(readable(segments, None), "table", title="Segments per device and stream", wide=args.wide)
    return 0
