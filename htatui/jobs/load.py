"""Open a job: trace files (parsed, or read from the cache) and job datasets, as one TraceSet."""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl

from htatui.sources import SourcePath
from htatui.store.layout import is_dataset
from htatui.trace.discover import Discovered, DiscoveryError, discover, rank_from_filename, skipped_note
from htatui.trace.fetch import DownloadCallback
from htatui.trace.formats import foreign_format
from htatui.trace.loader import (
    LoadError,
    LoadProgress,
    ParsedFile,
    ProgressCallback,
    StoredFile,
    align,
    assign_ranks,
    parse_all,
)
from htatui.trace.model import RANK_FROM_TRACE, EventsUnavailable, KeptTables, LoadProblem, RankTrace, TraceSet
from htatui.trace.step_sources import user_steps

if TYPE_CHECKING:
    from htatui.store.dataset import Dataset


def load_traces(
    paths: Sequence[SourcePath],
    *,
    use_cache: bool = True,
    progress: ProgressCallback | None = None,
    cancel: threading.Event | None = None,
    max_workers: int | None = None,
    download_progress: DownloadCallback | None = None,
    refresh_cache: bool = False,
) -> TraceSet:
    """Load every trace named by `paths` (folders or files, local or URLs) into a TraceSet.

    `use_cache` reads and writes the parse cache; `refresh_cache` (with use_cache False)
    parses every file again and overwrites its cache entry, as `--no-cache` does.

    Raises LoadError when no file could be loaded or two files claim one rank; files that
    fail among good ones are listed in `TraceSet.problems`. Remote files missing from the
    cache are downloaded first, reporting bytes to `download_progress`.
    """
    datasets = [p for p in paths if isinstance(p, Path) and is_dataset(p)]
    traces = [p for p in paths if not (isinstance(p, Path) and is_dataset(p))]
    if datasets and user_steps() is not None:
        # A dataset's rows carry the steps it was ingested with; other spans would disagree with them.
        raise LoadError(
            f"{datasets[0]}: --steps-from applies to trace files; a dataset keeps the steps it was ingested with"
        )
    results: list[ParsedFile | StoredFile | LoadProblem] = [*_read_datasets(datasets, progress)]
    try:
        found = discover(traces) if traces else Discovered(files=[], skipped=[])
    except DiscoveryError as exc:
        raise LoadError(str(exc)) from None
    results += [LoadProblem(path, why) for path, why in found.unreadable]
    put_aside_notes: list[str] = []
    results += parse_all(
        found.files,
        use_cache,
        use_cache or refresh_cache,
        progress,
        cancel,
        max_workers,
        download_progress,
        notes=put_aside_notes,
        entry_tables=_entry_summary,
    )
    parsed = [r for r in results if isinstance(r, (ParsedFile, StoredFile))]
    problems = tuple(_named(r) for r in results if isinstance(r, LoadProblem))
    if not parsed:
        if len(problems) == 1:
            raise LoadError(str(problems[0]))
        raise LoadError("no trace could be loaded: " + "; ".join(str(p) for p in problems))
    notes = [skipped_note(p) for p in found.skipped] + found.notes + put_aside_notes
    ranks, rank_notes = assign_ranks(parsed)
    notes.extend(rank_notes)
    aligned = align(ranks)
    captures = _captures([*found.captures, *_user_captures()], use_cache, refresh_cache, cancel, max_workers, notes)
    # A dataset's summary rows hold for the ranks exactly as they are aligned here: opened alone.
    summary: pl.DataFrame | None = None
    kept: KeptTables | None = None
    if datasets and not traces and len(datasets) == 1:
        summary, kept = _dataset_summary(datasets[0], aligned)
    if not datasets and (use_cache or refresh_cache):
        from htatui.jobs.cached_tables import parse_cache_tables

        kept = parse_cache_tables(aligned, read=use_cache)
    if not datasets and use_cache:
        entries = {p.path: p.read_table for p in parsed if isinstance(p, StoredFile) and p.read_table is not None}
        summary = _folder_summary(aligned, entries)
    if not datasets:
        # GPU work replayed by graph launches: whether its ops are known (a capture beside it).
        notes += _replay_notes(TraceSet(ranks=aligned, captures=captures))
    return TraceSet(ranks=aligned, problems=problems, notes=tuple(notes), summary=summary, kept=kept, captures=captures)


def _replay_notes(traces: TraceSet) -> list[str]:
    """`graph_replay.replay_notes`, imported only when a rank has graph launches (a cached `info`
    reads each rank's stored figures and imports nothing more)."""
    from htatui.analysis.core.rank_figures import stored_figures, trace_figures

    def graph_kernels(trace: RankTrace) -> int:
        # A rank not in memory (spilled, or a dataset's) is not read for this note.
        figures = trace_figures(trace) if trace.loaded else stored_figures(trace)
        return figures.graph_kernels if figures is not None else 0

    if not any(graph_kernels(trace) for trace in traces.ranks.values()):
        return []
    from htatui.analysis.model.graph_replay import replay_notes

    return replay_notes(traces)


CAPTURES_ENV = "HTATUI_CAPTURES"
"""Graph-capture traces named with `--capture FILE` (several joined by the path separator)."""


def _user_captures() -> list[SourcePath]:
    value = os.environ.get(CAPTURES_ENV, "")
    named = [Path(part) for part in value.split(os.pathsep) if part.strip()]
    try:
        return list(discover(named).files) if named else []
    except DiscoveryError as exc:
        raise LoadError(f"--capture: {exc}") from None


def _captures(
    paths: Sequence[SourcePath],
    use_cache: bool,
    refresh_cache: bool,
    cancel: threading.Event | None,
    max_workers: int | None,
    notes: list[str],
) -> tuple[RankTrace, ...]:
    """The graph-capture traces, parsed as traces are (and cached); each keeps its own time base."""
    if not paths:
        return ()
    results = parse_all(
        list(dict.fromkeys(paths)), use_cache, use_cache or refresh_cache, None, cancel, max_workers, None
    )
    captures: list[RankTrace] = []
    for result in results:
        if isinstance(result, LoadProblem):
            notes.append(f"capture {result}: left out")
            continue
        rank = result.meta.claimed_rank
        rank = rank if rank is not None else (rank_from_filename(result.path) or 0)
        captures.append(align({rank: (result, RANK_FROM_TRACE)})[rank])
    return tuple(captures)


def _named(problem: LoadProblem) -> LoadProblem:
    """A file that failed to parse, named by its format when htatui knows it (a rocprofv3 JSON)."""
    found = foreign_format(problem.path)
    return LoadProblem(problem.path, found.reason(problem.path)) if found is not None else problem


def _entry_summary(parsed: ParsedFile, start_ns: int) -> dict[str, pl.DataFrame]:
    """The rank's summary row for its cache entry (`jobs.summary.entry_summary`), imported in the
    worker that parsed it: a cached open imports none of the views."""
    from htatui.jobs.summary import entry_summary

    return entry_summary(parsed, start_ns)


def _folder_summary(
    ranks: dict[int, RankTrace], tables: Mapping[SourcePath, Callable[[str], pl.DataFrame | None]]
) -> pl.DataFrame | None:
    """The summary rows the ranks' cache entries keep (`_entry_summary`; `tables` reads an entry's
    table, by the rank's file), as a dataset's summary, when every rank has one that holds for its
    rank number and shift here and was made by the code of now
    (`store.summary_table.entry_summary_for`); else None (the views read the events)."""
    from htatui.analysis.core.kept import made_with
    from htatui.store.summary_table import ENTRY_SUMMARY, SUMMARY_SCHEMA, entry_summary_for

    made = made_with()
    rows = []
    for rank, trace in ranks.items():
        read = tables.get(trace.path)
        held = entry_summary_for(read(ENTRY_SUMMARY) if read is not None else None, rank, trace.shift_us, made)
        if held is None:
            return None
        rows.append(held)
    return pl.DataFrame(rows, schema=SUMMARY_SCHEMA).sort("rank") if rows else None


def _dataset_summary(folder: Path, ranks: dict[int, RankTrace]) -> tuple[pl.DataFrame | None, KeptTables | None]:
    """The summary rows of a dataset opened alone, read only when its size and checksum are the
    ingest's, and its stored tables (None, None when they do not hold: the ranks are aligned
    otherwise than at ingest, or other rules or code made them)."""
    from htatui.analysis.core.kept import made_with
    from htatui.store.dataset import DatasetError, open_dataset
    from htatui.store.summary_table import summary_for

    try:
        dataset = open_dataset(folder)
        summary = dataset.summary()
    except DatasetError as exc:
        raise LoadError(str(exc)) from None
    held = summary_for(summary, {rank: trace.shift_us for rank, trace in ranks.items()}, made_with())
    if held is None:
        return None, None
    return held, DatasetTables(dataset)


class DatasetTables:
    """The `TraceSet.kept` of a dataset opened alone: the cross-rank tables its ingest stored.

    A stored file changed since the ingest is one line naming it (EventsUnavailable), as a
    damaged rank file is; nothing is kept (a dataset is written once).
    """

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self._read: dict[str, pl.DataFrame] = {}
        self._lock = threading.Lock()

    def read(self, name: str, ranks: Sequence[int]) -> pl.DataFrame | None:
        from htatui.analysis.views.ranks.tables import PER_RANK, SCHEMAS

        if name not in SCHEMAS:
            return None  # a per-rank view table: made from the events
        if name in PER_RANK:
            # Read each time, not kept: a rank's intervals are wanted once, while its calls are measured.
            frames = [self._checked(name, functools.partial(self.dataset.busy, rank), rank) for rank in ranks]
            return pl.concat(frames, how="vertical") if frames else None
        with self._lock:  # read once (a worker thread may ask while another reads)
            if name not in self._read:
                self._read[name] = self._checked(name, lambda: self.dataset.table(name), None)
        return self._read[name].filter(pl.col("rank").is_in(pl.Series(list(ranks), dtype=pl.Int32).implode()))

    def keep(self, rank: int, tables: Mapping[str, pl.DataFrame]) -> None:
        return None

    def _checked(self, name: str, read: Callable[[], pl.DataFrame], rank: int | None) -> pl.DataFrame:
        from htatui.analysis.views.ranks.tables import SCHEMAS
        from htatui.store.dataset import DatasetError

        try:
            frame = read()
        except DatasetError as exc:
            raise EventsUnavailable(str(exc)) from None
        if frame.schema != pl.Schema(SCHEMAS[name]):
            where = self.dataset.table_files[name] if rank is None else self.dataset.busy_files[rank]
            raise EventsUnavailable(f"{where.path}: not an htatui {name} table; ingest again")
        return frame


def _read_datasets(folders: list[Path], progress: ProgressCallback | None) -> list[StoredFile | LoadProblem]:
    """The files an ingest stored (`htatui ingest`), as if parsed now; no rank's events are read yet."""
    if not folders:
        return []  # trace files only: the dataset reader is not even imported
    from htatui.store.dataset import DatasetError, open_dataset

    results: list[StoredFile | LoadProblem] = []
    for folder in folders:
        try:
            dataset = open_dataset(folder)
        except DatasetError as exc:
            raise LoadError(str(exc)) from None
        results.extend(LoadProblem(source, message) for source, message in dataset.problems)
        for done, stored in enumerate(dataset.ranks, start=1):
            try:
                stored.check()
                results.append(
                    StoredFile(
                        stored.source,
                        stored.meta,
                        stored.warnings,
                        stored.start_ns,
                        stored.events,
                        stored.details,
                        stored.source_stamp,
                    )
                )
            except DatasetError as exc:
                results.append(LoadProblem(stored.source, str(exc)))
            if progress is not None:
                progress(LoadProgress(done=done, total=len(dataset.ranks), path=stored.source, from_cache=True))
    return results
