"""Parse trace files into ranks: in parallel processes (or from the cache), each rank placed on the job's time base.

`htatui.jobs.load.load_traces` puts a job together from these and from stored datasets."""

from __future__ import annotations

import dataclasses
import functools
import gc
import multiprocessing
import os
import stat
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from htatui.errors import Cancelled, HtatuiError
from htatui.sources import RemotePath, SourcePath
from htatui.trace import cache, chunks
from htatui.trace.decode import TraceFormatError
from htatui.trace.discover import rank_from_filename
from htatui.trace.fetch import DownloadCallback, FetchCancelled, fetched
from htatui.trace.figures import file_figures, valid_figures
from htatui.trace.frame import finish_pieces
from htatui.trace.model import (
    RANK_FROM_FILENAME,
    RANK_FROM_ORDER,
    RANK_FROM_TRACE,
    EventsUnavailable,
    LoadProblem,
    RankTrace,
    TraceMeta,
)
from htatui.trace.parallel import decode_columns_parallel
from htatui.trace.read import FileIdentity, TraceSource, identity, is_pipe_argument, open_trace
from htatui.trace.spill import SpillFolder, spill_events
from htatui.trace.timings import Timings, recording, spent
from htatui.trace.timings import forget as forget_timings
from htatui.trace.timings import keep as keep_timings
from htatui.trace.validate import check_meta, drop_duplicate_events, drop_impossible_events
from htatui.trace.workers import die_with_parent, stop_pool, termination_deferred


class LoadError(HtatuiError):
    """Nothing usable could be loaded; the message is one line naming the file(s)."""


class LoadCancelled(Cancelled):
    """The caller cancelled the load."""


@dataclass(frozen=True)
class LoadProgress:
    """One file finished (parsed, read from cache, or failed), or more of one file's bytes decoded.

    `bytes_total` is 0 for a finished file; while a file bigger than one decoding piece is parsed
    in this process (a one-file job, or one worker), updates with `bytes_done` of `bytes_total`
    say how far it got: bytes of the file (compressed ones for gzip; JSON bytes for a pipe).
    """

    done: int
    total: int
    path: SourcePath
    from_cache: bool
    failed: bool = False
    """The file could not be loaded (it is listed in TraceSet.problems)."""
    bytes_done: int = 0
    bytes_total: int = 0


ProgressCallback = Callable[[LoadProgress], None]

EntryTables = Callable[["ParsedFile", int], dict[str, pl.DataFrame]]
"""More small tables a cache entry keeps, made by the parse worker from the rank it holds (given
the parsed file and when its first event happened, `start_ns`): e.g. the rank's summary row
(`htatui.jobs.summary.entry_summary`); a module-level function, as it goes to worker processes."""


@dataclass(frozen=True)
class ParsedFile:
    path: SourcePath
    events: pl.DataFrame
    details: pl.DataFrame
    """The detail table (model.DETAIL_SCHEMA) of the events kept."""
    meta: TraceMeta
    warnings: list[str]
    identity: FileIdentity | None = None
    """The file's identity taken before reading; None for a pipe (never cached)."""
    figures: pl.DataFrame | None = None
    """`trace.figures.file_figures` of the events, when they were made for the cache entry."""
    timings: Timings | None = None
    """Where the parse went (timings.py), for `info --timings`."""


PIECE_WORKERS_UNSET = 8
"""Workers for a lone file's pieces when `--jobs` is not given: on a 16-core node 8 were the
fastest on a 541 MB and a 2.1 GB rank, 16 slower (each worker's start-up, and this process taking
every piece back; benchmarks/results/history.md, "One big rank on 16 cores")."""


POOL_MIN_BYTES = 1 << 20
"""Files that hold less than this together (on disk, gzip as it is) are parsed in this process
unless workers are asked for (`--jobs`, HTATUI_JOBS, `max_workers`): each spawned worker spends
about a second importing polars and htatui, longer than this process takes to parse them all."""


def _jobs_asked() -> int:
    """HTATUI_JOBS (`--jobs`), or 0 when it is not set."""
    try:
        return max(int(os.environ.get("HTATUI_JOBS", "")), 0)
    except ValueError:
        return 0


def default_workers() -> int:
    """Worker processes for ranks and for the pieces of a big file: HTATUI_JOBS (`--jobs`), else
    the cores this process may run on."""
    if jobs := _jobs_asked():
        return jobs
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def default_piece_workers() -> int:
    """`default_workers` for one file's pieces: at most `PIECE_WORKERS_UNSET` unless `--jobs` says."""
    return _jobs_asked() or min(default_workers(), PIECE_WORKERS_UNSET)


def parse_file(path: Path, byte_progress: Callable[[int, int], None] | None = None, workers: int = 1) -> ParsedFile:
    """Read, decode and frame one trace file (in a worker process, or here with `workers` for its pieces).

    A regular file is read as its pieces are decoded, so its JSON is never whole in memory;
    `byte_progress` gets (bytes of the file read, the file's size; compressed bytes for gzip).
    A pipe, or a file the piece decoder cannot cut, is read whole (events.py). With `workers`
    above 1 a big file's pieces are decoded on that many processes (parallel.py), to the same frame.
    """
    try:
        with open_trace(path) as source:
            return _parse_source(source, byte_progress, workers)
    except PermissionError:
        raise TraceFormatError("cannot be read (permission denied)") from None
    except IsADirectoryError:
        raise TraceFormatError("is a folder, not a trace file") from None
    except OSError as exc:
        raise TraceFormatError(f"cannot be read ({exc.strerror or exc})") from None


def _parse_source(source: TraceSource, byte_progress: Callable[[int, int], None] | None, workers: int) -> ParsedFile:
    # The cyclic GC re-scans millions of fresh objects while decoding; it finds no cycles here.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        warnings: list[str] = []
        columns, details, meta = decode_columns_parallel(source, warnings, workers, progress=byte_progress)
        # Finished once the JSON is let go: the JSON and the frame are not both alive.
        with spent("framing"):
            events = finish_pieces(columns)
        del columns
    except RecursionError:
        raise TraceFormatError("JSON nested too deeply (about 1,000 levels or more)") from None
    finally:
        if gc_was_enabled:
            gc.enable()
    with spent("checks"):
        events, dropped = drop_impossible_events(events)
        events, repeated = drop_duplicate_events(events, details)
        if dropped or repeated:
            # A dropped event's details go with it.
            details = details.join(events.select("index"), on="index", how="semi", maintain_order="left")
        meta, meta_warnings = check_meta(meta)
    warnings.extend(meta_warnings + [w for w in (dropped, repeated) if w])
    if events.height == 0:
        raise TraceFormatError("trace has no events" + (f" ({dropped})" if dropped else ""))
    return ParsedFile(
        path=source.path, events=events, details=details, meta=meta, warnings=warnings, identity=source.identity
    )


def _parse_or_problem(
    path: Path,
    write_cache: bool,
    origin: RemotePath | None = None,
    byte_progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    *,
    entry_tables: EntryTables | None = None,
) -> ParsedFile | LoadProblem:
    """Parse `path`; a downloaded copy is named, and cached, as the remote file `origin`."""
    with recording() as timings:
        parsed = _parse_and_cache(path, write_cache, origin, byte_progress, workers, entry_tables)
    if isinstance(parsed, ParsedFile):
        parsed = dataclasses.replace(parsed, timings=timings)
    return parsed


def _parse_and_cache(
    path: Path,
    write_cache: bool,
    origin: RemotePath | None,
    byte_progress: Callable[[int, int], None] | None,
    workers: int,
    entry_tables: EntryTables | None = None,
) -> ParsedFile | LoadProblem:
    source: SourcePath = origin or path
    try:
        parsed = parse_file(path, byte_progress, workers)
    except TraceFormatError as exc:
        return LoadProblem(source, str(exc))
    except MemoryError:
        return LoadProblem(source, "out of memory while parsing")
    except Exception as exc:  # noqa: BLE001 - as a pool worker's failure reads: one bad file, one line
        return LoadProblem(source, f"parser failed ({type(exc).__name__})")
    if origin is not None:
        parsed = ParsedFile(origin, parsed.events, parsed.details, parsed.meta, parsed.warnings)
    if write_cache and (origin is not None or parsed.identity is not None):
        with spent("cache write"):
            # Made once here, kept in the entry and on the parsed file: `info` reads them, not the events.
            figures = file_figures(parsed.events)
            first = start_ns(parsed.events, parsed.meta)
        more = _entry_tables(entry_tables, dataclasses.replace(parsed, figures=figures), first)
        with spent("cache write"):
            cache.store(
                origin or path,
                parsed.identity,
                parsed.events,
                parsed.details,
                parsed.meta,
                parsed.warnings,
                first,
                figures,
                more,
            )
        parsed = dataclasses.replace(parsed, figures=figures)
    return parsed


def _entry_tables(entry_tables: EntryTables | None, parsed: ParsedFile, first: int) -> dict[str, pl.DataFrame]:
    """`entry_tables` of a parsed file (timed as "summary"), none when it fails: a table not kept
    is made from the events when a view asks."""
    if entry_tables is None:
        return {}
    with spent("summary"):
        try:
            return entry_tables(parsed, first)
        except Exception:  # noqa: BLE001 - the parse holds without it
            return {}


@dataclass(frozen=True)
class HeldFile:
    """A rank of a many-file job, parsed and put aside instead of handed back whole: its events
    are in the parse cache (`spilled` None) or in a spill file, read back when a view asks."""

    path: SourcePath
    meta: TraceMeta
    warnings: list[str]
    start_ns: int
    identity: FileIdentity | None
    spilled: Path | None = None
    cache_refused: bool = False
    spilled_details: Path | None = None
    """A local file whose cache entry could not be written (full disk, read-only folder): spilled instead."""
    timings: Timings | None = None


def _parse_and_put_aside(
    path: Path,
    write_cache: bool,
    origin: RemotePath | None = None,
    byte_progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    *,
    spill_folder: Path | None,
    entry_tables: EntryTables | None = None,
) -> ParsedFile | HeldFile | LoadProblem:
    """Parse `path` (in a worker) and put its events aside: into the parse cache when it is
    written, else into `spill_folder`; the events come back only when neither can be written."""
    parsed = _parse_or_problem(path, write_cache, origin, byte_progress, workers, entry_tables=entry_tables)
    if isinstance(parsed, LoadProblem):
        return parsed
    first = start_ns(parsed.events, parsed.meta)
    local = origin is None and parsed.identity is not None
    # The entry just written is there (it is looked up, as `store` never fails the load).
    cached = write_cache and local and cache.peek_cached(path, parsed.identity, start=False) is not None
    if cached:  # read back as a cached open reads it (a downloaded copy is spilled too)
        return HeldFile(parsed.path, parsed.meta, parsed.warnings, first, parsed.identity, timings=parsed.timings)
    spilled = spill_events(parsed.events, spill_folder) if spill_folder is not None else None
    spilled_details = (
        spill_events(parsed.details, spill_folder, "details-")
        if spilled is not None and spill_folder is not None
        else None
    )
    if spilled is None or spilled_details is None:
        if spilled is not None:
            spilled.unlink(missing_ok=True)
        return parsed
    refused = write_cache and local and not cached
    return HeldFile(
        parsed.path,
        parsed.meta,
        parsed.warnings,
        first,
        parsed.identity,
        spilled,
        refused,
        spilled_details,
        parsed.timings,
    )


@dataclass(frozen=True)
class StoredFile:
    """A parsed file kept in a job dataset: metadata now, events read when a view first asks."""

    path: SourcePath
    meta: TraceMeta
    warnings: list[str]
    start_ns: int
    read_events: Callable[[], pl.DataFrame]
    read_details: Callable[[], pl.DataFrame]
    source_stamp: tuple[int, int] | None = None
    """The source file's (size, mtime_ns) at ingest, or None when the dataset did not record it."""
    identity: FileIdentity | None = None
    """A local trace file's identity, for a rank whose parse the cache keeps (read when asked)."""
    read_figures: Callable[[], pl.DataFrame | None] | None = None
    """The file's figures as its cache entry keeps them (`trace.figures`), read when asked."""
    read_table: Callable[[str], pl.DataFrame | None] | None = None
    """One of its cache entry's untagged tables by name (`cache.CachedEntry.read_table`), read when asked."""


Parsed = ParsedFile | StoredFile
"""A file ready to be a rank: parsed now, or stored by an ingest (events read when asked)."""


def parse_all(
    files: list[SourcePath],
    use_cache: bool,
    write_cache: bool,
    progress: ProgressCallback | None,
    cancel: threading.Event | None,
    max_workers: int | None,
    download_progress: DownloadCallback | None = None,
    notes: list[str] | None = None,
    entry_tables: EntryTables | None = None,
) -> list[ParsedFile | StoredFile | LoadProblem]:
    """Each file parsed, or as the cache keeps it: a local file's cached events are read only
    when a view first asks for that rank (as a dataset's), so a cached job of many ranks opens
    without holding them all.

    A job of several files opens the same way when it is parsed now: each rank, once parsed, is
    put aside (`_parse_and_put_aside`) and read back when asked, so at most a rank per worker is
    in memory. Where that could not be done as asked, a line is added to `notes`. The cache entry
    of a rank put aside keeps `entry_tables`' tables too, made where it was parsed (a lone file is
    a frame in memory: its parse is not made longer for them).
    """
    results: dict[SourcePath, ParsedFile | StoredFile | LoadProblem] = {}
    held: dict[SourcePath, HeldFile] = {}
    forget_timings()
    done = 0
    put_aside = len(files) > 1  # one file is one frame: kept as parsed
    spill = SpillFolder.make() if put_aside else None
    parse_one: Callable[..., ParsedFile | HeldFile | LoadProblem] = _parse_or_problem
    if put_aside:
        parse_one = functools.partial(
            _parse_and_put_aside, spill_folder=spill.path if spill else None, entry_tables=entry_tables
        )

    def keep(path: SourcePath, result: ParsedFile | HeldFile | LoadProblem) -> None:
        if not isinstance(result, LoadProblem) and result.timings is not None:
            keep_timings(str(path), result.timings)
        if isinstance(result, HeldFile):
            held[path] = result
            results[path] = _stored(result, spill)
        else:
            results[path] = result

    def report(path: SourcePath, from_cache: bool) -> None:
        nonlocal done
        done += 1
        if progress is not None:
            failed = isinstance(results.get(path), LoadProblem)
            progress(LoadProgress(done=done, total=len(files), path=path, from_cache=from_cache, failed=failed))

    def parse_here(paths: list[Path]) -> None:
        for path in paths:
            if cancel is not None and cancel.is_set():
                raise LoadCancelled
            keep(path, parse_one(path, write_cache))
            report(path, False)

    def report_bytes(path: SourcePath) -> Callable[[int, int], None] | None:
        if progress is None:
            return None
        callback = progress

        def bytes_done(done_bytes: int, total_bytes: int) -> None:
            if total_bytes <= chunks.CHUNK_BYTES:
                return  # decoded in one piece: nothing to show between its start and its end
            callback(LoadProgress(done, len(files), path, False, bytes_done=done_bytes, bytes_total=total_bytes))

        return bytes_done

    to_parse: list[SourcePath] = []
    # A pipe's file descriptor lives in this process only, so it is read here.
    pipes = [path for path in files if isinstance(path, Path) and is_pipe_argument(path)]
    for path in files:
        if path in pipes:
            continue
        taken = _identity_or_none(path)
        entry = cache.peek_cached(path, taken) if use_cache and isinstance(path, Path) and taken else None
        if entry is not None and entry.start_ns is not None and isinstance(path, Path) and taken is not None:
            results[path] = _cached_file(path, taken, entry)
            report(path, True)
            continue
        hit = cache.load_cached(path, taken) if use_cache else None
        if hit is None:
            to_parse.append(path)
            continue
        events, details, meta, warnings = hit
        results[path] = ParsedFile(path, events, details, meta, warnings, identity=taken)
        report(path, True)
    parse_here(pipes)
    try:
        with fetched(to_parse, download_progress, cancel) as ready:
            for problem in ready.problems:
                results[problem.path] = problem
                report(problem.path, False)
            _parse_local(ready.files, write_cache, cancel, max_workers, keep, report, report_bytes, parse_one)
    except BaseException as exc:
        if spill is not None:
            spill.remove()  # the load stopped: its spilled ranks go now
        if isinstance(exc, FetchCancelled):
            raise LoadCancelled from None
        raise
    if spill is not None and not any(item.spilled for item in held.values()):
        spill.remove()  # nothing was spilled: the empty folder goes now
    if notes is not None and put_aside:
        notes.extend(_put_aside_notes(list(held.values()), [r for r in results.values() if isinstance(r, ParsedFile)]))
    return [results[path] for path in files]


def _put_aside_notes(held: list[HeldFile], in_memory: list[ParsedFile]) -> list[str]:
    """A line for each way ranks were put aside otherwise than asked (nothing when all went as asked)."""
    notes = []
    refused = sum(item.cache_refused for item in held)
    if refused:
        notes.append(
            f"the parse cache ({cache.cache_dir()}) could not be written: {refused} rank(s) kept in a"
            " temporary folder instead until exit"
        )
    if in_memory:
        notes.append(f"{len(in_memory)} rank(s) kept in memory: no temporary folder could be written")
    return notes


def _stored(item: HeldFile, spill: SpillFolder | None) -> StoredFile:
    """A put-aside rank as a stored one: as a cached open finds it, or read back from its spill file."""
    if item.spilled is None and isinstance(item.path, Path) and item.identity is not None:
        entry = cache.peek_cached(item.path, item.identity, start=False)
        if entry is not None:
            return _cached_file(item.path, item.identity, entry, item.start_ns)
        # Evicted already: parsed again when asked.
        read = functools.partial(_events_again, item.path, item.identity)
        read_details = functools.partial(_details_again, item.path, item.identity)
    else:
        assert item.spilled is not None and item.spilled_details is not None and spill is not None
        read = functools.partial(spill.read, item.spilled, item.path)
        read_details = functools.partial(spill.read, item.spilled_details, item.path)
    return StoredFile(item.path, item.meta, item.warnings, item.start_ns, read, read_details, identity=item.identity)


def _cached_file(path: Path, taken: FileIdentity, entry: cache.CachedEntry, first: int | None = None) -> StoredFile:
    """A rank whose parse the cache keeps, its events read (and verified) when a view first asks."""
    read = functools.partial(_cached_events, path, taken, entry)
    start = entry.start_ns if first is None else first
    assert start is not None
    read_details = functools.partial(_cached_details, path, taken, entry)
    figures = functools.partial(_cached_figures, path, taken, entry)
    return StoredFile(
        path,
        entry.meta,
        entry.warnings,
        start,
        read,
        read_details,
        identity=taken,
        read_figures=figures,
        read_table=entry.read_table,
    )


def _cached_events(path: Path, taken: FileIdentity, entry: cache.CachedEntry) -> pl.DataFrame:
    """A cached rank's events, read now; parsed again when its entry was evicted or damaged since
    the job was opened, as long as the file is still the one opened."""
    events = entry.read_events()
    return events if events is not None else _parsed_again(path, taken).events


def _cached_details(path: Path, taken: FileIdentity, entry: cache.CachedEntry) -> pl.DataFrame:
    """A cached rank's detail table, read now (parsed again as `_cached_events` says)."""
    details = entry.read_details()
    return details if details is not None else _parsed_again(path, taken).details


def _events_again(path: Path, taken: FileIdentity) -> pl.DataFrame:
    return _parsed_again(path, taken).events


def _details_again(path: Path, taken: FileIdentity) -> pl.DataFrame:
    return _parsed_again(path, taken).details


def _parsed_again(path: Path, taken: FileIdentity) -> ParsedFile:
    """A rank parsed again for a view (its cached copy is gone), if the file is unchanged."""
    try:
        if identity(path) != taken:
            raise EventsUnavailable(f"{path}: changed since the job was opened; open it again")
        parsed = _parse_or_problem(path, True)
    except OSError as exc:
        raise EventsUnavailable(f"{path}: cannot be read again ({exc.strerror or exc})") from None
    if isinstance(parsed, LoadProblem):
        raise EventsUnavailable(str(parsed))
    return parsed


def _cached_figures(path: Path, taken: FileIdentity, entry: cache.CachedEntry) -> pl.DataFrame:
    """A cached rank's figures as its entry keeps them; when the kept table does not check out (or
    the entry was written before figures were kept), made again from the verified events and kept."""
    figures = valid_figures(entry.read_table("figures"))
    if figures is not None:
        return figures
    figures = file_figures(_cached_events(path, taken, entry))
    cache.store_figures(path, taken, figures)
    return figures


def _identity_or_none(path: SourcePath) -> FileIdentity | None:
    """A local file's identity now (what a cache hit is keyed on and an export checks against)."""
    if not isinstance(path, Path):
        return None
    try:
        return identity(path)
    except OSError:
        return None


def _parse_local(
    files: list[tuple[Path, RemotePath | None]],
    write_cache: bool,
    cancel: threading.Event | None,
    max_workers: int | None,
    keep: Callable[[SourcePath, ParsedFile | HeldFile | LoadProblem], None],
    report: Callable[[SourcePath, bool], None],
    report_bytes: Callable[[SourcePath], Callable[[int, int], None] | None] = lambda _: None,
    parse_one: Callable[..., ParsedFile | HeldFile | LoadProblem] = _parse_or_problem,
) -> None:
    """Parse local files (downloaded copies stand for their `origin`) with `parse_one`, each result to `keep`.

    Files parsed in this process report their bytes as they go; pool workers report whole files.
    One worker count serves both: a file per worker, or a lone file's pieces on every worker.
    """
    cores = max_workers or default_workers()
    piece_workers = max_workers or default_piece_workers()
    done: set[SourcePath] = set()

    def parse_here(chosen: list[tuple[Path, RemotePath | None]]) -> None:
        for path, origin in chosen:
            if cancel is not None and cancel.is_set():
                raise LoadCancelled
            progress = report_bytes(origin or path)
            keep(origin or path, parse_one(path, write_cache, origin, progress, piece_workers))
            done.add(origin or path)
            report(origin or path, False)

    workers = min(len(files), cores)
    if workers <= 1 or (max_workers is None and not _jobs_asked() and _smaller_than(files, POOL_MIN_BYTES)):
        parse_here(files)
        return
    try:
        _parse_in_pool(files, workers, write_cache, keep, done, report, cancel, parse_one)
    except (BrokenProcessPool, OSError):
        # Worker processes could not start (e.g. a broken pipe while spawning): parse here.
        parse_here([(path, origin) for path, origin in files if (origin or path) not in done])


def _smaller_than(files: list[tuple[Path, RemotePath | None]], limit: int) -> bool:
    """True when the files' sizes on disk add up to less than `limit` (False for one that cannot be
    sized: a pipe, a file gone)."""
    total = 0
    for path, _origin in files:
        try:
            status = path.stat()
        except OSError:
            return False
        if not stat.S_ISREG(status.st_mode):
            return False
        total += status.st_size
        if total >= limit:
            return False
    return True


def _parse_in_pool(
    files: list[tuple[Path, RemotePath | None]],
    workers: int,
    write_cache: bool,
    keep: Callable[[SourcePath, ParsedFile | HeldFile | LoadProblem], None],
    done: set[SourcePath],
    report: Callable[[SourcePath, bool], None],
    cancel: threading.Event | None,
    parse_one: Callable[..., ParsedFile | HeldFile | LoadProblem] = _parse_or_problem,
) -> None:
    # spawn, not fork: the parent may already run polars threads, which fork would copy.
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=die_with_parent, initargs=(os.getpid(),)
    )
    try:
        with termination_deferred():  # the submits spawn the workers
            futures: dict[Future[ParsedFile | HeldFile | LoadProblem], SourcePath] = {
                pool.submit(parse_one, path, write_cache, origin): origin or path for path, origin in files
            }
        pending = set(futures)
        while pending:
            # Wake up regularly so that a cancel stops the work even while every worker is busy.
            finished, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
            if cancel is not None and cancel.is_set():
                stop_pool(pool)
                raise LoadCancelled
            for future in finished:
                source = futures[future]
                try:
                    keep(source, future.result())
                except Exception as exc:  # noqa: BLE001 - a dead worker is one bad file (never retried here)
                    keep(source, LoadProblem(source, f"parser failed ({type(exc).__name__})"))
                done.add(source)
                report(source, False)
    except BaseException:
        stop_pool(pool)
        raise
    pool.shutdown(wait=True)


def assign_ranks(
    parsed: Sequence[Parsed],
) -> tuple[dict[int, tuple[Parsed, str]], list[str]]:
    """Each parsed file's rank: distributedInfo.rank first, then the file name, then distinct ranks in name order.

    Raises LoadError when two files claim one rank; the notes say which files got a rank by order.
    """
    claimed: dict[int, tuple[Parsed, str]] = {}
    unclaimed: list[Parsed] = []
    for item in parsed:
        rank, source = item.meta.claimed_rank, RANK_FROM_TRACE
        if rank is None:
            rank, source = rank_from_filename(item.path), RANK_FROM_FILENAME
        if rank is None:
            unclaimed.append(item)
            continue
        if rank in claimed:
            other = claimed[rank][0].path
            raise LoadError(f"{other} and {item.path}: both are rank {rank}; load them separately")
        claimed[rank] = (item, source)
    notes: list[str] = []
    next_rank = 0
    for item in sorted(unclaimed, key=lambda p: p.path.name):
        while next_rank in claimed:
            next_rank += 1
        claimed[next_rank] = (item, RANK_FROM_ORDER)
        notes.append(f"{item.path}: no rank in the trace or its name; using rank {next_rank}")
    return dict(sorted(claimed.items())), notes


def start_ns(events: pl.DataFrame, meta: TraceMeta) -> int:
    """When a parsed file's first event happened, in absolute ns (what `_align` lines ranks up on)."""
    first = events["ts"].min()
    first_ns = round(float(first) * 1000) if isinstance(first, (int, float)) else 0
    return (meta.base_time_ns or 0) + first_ns


def shifts_us(starts: dict[int, int], bases: dict[int, int | None]) -> dict[int, float]:
    """Each rank's shift onto the job's time base: µs since the earliest start, in absolute time.

    Absolute time is baseTimeNanoseconds + ts when the trace has a base (Kineto's relative
    timestamps), else ts itself (older traces write µs since the epoch). The shift is computed
    in integer ns so no precision is lost on 1.7e15-µs epoch values.
    """
    # Floored to a whole µs so that integer-µs shifts keep HTA's ceil/floor rounding comparable.
    origin_ns = min(starts.values()) // 1000 * 1000
    return {rank: ((bases[rank] or 0) - origin_ns) / 1000.0 for rank in starts}


def aligned_events(events: pl.DataFrame, rank: int, shift_us: float) -> pl.DataFrame:
    """A parsed file's events as rank `rank` on the job's time base."""
    return events.with_columns(
        rank=pl.lit(rank, dtype=pl.Int32),
        ts=pl.col("ts") + shift_us,
        end=pl.col("end") + shift_us,
    )


def aligned_details(details: pl.DataFrame, rank: int) -> pl.DataFrame:
    """A parsed file's detail table as rank `rank` (its values need no shift)."""
    return details.with_columns(rank=pl.lit(rank, dtype=pl.Int32))


def align(ranks: dict[int, tuple[Parsed, str]]) -> dict[int, RankTrace]:
    """Every rank on one time base (`shifts_us`); a stored rank's events stay unread until asked for."""
    starts = {
        rank: item.start_ns if isinstance(item, StoredFile) else start_ns(item.events, item.meta)
        for rank, (item, _) in ranks.items()
    }
    shifts = shifts_us(starts, {rank: item.meta.base_time_ns for rank, (item, _) in ranks.items()})
    aligned: dict[int, RankTrace] = {}
    for rank, (item, source) in ranks.items():
        shift = shifts[rank]
        if isinstance(item, StoredFile):
            load = functools.partial(_read_aligned, item.read_events, rank, shift)
            load_details = functools.partial(_read_aligned_details, item.read_details, rank)
            aligned[rank] = RankTrace(
                rank,
                item.path,
                source,
                meta=item.meta,
                shift_us=shift,
                warnings=tuple(item.warnings),
                load=load,
                source_stamp=item.source_stamp,
                source_identity=item.identity,
                figures=item.read_figures,
                load_details=load_details,
            )
        else:
            events = aligned_events(item.events, rank, shift)
            aligned[rank] = RankTrace(
                rank,
                item.path,
                source,
                events,
                item.meta,
                shift,
                tuple(item.warnings),
                source_identity=item.identity,
                figures=functools.partial(_given, item.figures) if item.figures is not None else None,
                details=aligned_details(item.details, rank),
            )
    return aligned


def _given(figures: pl.DataFrame) -> pl.DataFrame:
    return figures


def _read_aligned(read: Callable[[], pl.DataFrame], rank: int, shift_us: float) -> pl.DataFrame:
    return aligned_events(read(), rank, shift_us)


def _read_aligned_details(read: Callable[[], pl.DataFrame], rank: int) -> pl.DataFrame:
    return aligned_details(read(), rank)
