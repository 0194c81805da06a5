"""`export slice`: the events of a time window of some ranks, as one Chrome trace for Perfetto.

The window is on the job's common time base (the views' `start_us`). Each chosen rank's original
file is read again; metadata events (`ph: M`) are kept, complete events overlapping the window
and instant, counter and flow events inside it are kept, the rest dropped. With one rank whose
file needs no time shift the kept events are copied byte for byte; otherwise each kept event is
re-encoded with `ts` on the common base and, with several ranks, `pid` prefixed by the rank so
that the ranks' processes stay apart. The file is written through export's temp-then-rename
writer, never over an input and never over an existing file without `force`.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import msgspec

from htatui.analysis.export.traces import (
    ExportError,
    check_out_dir,
    join_document,
    output_path,
    read_source,
    reencode_event,
    split_document,
    write_atomic,
)
from htatui.trace.model import TraceSet


class _Head(msgspec.Struct):
    """The fields of an event that decide whether it is in the window."""

    ph: Any = None
    ts: Any = None
    dur: Any = None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _kept(head: _Head, start_us: float, end_us: float) -> bool:
    """Metadata always; a complete event when it overlaps [start, end); others when they start
    inside it."""
    if head.ph == "M":
        return True
    ts = _number(head.ts)
    if ts is None:
        return False
    if head.ph == "X":
        dur = _number(head.dur) or 0.0
        return ts < end_us and (ts + dur > start_us or (dur == 0.0 and ts >= start_us))
    return start_us <= ts < end_us


def _moved(raw: msgspec.Raw, shift_us: float, pid_prefix: str | None) -> bytes:
    """One event with `ts` shifted onto the common base and its pid prefixed (if asked)."""

    def move(event: dict[str, Any]) -> None:
        ts = _number(event.get("ts"))
        if ts is not None and shift_us:
            event["ts"] = round(ts + shift_us, 3)
        if pid_prefix is not None and "pid" in event:
            event["pid"] = f"{pid_prefix}{event['pid']}"

    return reencode_event(raw, move)


def export_slice(
    traces: TraceSet,
    ranks: list[int] | None,
    start_us: float,
    end_us: float,
    out: Path | str,
    force: bool = False,
) -> tuple[Path, int]:
    """Write the window [start_us, end_us) of `ranks` (None = all) to the file `out`; return
    it and the number of events written. Raises ExportError with a one-line message."""
    if not (math.isfinite(start_us) and math.isfinite(end_us)):
        raise ExportError(f"--start and --end must be finite numbers of µs, got {start_us:g} and {end_us:g}")
    if end_us <= start_us:
        raise ExportError(f"the window [{start_us:g}, {end_us:g}) µs is empty: --end must be after --start")
    chosen = traces.rank_ids if ranks is None else list(dict.fromkeys(ranks))
    missing = [r for r in chosen if r not in traces.ranks]
    if missing:
        raise ExportError(f"rank {missing[0]} is not loaded (loaded: {', '.join(map(str, traces.rank_ids))})")
    if not chosen:
        raise ExportError("no rank to export")
    target_path = Path(out).expanduser()
    folder = check_out_dir(target_path.parent)
    target = output_path(folder, target_path.name, traces, force)
    several = len(chosen) > 1
    parts: list[bytes | memoryview] = []
    top: dict[str, msgspec.Raw] | None = None
    count = 0
    for rank in chosen:
        rank_trace = traces.ranks[rank]
        data = read_source(rank_trace)
        rank_top, array = split_document(data, rank_trace.path)
        if top is None:
            top = rank_top
        try:
            raws = msgspec.json.decode(array, type=list[msgspec.Raw])
            heads = msgspec.json.decode(array, type=list[_Head])
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ExportError(f"{rank_trace.path}: traceEvents holds something other than events") from None
        shift = rank_trace.shift_us
        # The window in the file's own time: the common base minus the rank's shift.
        low, high = start_us - shift, end_us - shift
        prefix = f"rank {rank} · " if several else None
        for raw, head in zip(raws, heads, strict=True):
            if not _kept(head, low, high):
                continue
            parts.append(memoryview(raw) if prefix is None and not shift else _moved(raw, shift, prefix))
            count += 1
    joined: list[bytes | memoryview] = [b"[\n"]
    for i, part in enumerate(parts):
        if i:
            joined.append(b",\n")
        joined.append(part)
    joined.append(b"\n]")
    payload = join_document(top, [b"".join(joined)])
    write_atomic(target, payload, force)
    return target, count
