"""A job dataset on disk: one Arrow IPC file per rank, a per-rank summary table, and a manifest.

```
DATASET/
  htatui-dataset.json   manifest: format version, and per rank file: source path, events file,
                        metadata, warnings (what the loader would have parsed from the trace),
                        and when its first event happened (to align ranks without reading them)
  ranks/NNNNN.arrow     the rank's event frame as the parser made it (zstd Arrow IPC)
  summary.arrow         one row per rank: span, steps, temporal/idle/overlap figures
```

A dataset holds what parsing the trace files gives, before ranks are assigned and aligned, so
loading it runs the same rank assignment and alignment as loading the traces: every number is the
same. Opening it reads the manifest and the summary only; a rank's file is read when a view
first needs that rank. It is written into a temp folder beside the target and renamed into place, so a dataset is
either complete or absent.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl

from htatui.store.layout import MANIFEST, SUMMARY, is_dataset
from htatui.trace.cache import LOADER_VERSION, meta_from_json, meta_to_json
from htatui.trace.model import EVENT_SCHEMA, EventsUnavailable, TraceMeta

FORMAT = "htatui-dataset"
FORMAT_VERSION = 2


class DatasetError(Exception):
    """The dataset cannot be read or written; the message is one line naming the folder."""


@dataclass(frozen=True)
class StoredRank:
    """One parsed trace file of the dataset; `events_file` is read only when asked."""

    source: Path
    events_file: Path
    meta: TraceMeta
    warnings: list[str]
    start_ns: int

    def check(self) -> None:
        """Raise DatasetError unless the events file is there with the event table's columns (its footer only)."""
        try:
            schema = pl.read_ipc_schema(self.events_file)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one problem line
            raise DatasetError(f"{self.events_file}: unreadable ({type(exc).__name__})") from None
        if pl.Schema(schema) != pl.Schema(EVENT_SCHEMA):
            raise DatasetError(f"{self.events_file}: not an htatui event table")

    def events(self) -> pl.DataFrame:
        try:
            frame = pl.read_ipc(self.events_file)
        except Exception as exc:  # noqa: BLE001 - any unreadable file is one problem line
            raise EventsUnavailable(f"{self.events_file}: unreadable ({type(exc).__name__})") from None
        if frame.schema != pl.Schema(EVENT_SCHEMA):
            raise EventsUnavailable(f"{self.events_file}: not an htatui event table")
        return frame


@dataclass(frozen=True)
class Dataset:
    """A dataset folder as read from its manifest."""

    folder: Path
    ranks: list[StoredRank]
    problems: list[tuple[Path, str]]

    def summary(self) -> pl.DataFrame:
        return pl.read_ipc(self.folder / SUMMARY)


def open_dataset(folder: Path) -> Dataset:
    try:
        data = orjson.loads((folder / MANIFEST).read_bytes())
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise DatasetError(f"{folder}: not an htatui dataset of version {FORMAT_VERSION}; ingest again")
        if data.get("loader_version") != LOADER_VERSION:
            raise DatasetError(f"{folder}: written by another htatui version; ingest the traces again")
        ranks = [
            StoredRank(
                source=Path(entry["source"]),
                events_file=folder / entry["events"],
                meta=meta_from_json(orjson.dumps(entry["meta"]))[0],
                warnings=list(entry["warnings"]),
                start_ns=int(entry["start_ns"]),
            )
            for entry in data["ranks"]
        ]
        problems = [(Path(p["source"]), str(p["message"])) for p in data["problems"]]
    except DatasetError:
        raise
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DatasetError(f"{folder}: unreadable dataset manifest ({type(exc).__name__})") from None
    return Dataset(folder=folder, ranks=ranks, problems=problems)


@dataclass(frozen=True)
class IngestedFile:
    """What one ingest task sends back: small (the events stay in the file it wrote)."""

    source: Path
    events_name: str
    meta_json: bytes
    start_ns: int


def write_rank(folder: Path, index: int, events: pl.DataFrame) -> str:
    """Write one rank's events under `folder/ranks/`; returns the name relative to `folder`."""
    name = f"ranks/{index:05d}.arrow"
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    events.write_ipc(target, compression="zstd")
    return name


def meta_json(meta: TraceMeta, warnings: list[str]) -> bytes:
    return meta_to_json(meta, warnings)


@dataclass(frozen=True)
class Staging:
    """The temp folder a dataset is written into before it is renamed to its place."""

    folder: Path
    target: Path


def staging(target: Path, force: bool) -> Staging:
    if target.exists() and not force:
        raise DatasetError(f"{target}: already exists (use --force to replace it)")
    if target.exists() and not is_dataset(target):
        raise DatasetError(f"{target}: exists and is not an htatui dataset; not replacing it")
    target.parent.mkdir(parents=True, exist_ok=True)
    return Staging(Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent)), target)


def commit(
    stage: Staging,
    files: list[IngestedFile],
    problems: list[tuple[Path, str]],
    summary: pl.DataFrame,
) -> Path:
    """Write the manifest and summary, then move the staged folder into place."""
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "loader_version": LOADER_VERSION,
        "ranks": [
            {
                "source": str(f.source),
                "events": f.events_name,
                "meta": orjson.loads(f.meta_json),
                "warnings": orjson.loads(f.meta_json)["warnings"],
                "start_ns": f.start_ns,
            }
            for f in files
        ],
        "problems": [{"source": str(path), "message": message} for path, message in problems],
    }
    summary.write_ipc(stage.folder / SUMMARY, compression="zstd")
    (stage.folder / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    if stage.target.exists():
        old = stage.target.with_name(f".{stage.target.name}.old-{os.getpid()}")
        os.replace(stage.target, old)
        os.replace(stage.folder, stage.target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(stage.folder, stage.target)
    return stage.target


def discard(stage: Staging) -> None:
    shutil.rmtree(stage.folder, ignore_errors=True)


def iter_events(dataset: Dataset) -> Iterator[tuple[StoredRank, pl.DataFrame]]:
    """Each stored rank with its events, one at a time (memory of one rank)."""
    for rank in dataset.ranks:
        yield rank, rank.events()
