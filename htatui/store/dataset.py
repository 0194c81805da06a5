"""A job dataset on disk: one Arrow IPC file per rank, a per-rank summary table, and a manifest.

```
DATASET/
  htatui-dataset.json   manifest: the digest of the code that wrote it, and per rank file: source path, events file
                        (with its size and sha256), metadata, warnings (what the loader would
                        have parsed from the trace), and when its first event happened (to align
                        ranks without reading them); the summary's size and sha256
  ranks/NNNNN.arrow     the rank's event frame as the parser made it (zstd Arrow IPC)
  ranks/NNNNN.details.arrow  the rank's detail table (trace.model.DETAIL_SCHEMA), with its size
                        and sha256 in the manifest
  summary.arrow         one row per rank: span, steps, temporal/idle/overlap figures
  tables/NAME.arrow     the cross-rank analysis's small tables, every rank's rows (collective
                        calls, step and phase times: analysis/views/ranks/tables.py); each with
                        its size and sha256 in the manifest
  tables/busy/RANK.arrow  one rank's merged GPU work (`busy`: it grows with the kernel count, so it
                        is read a rank at a time), with its size and sha256 in the manifest
```

A dataset holds what parsing the trace files gives, before ranks are assigned and aligned, so
loading it runs the same rank assignment and alignment as loading the traces: every number is the
same. Opening it reads the manifest and the summary only; a rank's file is read when a view
first needs that rank. It is written into a temp folder beside the target and renamed into place, so a dataset is
either complete or absent.

Stored data is checked when read: a file is read only when it is a regular file inside the
dataset folder whose size and sha256 are the manifest's, so a flipped byte, a swapped or edited
file, a path out of the folder or a FIFO in a file's place is one line naming the file, never a
wrong number or a hang; a read that panics inside polars is one line too.

Writes are safe against a second ingest and a killed one: the staging folder is named after the
ingest's pid (`.NAME.staging-PID.HOST-…`) and removed by the next ingest once that pid is gone; the
target's identity is taken when the ingest starts and checked before the rename, so a dataset
another ingest wrote meanwhile is never replaced unseen; `--force` replaces only a folder whose
manifest says it is an htatui dataset and reports the files its manifest did not name.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import shutil
import socket
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson
import polars as pl

from htatui.errors import HtatuiError
from htatui.store.layout import MANIFEST, SUMMARY, TABLES, is_dataset
from htatui.trace.cache import meta_from_json, meta_to_json
from htatui.trace.code import source_digest
from htatui.trace.model import DETAIL_SCHEMA, EVENT_SCHEMA, EventsUnavailable, TraceMeta
from htatui.trace.validate import drop_impossible_events

FORMAT = "htatui-dataset"
STORE_CODE = ("sources", "store", "trace")
"""The code that parses the traces and lays a dataset out: a dataset records its digest and is
read only by the same code (another is refused: ingest again), so no format number is bumped by hand."""


def store_digest() -> str:
    """The digest of the code that parsed a dataset's ranks and wrote its files."""
    return source_digest(STORE_CODE)


class DatasetError(HtatuiError):
    """The dataset cannot be read or written; the message is one line naming the folder."""


@dataclass(frozen=True)
class DatasetFile:
    """A file of the dataset as the manifest names it: where, how big, and its sha256."""

    path: Path
    size: int
    sha256: str

    def verified_bytes(self) -> bytes:
        """The file's bytes when they are the ones the ingest wrote; DatasetError otherwise."""
        try:
            mode = self.path.lstat().st_mode
        except OSError as exc:
            raise DatasetError(f"{self.path}: unreadable ({exc.strerror or exc})") from None
        if not stat.S_ISREG(mode):
            raise DatasetError(f"{self.path}: not a regular file (a link, FIFO or device in a dataset file's place)")
        try:
            data = self.path.read_bytes()
        except OSError as exc:
            raise DatasetError(f"{self.path}: unreadable ({exc.strerror or exc})") from None
        if len(data) != self.size or hashlib.sha256(data).hexdigest() != self.sha256:
            raise DatasetError(f"{self.path}: changed since it was ingested (size or checksum differs); ingest again")
        return data


@dataclass(frozen=True)
class StoredRank:
    """One parsed trace file of the dataset; its events file is read only when asked."""

    source: Path
    events_file: DatasetFile
    details_file: DatasetFile
    meta: TraceMeta
    warnings: list[str]
    start_ns: int
    source_stamp: tuple[int, int] | None = None

    def check(self) -> None:
        """Raise DatasetError unless the events and details files are regular files of the
        manifest's sizes (cheap: the checksums are verified when they are read)."""
        for file in (self.events_file, self.details_file):
            try:
                info = file.path.lstat()
            except OSError as exc:
                raise DatasetError(f"{file.path}: unreadable ({exc.strerror or exc})") from None
            if not stat.S_ISREG(info.st_mode) or info.st_size != file.size:
                raise DatasetError(f"{file.path}: not the file that was ingested (its type or size differs)")

    def events(self) -> pl.DataFrame:
        frame = _verified_table(self.events_file, EVENT_SCHEMA, "event")
        # The loader's own rules, on what is read back: ingest never stores such an event.
        if drop_impossible_events(frame)[1] is not None:
            raise EventsUnavailable(f"{self.events_file.path}: holds events with impossible times; ingest again")
        return frame

    def details(self) -> pl.DataFrame:
        """The rank's detail table, read only when its size and sha256 are the ingest's."""
        return _verified_table(self.details_file, DETAIL_SCHEMA, "detail")


def _verified_table(file: DatasetFile, schema: dict[str, pl.DataType], what: str) -> pl.DataFrame:
    """A rank's stored frame, read only when its size and sha256 are the ingest's and it has `schema`."""
    try:
        data = file.verified_bytes()
    except DatasetError as exc:
        raise EventsUnavailable(str(exc)) from None
    frame = read_frame(data, file.path, EventsUnavailable)
    if frame.schema != pl.Schema(schema):
        raise EventsUnavailable(f"{file.path}: not an htatui {what} table")
    return frame


def read_frame(data: bytes, path: Path, error: type[Exception]) -> pl.DataFrame:
    """An Arrow IPC frame from verified bytes; any failure, a polars panic included, is `error`."""
    try:
        return pl.read_ipc(io.BytesIO(data))
    except BaseException as exc:  # noqa: BLE001 - polars panics derive from BaseException
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        raise error(f"{path}: unreadable ({type(exc).__name__})") from None


@dataclass(frozen=True)
class Dataset:
    """A dataset folder as read from its manifest."""

    folder: Path
    ranks: list[StoredRank]
    problems: list[tuple[Path, str]]
    summary_file: DatasetFile
    table_files: dict[str, DatasetFile]
    busy_files: dict[int, DatasetFile]

    def summary(self) -> pl.DataFrame:
        return read_frame(self.summary_file.verified_bytes(), self.summary_file.path, DatasetError)

    def table(self, name: str) -> pl.DataFrame:
        """A cross-rank table as stored, read only when its size and sha256 are the ingest's."""
        stored = self.table_files.get(name)
        if stored is None:
            raise DatasetError(f"{self.folder}: the manifest names no table {name!r}; ingest again")
        return read_frame(stored.verified_bytes(), stored.path, DatasetError)

    def busy(self, rank: int) -> pl.DataFrame:
        """One rank's `busy` table as stored, read only when its size and sha256 are the ingest's."""
        stored = self.busy_files.get(rank)
        if stored is None:
            raise DatasetError(f"{self.folder}: the manifest names no busy table for rank {rank}; ingest again")
        return read_frame(stored.verified_bytes(), stored.path, DatasetError)


def _inside(folder: Path, name: object) -> Path:
    """`folder / name` when `name` is a relative path that stays inside the folder; DatasetError otherwise."""
    if not isinstance(name, str) or not name or Path(name).is_absolute() or ".." in Path(name).parts:
        raise DatasetError(f"{folder}: the manifest names {name!r}, a path out of the dataset folder")
    return folder / name


def _stored(folder: Path, name: object, size: object, sha256: object) -> DatasetFile:
    if not isinstance(size, int) or isinstance(size, bool) or not isinstance(sha256, str):
        raise DatasetError(f"{folder}: the manifest gives no size and checksum for {name!r}; ingest again")
    return DatasetFile(_inside(folder, name), size, sha256)


def _stamp(size: object, mtime_ns: object) -> tuple[int, int] | None:
    if isinstance(size, int) and isinstance(mtime_ns, int) and not isinstance(size, bool):
        return size, mtime_ns
    return None


def open_dataset(folder: Path) -> Dataset:
    try:
        data = orjson.loads((folder / MANIFEST).read_bytes())
        if not isinstance(data, dict):
            raise DatasetError(f"{folder}: the manifest is not an htatui dataset manifest; ingest again")
        if data.get("format") != FORMAT:
            raise DatasetError(f"{folder}: not an htatui dataset manifest; ingest again")
        if data.get("code") != store_digest():
            raise DatasetError(f"{folder}: written by another htatui version; ingest the traces again")
        ranks = [
            StoredRank(
                source=Path(entry["source"]),
                events_file=_stored(folder, entry["events"], entry.get("size"), entry.get("sha256")),
                details_file=_stored(folder, entry["details"], entry.get("details_size"), entry.get("details_sha256")),
                meta=meta_from_json(orjson.dumps(entry["meta"]))[0],
                warnings=list(entry["warnings"]),
                start_ns=int(entry["start_ns"]),
                source_stamp=_stamp(entry.get("source_size"), entry.get("source_mtime_ns")),
            )
            for entry in data["ranks"]
        ]
        problems = [(Path(p["source"]), str(p["message"])) for p in data["problems"]]
        summary = data["summary"]
        summary_file = _stored(folder, SUMMARY, summary.get("size"), summary.get("sha256"))
        table_files = {
            str(name): _stored(folder, entry.get("file"), entry.get("size"), entry.get("sha256"))
            for name, entry in data["tables"].items()
        }
        busy_files = {
            int(rank): _stored(folder, entry.get("file"), entry.get("size"), entry.get("sha256"))
            for rank, entry in data["busy"].items()
        }
    except DatasetError:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DatasetError(f"{folder}: unreadable dataset manifest ({type(exc).__name__})") from None
    return Dataset(
        folder=folder,
        ranks=ranks,
        problems=problems,
        summary_file=summary_file,
        table_files=table_files,
        busy_files=busy_files,
    )


@dataclass(frozen=True)
class IngestedFile:
    """What one ingest task sends back: small (the events stay in the file it wrote)."""

    source: Path
    events_name: str
    meta_json: bytes
    start_ns: int
    size: int
    sha256: str
    source_stamp: tuple[int, int] | None = None
    """The source file's (size, mtime_ns) taken before it was parsed."""
    details: tuple[str, int, str] = ("", 0, "")
    """The detail table's file name, size and sha256."""


def write_rank(folder: Path, index: int, events: pl.DataFrame) -> tuple[str, int, str]:
    """Write one rank's events under `folder/ranks/`; the name relative to `folder`, its size and sha256."""
    return _write_rank_file(folder, f"ranks/{index:05d}.arrow", events)


def write_details(folder: Path, index: int, details: pl.DataFrame) -> tuple[str, int, str]:
    """Write one rank's detail table under `folder/ranks/`; its name, size and sha256."""
    return _write_rank_file(folder, f"ranks/{index:05d}.details.arrow", details)


def _write_rank_file(folder: Path, name: str, frame: pl.DataFrame) -> tuple[str, int, str]:
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    size, digest = _write_ipc(frame, target)
    return name, size, digest


def _write_ipc(frame: pl.DataFrame, target: Path) -> tuple[int, str]:
    """`frame` as zstd Arrow IPC at `target`; its size and sha256, taken from the bytes written."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="zstd")
    data = buffer.getvalue()
    target.write_bytes(data)
    return len(data), hashlib.sha256(data).hexdigest()


def write_busy(folder: Path, rank: int, busy: pl.DataFrame) -> tuple[str, int, str]:
    """Write one rank's `busy` table under `folder/tables/busy/`; its name, size and sha256."""
    name = f"{TABLES}/busy/{rank:05d}.arrow"
    target = folder / name
    target.parent.mkdir(parents=True, exist_ok=True)
    size, digest = _write_ipc(busy, target)
    return name, size, digest


def meta_json(meta: TraceMeta, warnings: list[str]) -> bytes:
    return meta_to_json(meta, warnings)


@dataclass(frozen=True)
class Staging:
    """The temp folder a dataset is written into before it is renamed to its place.

    `target` is the real folder (a symlinked `-o` is followed, so the link keeps pointing at the
    new dataset); `before` is that folder's identity when the ingest started (None: absent), so
    a dataset another ingest wrote meanwhile is never replaced unseen.
    """

    folder: Path
    target: Path
    before: tuple[int, int] | None
    cleaned: tuple[Path, ...] = ()
    """Folders left by ingests that died (staging or replaced datasets), removed by this one."""
    asked: Path | None = None
    """The target as the user named it (messages name it so)."""


_STAGING = "staging"
_OLD = "old"


def _host_tag() -> str:
    """This machine's name, in letters and digits: a pid means something only on its own host
    (a dataset folder on a shared file system may be written from several)."""
    return "".join(c for c in socket.gethostname() if c.isalnum())[:32] or "host"


def _owner() -> str:
    return f"{os.getpid()}.{_host_tag()}"


def _folder_identity(path: Path) -> tuple[int, int] | None:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return None
    return info.st_dev, info.st_ino


def is_htatui_dataset(folder: Path) -> bool:
    """A folder whose manifest says it is an htatui dataset (any version): what `--force` may replace."""
    if not is_dataset(folder):
        return False
    try:
        data = orjson.loads((folder / MANIFEST).read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def clean_stale(target: Path) -> list[Path]:
    """Remove `.NAME.staging-PID.HOST-…` and `.NAME.old-PID.HOST` folders beside `target` whose
    ingest, on this host, is dead."""
    removed = []
    prefixes = (f".{target.name}.{_STAGING}-", f".{target.name}.{_OLD}-")
    try:
        entries = list(target.parent.iterdir())
    except OSError:
        return []
    for entry in entries:
        prefix = next((p for p in prefixes if entry.name.startswith(p)), None)
        if prefix is None:
            continue
        pid_text, _, host = entry.name[len(prefix) :].split("-", 1)[0].partition(".")
        if host != _host_tag() or not pid_text.isdigit() or int(pid_text) == os.getpid():
            continue
        if _pid_alive(int(pid_text)):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def staging(target: Path, force: bool) -> Staging:
    real = Path(os.path.realpath(target))
    cleaned = clean_stale(real)
    before = _folder_identity(real)
    if before is not None and not force:
        raise DatasetError(f"{target}: already exists (use --force to replace it)")
    if before is not None and not is_htatui_dataset(real):
        raise DatasetError(f"{target}: exists and is not an htatui dataset; not replacing it")
    real.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{real.name}.{_STAGING}-{_owner()}-"
    return Staging(Path(tempfile.mkdtemp(prefix=prefix, dir=real.parent)), real, before, tuple(cleaned), target)


def foreign_files(folder: Path) -> list[str]:
    """Files inside a dataset folder that its manifest does not name (put there by someone else)."""
    try:
        data = orjson.loads((folder / MANIFEST).read_bytes())
        ranks = data.get("ranks") if isinstance(data, dict) else None
        names = {MANIFEST, SUMMARY}
        names.update(str(r.get("events")) for r in ranks or [] if isinstance(r, dict))
        names.update(str(r.get("details")) for r in ranks or [] if isinstance(r, dict))
        tables = data.get("tables") if isinstance(data, dict) else None
        names.update(str(t.get("file")) for t in (tables or {}).values() if isinstance(t, dict))
        busy = data.get("busy") if isinstance(data, dict) else None
        names.update(str(t.get("file")) for t in (busy or {}).values() if isinstance(t, dict))
    except (OSError, orjson.JSONDecodeError):
        names = {MANIFEST, SUMMARY}
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_dir() and not path.is_symlink():
            continue
        if relative not in names:
            found.append(relative)
    return found


def commit(
    stage: Staging,
    files: list[IngestedFile],
    problems: list[tuple[Path, str]],
    summary: pl.DataFrame,
    tables: dict[str, pl.DataFrame] | None = None,
    busy: dict[int, tuple[str, int, str]] | None = None,
) -> list[str]:
    """Write the manifest and summary, then move the staged folder into place.

    Returns the files of the replaced dataset that its manifest did not name (a user's files,
    removed with it). Raises DatasetError when the target appeared or changed since the ingest
    started (another ingest wrote it): it is left as it is.
    """
    manifest: dict[str, object] = {
        "format": FORMAT,
        "code": store_digest(),
        "ranks": [
            {
                "source": str(f.source),
                "events": f.events_name,
                "size": f.size,
                "sha256": f.sha256,
                "details": f.details[0],
                "details_size": f.details[1],
                "details_sha256": f.details[2],
                "meta": orjson.loads(f.meta_json),
                "warnings": orjson.loads(f.meta_json)["warnings"],
                "start_ns": f.start_ns,
                "source_size": None if f.source_stamp is None else f.source_stamp[0],
                "source_mtime_ns": None if f.source_stamp is None else f.source_stamp[1],
            }
            for f in files
        ],
        "problems": [{"source": str(path), "message": message} for path, message in problems],
    }
    summary_size, summary_sha256 = _write_ipc(summary, stage.folder / SUMMARY)
    manifest["summary"] = {"size": summary_size, "sha256": summary_sha256}
    stored_tables: dict[str, dict[str, object]] = {}
    for name, frame in (tables or {}).items():
        file = f"{TABLES}/{name}.arrow"
        (stage.folder / TABLES).mkdir(exist_ok=True)
        size, digest = _write_ipc(frame, stage.folder / file)
        stored_tables[name] = {"file": file, "size": size, "sha256": digest}
    manifest["tables"] = stored_tables
    manifest["busy"] = {
        str(rank): {"file": file, "size": size, "sha256": digest} for rank, (file, size, digest) in (busy or {}).items()
    }
    (stage.folder / MANIFEST).write_bytes(orjson.dumps(manifest, option=orjson.OPT_INDENT_2))
    target = stage.target
    raced = DatasetError(f"{stage.asked or target}: written by another ingest while this one ran; not replacing it")
    if _folder_identity(target) != stage.before:
        raise raced
    if stage.before is None:
        try:
            # rename(2) onto an existing non-empty folder fails: a dataset written meanwhile stays.
            os.rename(stage.folder, target)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
                raise raced from None
            raise
        return []
    foreign = foreign_files(target)
    old = target.with_name(f".{target.name}.{_OLD}-{_owner()}")
    os.rename(target, old)
    if _folder_identity(old) != stage.before:
        os.rename(old, target)
        raise raced
    os.rename(stage.folder, target)
    shutil.rmtree(old, ignore_errors=True)
    return foreign


def discard(stage: Staging) -> None:
    shutil.rmtree(stage.folder, ignore_errors=True)
