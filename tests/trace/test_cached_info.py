"""A cached `info` answers from the figures table each cache entry keeps (made at parse time) and
reads no events; a figures table that does not check out is made again from the events, never used."""

from __future__ import annotations

from pathlib import Path

import orjson
import polars as pl
import pytest
from kineto_util import cpu_op, device, kernel, step, write_trace
from memory_util import memory_event

from htatui.analysis.core.describe import describe_scope
from htatui.analysis.core.options import CommonOptions
from htatui.analysis.core.scope import Scope, Steps
from htatui.analysis.health import quick_findings
from htatui.cli.info import info_frame
from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.trace import cache
from htatui.trace.figures import FIGURES_SCHEMA

BASE_NS = 1_000_000_000_000  # rank 1 starts 250 ns later in absolute time: shifted by 0.25 µs


def _job(folder: Path) -> Path:
    write_trace(
        folder / "rank-0.json",
        [
            step(1, 0, 100),
            step(2, 100, 50),
            kernel("gemm", 10, 5, stream=7),
            device("gpu_memcpy", "Memcpy HtoD", 20, 5, stream=7),
            kernel("nccl", 120, 40, stream=9),
            memory_event(170, 512, 512, 1),  # an instant event: counted, but not part of the span
        ],
        rank=0,
        base_ns=BASE_NS,
    )
    write_trace(
        folder / "rank-1.json",
        [cpu_op("aten::mm", 0.5, 10), kernel("gemm", 5.5, 2.25, stream=3)],
        rank=1,
        base_ns=BASE_NS + 250,
    )
    return folder


# By hand: rank 0 has 6 events, 2 kernels on streams 7 and 9 (the memcpy is on 7 too), the first
# start at 0 and the last end at 120 + 40, steps 1 and 2; rank 1 spans 0.5 to 10.5, no steps.
RANK_0 = {"events": 6, "kernels": 2, "streams": 2, "memory_events": 1}
EXPECTED = pl.DataFrame(
    {
        "rank": [0, 1],
        "file": ["rank-0.json", "rank-1.json"],
        "events": [6, 2],
        "kernels": [2, 1],
        "streams": [2, 1],
        "span_ms": [0.16, 0.01],
        "steps": ["1-2", ""],
    }
)


class EventReads:
    """Counts the cached events files read (`CachedEntry.read_events`), by entry key."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.keys: list[str] = []
        original = cache.CachedEntry.read_events

        def counted(entry: cache.CachedEntry) -> pl.DataFrame | None:
            self.keys.append(entry.key)
            return original(entry)

        monkeypatch.setattr(cache.CachedEntry, "read_events", counted)


def _info(folder: Path, *, use_cache: bool = True) -> pl.DataFrame:
    return info_frame(load_traces([folder], use_cache=use_cache, max_workers=1)).select(EXPECTED.columns)


def _entry(trace: Path) -> cache.CachedEntry:
    entry = cache.peek_cached(trace)
    assert entry is not None
    return entry


def test_parsing_keeps_each_files_figures_as_a_table_of_its_cache_entry(tmp_path: Path) -> None:
    job = _job(tmp_path / "job")
    load_traces([job], max_workers=1)
    figures = _entry(job / "rank-0.json").read_table("figures")
    assert figures is not None and figures.schema == pl.Schema(FIGURES_SCHEMA)
    row = figures.row(0, named=True)
    assert {key: row[key] for key in RANK_0} == RANK_0
    assert (row["first_start_us"], row["last_end_us"], row["iterations"]) == (0.0, 160.0, [1, 2])
    other = _entry(job / "rank-1.json").read_table("figures")
    assert other is not None and other.row(0)[4:7] == (0.5, 10.5, [])  # the file's own times: not shifted
    # What the load-time checks and the header read: steps by start, GPU rows (2 kernels and a
    # memcpy on rank 0, a kernel on rank 1), no overlapping kernels.
    assert (row["steps_by_start"], row["gpu_rows"], row["overlap_kernels"]) == ([1, 2], 3, 0)
    assert other.row(0, named=True)["steps_by_start"] == [] and other.row(0, named=True)["gpu_rows"] == 1


def test_a_cached_info_reads_no_events_and_prints_what_a_fresh_parse_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    job = _job(tmp_path / "job")
    assert _info(job, use_cache=False).equals(EXPECTED)
    assert main(["info", str(job), "--format", "csv", "--no-cache"]) == 0  # parses and fills the cache
    fresh = capsys.readouterr().out
    reads = EventReads(monkeypatch)
    traces = load_traces([job], max_workers=1)
    assert {rank: trace.shift_us for rank, trace in traces.ranks.items()} == {0: 0.0, 1: 0.25}
    assert info_frame(traces).select(EXPECTED.columns).equals(EXPECTED)
    assert not any(trace.loaded for trace in traces.ranks.values())  # the ranks stay unread
    assert main(["info", str(job), "--format", "csv"]) == 0
    assert capsys.readouterr().out == fresh
    assert main(["info", str(job / "rank-1.json"), "--format", "csv"]) == 0  # the file alone: not shifted
    assert capsys.readouterr().out.splitlines()[1] == '1,rank-1.json,distributedInfo,Test GPU,2,1,1,0.01,"",""'
    assert reads.keys == []


def _tamper_figures(trace: Path) -> None:
    entry = _entry(trace)
    offset, length, _ = entry.file_tables["figures"]
    tables = entry.folder / f"{entry.key}.tables"
    data = bytearray(tables.read_bytes())
    data[offset + length // 2] ^= 0xFF
    tables.write_bytes(bytes(data))


def _forget_figures(trace: Path) -> None:
    entry = _entry(trace)
    record_file = entry.folder / f"{entry.key}.json"
    record = orjson.loads(record_file.read_bytes())
    del record["file_tables"]  # an entry written before figures were kept
    record_file.write_bytes(orjson.dumps(record))


def _wrong_schema(trace: Path) -> None:
    # Checksums that hold, over a table that is not the figures: never used either.
    cache.store_figures(trace, None, pl.DataFrame({"events": ["many"]}))
    entry = _entry(trace)
    assert entry.read_table("figures") is not None


@pytest.mark.parametrize("damage", [_tamper_figures, _forget_figures, _wrong_schema])
def test_a_figures_table_that_does_not_check_out_is_made_again_from_the_events(
    damage: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert callable(damage)
    job = _job(tmp_path / "job")
    load_traces([job], max_workers=1)
    damage(job / "rank-0.json")
    reads = EventReads(monkeypatch)
    assert _info(job).equals(EXPECTED)
    assert reads.keys == [_entry(job / "rank-0.json").key]  # that rank's verified events, once
    assert _info(job).equals(EXPECTED)  # kept again: read from the table
    assert len(reads.keys) == 1


def test_an_entry_whose_events_do_not_check_out_is_parsed_again_for_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(tmp_path / "job")
    load_traces([job], max_workers=1)
    _tamper_figures(job / "rank-1.json")
    entry = _entry(job / "rank-1.json")
    events_file = entry.folder / f"{entry.key}.arrow"
    events_file.write_bytes(events_file.read_bytes()[:-1] + b"\0")  # same size, another checksum
    assert _info(job).equals(EXPECTED)
    reads = EventReads(monkeypatch)
    assert _info(job).equals(EXPECTED)
    assert reads.keys == []  # the parse kept a new entry, figures with it


def test_the_cross_rank_tables_and_the_figures_keep_each_other(tmp_path: Path) -> None:
    from htatui.analysis.registry import BY_ID

    job = _job(tmp_path / "job")
    load_traces([job], max_workers=1)
    traces = load_traces([job], max_workers=1)
    view = BY_ID["stragglers"]
    view.tables[0].compute(traces, view.options())  # keeps the ranks' tagged tables in their entries
    trace = job / "rank-0.json"
    record = orjson.loads((_entry(trace).folder / f"{_entry(trace).key}.json").read_bytes())
    assert set(record) >= {"tables", "file_tables"}
    assert _entry(trace).read_table("figures") is not None
    figures = _entry(trace).read_table("figures")
    assert figures is not None
    cache.store_figures(trace, None, figures)
    again = load_traces([job], max_workers=1)
    assert again.kept is not None and again.kept.read("calls", sorted(again.ranks)) is not None


def test_the_figures_and_the_events_are_each_verified_alone(tmp_path: Path) -> None:
    """Damage to the events file leaves the figures table usable, and the reverse: each is checked
    against its own sha256 when it is read."""
    job = _job(tmp_path / "job")
    load_traces([job], max_workers=1)
    entry = _entry(job / "rank-0.json")
    events_file = entry.folder / f"{entry.key}.arrow"
    good_events = events_file.read_bytes()
    events_file.write_bytes(good_events[:-1] + b"\0")
    assert entry.read_events() is None
    assert entry.read_table("figures") is not None
    events_file.write_bytes(good_events)
    _tamper_figures(job / "rank-0.json")
    assert entry.read_table("figures") is None
    assert entry.read_events() is not None


def test_kept_figures_shifted_give_the_span_of_the_shifted_events_to_the_bit() -> None:
    """The span is taken after the shift is added to the kept first start and last end, as it is to
    every event when a rank is aligned; subtracting first and shifting after would differ here."""
    from htatui.analysis.core.rank_figures import figures_of, rank_figures
    from htatui.trace.figures import file_figures
    from htatui.trace.loader import aligned_events
    from htatui.trace.model import EVENT_SCHEMA

    frame = pl.DataFrame(
        {"ph": ["X", "X"], "cat": ["kernel", "cpu_op"], "ts": [0.1, 0.2], "dur": [0.2, 0.3], "end": [0.3, 0.5]}
    )
    events = frame.with_columns(
        pl.lit(None, dtype=dtype).alias(name) for name, dtype in EVENT_SCHEMA.items() if name not in frame.columns
    ).select(pl.col(name).cast(dtype) for name, dtype in EVENT_SCHEMA.items())
    shift = 1_234_567.7
    expected = rank_figures(aligned_events(events, 0, shift)).span_us
    assert expected == (0.5 + shift) - (0.1 + shift) != 0.5 - 0.1
    assert figures_of(file_figures(events).row(0, named=True), shift).span_us == expected


def test_the_scope_header_of_a_cached_folder_reads_no_rank(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The figures keep each rank's ProfilerSteps by start: the header says what the views use
    (the same words as from the events), and no rank is read for it."""
    job = _job(tmp_path / "job")
    fresh = load_traces([job], use_cache=False, max_workers=1)
    load_traces([job], max_workers=1)
    cached = load_traces([job], max_workers=1)
    reads = EventReads(monkeypatch)
    for steps in ("", "1", "all", "2-9"):
        options = CommonOptions(scope=Scope(steps=Steps.parse(steps) if steps else Steps()))
        assert describe_scope(cached, options) == describe_scope(fresh, options)
    # By hand: rank 0's steps 1 and 2 by start, the last left out by default; rank 1 has none.
    assert describe_scope(cached, CommonOptions()) == "ranks all (2) · step 1 (varies by rank) (last step 2 left out)"
    assert reads.keys == [] and not any(cached.ranks[rank].loaded for rank in cached.rank_ids)


def test_the_load_time_checks_of_a_cached_rank_read_no_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlapping kernels found at parse time are reported from the cache entry, unread, with
    the words a fresh parse gives."""
    # Kernel b starts 30 µs before a (0-100) ends and lasts 40: over 20 µs and half its length.
    write_trace(
        tmp_path / "rank-0.json",
        [step(1, 0, 200), kernel("a", 0, 100, stream=7), kernel("b", 70, 40, stream=7), kernel("c", 150, 5, stream=7)],
        rank=0,
    )
    fresh = quick_findings(load_traces([tmp_path / "rank-0.json"], use_cache=False, max_workers=1))
    load_traces([tmp_path / "rank-0.json"], max_workers=1)
    cached_job = load_traces([tmp_path / "rank-0.json"], max_workers=1)
    reads = EventReads(monkeypatch)
    cached = quick_findings(cached_job)
    assert cached == fresh and [f.kind for f in cached] == ["overlapping kernels"]
    assert (
        "1 kernel(s)" in cached[0].message and "stream 7" in cached[0].message and "(30 µs in all)" in cached[0].message
    )
    assert reads.keys == [] and not cached_job.ranks[0].loaded
