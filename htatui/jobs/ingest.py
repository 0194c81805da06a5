"""Ingest: trace files → a job dataset, one task per rank file, on this machine or on Ray.

Each task parses one file, writes its events into the staged dataset folder and sends back only
the small record (metadata, warnings, first timestamp), so the driver's memory does not grow with
the ranks' sizes; a second, cheap task per rank reads the written events back and makes the
rank's summary row and its cross-rank tables (collective calls, step and phase times: what the
Ranks views read instead of events) once every rank's number and time shift is known. `local` runs the tasks on
a process pool over this machine's cores; `ray` runs them as Ray tasks (a cluster given by
address, or a local Ray): the folder must then be on a file system that every worker sees.
Both engines write the same dataset.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from htatui.jobs.summary import TABLE_COLUMNS, rank_summary_and_tables, summary_frame
from htatui.store.dataset import (
    DatasetError,
    IngestedFile,
    commit,
    discard,
    meta_json,
    staging,
    write_busy,
    write_details,
    write_rank,
)
from htatui.trace.cache import meta_from_json
from htatui.trace.decode import TraceFormatError
from htatui.trace.discover import DiscoveryError, discover
from htatui.trace.loader import (
    LoadError,
    ParsedFile,
    aligned_details,
    aligned_events,
    assign_ranks,
    default_workers,
    parse_file,
    shifts_us,
    start_ns,
)
from htatui.trace.workers import die_with_parent, stop_pool, termination_deferred

ENGINES = ("local", "ray")
RAY_DID_NOT_START = "Ray did not start"
LOCAL_RAY_STORE_BYTES = 256 * 1024 * 1024
"""A local Ray's object store: the tasks send back records and small tables (2.5 MB for 1,024 ranks)."""


@dataclass(frozen=True)
class IngestFailure:
    source: Path
    message: str


TaskResult = IngestedFile | IngestFailure


@dataclass(frozen=True)
class IngestReport:
    """The written dataset, its ranks' count, and the files that could not be ingested."""

    folder: Path
    ranks: int
    problems: list[IngestFailure]
    removed: list[str] = field(default_factory=list)
    """Files of the replaced dataset (`--force`) that the ingest had not written: a user's files."""
    cleaned: list[Path] = field(default_factory=list)
    """Folders left beside the target by ingests that died, removed by this one."""
    engine_start_s: float = 0.0
    """Seconds spent starting the engine before any task ran (Ray's start or connection; ~0 for a pool)."""


def ingest_file(index: int, source: Path, folder: Path) -> TaskResult:
    """Task 1: parse `source`, write its events as rank file `index` of `folder`, return the record."""
    try:
        info = os.stat(source)
        parsed = parse_file(source)
    except OSError as exc:
        return IngestFailure(source, f"cannot be read ({exc.strerror or exc})")
    except TraceFormatError as exc:
        return IngestFailure(source, str(exc))
    except MemoryError:
        return IngestFailure(source, "out of memory while parsing")
    try:
        name, size, digest = write_rank(folder, index, parsed.events)
        details = write_details(folder, index, parsed.details)
    except OSError as exc:
        return IngestFailure(source, f"cannot write its events ({exc.strerror or exc})")
    meta = meta_json(parsed.meta, parsed.warnings)
    stamp = (info.st_size, info.st_mtime_ns)
    return IngestedFile(source, name, meta, start_ns(parsed.events, parsed.meta), size, digest, stamp, details)


def summarize_file(
    folder: Path, record: IngestedFile, rank: int, shift_us: float
) -> tuple[dict[str, Any], dict[str, pl.DataFrame], tuple[int, tuple[str, int, str]]]:
    """Task 2: the summary row of a written rank file and its cross-rank tables, aligned as
    loading the dataset will align it; its `busy` table (the big one) is written here, a file
    per rank, and only its name, size and sha256 go back."""
    events = pl.read_ipc(folder / record.events_name, columns=list(TABLE_COLUMNS))
    details = aligned_details(pl.read_ipc(folder / record.details[0]), rank)
    meta = meta_from_json(record.meta_json)[0]
    aligned = aligned_events(events, rank, shift_us)
    row, tables = rank_summary_and_tables(record.source, aligned, details, meta, rank, shift_us)
    busy = write_busy(folder, rank, tables.pop("busy"))
    return row, tables, (rank, busy)


def ingest(
    paths: Sequence[Path],
    target: Path,
    *,
    engine: str = "local",
    force: bool = False,
    max_workers: int | None = None,
    ray_address: str | None = None,
    progress: Callable[[int, int, Path], None] | None = None,
) -> IngestReport:
    """Write the dataset `target` from the trace files under `paths`.

    Two rounds of one task per file: parse and write each rank, then (once every rank number and
    time shift is known) summarise each written rank. Raises LoadError when nothing could be
    ingested or two files claim one rank, DatasetError when `target` cannot be written; a
    partial dataset is never left behind.
    """
    if engine not in ENGINES:
        raise DatasetError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")
    try:
        found = discover(list(paths))
    except DiscoveryError as exc:
        raise LoadError(str(exc)) from None
    files = [path for path in found.files if isinstance(path, Path)]
    if len(files) != len(found.files):
        raise LoadError("ingest reads local files; download remote traces first")
    stage = staging(target, force)
    try:
        with _engine(engine, max_workers, ray_address, len(files)) as (run, engine_start_s):
            parse_tasks = [(index, path, stage.folder) for index, path in enumerate(files)]
            results = run(ingest_file, parse_tasks, progress)
            done = [r for r in results if isinstance(r, IngestedFile)]
            failed = [r for r in results if isinstance(r, IngestFailure)]
            if not done:
                raise LoadError("; ".join(f"{f.source}: {f.message}" for f in failed) or "no trace files")
            ranks, shifts = _ranks_and_shifts(done)
            summary_tasks = [(stage.folder, f, ranks[f.source], shifts[ranks[f.source]]) for f in done]
            rows = run(summarize_file, summary_tasks, None)
        bad = [row for row in rows if isinstance(row, IngestFailure)]
        if bad:
            raise LoadError(f"{bad[0].source}: could not be summarised ({bad[0].message})")
        made = [r for r in rows if isinstance(r, tuple)]
        removed = commit(
            stage,
            done,
            [(f.source, f.message) for f in failed],
            summary_frame([row for row, _, _ in made]),
            _joined_tables([rank_tables for _, rank_tables, _ in made]),
            dict(busy for _, _, busy in made),
        )
    except BaseException:
        discard(stage)
        raise
    return IngestReport(
        folder=target,
        ranks=len(done),
        problems=failed,
        removed=removed,
        cleaned=list(stage.cleaned),
        engine_start_s=engine_start_s,
    )


def _joined_tables(parts: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Every rank's cross-rank tables, one table of all ranks per name, in rank order."""
    if not parts:
        return {}
    ordered = sorted(parts, key=lambda part: int(part["rank_steps"]["rank"][0]) if part["rank_steps"].height else -1)
    return {name: pl.concat([part[name] for part in ordered], how="vertical") for name in ordered[0]}


def _ranks_and_shifts(done: list[IngestedFile]) -> tuple[dict[Path, int], dict[int, float]]:
    """The rank the loader will give each file and each rank's time shift (same rules, same order)."""
    stand_ins = [ParsedFile(f.source, pl.DataFrame(), pl.DataFrame(), meta_from_json(f.meta_json)[0], []) for f in done]
    assigned, _ = assign_ranks(stand_ins)
    rank_of = {item.path: rank for rank, (item, _) in assigned.items()}
    starts = {rank_of[f.source]: f.start_ns for f in done}
    bases = {rank: item.meta.base_time_ns for rank, (item, _) in assigned.items()}
    return {path: rank for path, rank in rank_of.items() if isinstance(path, Path)}, shifts_us(starts, bases)


Runner = Callable[[Callable[..., Any], list[tuple[Any, ...]], Callable[[int, int, Path], None] | None], list[Any]]


@contextmanager
def _engine(engine: str, max_workers: int | None, address: str | None, tasks: int) -> Iterator[tuple[Runner, float]]:
    """A function that runs one task per argument tuple on the engine, kept open for both rounds,
    and the seconds the engine took to start."""
    if engine == "ray":
        started = time.perf_counter()
        with _ray_session(max_workers, address) as run:
            yield run, time.perf_counter() - started
        return
    workers = min(tasks, max_workers or default_workers())
    if workers <= 1:
        yield _run_here, 0.0
        return
    # spawn, not fork: the parent may already run polars threads, which fork would copy.
    # Workers die with this process: a killed ingest leaves no parser running on (issue 22).
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=die_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        try:
            yield functools.partial(_run_in_pool, pool), 0.0
        except BaseException:
            stop_pool(pool)  # Ctrl-C or SIGTERM: end the workers now instead of waiting for their files
            raise


def _source_of(task: tuple[Any, ...]) -> Path:
    """The trace file a task is about (both rounds' argument tuples name it)."""
    for value in task:
        if isinstance(value, IngestedFile):
            return value.source
    return Path(task[1])


def _run_here(
    work: Callable[..., Any], tasks: list[tuple[Any, ...]], progress: Callable[[int, int, Path], None] | None
) -> list[Any]:
    results = []
    for task in tasks:
        results.append(_guarded(work, task))
        if progress is not None:
            progress(len(results), len(tasks), _source_of(task))
    return results


def _guarded(work: Callable[..., Any], task: tuple[Any, ...]) -> Any:
    try:
        return work(*task)
    except Exception as exc:  # noqa: BLE001 - a failed task is one bad file
        return IngestFailure(_source_of(task), f"task failed ({type(exc).__name__})")


def _run_in_pool(
    pool: ProcessPoolExecutor,
    work: Callable[..., Any],
    tasks: list[tuple[Any, ...]],
    progress: Callable[[int, int, Path], None] | None,
) -> list[Any]:
    with termination_deferred():  # the submits spawn the workers
        futures = {pool.submit(work, *task): index for index, task in enumerate(tasks)}
    results: dict[int, Any] = {}
    for future in as_completed(futures):
        index = futures[future]
        try:
            results[index] = future.result()
        except Exception as exc:  # noqa: BLE001 - a dead worker is one bad file
            results[index] = IngestFailure(_source_of(tasks[index]), f"parser failed ({type(exc).__name__})")
        if progress is not None:
            progress(len(results), len(tasks), _source_of(tasks[index]))
    return [results[i] for i in range(len(tasks))]


@contextmanager
def _ray_session(max_workers: int | None, address: str | None) -> Iterator[Runner]:
    try:
        import ray
    except ImportError:
        raise DatasetError("--engine ray needs Ray: pip install 'htatui[cluster]'") from None
    started_here = not ray.is_initialized()
    # The cluster's address: the option, else Ray's own RAY_ADDRESS; without either, a local Ray of
    # this run's own ("local": never a stale cluster that `ray start` left on this machine).
    address = address or os.environ.get("RAY_ADDRESS") or None
    if started_here:
        try:
            if address:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            else:
                # A local Ray for this run (its workers get this process's sys.path, so this htatui).
                # Its raylet waits ~15 s for its agent processes by default, too short on a busy machine.
                os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
                os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
                # Out of the way of a shared machine's other work: no dashboard, and an object store
                # sized for what the tasks send back (records and small tables), not 30 % of the memory.
                ray.init(
                    address="local",
                    num_cpus=max_workers or default_workers(),
                    include_dashboard=False,
                    log_to_driver=False,
                    logging_level=logging.WARNING,
                    object_store_memory=LOCAL_RAY_STORE_BYTES,
                )
        except Exception as exc:  # noqa: BLE001 - Ray raises bare Exceptions when its node cannot start
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DatasetError(f"{RAY_DID_NOT_START}: {message}") from None

    def run(
        work: Callable[..., Any], tasks: list[tuple[Any, ...]], progress: Callable[[int, int, Path], None] | None
    ) -> list[Any]:
        remote = ray.remote(work)
        pending = {remote.remote(*task): index for index, task in enumerate(tasks)}
        results: dict[int, Any] = {}
        waiting = list(pending)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            index = pending[ready[0]]
            try:
                results[index] = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - a failed task is one bad file
                results[index] = IngestFailure(_source_of(tasks[index]), f"task failed ({type(exc).__name__})")
            if progress is not None:
                progress(len(results), len(tasks), _source_of(tasks[index]))
        return [results[i] for i in range(len(tasks))]

    try:
        yield run
    finally:
        if started_here:
            ray.shutdown()
