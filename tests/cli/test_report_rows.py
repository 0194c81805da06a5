"""`report`'s tables are capped by default and drawn in time linear in their rows (issue 35):
rich's table took 3 ms a row (99 s for the 18,570 rows of a 2-rank job's critical path, 250 s
for its 36,845 edges); a table of 20,000 rows printed whole with no default cap."""

from __future__ import annotations

import io
import time
from pathlib import Path

import polars as pl
import pytest

from htatui.analysis.core.columns import derived_label
from htatui.cli.main import main
from htatui.cli.report import TABLE_ROWS
from htatui.text.render import render_frame

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "fixtures" / "demo"


def frame_of(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": [i % 2 for i in range(rows)],
            "name": [f"void at::native::kernel_{i}<float, 4>(int)" for i in range(rows)],
            "dur_us": [i * 1.25 for i in range(rows)],
            "start_us": [i * 10.0 for i in range(rows)],
            "kind": ["kernel_kernel"] * rows,
        }
    )


def test_twenty_thousand_rows_render_in_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wide bound: 20,000 rows took about 60 s through rich's table, 0.5 s now."""
    monkeypatch.setenv("COLUMNS", "160")
    out = io.StringIO()
    started = time.perf_counter()
    render_frame(frame_of(20_000), "table", title="edges", out=out)
    assert time.perf_counter() - started < 15
    rows = [line for line in out.getvalue().splitlines() if line.startswith("│")]
    assert len(rows) == 20_000 and "kernel_19999<float, 4>(int)" in rows[-1]


def test_the_box_is_the_one_rich_drew(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same borders, padding and alignment as rich's heavy-head table (numbers right, text left)."""
    from rich.console import Console
    from rich.table import Table

    monkeypatch.setenv("COLUMNS", "160")
    frame = frame_of(3)
    ours = io.StringIO()
    render_frame(frame, "table", title="edges", out=ours)
    table = Table(title="edges", title_justify="left", header_style="bold")
    for name, dtype in frame.schema.items():
        table.add_column(derived_label(name), justify="right" if dtype.is_numeric() else "left", no_wrap=True)
    for row in frame.iter_rows():
        table.add_row(*(f"{v:,.2f}" if isinstance(v, float) else str(v) for v in row))
    theirs = io.StringIO()
    Console(file=theirs, width=160).print(table)
    assert [line.rstrip() for line in ours.getvalue().splitlines()] == [
        line.rstrip() for line in theirs.getvalue().splitlines()
    ]


def test_control_characters_in_a_name_stay_on_one_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    out = io.StringIO()
    render_frame(pl.DataFrame({"name": ["a\nb\x1b[2Jc"], "n": [1]}), "table", out=out)
    rows = [line for line in out.getvalue().splitlines() if line.startswith("│")]
    assert rows == ["│ a␊b␛[2Jc │ 1 │"]
    assert "\x1b" not in out.getvalue()


def run(capsys: pytest.CaptureFixture[str], *args: str, view: tuple[str, ...] = ("idle",)) -> tuple[int, str, str]:
    code = main(["report", str(DEMO), "--view", *view, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_long_table_is_capped_and_says_how_many_rows_it_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    job_edges = ("critical-path", "--job-edges")
    code, csv, _ = run(capsys, "--format", "csv", view=job_edges)
    total = len(csv.splitlines()) - 1
    assert code == 0 and total > TABLE_ROWS  # the demo's job path has 1,013 edges; CSV holds them all
    code, text, _ = run(capsys, view=job_edges)
    rows = [line for line in text.splitlines() if line.startswith("│")]
    assert code == 0 and len(rows) == TABLE_ROWS
    assert f"· the first {TABLE_ROWS:,} of {total:,} rows" in " ".join(text.split())
    assert text.rstrip().endswith(f"{total - TABLE_ROWS:,} more rows left out (--top all prints every row)")


def test_top_sets_the_rows_of_a_view_without_its_own(capsys: pytest.CaptureFixture[str]) -> None:
    code, text, _ = run(capsys, "--top", "3")  # idle: 21 rows of streams
    assert code == 0 and len([line for line in text.splitlines() if line.startswith("│")]) == 3
    code, text, _ = run(capsys, "--top", "all")
    code_csv, csv, _ = run(capsys, "--format", "csv")
    assert len([line for line in text.splitlines() if line.startswith("│")]) == len(csv.splitlines()) - 1
    assert "more rows left out" not in text
    code, csv, _ = run(capsys, "--format", "csv", "--top", "2")
    assert len(csv.splitlines()) == 3  # the header and two rows: asked for, so CSV is cut too
    code, _, err = run(capsys, "--top", "0")
    assert code == 2 and err == "htatui: --top needs 1 or more rows, or all (got 0)\n"
