"""Every table on every page is the table `report` prints: same rows, columns and values, same cell text.

One app per (job, mode) visits each registry page; each of the page's tables (the ones in a
pane and the ones behind a chart) is compared with `htatui report --view V [--TABLE] --format
json` run with the page's knob values as flags, and each pane's first row is checked to read as
`report`'s table writes its cells.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from kineto_util import write_trace
from memory_util import memory_trace_events
from tui_helpers import press, ready

from htatui.analysis.core.knobs import knobs_of
from htatui.analysis.core.scope import Steps
from htatui.analysis.registry import PAGES, PageTable, view
from htatui.cli.main import main
from htatui.jobs.load import load_traces
from htatui.text.numbers import cell_text
from htatui.text.render import json_rows
from htatui.tui.app import HtaTuiApp, Settings
from htatui.tui.run import settle
from htatui.tui.screens.page import PageScreen, pane_id
from htatui.tui.widgets.status_bar import page_keys
from htatui.tui.widgets.table_pane import TablePane

ROOT = Path(__file__).resolve().parents[2]

RUNS = [
    ("demo", False),
    ("demo", True),
    ("h100_ddp_gloo_2rank", False),
    ("trace_filter", True),
    ("memory", False),
]
"""(job, hta-compat): the bundled demo (4 ranks, NCCL) in both modes, so every page and table is
seen in each mode on a multi-rank job; two shared jobs that take other paths (2 ranks on gloo,
2 ranks with NCCL send/recv), one mode each; and a hand-made trace with `[memory]` events (the
Memory page: only a job that has them shows it). Every job in both modes cost CI 8 apps for the
coverage of these 5."""


def knob_flags(view_id: str, options: Any) -> list[str]:
    """The `report` flags that give a view the page's scope and knob values (the defaults need none)."""
    defaults = view(view_id).options()
    scope = options.scope
    flags: list[str] = ["--hta-compat"] if scope.hta_compat else []
    flags += ["--steps", str(scope.steps)] if scope.steps != Steps() else []
    flags += ["--ranks", ",".join(map(str, scope.ranks))] if scope.ranks is not None else []
    for name, spec in knobs_of(options).items():
        value = getattr(options, name)
        if value == getattr(defaults, name):
            continue
        if spec.kind == "switch":
            flags += [spec.flag] if value else []
        elif value is None:
            flags += [spec.flag, "all"]
        elif isinstance(value, tuple):
            flags += [spec.flag, ",".join(map(str, value))]
        else:
            flags += [spec.flag, str(value)]
    return flags


def _rows(frame: Any, table: PageTable) -> list[dict[str, Any]]:
    """A frame's rows as report's JSON gives them (NaN and inf as null, floats kept to their
    unit's precision by the table's column declarations)."""
    rows: list[dict[str, Any]] = json_rows(frame, view(table.view).table(table.table).columns)
    return rows


def report_rows(path: Path, table: PageTable, flags: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    args = ["report", str(path), "--view", table.view, "--format", "json", *flags]
    if table.table != "main":
        args.append(f"--{table.table}")
    capsys.readouterr()
    assert main(args) == 0, f"report failed for {table}"
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("job", "compat"), RUNS, ids=[f"{job}-{'hta-compat' if compat else 'default'}" for job, compat in RUNS]
)
async def test_every_page_table_is_reports_table(
    job: str,
    compat: bool,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    cli_one_job: None,
) -> None:
    monkeypatch.setenv("HTATUI_CACHE_DIR", str(tmp_path / "cache"))  # report reads the app's parse
    if job == "memory":
        path = tmp_path / "memory"
        write_trace(path / "rank-0.pt.trace.json", memory_trace_events())
    else:
        path = ROOT / "fixtures" / "demo" if job == "demo" else request.getfixturevalue("shared_traces") / job
    traces = load_traces([path], use_cache=False, max_workers=1)
    app = HtaTuiApp(Settings(paths=(path,), use_cache=False, hta_compat=compat, max_workers=1), traces=traces)
    shown: list[tuple[str, PageTable, list[str], list[dict[str, Any]]]] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot)
        listed = [mode for mode, _title in app.view_order()]
        for page in PAGES:
            if page.id not in listed:
                continue  # Memory, on a job without [memory] events
            if page.id in page_keys():
                await press(pilot, page_keys()[page.id])
            else:  # past the tenth page: no number key, `]` or the palette (what they run)
                await app.run_action(f"view('{page.id}')")
                await settle(pilot)
            screen = app.screen
            assert isinstance(screen, PageScreen) and screen.PAGE == page.id
            assert screen.result is not None, f"{page.id}: no result on {job}"
            for table in page.tables:
                # The page's scope: the app's, or the one step the Critical path page follows.
                options = dataclasses.replace(screen.view_options[table.view], scope=screen.result.scope or app.scope())
                rows = _rows(screen.result.frame(table.view, table.table), table)
                shown.append((page.id, table, knob_flags(table.view, options), rows))
                if table in screen.PANES:
                    pane = screen.query_one(f"#{pane_id(table)}", TablePane).table
                    assert _rows(pane.source, table) == rows, f"{page.id}: {table} pane"
                    _check_first_row_cells(pane, f"{page.id}: {table}")
    # `report` runs after the app: a running app holds stdout.
    for page_id, table, flags, rows in shown:
        assert rows == report_rows(path, table, flags, capsys), f"{page_id}: {table} on {job}"
    assert len(shown) == sum(len(page.tables) for page in PAGES if page.id in listed)
    assert ("memory" in listed) == (job == "memory")


def _check_first_row_cells(table: Any, where: str) -> None:
    """The first row's numbers read as `report`'s table cells read (a missing value is a dim –)."""
    if not table.row_count:
        return
    row = table.shown.row(0, named=True)
    visible = [str(column.key.value) for column in table.ordered_columns]
    for column in table.columns_spec:
        if column.numeric and column.key in visible:
            cell = table.get_cell_at((0, visible.index(column.key)))
            assert cell.plain == (cell_text(row[column.key], column.unit) or "–"), f"{where}: {column.key}"
