"""Parsed ranks cached as Arrow IPC under the user cache dir, keyed by file identity.

A cache entry is three files written atomically (temp + rename): `<key>.arrow` with the events,
`<key>.details` with the detail table (model.DETAIL_SCHEMA) and `<key>.json` with the metadata,
the warnings, the entry's key and each data file's size and sha256. An entry is served only when
they are regular files (not links), the JSON names this key (a copy of another entry's files is
not this trace) and the data files have those sizes and checksums; anything else is rebuilt,
never trusted. An entry may also keep small tables in `<key>.tables`, each one's offset, size and
sha256 in the JSON: the file's headline figures (`trace.figures`, written with the events: what a
cached `info` prints, so it reads no events), the summary row a parse worker made of a folder's
rank (`loader.EntryTables`, written with the events too), a rank's cross-rank analysis tables
(`store_tagged`) and its rows of per-rank view tables, these two tagged with the
job they hold for.

What is verified, and when: the JSON record is read whole on every open (it is the root: it names
its key and holds the checksums). The events file's size is checked on open; the events and
details files' whole bytes against the record's size and sha256 each time they are read (all of
them, before any is decoded); each small table's bytes against its own sha256 each time that table is read, alone.
A table that does not check out is never used: the figures are made again from the (verified)
events and kept again, the analysis tables made again from the events.

The key is the file's path and identity (size, mtime, ctime, inode, device), taken before the
file is read, so a rewrite with the same size and a restored mtime (ctime changes) or a file
replaced mid-parse is never served stale, and the digest of the parser's code (`trace.code`), so
an entry another version of htatui made is parsed again. Entries beyond a size cap are evicted, oldest first.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from htatui.sources import RemotePath, SourcePath, cache_identity
from htatui.trace.code import parser_digest
from htatui.trace.model import DETAIL_SCHEMA, EVENT_SCHEMA, TraceMeta
from htatui.trace.read import FileIdentity, identity
from htatui.trace.step_sources import STEPS_FROM_ENV
from htatui.trace.validate import drop_impossible_events

DEFAULT_MAX_CACHE_BYTES = 4 << 30


def cache_dir() -> Path:
    override = os.environ.get("HTATUI_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "htatui"


class NotCacheable(LookupError):
    """A remote file whose store gives no version identity (ETag, generation…) is never cached."""


def max_cache_bytes() -> int:
    """The cache folder's size cap; HTATUI_CACHE_MAX_BYTES overrides 4 GiB."""
    try:
        return int(os.environ.get("HTATUI_CACHE_MAX_BYTES", ""))
    except ValueError:
        return DEFAULT_MAX_CACHE_BYTES


def cache_key(path: SourcePath, file_identity: FileIdentity | None = None) -> str:
    """A remote file by URL + version identity + size; a local one by path + size, mtime, ctime,
    inode; either with the digest of the parser's code (an entry another parser made is not served)."""
    if isinstance(path, RemotePath):
        remote = cache_identity(path)
        if remote is None:
            raise NotCacheable(str(path))
        text = f"remote|{remote}|{parser_digest()}"
    else:
        token = (file_identity or identity(path)).token()
        text = f"{path.resolve()}|{token}|{parser_digest()}"
    # A user's --steps-from gives each row other steps: an entry of its own.
    steps_from = os.environ.get(STEPS_FROM_ENV, "")
    if steps_from:
        text += f"|steps-from={steps_from}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def meta_to_json(meta: TraceMeta, warnings: list[str]) -> bytes:
    """A parsed file's metadata and warnings as the JSON record a cache entry (and a job dataset) keeps."""
    payload: dict[str, Any] = {
        "schema_version": meta.schema_version,
        "device_properties": list(meta.device_properties),
        "distributed_info": meta.distributed_info,
        "base_time_ns": meta.base_time_ns,
        "display_time_unit": meta.display_time_unit,
        "trace_name": meta.trace_name,
        "process_names": meta.process_names,
        "process_labels": meta.process_labels,
        "thread_names": [[pid, tid, name] for (pid, tid), name in meta.thread_names.items()],
        "fractional_ts": meta.fractional_ts,
        "warnings": warnings,
    }
    return orjson.dumps(payload, option=orjson.OPT_NON_STR_KEYS)


def meta_from_json(raw: bytes) -> tuple[TraceMeta, list[str]]:
    """A `meta_to_json` record back as (metadata, warnings); wrong types raise (and a cache entry is rebuilt)."""
    data = orjson.loads(raw)
    _check_types(data)
    meta = TraceMeta(
        schema_version=data["schema_version"],
        device_properties=tuple(data["device_properties"]),
        distributed_info=data["distributed_info"],
        base_time_ns=data["base_time_ns"],
        display_time_unit=data["display_time_unit"],
        trace_name=data["trace_name"],
        process_names=dict(data["process_names"]),
        process_labels=dict(data["process_labels"]),
        thread_names={(str(pid), str(tid)): str(name) for pid, tid, name in data["thread_names"]},
        fractional_ts=bool(data["fractional_ts"]),
    )
    return meta, [str(w) for w in data["warnings"]]


_META_TYPES: dict[str, tuple[type, ...]] = {
    "schema_version": (int, type(None)),
    "device_properties": (list,),
    "distributed_info": (dict, type(None)),
    "base_time_ns": (int, type(None)),
    "display_time_unit": (str, type(None)),
    "trace_name": (str, type(None)),
    "process_names": (dict,),
    "process_labels": (dict,),
    "thread_names": (list,),
    "fractional_ts": (bool,),
    "warnings": (list,),
}


def _check_types(data: Any) -> None:
    if not isinstance(data, dict):
        raise TypeError("cache metadata is not an object")
    for key, types in _META_TYPES.items():
        if not isinstance(data[key], types):
            raise TypeError(f"cache metadata {key} has the wrong type")
    if not all(isinstance(p, dict) for p in data["device_properties"]):
        raise TypeError("cache metadata device_properties holds a non-object")
    if not all(isinstance(t, list) and len(t) == 3 for t in data["thread_names"]):
        raise TypeError("cache metadata thread_names is malformed")


def _regular(path: Path) -> Path:
    """`path` if it is a regular file, not a link (a FIFO would hang a read, a link may name another entry)."""
    if not stat.S_ISREG(os.lstat(path).st_mode):
        raise OSError(f"{path}: not a regular file")
    return path


def load_cached(
    path: SourcePath, file_identity: FileIdentity | None = None
) -> tuple[pl.DataFrame, pl.DataFrame, TraceMeta, list[str]] | None:
    """The cached parse of `path` (of a local file with `file_identity` when given, else as it is
    now): events, detail table, metadata and warnings; None when absent, stale, corrupt or another entry's."""
    entry = peek_cached(path, file_identity, start=False)
    events = entry.read_events() if entry is not None else None
    details = entry.read_details() if entry is not None and events is not None else None
    if entry is None or events is None or details is None:
        return None
    return events, details, entry.meta, entry.warnings


class CachedEntry:
    """A cache entry whose record was read and whose events file is in place (its size is the
    record's); the events are read, and their checksum verified, only by `read_events`."""

    def __init__(
        self,
        folder: Path,
        key: str,
        meta: TraceMeta,
        warnings: list[str],
        start_ns: int | None,
        file_tables: dict[str, tuple[int, int, str]] | None = None,
    ) -> None:
        self.folder, self.key, self.meta, self.warnings, self.start_ns = folder, key, meta, warnings, start_ns
        self.file_tables = file_tables or {}
        """The entry's untagged small tables (e.g. `figures`) as the record names them: offset, size, sha256."""

    def read_table(self, name: str) -> pl.DataFrame | None:
        """One of the entry's untagged small tables, verified against its sha256; None when absent or changed."""
        if name not in self.file_tables:
            return None
        return CachedTables(self.folder / f"{self.key}.tables", self.file_tables).read(name)

    def read_events(self) -> pl.DataFrame | None:
        """The entry's events when its size, checksum, schema and times hold; None otherwise."""
        events = self._verified_frame(".arrow", "entry", {"key": self.key}, EVENT_SCHEMA)
        if events is None or drop_impossible_events(events)[1] is not None:
            return None  # the loader never stores such an event: parsed again
        return events

    def read_details(self) -> pl.DataFrame | None:
        """The entry's detail table when its size, checksum and schema hold; None otherwise."""
        return self._verified_frame(".details", "details", {}, DETAIL_SCHEMA)

    def _verified_frame(
        self, suffix: str, field: str, expected: dict[str, Any], schema: dict[str, pl.DataType]
    ) -> pl.DataFrame | None:
        """`<key><suffix>` as a frame when the record's `field` is `expected` plus the file's size
        and sha256, and the frame has `schema`; None otherwise."""
        try:
            record = orjson.loads(_regular(self.folder / f"{self.key}.json").read_bytes())
            data = _regular(self.folder / f"{self.key}{suffix}").read_bytes()
            if record.get(field) != {**expected, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}:
                return None
            frame = pl.read_ipc(io.BytesIO(data))
        except BaseException as exc:  # noqa: BLE001 - any failure (a polars panic too) means "rebuild"
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return None
        return frame if frame.schema == pl.Schema(schema) else None


def peek_cached(
    path: SourcePath, file_identity: FileIdentity | None = None, *, start: bool = True
) -> CachedEntry | None:
    """The entry of `path` with its metadata, without reading its events: None when absent,
    another entry's, its events file is not a regular file of the recorded size, or (with
    `start`) the record keeps no first-event time (an entry written before it did)."""
    try:
        key = cache_key(path, file_identity)
        folder = cache_dir()
        record = _regular(folder / f"{key}.json").read_bytes()
        meta, warnings = meta_from_json(record)
        data = orjson.loads(record)
        entry = data.get("entry")
        first = data.get("start_ns")
        if not isinstance(entry, dict) or entry.get("key") != key:
            return None
        if os.lstat(_regular(folder / f"{key}.arrow")).st_size != entry.get("size"):
            return None
        if start and (not isinstance(first, int) or isinstance(first, bool)):
            return None
    except BaseException as exc:  # noqa: BLE001 - any failure means "rebuild"
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        return None
    for suffix in _SUFFIXES:
        with contextlib.suppress(OSError):
            os.utime(folder / f"{key}{suffix}")  # recently used: evicted last
    return CachedEntry(
        folder, key, meta, warnings, first if isinstance(first, int) else None, _parts(data, "file_tables")
    )


def _parts(record: Any, group: str) -> dict[str, tuple[int, int, str]]:
    """The (offset, size, sha256) of each table the record's `group` names; empty when malformed or absent."""
    try:
        kept = record.get(group) if isinstance(record, dict) else None
        return {
            str(name): (int(offset), int(length), str(digest))
            for name, (offset, length, digest) in (kept or {}).get("parts", {}).items()
        }
    except (AttributeError, TypeError, ValueError):
        return {}


def store(
    path: SourcePath,
    file_identity: FileIdentity | None,
    events: pl.DataFrame,
    details: pl.DataFrame,
    meta: TraceMeta,
    warnings: list[str],
    start_ns: int | None = None,
    figures: pl.DataFrame | None = None,
    tables: dict[str, pl.DataFrame] | None = None,
) -> None:
    """Write the cache entry under the identity taken before reading; never fails the load.

    `figures` (`trace.figures.file_figures` of these events) is kept as the entry's `figures`
    table, and `tables` (e.g. the rank's summary row, `loader.EntryTables`) as untagged tables of
    their names. Nothing is stored for a local file that changed since that identity was taken.
    """
    try:
        if isinstance(path, Path) and (file_identity is None or identity(path) != file_identity):
            return
        key = cache_key(path, file_identity)
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        events.write_ipc(buffer, compression="zstd")
        data = buffer.getvalue()
        buffer = io.BytesIO()
        details.write_ipc(buffer, compression="zstd")
        detail_data = buffer.getvalue()
        record = orjson.loads(meta_to_json(meta, warnings))
        record["entry"] = {"key": key, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        record["details"] = {"size": len(detail_data), "sha256": hashlib.sha256(detail_data).hexdigest()}
        record["start_ns"] = start_ns  # when its first event happened: ranks are aligned without reading it
        _atomic_write(folder / f"{key}.arrow", lambda f: f.write(data))
        _atomic_write(folder / f"{key}.details", lambda f: f.write(detail_data))
        untagged = {name: _ipc_bytes(frame) for name, frame in (tables or {}).items()}
        if figures is not None:
            untagged["figures"] = _ipc_bytes(figures)
        _write_tables(folder, key, record, untagged, None)
        evict(folder, max_cache_bytes())
    except Exception:  # noqa: BLE001 - e.g. OSError, or metadata orjson cannot encode
        return


_TABLES_WRITE = threading.Lock()
"""One rewrite of an entry's tables at a time in this process: two of the app's workers keeping
tables at once would each write the tables file and then a record naming the other's offsets (no
wrong table is served, as every one is checked, but both writes, and the figures, would be lost)."""

PART_PREFIX = "part/"
"""Names of a rank's kept rows of per-rank view tables among its tagged tables (`analysis.kept_parts`)."""
MAX_PARTS = 48
"""Parts kept per entry: the newest, so the views a user asks for again stay without growing."""


def store_tagged(
    path: SourcePath, file_identity: FileIdentity | None, tag: str, tables: dict[str, pl.DataFrame]
) -> None:
    """Keep a parsed rank's small analysis tables (`tag` says what they were made for: rank, time
    shift, the rules and code) beside its cache entry: `<key>.tables` holds each table's Arrow IPC
    bytes one after another, and the entry's JSON gains their offsets, sizes and sha256s, so one
    table is read and verified alone. The entry's untagged tables (its figures) and its tables of
    the same tag that check out are kept (others were made for another rank number, shift, rules
    or code: dropped); the oldest parts go beyond MAX_PARTS. Never fails the caller; nothing is
    kept without an entry."""
    try:
        key = cache_key(path, file_identity)
        folder = cache_dir()
        new = {name: _ipc_bytes(frame) for name, frame in tables.items()}
        with _TABLES_WRITE:
            record = _entry_record(folder, key)
            if record is None:
                return
            kept = _tagged_blobs(folder, key, record, tag)
            for name in tables:
                kept.pop(name, None)  # made again: moves to the newest end
            kept.update(new)
            for name in [name for name in kept if name.startswith(PART_PREFIX)][:-MAX_PARTS]:
                del kept[name]
            _write_tables(folder, key, record, _verified_blobs(folder, key, record, "file_tables"), (tag, kept))
    except Exception:  # noqa: BLE001 - e.g. OSError: the tables are made again next time
        return


def _tagged_blobs(folder: Path, key: str, record: dict[str, Any], tag: str) -> dict[str, bytes]:
    """The record's tagged tables that still check out, when they were made for `tag`; else none."""
    kept = record.get("tables")
    return _verified_blobs(folder, key, record, "tables") if isinstance(kept, dict) and kept.get("tag") == tag else {}


def store_figures(path: SourcePath, file_identity: FileIdentity | None, figures: pl.DataFrame) -> None:
    """Keep (again) the entry's `figures` table, made from its verified events after the kept one
    did not check out (or an entry written before figures were kept); the tagged tables that check
    out are kept with it. Never fails the caller; nothing is kept without an entry."""
    try:
        key = cache_key(path, file_identity)
        folder = cache_dir()
        with _TABLES_WRITE:
            record = _entry_record(folder, key)
            if record is None:
                return
            untagged = {**_verified_blobs(folder, key, record, "file_tables"), "figures": _ipc_bytes(figures)}
            kept = record.get("tables")
            tag = kept.get("tag") if isinstance(kept, dict) else None
            tagged = (tag, _verified_blobs(folder, key, record, "tables")) if isinstance(tag, str) else None
            _write_tables(folder, key, record, untagged, tagged)
    except Exception:  # noqa: BLE001 - e.g. OSError: made again from the events next time
        return


def _entry_record(folder: Path, key: str) -> dict[str, Any] | None:
    record = orjson.loads(_regular(folder / f"{key}.json").read_bytes())
    if not isinstance(record, dict) or not isinstance(record.get("entry"), dict) or record["entry"].get("key") != key:
        return None
    return record


def _ipc_bytes(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="zstd")
    return buffer.getvalue()


def _verified_blobs(folder: Path, key: str, record: dict[str, Any], group: str) -> dict[str, bytes]:
    """The bytes of each table of the record's `group` that still matches its sha256 (others are dropped)."""
    kept = {}
    for name, (offset, length, digest) in _parts(record, group).items():
        data = CachedTables(folder / f"{key}.tables", {}).read_bytes(offset, length)
        if data is not None and hashlib.sha256(data).hexdigest() == digest:
            kept[name] = data
    return kept


def _write_tables(
    folder: Path,
    key: str,
    record: dict[str, Any],
    untagged: dict[str, bytes],
    tagged: tuple[str, dict[str, bytes]] | None,
) -> None:
    """Write `<key>.tables` (the untagged tables, then the tagged ones) and then the record naming
    them; the record is written last, so a reader sees the old record (whose checksums no longer
    match: made again) or the new one, never a table it would trust wrongly."""
    blobs: list[bytes] = []

    def parts(tables: dict[str, bytes]) -> dict[str, list[object]]:
        named: dict[str, list[object]] = {}
        for name, blob in tables.items():
            named[name] = [sum(len(b) for b in blobs), len(blob), hashlib.sha256(blob).hexdigest()]
            blobs.append(blob)
        return named

    record.pop("file_tables", None)
    record.pop("tables", None)
    if untagged:
        record["file_tables"] = {"parts": parts(untagged)}
    if tagged is not None:
        record["tables"] = {"tag": tagged[0], "parts": parts(tagged[1])}
    if blobs:
        _atomic_write(folder / f"{key}.tables", lambda f: [f.write(blob) for blob in blobs])
    _atomic_write(folder / f"{key}.json", lambda f: f.write(orjson.dumps(record, option=orjson.OPT_NON_STR_KEYS)))


class CachedTables:
    """A cache entry's small analysis tables (`store_tagged`), each read and verified when asked."""

    def __init__(self, file: Path, parts: dict[str, tuple[int, int, str]]) -> None:
        self.file = file
        self.parts = parts

    def read(self, name: str) -> pl.DataFrame | None:
        """The table as stored, or None when it is absent, changed or unreadable."""
        try:
            offset, length, digest = self.parts[name]
            data = self.read_bytes(offset, length)
            if data is None or hashlib.sha256(data).hexdigest() != digest:
                return None
            return pl.read_ipc(io.BytesIO(data))
        except BaseException as exc:  # noqa: BLE001 - any failure (a polars panic too) means "make them again"
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return None

    def read_bytes(self, offset: int, length: int) -> bytes | None:
        """`length` bytes of the tables file from `offset`; None when the file is shorter or unreadable."""
        try:
            with _regular(self.file).open("rb") as handle:
                handle.seek(offset)
                data = handle.read(length)
        except (OSError, ValueError):
            return None
        return data if len(data) == length else None


def cached_tables(path: SourcePath, file_identity: FileIdentity | None, tag: str) -> CachedTables | None:
    """The tables kept for this entry when they were made for `tag`; None otherwise (reads the JSON only)."""
    try:
        key = cache_key(path, file_identity)
        folder = cache_dir()
        record = orjson.loads(_regular(folder / f"{key}.json").read_bytes())
        kept = record.get("tables")
        if record["entry"]["key"] != key or not isinstance(kept, dict) or kept.get("tag") != tag:
            return None
        return CachedTables(_regular(folder / f"{key}.tables"), _parts(record, "tables"))
    except Exception:  # noqa: BLE001 - absent, malformed or another entry's: none kept
        return None


def evict(folder: Path, limit: int) -> None:
    """Delete the least recently used entries until the folder's entries fit in `limit` bytes."""
    entries: dict[str, list[os.stat_result]] = {}
    for child in folder.iterdir():
        if child.suffix in _SUFFIXES and not child.name.startswith("."):
            with contextlib.suppress(OSError):
                entries.setdefault(child.stem, []).append(child.lstat())
    total = sum(s.st_size for stats in entries.values() for s in stats)
    if total <= limit:
        return
    oldest_first = sorted(entries, key=lambda stem: max(s.st_mtime_ns for s in entries[stem]))
    for stem in oldest_first[:-1] if len(oldest_first) > 1 else []:
        for suffix in (".json", ".arrow", ".details", ".tables"):
            with contextlib.suppress(OSError):
                (folder / f"{stem}{suffix}").unlink()
        total -= sum(s.st_size for s in entries[stem])
        if total <= limit:
            return


_SUFFIXES = (".arrow", ".details", ".json", ".tables")
"""The files of a cache entry."""


def _atomic_write(target: Path, write: Any) -> None:
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
