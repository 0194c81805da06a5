"""Trace exports: the original trace plus HTA's counters, or overlaid with frequent patterns.

The only analysis module that does file I/O. Every export re-reads the rank's original file
(`RankTrace.path`) and writes a new file into `out_dir`; the input is never modified.

The original bytes are kept: the top-level object is split into its keys with their raw JSON
values (msgspec), new counter events are appended inside the `traceEvents` array, and only
events that gain a "Patterns" arg are re-encoded. So every original event, the metadata and
`"rank": N` (which HTA's rank detection reads as text) stay byte-for-byte as they were, and a
50 MB trace exports in about a second plus compression. Output files ending in `.gz` are gzip
(level 3), others plain JSON (HTA always gzips; see docs/semantics-patterns-ops-export.md). Files are
written to a temporary name in `out_dir` and then moved into place; an existing file is only
replaced with `force=True`, and never when it is one of the loaded input traces.
"""

from __future__ import annotations

import errno
import gzip
import os
import secrets
import stat
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import msgspec
import orjson
import polars as pl

from htatui.analysis.core.options import CommonOptions
from htatui.analysis.views import membw, patterns, queue
from htatui.errors import HtatuiError
from htatui.sources import SourcePath
from htatui.trace.decode import TraceFormatError
from htatui.trace.fetch import read_source_bytes
from htatui.trace.kineto import COPY_CATS, DEVICE_CATS, GPU_ACTIVITY_CATS
from htatui.trace.model import RankTrace, TraceSet
from htatui.trace.read import identity

QUEUE_LENGTH = "queue_length"
MEMORY_BW = "memory_bw"
COUNTER_KINDS = (QUEUE_LENGTH, MEMORY_BW)

QUEUE_COUNTER_NAME = "Queue Length"
BW_ARG = "Memcpy BW"
GZIP_LEVEL = 3

Progress = Callable[[int, int, Path], None]
"""progress(done, total, path): called after each file is written."""


class ExportError(HtatuiError):
    """An export could not be written; the message is one line naming the file or folder."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path
        """The file or folder the problem is about, when there is one."""


class ExportExistsError(ExportError, FileExistsError):
    """The output file already exists and `force` was not given (each face says how to overwrite)."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: already exists", path)


def counters_file_name(path: SourcePath) -> str:
    """HTA's name: every ".json" in the file name becomes "_with_counters.json"."""
    name = path.name
    if ".json" in name:
        return name.replace(".json", "_with_counters.json")
    return f"{name}_with_counters.json"


def overlay_file_name(path: SourcePath) -> str:
    """HTA's name for the patterns overlay: "overlaid_" + the original file name."""
    return f"overlaid_{path.name}"


# ----------------------------------------------------------------------------- counter events


def _pid_value(pid: str) -> int | str:
    text = pid.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    return pid


def _file_times(ts_us: pl.Series, shift_us: float) -> list[int | float]:
    """Series times back on the file's own time base: whole µs as ints, else to the ns (values
    beyond 1e12 µs — epoch-based traces — are never rounded: ×1000 would lose their precision)."""
    value = pl.col("ts")
    nearest = value.round(0)
    frame = pl.DataFrame({"ts": ts_us - shift_us}).select(
        whole=pl.when((value - nearest).abs() < 5e-4).then(nearest.cast(pl.Int64, strict=False)),
        ts=pl.when(value.abs() < 1e12).then(value.round(3)).otherwise(value),
    )
    return [w if w is not None else t for w, t in zip(frame["whole"].to_list(), frame["ts"].to_list(), strict=True)]


def _stream_pids(events: pl.DataFrame) -> dict[int, int | str]:
    """The GPU pid of each stream: the most common pid of the device rows on that stream."""
    rows = events.filter(pl.col("cat").cast(pl.Utf8).is_in(DEVICE_CATS) & pl.col("stream").is_not_null())
    if rows.height == 0:
        return {}
    counted = (
        rows.group_by("stream", pl.col("pid").cast(pl.Utf8))
        .len()
        .sort(["stream", "len", "pid"], descending=[False, True, False])
    )
    first = counted.group_by("stream", maintain_order=True).first()
    return {int(s): _pid_value(p) for s, p in zip(first["stream"].to_list(), first["pid"].to_list(), strict=True)}


def _copy_pids(events: pl.DataFrame) -> dict[str, int | str]:
    """The GPU pid of each copy kind: the most common pid of its copy/memset rows."""
    rows = events.filter(pl.col("cat").cast(pl.Utf8).is_in(COPY_CATS)).with_columns(copy_kind=membw.copy_kind())
    if rows.height == 0:
        return {}
    counted = (
        rows.group_by("copy_kind", pl.col("pid").cast(pl.Utf8))
        .len()
        .sort(["copy_kind", "len", "pid"], descending=[False, True, False])
    )
    first = counted.group_by("copy_kind", maintain_order=True).first()
    return {str(k): _pid_value(p) for k, p in zip(first["copy_kind"].to_list(), first["pid"].to_list(), strict=True)}


def _device_pid(events: pl.DataFrame) -> int | str:
    """A rank's GPU pid (most common pid of its device rows), for series without a match."""
    rows = events.filter(pl.col("cat").cast(pl.Utf8).is_in(GPU_ACTIVITY_CATS))
    if rows.height == 0:
        return 0
    counted = rows.group_by(pl.col("pid").cast(pl.Utf8)).len().sort(["len", "pid"], descending=[True, False])
    return _pid_value(str(counted["pid"][0]))


def counter_events(
    traces: TraceSet,
    rank: int,
    options: CommonOptions | None = None,
    kinds: Sequence[str] = COUNTER_KINDS,
) -> list[dict[str, Any]]:
    """HTA's counter events for one rank, on the file's own time base (docs/semantics-patterns-ops-export.md).

    "Queue Length" events carry `id` = stream and args {"Queue Length": n}; bandwidth events are
    named by copy kind ("Memcpy HtoD", "Memset", …) with args {"Memcpy BW": GB/s}.
    """
    unknown = [k for k in kinds if k not in COUNTER_KINDS]
    if unknown:
        raise ValueError(f"unknown counter kind {unknown[0]!r}; choose from {', '.join(COUNTER_KINDS)}")
    if rank not in traces.ranks:
        return []
    base = options or CommonOptions()
    rank_trace = traces.ranks[rank]
    shift = rank_trace.shift_us
    out: list[dict[str, Any]] = []
    fallback_pid = _device_pid(rank_trace.events)
    if QUEUE_LENGTH in kinds:
        series = queue.series(
            traces,
            queue.QueueOptions(base.scope.with_ranks((rank,))),
        )
        pids = _stream_pids(rank_trace.events)
        out.extend(
            {
                "ph": "C",
                "name": QUEUE_COUNTER_NAME,
                "pid": pids.get(stream, fallback_pid),
                "ts": ts,
                "id": stream,
                "args": {QUEUE_COUNTER_NAME: length},
            }
            for stream, ts, length in zip(
                series["stream"].to_list(),
                _file_times(series["ts_us"], shift),
                series["queue_length"].to_list(),
                strict=True,
            )
        )
    if MEMORY_BW in kinds:
        series = membw.series(
            traces,
            membw.MemoryBandwidthOptions(base.scope.with_ranks((rank,))),
        )
        pids_by_kind = _copy_pids(rank_trace.events)
        out.extend(
            {
                "ph": "C",
                "name": kind,
                "pid": pids_by_kind.get(kind, fallback_pid),
                "ts": ts,
                "args": {BW_ARG: bw},
            }
            for kind, ts, bw in zip(
                series["copy_kind"].to_list(),
                _file_times(series["ts_us"], shift),
                series["memory_bw_gbps"].to_list(),
                strict=True,
            )
        )
    return out


# ----------------------------------------------------------------------------- raw splicing


def read_source(rank_trace: RankTrace) -> bytes:
    """The rank's original trace file's JSON bytes, read again; any failure is a one-line ExportError.

    A rank from a dataset recorded its source's size and mtime at ingest: a source changed since
    is refused, since its events would be spliced with counters computed from the stored ones.
    """
    _check_unchanged_since_ingest(rank_trace)
    _check_unchanged_since_load(rank_trace)
    try:
        return bytes(read_source_bytes(rank_trace.path))
    except FileNotFoundError:
        raise ExportError(f"{rank_trace.path}: the original trace is gone; reload it") from None
    except PermissionError:
        raise ExportError(f"{rank_trace.path}: cannot be read (permission denied)") from None
    except IsADirectoryError:
        raise ExportError(f"{rank_trace.path}: is a folder, not a trace file") from None
    except TraceFormatError as exc:
        raise ExportError(f"{rank_trace.path}: {exc}") from None
    except OSError as exc:
        raise ExportError(f"{rank_trace.path}: cannot be read ({exc.strerror or exc})") from None


def _check_unchanged_since_ingest(rank_trace: RankTrace) -> None:
    stamp = rank_trace.source_stamp
    if stamp is None or not isinstance(rank_trace.path, Path):
        return
    try:
        info = os.stat(rank_trace.path)
    except OSError:
        return  # read_source names the problem
    if (info.st_size, info.st_mtime_ns) != stamp:
        raise ExportError(
            f"{rank_trace.path}: changed since it was ingested; its events are not the dataset's "
            "(ingest it again, or export from the trace files)",
            rank_trace.path,
        )


def _check_unchanged_since_load(rank_trace: RankTrace) -> None:
    """A trace file edited or replaced since it was loaded (the app keeps a job loaded for hours)
    would splice its new events with counters or steps computed from the old ones."""
    taken = rank_trace.source_identity
    if taken is None or not isinstance(rank_trace.path, Path):
        return
    try:
        now = identity(rank_trace.path)
    except OSError:
        return  # read_source names the problem
    if now != taken:
        raise ExportError(
            f"{rank_trace.path}: changed since it was loaded; its events are not the ones analysed (load it again)",
            rank_trace.path,
        )


def split_document(data: bytes, path: SourcePath) -> tuple[dict[str, msgspec.Raw] | None, msgspec.Raw]:
    """The top-level keys with their raw JSON values (byte-exact, in file order) and the raw
    traceEvents array; (None, the array) for a trace written as a bare JSON array."""
    try:
        if data.lstrip()[:1] == b"[":
            return None, msgspec.json.decode(data, type=msgspec.Raw)
        top = msgspec.json.decode(data, type=dict[str, msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ExportError(f"{path}: not a JSON trace ({exc})") from None
    if "traceEvents" not in top:
        raise ExportError(f"{path}: not a Chrome trace (no traceEvents)")
    return top, top["traceEvents"]


def join_document(top: dict[str, msgspec.Raw] | None, events: list[bytes | memoryview]) -> bytes:
    """The document again: each top-level key with its raw value, `events` (buffer parts) as
    the traceEvents value (or as the whole document for a bare-array trace)."""
    if top is None:
        return b"".join([*events, b"\n"])
    parts: list[bytes | memoryview] = [b"{\n"]
    for i, (key, value) in enumerate(top.items()):
        if i:
            parts.append(b",\n")
        parts.append(msgspec.json.encode(key) + b": ")
        if key == "traceEvents":
            parts.extend(events)
        else:
            parts.append(memoryview(value))
    parts.append(b"\n}\n")
    return b"".join(parts)


_WHITESPACE = frozenset(b" \t\r\n")


def _append_events(array: msgspec.Raw, extra: bytes, path: SourcePath) -> list[bytes | memoryview]:
    """The raw traceEvents array with `extra` (encoded events separated by commas) appended
    before its `]`, as buffer parts (no copy of the original events)."""
    view = memoryview(array)
    end = len(view)
    while end and view[end - 1] in _WHITESPACE:
        end -= 1
    start = 0
    while start < end and view[start] in _WHITESPACE:
        start += 1
    if end - start < 2 or view[start] != ord("[") or view[end - 1] != ord("]"):
        raise ExportError(f"{path}: traceEvents is not a list")
    if not extra:
        return [view[start:end]]
    close = end - 1
    inner_end = close
    while inner_end > start + 1 and view[inner_end - 1] in _WHITESPACE:
        inner_end -= 1
    if inner_end == start + 1:  # an empty array
        return [b"[\n", extra, b"\n]"]
    return [view[start:inner_end], b",\n", extra, b"\n]"]


def _encode_events(events: list[dict[str, Any]]) -> bytes:
    """Events as `{...},{...}` (one orjson call, one line)."""
    if not events:
        return b""
    return orjson.dumps(events)[1:-1]


# ----------------------------------------------------------------------------- safe writing


def check_out_dir(out_dir: Path) -> Path:
    """`out_dir` (user-expanded) when it is an existing, writable folder; else a one-line ExportError."""
    folder = Path(out_dir).expanduser()
    if not folder.exists():
        raise ExportError(f"{folder}: output folder does not exist")
    if not folder.is_dir():
        raise ExportError(f"{folder}: is not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ExportError(f"{folder}: output folder is not writable")
    return folder


def _inputs(traces: TraceSet) -> set[Path]:
    out: set[Path] = set()
    for rank_trace in traces.ranks.values():
        try:
            if isinstance(rank_trace.path, Path):
                out.add(rank_trace.path.resolve())
        except OSError:
            continue
    return out


def output_path(folder: Path, name: str, traces: TraceSet, force: bool) -> Path:
    """Where to write `name` in `folder`: never an input trace or a folder, an existing file only with `force`."""
    target = folder / name
    if target.resolve() in _inputs(traces):
        raise ExportError(f"{target}: is one of the input traces; choose another output folder")
    if (target.exists() or target.is_symlink()) and not force:
        raise ExportExistsError(target)
    if target.is_dir():
        raise ExportError(f"{target}: is a folder")
    _refuse_special(target)
    return target


def _refuse_special(target: Path) -> None:
    """An export replaces regular files only, never a device node, FIFO or socket (as root,
    `-o /dev/full --force` had replaced the device with a regular file)."""
    try:
        mode = target.lstat().st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ExportError(f"{target}: cannot be checked ({exc.strerror or exc})") from None
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
        raise ExportError(f"{target}: is {kind}, not a regular file; exports write regular files only")


def write_atomic(target: Path, payload: bytes, force: bool) -> None:
    """Write `payload` (gzip when the name ends in .gz) to a temp file beside `target`, then move
    it into place: replace only with `force`, else fail if the name appeared meanwhile."""
    tmp = _write_temp(target, payload)
    try:
        _commit(tmp, target, force)
    finally:
        _discard(tmp)


def _write_temp(target: Path, payload: bytes) -> Path:
    """`payload` written in full to a hidden temp file beside `target` (removed on failure)."""
    data = gzip.compress(payload, compresslevel=GZIP_LEVEL, mtime=0) if target.name.endswith(".gz") else payload
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except PermissionError:
        raise ExportError(f"{target.parent}: output folder is not writable") from None
    except OSError as exc:
        raise ExportError(f"{target}: cannot be written ({exc.strerror or exc})") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        _discard(tmp)
        raise ExportError(f"{target}: cannot be written ({exc.strerror or exc})") from None
    except BaseException:
        _discard(tmp)
        raise
    return tmp


def _commit(tmp: Path, target: Path, force: bool) -> None:
    """Move a written temp file to `target`: replace only with `force`, else never over a file."""
    try:
        if force:
            _refuse_special(target)  # checked again: the name may have changed since output_path
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise ExportExistsError(target) from None
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
                raise
            # No hard links here (some network/FUSE file systems): check, then rename.
            if target.exists():
                raise ExportExistsError(target) from None
            os.replace(tmp, target)
    except ExportError:
        raise
    except OSError as exc:
        raise ExportError(f"{target}: cannot be written ({exc.strerror or exc})") from None


def _discard(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _check_not_input_folder(folder: Path, traces: TraceSet) -> None:
    """Refuse to write beside the inputs: the export would be loaded as one more rank next time."""
    resolved = folder.resolve()
    for path in sorted(_inputs(traces)):
        if path.parent == resolved:
            raise ExportError(
                f"{folder}: holds the input trace {path.name}; an export there would be read as another "
                "rank next time, so choose another output folder"
            )


# ----------------------------------------------------------------------------- exports


def export_counters(
    traces: TraceSet,
    ranks: Iterable[int] | None,
    out_dir: Path | str,
    force: bool = False,
    progress: Progress | None = None,
    *,
    options: CommonOptions | None = None,
    kinds: Sequence[str] = COUNTER_KINDS,
) -> list[Path]:
    """Write `<name>_with_counters.json[.gz]` into `out_dir` for each rank (None = all): a copy
    of the rank's original trace with HTA's queue-length and memory-bandwidth counter events
    appended to traceEvents. Returns the written paths in rank order.

    `options` picks compat mode and the step filter for the series (its `ranks` is ignored);
    `kinds` picks the series (`queue_length`, `memory_bw`). Raises ExportError (one line) for
    a bad folder or an unreadable input, ExportExistsError when a file exists without `force`.
    """
    folder = check_out_dir(Path(out_dir))
    _check_not_input_folder(folder, traces)
    chosen = traces.rank_ids if ranks is None else list(dict.fromkeys(ranks))
    missing = [r for r in chosen if r not in traces.ranks]
    if missing:
        raise ExportError(f"rank {missing[0]} is not loaded (loaded: {', '.join(map(str, traces.rank_ids))})")
    targets = {rank: output_path(folder, counters_file_name(traces.ranks[rank].path), traces, force) for rank in chosen}
    clashes = [r for r in chosen if list(targets.values()).count(targets[r]) > 1]
    if clashes:
        raise ExportError(
            f"{targets[clashes[0]]}: ranks {', '.join(map(str, clashes))} have the same file name; "
            "export them separately"
        )
    # All ranks or none: every file is written to a temp name first, and only when all are
    # complete are they moved into place; a failure removes what this export placed.
    temps: dict[int, Path] = {}
    placed: list[Path] = []
    try:
        for done, rank in enumerate(chosen, start=1):
            rank_trace = traces.ranks[rank]
            events = _encode_events(counter_events(traces, rank, options, kinds))
            data = read_source(rank_trace)
            top, array = split_document(data, rank_trace.path)
            payload = join_document(top, _append_events(array, events, rank_trace.path))
            del data, top, array
            temps[rank] = _write_temp(targets[rank], payload)
            del payload
            if progress is not None:
                progress(done, len(chosen), targets[rank])
        for rank in chosen:
            _commit(temps[rank], targets[rank], force)
            placed.append(targets[rank])
    except ExportError as exc:
        if force and placed:
            # The files they replaced are gone already; keep the new ones rather than nothing.
            left = f"; already replaced: {', '.join(p.name for p in placed)}"
        else:
            for path in placed:
                _discard(path)
            left = "" if len(chosen) == 1 else "; no rank was exported (all or none)"
        raise type(exc)(f"{exc}{left}") from None
    finally:
        for tmp in temps.values():
            _discard(tmp)
    return [targets[rank] for rank in chosen]


def _symbol_table(heads: list[_EventHead]) -> dict[str, int]:
    table: dict[str, int] = {}
    for head in heads:
        if head.ph == "X" and isinstance(head.name, str) and head.name not in table:
            table[head.name] = len(table)
    return table


class _EventHead(msgspec.Struct):
    ph: Any = None
    name: Any = None
    pid: Any = None


def reencode_event(raw: msgspec.Raw, update: Callable[[dict[str, Any]], None]) -> bytes:
    """Re-encode one raw event after `update` changes it (events that fail to decode stay)."""
    try:
        event = orjson.loads(bytes(raw))
    except orjson.JSONDecodeError:
        return bytes(raw)
    if not isinstance(event, dict):
        return bytes(raw)
    update(event)
    try:
        return orjson.dumps(event)
    except TypeError:
        return bytes(raw)


def export_patterns(
    traces: TraceSet,
    options: patterns.PatternsOptions,
    out_dir: Path | str,
    force: bool = False,
    *,
    compress_other_kernels: bool = False,
) -> Path:
    """Write `overlaid_<original file name>` into `out_dir`: the chosen rank's trace where every
    event involved in one of the `top_k` patterns gets `args["Patterns"] = {pattern: count}`
    (search "Patterns" in the trace viewer). With `compress_other_kernels` (HTA's default, off
    here) every other complete event loses its args and its name becomes a number; the
    number → name table goes into the args of the "PyTorch Profiler" span event.
    """
    folder = check_out_dir(Path(out_dir))
    _check_not_input_folder(folder, traces)
    rank = patterns.chosen_rank(traces, options)
    if rank is None:
        raise ExportError("no rank to export: the chosen rank is not loaded")
    rank_trace = traces.ranks[rank]
    target = output_path(folder, overlay_file_name(rank_trace.path), traces, force)
    table = patterns.pattern_indices(traces, options)
    involved: dict[int, dict[str, int]] = {}
    for pattern, count, indices in table.iter_rows():
        for index in indices:
            involved.setdefault(index, {})[pattern] = count
    data = read_source(rank_trace)
    top, array = split_document(data, rank_trace.path)
    try:
        raw_events = msgspec.json.decode(array, type=list[msgspec.Raw])
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise ExportError(f"{rank_trace.path}: traceEvents is not a list") from None
    out: list[bytes | msgspec.Raw] = list(raw_events)

    def add_patterns(found: dict[str, int]) -> Callable[[dict[str, Any]], None]:
        def update(event: dict[str, Any]) -> None:
            args = event.get("args")
            if not isinstance(args, dict):
                args = {}
            args["Patterns"] = found
            event["args"] = args

        return update

    for index, found in involved.items():
        if 0 <= index < len(out):
            out[index] = reencode_event(raw_events[index], add_patterns(found))
    if compress_other_kernels:
        try:
            heads = msgspec.json.decode(array, type=list[_EventHead])
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise ExportError(f"{rank_trace.path}: traceEvents holds something other than events") from None
        symbols = _symbol_table(heads)
        spans = next((i for i, h in enumerate(heads) if h.pid == "Spans" and "PyTorch Profiler" in str(h.name)), None)

        def compress(event: dict[str, Any]) -> None:
            event["args"] = {}
            name = event.get("name")
            if isinstance(name, str) and name in symbols:
                event["name"] = str(symbols[name])

        for i, head in enumerate(heads):
            if head.ph == "X" and i not in involved and i != spans:
                out[i] = reencode_event(raw_events[i], compress)
        if spans is not None:
            mapping = {str(i): name for name, i in symbols.items()}

            def span_args(event: dict[str, Any]) -> None:
                event["args"] = mapping

            out[spans] = reencode_event(raw_events[spans], span_args)
    joined = b"[\n" + b",\n".join(out) + b"\n]" if out else b"[]"
    payload = join_document(top, [joined])
    del data, top, array, raw_events, out
    write_atomic(target, payload, force)
    return target
