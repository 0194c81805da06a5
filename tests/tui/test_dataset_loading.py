"""The app opens a job dataset (`htatui ingest`) as it opens the trace folder it came from."""

from __future__ import annotations

from pathlib import Path

from tui_helpers import press, ready

from htatui.jobs.ingest import ingest
from htatui.jobs.load import load_traces
from htatui.tui.app import HtaTuiApp, Settings


async def test_app_opens_a_dataset_with_the_traces_numbers(trace_root: Path, tmp_path: Path) -> None:
    ingest([trace_root / "small"], tmp_path / "ds", max_workers=1)
    app = HtaTuiApp(Settings(paths=(tmp_path / "ds",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.current_mode == "diagnosis"
        assert app.traces is not None and app.traces.rank_ids == [0, 1]
        direct = load_traces([trace_root / "small"], use_cache=False, max_workers=1)
        for rank in direct.rank_ids:
            assert app.traces.ranks[rank].events.equals(direct.ranks[rank].events)


async def test_the_temporal_page_of_a_dataset_reads_no_rank(trace_root: Path, tmp_path: Path) -> None:
    """The breakdown comes from the summary; the ranks are read when a page needs their events (the
    Diagnosis page the app opens on reads each rank once, and drops it again)."""
    from htatui.tui.widgets.table_pane import TablePane

    ingest([trace_root / "small"], tmp_path / "ds", max_workers=1)
    app = HtaTuiApp(Settings(paths=(tmp_path / "ds",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.traces is not None and not any(r.loaded for r in app.traces.ranks.values())
        await press(pilot, "1")
        table = app.screen.query_one("#temporal-main", TablePane)
        assert table.table.row_count == 2
        assert app.steps_label == "steps 1-2 (last step 3 left out)"  # from the summary, no rank read
        assert not any(r.loaded for r in app.traces.ranks.values())


def _same(got: object, expected: object) -> bool:
    """Results of a screen's analysis are equal: frames by value, dicts and dataclasses field by field."""
    import dataclasses

    import polars as pl

    if isinstance(got, pl.DataFrame) and isinstance(expected, pl.DataFrame):
        return got.equals(expected)
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(_same(got[k], expected[k]) for k in got)
    if dataclasses.is_dataclass(got) and dataclasses.is_dataclass(expected):
        names = [f.name for f in dataclasses.fields(got)]
        return all(_same(getattr(got, n), getattr(expected, n)) for n in names)
    return got == expected


async def test_per_rank_screens_keep_no_rank_of_a_dataset(trace_root: Path, tmp_path: Path) -> None:
    """Idle, Launch and Counters read a dataset's ranks one at a time, with the numbers of the traces."""
    ingest([trace_root / "small"], tmp_path / "ds", max_workers=1)
    direct = load_traces([trace_root / "small"], use_cache=False, max_workers=1)
    app = HtaTuiApp(Settings(paths=(tmp_path / "ds",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        for key in ("2", "5", "6"):
            await press(pilot, key)
            screen = app.screen
            assert app.traces is not None and not any(r.loaded for r in app.traces.ranks.values()), key
            expected = screen.analyse(direct, app.scope())  # type: ignore[attr-defined]
            assert _same(screen.result, expected), key  # type: ignore[attr-defined]


async def test_a_damaged_rank_file_is_one_notification_not_computing_forever(trace_root: Path, tmp_path: Path) -> None:
    """Before: a flipped byte made polars panic (a BaseException the workers let through); the
    Kernels page stayed on "computing…" with Rust backtraces over the screen. Now the page's
    analysis fails with the one line naming the file, as a notification."""
    ingest([trace_root / "small"], tmp_path / "ds", max_workers=1)
    rank_file = tmp_path / "ds" / "ranks" / "00000.arrow"
    data = bytearray(rank_file.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rank_file.write_bytes(bytes(data))
    app = HtaTuiApp(Settings(paths=(tmp_path / "ds",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot)
        await press(pilot, "3")
        assert app.current_mode == "kernels"
        line = f"{rank_file}: changed since it was ingested (size or checksum differs); ingest again"
        assert [n.message for n in app._notifications if str(rank_file) in n.message] == [line]
        assert "computing" not in str(app.screen.query_one("StatusBar").render())
