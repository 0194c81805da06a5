"""Ingest: trace files → a job dataset, one task per rank file, on this machine or on Ray.

Each task parses one file, writes its events into the staged dataset folder and sends back only
the small record (metadata, warnings, summary row), so the driver's memory does not grow with
the ranks' sizes. `local` runs the tasks on a process pool over this machine's cores; `ray` runs
them as Ray tasks (a cluster given by address, or a local Ray): the folder must then be on a
file system that every worker sees. Both engines write the same dataset.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from htatui.store.dataset import DatasetError, IngestedFile, commit, discard, meta_json, staging, write_rank
from htatui.store.summary import rank_summary, summary_frame
from htatui.trace.cache import _meta_from_json
from htatui.trace.decode import TraceFormatError
from htatui.trace.discover import DiscoveryError, discover
from htatui.trace.loader import LoadError, ParsedFile, _assign_ranks, parse_file

ENGINES = ("local", "ray")
RAY_DID_NOT_START = "Ray did not start"


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


def ingest_file(index: int, source: Path, folder: Path) -> TaskResult:
    """One task: parse `source`, write its events as rank file `index` of `folder`, return the record."""
    try:
        parsed = parse_file(source)
    except TraceFormatError as exc:
        return IngestFailure(source, str(exc))
    except MemoryError:
        return IngestFailure(source, "out of memory while parsing")
    try:
        name = write_rank(folder, index, parsed.events)
    except OSError as exc:
        return IngestFailure(source, f"cannot write its events ({exc.strerror or exc})")
    summary = rank_summary(source, parsed.events, parsed.meta)
    return IngestedFile(source, name, meta_json(parsed.meta, parsed.warnings), summary)


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

    Raises LoadError when nothing could be ingested or two files claim one rank, DatasetError
    when `target` cannot be written; a partial dataset is never left behind.
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
        tasks = [(index, path, stage.folder) for index, path in enumerate(files)]
        runner = _run_ray if engine == "ray" else _run_local
        results = runner(tasks, max_workers, ray_address, progress)
        done = [r for r in results if isinstance(r, IngestedFile)]
        failed = [r for r in results if isinstance(r, IngestFailure)]
        if not done:
            raise LoadError("; ".join(f"{f.source}: {f.message}" for f in failed) or "no trace files")
        rows = _with_ranks(done)
        commit(stage, done, [(f.source, f.message) for f in failed], summary_frame(rows))
    except BaseException:
        discard(stage)
        raise
    return IngestReport(folder=target, ranks=len(done), problems=failed)


def _with_ranks(done: list[IngestedFile]) -> list[dict[str, Any]]:
    """Each summary row with the rank the loader will give its file (same rules, same order)."""
    stand_ins = [
        ParsedFile(path=f.source, events=pl.DataFrame(), meta=_meta_from_json(f.meta_json)[0], warnings=[])
        for f in done
    ]
    ranks, _ = _assign_ranks(stand_ins)
    rank_of = {item.path: rank for rank, (item, _) in ranks.items()}
    return [dict(f.summary, rank=rank_of[f.source]) for f in done]


_Task = tuple[int, Path, Path]


def _run_local(
    tasks: list[_Task],
    max_workers: int | None,
    _address: str | None,
    progress: Callable[[int, int, Path], None] | None,
) -> list[TaskResult]:
    workers = min(len(tasks), max_workers or os.cpu_count() or 1)
    results: dict[int, TaskResult] = {}
    if workers <= 1:
        for index, source, folder in tasks:
            results[index] = ingest_file(index, source, folder)
            if progress is not None:
                progress(len(results), len(tasks), source)
        return [results[i] for i, _, _ in tasks]
    # spawn, not fork: the parent may already run polars threads, which fork would copy.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(ingest_file, *task): task for task in tasks}
        for future in as_completed(futures):
            index, source, _ = futures[future]
            try:
                results[index] = future.result()
            except Exception as exc:  # noqa: BLE001 - a dead worker is one bad file
                results[index] = IngestFailure(source, f"parser failed ({type(exc).__name__})")
            if progress is not None:
                progress(len(results), len(tasks), source)
    return [results[i] for i, _, _ in tasks]


def _run_ray(
    tasks: list[_Task],
    max_workers: int | None,
    address: str | None,
    progress: Callable[[int, int, Path], None] | None,
) -> list[TaskResult]:
    try:
        import ray
    except ImportError:
        raise DatasetError("--engine ray needs Ray: pip install 'htatui[cluster]'") from None
    started_here = not ray.is_initialized()
    if started_here:
        try:
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                # A local Ray for this run (its workers get this process's sys.path, so this htatui).
                # Its raylet waits ~15 s for its agent processes by default, too short on a busy machine.
                os.environ.setdefault("RAY_raylet_start_wait_time_s", "120")
                os.environ.setdefault("RAY_agent_register_timeout_ms", "120000")
                ray.init(num_cpus=max_workers or os.cpu_count() or 1, include_dashboard=False, log_to_driver=False)
        except Exception as exc:  # noqa: BLE001 - Ray raises bare Exceptions when its node cannot start
            message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise DatasetError(f"{RAY_DID_NOT_START}: {message}") from None
    try:
        remote = ray.remote(ingest_file)
        pending = {remote.remote(*task): task for task in tasks}
        results: dict[int, TaskResult] = {}
        waiting = list(pending)
        while waiting:
            ready, waiting = ray.wait(waiting, num_returns=1)
            index, source, _ = pending[ready[0]]
            try:
                results[index] = ray.get(ready[0])
            except Exception as exc:  # noqa: BLE001 - a failed task is one bad file
                results[index] = IngestFailure(source, f"task failed ({type(exc).__name__})")
            if progress is not None:
                progress(len(results), len(tasks), source)
    finally:
        if started_here:
            ray.shutdown()
    return [results[i] for i, _, _ in tasks]
