"""Parsed ranks cached as Arrow IPC under the user cache dir, keyed by file identity.

A cache entry is two files written atomically (temp + rename): `<key>.arrow` with the events
and `<key>.json` with the metadata and warnings. Anything unreadable is rebuilt, never trusted.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import orjson
import polars as pl

from htatui.sources import RemotePath, SourcePath, cache_identity
from htatui.trace.model import EVENT_SCHEMA, TraceMeta

LOADER_VERSION = "3"


def cache_dir() -> Path:
    override = os.environ.get("HTATUI_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "htatui"


class NotCacheable(LookupError):
    """A remote file whose store gives no version identity (ETag, generation…) is never cached."""


def cache_key(path: SourcePath) -> str:
    if isinstance(path, RemotePath):
        remote = cache_identity(path)
        if remote is None:
            raise NotCacheable(str(path))
        identity = f"remote|{remote}|{LOADER_VERSION}"
        return hashlib.sha256(identity.encode()).hexdigest()[:32]
    stat = path.stat()
    identity = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{LOADER_VERSION}"
    return hashlib.sha256(identity.encode()).hexdigest()[:32]


def _meta_to_json(meta: TraceMeta, warnings: list[str]) -> bytes:
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


def _meta_from_json(raw: bytes) -> tuple[TraceMeta, list[str]]:
    data = orjson.loads(raw)
    meta = TraceMeta(
        schema_version=data["schema_version"],
        device_properties=tuple(data["device_properties"]),
        distributed_info=data["distributed_info"],
        base_time_ns=data["base_time_ns"],
        display_time_unit=data["display_time_unit"],
        trace_name=data["trace_name"],
        process_names=dict(data["process_names"]),
        process_labels=dict(data["process_labels"]),
        thread_names={(pid, tid): name for pid, tid, name in data["thread_names"]},
        fractional_ts=bool(data["fractional_ts"]),
    )
    return meta, list(data["warnings"])


def load_cached(path: SourcePath) -> tuple[pl.DataFrame, TraceMeta, list[str]] | None:
    """The cached parse of `path`, or None when absent, stale or corrupt."""
    try:
        key = cache_key(path)
        folder = cache_dir()
        meta, warnings = _meta_from_json((folder / f"{key}.json").read_bytes())
        events = pl.read_ipc(folder / f"{key}.arrow")
    except Exception:  # noqa: BLE001 - any failure means "rebuild"
        return None
    if events.schema != pl.Schema(EVENT_SCHEMA):
        return None
    return events, meta, warnings


def store(path: SourcePath, events: pl.DataFrame, meta: TraceMeta, warnings: list[str]) -> None:
    """Write the cache entry; a failure to cache never fails the load."""
    try:
        key = cache_key(path)
        folder = cache_dir()
        folder.mkdir(parents=True, exist_ok=True)
        _atomic_write(folder / f"{key}.arrow", lambda f: events.write_ipc(f, compression="zstd"))
        _atomic_write(folder / f"{key}.json", lambda f: f.write(_meta_to_json(meta, warnings)))
    except (OSError, NotCacheable):
        return


def _atomic_write(target: Path, write: Any) -> None:
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
