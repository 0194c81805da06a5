"""`htatui memory PATH [PATH2]`: where the GPU memory goes, from a snapshot, a trace or a memory timeline.

One PATH: per device the peak and what was live at it by allocation site, the allocator state,
OOMs, growth across steps and the peak per step/annotation. Two PATHs: the sites live at the end
of each and the segments, compared (A → B). Bad input is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    import polars as pl

    from htatui.analysis.memory.usage import MemoryAnalysis

TABLES = ("sites", "summary", "allocator", "oom", "growth", "spans", "series")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_memory_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    memory = sub.add_parser(
        "memory",
        help="GPU memory: peak, live blocks by allocation site, allocator state, OOMs, leaks",
        description="Read a CUDA memory snapshot (torch.cuda.memory._dump_snapshot), a trace folder or "
        "file recorded with profile_memory=True, or an export_memory_timeline file. With a second "
        "path, compare the two (what appeared or grew from PATH to PATH2). Snapshots are read "
        "without running code: a pickle that names any class or function is refused.",
    )
    memory.add_argument(
        "path", type=Path, metavar="PATH", help="snapshot .pickle, trace folder/file, or memory timeline"
    )
    memory.add_argument("path2", type=Path, nargs="?", metavar="PATH2", help="a second recording to compare with PATH")
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
    memory.set_defaults(run=run_memory)


def _err(message: str) -> None:
    print(f"htatui: {message}", file=sys.stderr)


def run_memory(args: argparse.Namespace) -> int:
    from htatui.analysis.memory.usage import analyse
    from htatui.trace.memory_inputs import MemoryInputError, read_memory

    try:
        first = analyse(read_memory(args.path))
        second = analyse(read_memory(args.path2)) if args.path2 is not None else None
    except MemoryInputError as exc:
        _err(str(exc))
        return 2
    devices = first.summary["device"].to_list()
    if args.device is not None:
        if args.device not in devices:
            _err(f"{args.path}: no device {args.device} (it has {', '.join(devices) or 'none'})")
            return 2
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
        render_frame(table(first, args.table or "sites", devices, args.top), args.format)
        return 0
    if args.table is not None:
        chosen = readable(table(first, args.table, devices, args.top), _start_us(first))
        title = f"{args.table} (GiB/MiB; times in ms from the first event)"
        render_frame(chosen, "table", title=title, wide=args.wide)
        return 0
    _print_all(first, devices, args.top, args.wide)
    return 0


def table(analysis: MemoryAnalysis, name: str, devices: list[str], top: int) -> pl.DataFrame:
    """One of TABLES for the chosen devices, each row naming its device."""
    import polars as pl

    from htatui.analysis.memory import usage as memory

    if name == "sites":
        frames = [analysis.sites_at_peak(d, top).select(pl.lit(d).alias("device"), pl.all()) for d in devices]
        return pl.concat(frames) if frames else pl.DataFrame()
    chosen = pl.col("device").is_in(devices)
    if name == "summary":
        return summary_table(analysis).filter(chosen)
    if name == "allocator":
        return memory.allocator_state(analysis.recording).filter(chosen)
    if name == "oom":
        found = memory.ooms(analysis).filter(chosen)
        why = [memory.oom_reason(analysis, row) for row in found.iter_rows(named=True)]
        return found.with_columns(pl.Series("why", why, dtype=pl.Utf8))
    if name == "growth":
        return memory.growth(analysis).points.filter(chosen)
    if name == "spans":
        return memory.span_peaks(analysis).filter(chosen)
    return analysis.series.filter(chosen)


def summary_table(analysis: MemoryAnalysis) -> pl.DataFrame:
    """The per-device summary with the allocator's rounded figures beside the requested sizes."""
    from htatui.analysis.memory import usage as memory

    joined = analysis.summary.join(memory.allocator_allocated(analysis), on="device", how="left")
    first = ["device", "peak_bytes", "allocator_peak_bytes", "end_bytes", "allocator_end_bytes"]
    return joined.select(first + [name for name in joined.columns if name not in first])


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

    from htatui.analysis.memory import usage as memory

    summary = summary_table(analysis).filter(pl.col("device") == device).to_dicts()[0]
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

    from htatui.analysis.memory import usage as memory
    from htatui.text.render import render_frame

    recording = analysis.recording
    start = _start_us(analysis)

    def show(frame: pl.DataFrame, title: str) -> None:
        render_frame(readable(frame, start), "table", title=title, wide=wide)

    print(f"{recording.path} ({recording.kind.replace('_', ' ')}; sizes in GiB/MiB, times in ms from its first event)")
    show(summary_table(analysis).filter(pl.col("device").is_in(devices)), "Memory per device")
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
                f"asked {_size(row['requested_bytes'])}, device free {_size(free)}"
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


def _size(value: int | None) -> str:
    """Bytes as a person reads them (exact bytes stay in CSV/JSON)."""
    if value is None:
        return "unknown"
    if abs(value) >= 2**30:
        return f"{value / 2**30:,.2f} GiB"
    return f"{value / 2**20:,.1f} MiB" if abs(value) >= 2**20 else f"{value:,} B"


def _print_frames(analysis: MemoryAnalysis, text: str) -> int:
    stacks = {site: frames for site, frames in analysis.recording.stacks.items() if text in site}
    if not stacks:
        _err(f"{analysis.recording.path}: no site contains {text!r}")
        return 2
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
        _err(f"{args.path} and {args.path2} have no device in common")
        return 2
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
