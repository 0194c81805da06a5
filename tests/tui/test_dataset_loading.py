"""The app opens a job dataset (`htatui ingest`) as it opens the trace folder it came from."""

from __future__ import annotations

from pathlib import Path

from tui_helpers import ready

from htatui.store.ingest import ingest
from htatui.trace import load_traces
from htatui.tui.app import HtaTuiApp, Settings


async def test_app_opens_a_dataset_with_the_traces_numbers(trace_root: Path, tmp_path: Path) -> None:
    ingest([trace_root / "small"], tmp_path / "ds", max_workers=1)
    app = HtaTuiApp(Settings(paths=(tmp_path / "ds",), use_cache=False, max_workers=1))
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot)
        assert app.current_mode == "temporal"
        assert app.traces is not None and app.traces.rank_ids == [0, 1]
        direct = load_traces([trace_root / "small"], use_cache=False, max_workers=1)
        for rank in direct.rank_ids:
            assert app.traces.ranks[rank].events.equals(direct.ranks[rank].events)
