"""A trace folder keeps each rank's rows of the per-rank tables in the parse cache: the next
`report` of the same table reads them instead of the rank (the rank stays unread), answers exactly
as a fresh parse, and never serves rows made for other options, another time shift, other code or
bytes that changed."""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl
import pytest
from dataset_util import demo_job, report_json

from htatui.analysis import kept_parts
from htatui.analysis.core import kept
from htatui.analysis.core.options import NotedTable
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.registry import BY_ID, VIEWS, frame_of, make_table
from htatui.jobs.load import load_traces
from htatui.trace import cache
from htatui.trace.model import TraceSet

PER_RANK = [(view.id, table.name) for view in VIEWS for table in view.tables if table.per_rank]


def _answer(traces: TraceSet, view_id: str, table: str, **options: object) -> pl.DataFrame:
    view = BY_ID[view_id]
    return frame_of(make_table(view.table(table), traces, view.options(**options)))[0]


def _count_event_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    reads: list[str] = []
    read_events = cache.CachedEntry.read_events

    def counted(entry: cache.CachedEntry) -> pl.DataFrame | None:
        reads.append(entry.key)
        return read_events(entry)

    monkeypatch.setattr(cache.CachedEntry, "read_events", counted)
    return reads


def test_every_per_rank_table_of_a_cached_folder_is_read_back_without_its_ranks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = demo_job(tmp_path / "job")
    reads = _count_event_reads(monkeypatch)
    fresh = load_traces([folder], use_cache=False, max_workers=1)
    expected = {key: _answer(fresh, *key) for key in PER_RANK}
    first = load_traces([folder], max_workers=1)
    for key in PER_RANK:
        assert _answer(first, *key).equals(expected[key]), key  # made from the ranks, and kept
    assert reads
    reads.clear()
    again = load_traces([folder], max_workers=1)
    for key in PER_RANK:
        assert _answer(again, *key).equals(expected[key]), key
    assert reads == []  # no rank was read: every table's rows were kept


def test_the_report_of_a_cached_folder_prints_the_fresh_parses_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = demo_job(tmp_path / "job")
    fresh = report_json(capsys, folder, "--view", "idle", "--no-cache")
    assert report_json(capsys, folder, "--view", "idle") == fresh  # makes and keeps the parts
    assert report_json(capsys, folder, "--view", "idle") == fresh  # reads them


def test_other_options_code_or_shift_make_the_rows_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = demo_job(tmp_path / "job")
    _answer(load_traces([folder], max_workers=1), "temporal", "main")
    all_steps = Scope(steps=Steps(kind="all"))
    names = {kept_parts.part_name("t/main", BY_ID["temporal"].options(scope=scope)) for scope in (Scope(), all_steps)}
    assert len(names) == 2
    # Other steps: another part, made from the ranks, equal to a fresh parse's.
    again = load_traces([folder], max_workers=1)
    fresh = load_traces([folder], use_cache=False, max_workers=1)
    reads = _count_event_reads(monkeypatch)
    assert _answer(again, "temporal", "main", scope=all_steps).equals(
        _answer(fresh, "temporal", "main", scope=all_steps)
    )
    assert len(reads) == len(again.ranks)  # made from each rank
    # Other code: the kept rows are not served.
    monkeypatch.setattr(kept, "code_digest", lambda: "edited")
    other_code = load_traces([folder], max_workers=1)
    assert other_code.kept is not None
    kept_by: list[int] = []
    store = other_code.kept

    class Counted:
        def read(self, name: str, ranks: Sequence[int]) -> pl.DataFrame | None:
            return store.read(name, ranks)

        def keep(self, rank: int, tables: Mapping[str, pl.DataFrame]) -> None:
            kept_by.append(rank)
            store.keep(rank, tables)

    _answer(dataclasses.replace(other_code, kept=Counted()), "temporal", "main")
    assert kept_by == sorted(other_code.ranks)
    # Three ranks alone have other time shifts: their entries' parts are not theirs.
    alone = load_traces(sorted(folder.iterdir())[1:], max_workers=1)
    name = kept_parts.part_name(BY_ID["temporal"].main.id, BY_ID["temporal"].options())
    assert alone.kept is not None and all(alone.kept.read(name, [rank]) is None for rank in alone.ranks)


def test_changed_bytes_are_never_served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = demo_job(tmp_path / "job")
    fresh = _answer(load_traces([folder], use_cache=False, max_workers=1), "temporal", "main")
    # Made a rank at a time and kept as parts (not answered from the entries' summary rows).
    _answer(dataclasses.replace(load_traces([folder], max_workers=1), summary=None), "temporal", "main")
    for record in Path(cache.cache_dir()).glob("*.json"):
        kept = record.with_suffix(".tables")
        data = bytearray(kept.read_bytes())
        tables = json.loads(record.read_bytes())
        parts = {**tables["tables"]["parts"], "summary": tables["file_tables"]["parts"]["summary"]}
        for name, (offset, length, _) in parts.items():
            if not name.endswith("#message"):  # the rows themselves, their sentence intact
                data[offset + length // 2] ^= 0xFF
        kept.write_bytes(bytes(data))
    reads = _count_event_reads(monkeypatch)
    again = load_traces([folder], max_workers=1)
    assert again.summary is None  # a rank's row changed: none is served
    assert _answer(again, "temporal", "main").equals(fresh)
    assert len(reads) == len(again.ranks)  # made again from each rank


class _Store:
    def __init__(self) -> None:
        self.parts: dict[tuple[int, str], pl.DataFrame] = {}

    def read(self, name: str, ranks: Sequence[int]) -> pl.DataFrame | None:
        (rank,) = ranks
        return self.parts.get((rank, name))

    def keep(self, rank: int, tables: Mapping[str, pl.DataFrame]) -> None:
        self.parts.update({(rank, name): frame for name, frame in tables.items()})


def test_a_tables_sentence_is_kept_with_its_rows_and_rows_without_it_are_not_served() -> None:
    store = _Store()
    traces = TraceSet(ranks={}, kept=store)
    rows = pl.DataFrame({"rank": [3], "x_us": [1.5]})
    kept_parts.keep_part(traces, 3, "part/a", NotedTable(rows, "why it is short"))
    kept_parts.keep_part(traces, 3, "part/b", rows)
    noted = kept_parts.read_part(traces, 3, "part/a")
    assert isinstance(noted, NotedTable) and noted.message == "why it is short" and noted.frame.equals(rows)
    plain = kept_parts.read_part(traces, 3, "part/b")
    assert isinstance(plain, pl.DataFrame) and plain.equals(rows)
    del store.parts[(3, "part/a#message")]
    assert kept_parts.read_part(traces, 3, "part/a") is None
    # Rows too big to be worth keeping are made again each time.
    kept_parts.keep_part(traces, 3, "part/big", pl.DataFrame({"x": range(kept_parts.MAX_PART_BYTES)}))
    assert kept_parts.read_part(traces, 3, "part/big") is None


def test_an_entry_keeps_its_newest_parts_beside_its_cross_rank_tables(tmp_path: Path) -> None:
    source = tmp_path / "rank-0.json"
    source.write_bytes(
        (demo_job(tmp_path / "job") / sorted(p.name for p in (tmp_path / "job").iterdir())[0]).read_bytes()
    )
    trace = load_traces([source], max_workers=1).ranks[0]
    identity = trace.source_identity
    row = pl.DataFrame({"n": [1]})
    cache.store_tagged(source, identity, "tag", {"calls": row})
    for n in range(cache.MAX_PARTS + 2):
        cache.store_tagged(source, identity, "tag", {f"{cache.PART_PREFIX}{n}": row.with_columns(n=pl.lit(n))})
    cache.store_tagged(source, identity, "tag", {"calls": row})  # the cross-rank tables again: parts stay
    kept = cache.cached_tables(source, identity, "tag")
    assert kept is not None
    names = [name for name in kept.parts if name.startswith(cache.PART_PREFIX)]
    assert names == [f"{cache.PART_PREFIX}{n}" for n in range(2, cache.MAX_PARTS + 2)]
    newest = kept.read(f"{cache.PART_PREFIX}{cache.MAX_PARTS + 1}")
    assert newest is not None and newest["n"].to_list() == [cache.MAX_PARTS + 1]
    assert kept.read("calls") is not None
    # Another tag (another rank number, shift, rules or code): everything kept for the old one goes.
    cache.store_tagged(source, identity, "other", {f"{cache.PART_PREFIX}x": row})
    other = cache.cached_tables(source, identity, "other")
    assert other is not None and list(other.parts) == [f"{cache.PART_PREFIX}x"]


def test_parts_kept_by_several_threads_at_once_are_all_kept_with_the_figures(tmp_path: Path) -> None:
    source = tmp_path / "rank-0.json"
    source.write_bytes(
        (demo_job(tmp_path / "job") / sorted(p.name for p in (tmp_path / "job").iterdir())[0]).read_bytes()
    )
    identity = load_traces([source], max_workers=1).ranks[0].source_identity
    row = pl.DataFrame({"n": list(range(2000))})
    names = [f"{cache.PART_PREFIX}{n}" for n in range(8)]
    threads = [
        threading.Thread(target=cache.store_tagged, args=(source, identity, "tag", {name: row})) for name in names
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    kept = cache.cached_tables(source, identity, "tag")
    assert kept is not None and sorted(kept.parts) == sorted(names)
    assert all(kept.read(name) is not None for name in names)
    entry = cache.peek_cached(source, identity)
    assert entry is not None and entry.read_table("figures") is not None
