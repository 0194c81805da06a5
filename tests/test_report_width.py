"""Headless tables fit an 80-column terminal; piped output keeps full rows; no number is ever split."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from fixtures.generate import write_scenario
from htatui.text.fit import short_header
from htatui.text.render import render_frame

ROOT = Path(__file__).resolve().parent.parent
LONG = (
    "void at::native::(anonymous namespace)::vectorized_elementwise_kernel"
    "<4, at::native::FillFunctor<float>>(int, float*)"
)


class Terminal(io.StringIO):
    """What render_frame sees when stdout is a terminal."""

    def isatty(self) -> bool:
        return True


def wide_frame() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": [0, 1],
            "name": [LONG, LONG.replace("<4,", "<8,")],
            "kernel_type": ["COMPUTATION", "COMMUNICATION"],
            "count": [190, 3],
            "sum_us": [8_204_993.25, 11_075.0],
            "mean_us": [43_184.17, 3_691.67],
            "min_us": [1.5, 2.5],
            "max_us": [260_638.0, 5_000.0],
            "std_us": [12.25, 0.5],
            "idle_pct": [7.25, 92.75],
            "non_compute_time_us": [14_522_911.5, 0.0],
        }
    )


def test_short_headers_keep_the_unit() -> None:
    assert short_header("non_compute_time_us") == "non-comp time µs"
    assert short_header("idle_pct") == "idle %"
    assert short_header("span_ms") == "span ms"
    assert short_header("accounted_for") == "accounted for"


def test_terminal_table_fits_80_columns_and_names_what_it_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    render_frame(wide_frame(), "table", title="kernels", out=out)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    # Numbers whole on one line; names shortened by meaning and still telling the two kernels apart.
    for number in ("8,204,993.25", "11,075.00", "190"):
        assert number in text
    rows = [line for line in lines if line.startswith("│")]
    assert len(rows) == 2
    names = [row.split("│")[2].strip() for row in rows]
    assert names[0] != names[1] and all("vectorized" in name for name in names)
    assert "(--wide shows all)" in text and "left out to fit 80 columns" in text


def test_wide_shows_every_column_without_breaking_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    out = Terminal()
    render_frame(wide_frame(), "table", out=out, wide=True)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", out.getvalue())
    assert "14,522,911.50" in text and "260,638.00" in text and "non_compute_time_us" in text
    assert "left out" not in text
    assert len([line for line in text.splitlines() if line.startswith("│")]) == 2


def test_piped_table_keeps_full_rows() -> None:
    out = io.StringIO()
    render_frame(wide_frame(), "table", out=out)
    text = out.getvalue()
    assert LONG in text and "non_compute_time_us" in text and "left out" not in text
    assert len([line for line in text.splitlines() if line.startswith("│")]) == 2


def run_in_pty(args: list[str], columns: int = 80) -> str:
    """Run the CLI with its stdout on a pseudo-terminal `columns` wide; returns what it printed."""
    leader, follower = pty.openpty()
    env = dict(os.environ, PYTHONPATH=str(ROOT), COLUMNS=str(columns), LINES="24", TERM="dumb", NO_COLOR="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "htatui", *args], stdout=follower, stderr=subprocess.DEVNULL, env=env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
    process.wait(timeout=120)
    os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace").replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.parametrize("view", ["temporal", "kernels", "idle", "launch"])
def test_report_in_an_80_column_pty(tmp_path: Path, view: str) -> None:
    write_scenario("small", tmp_path / "small")
    job = str(tmp_path / "small")
    text = run_in_pty(["report", job, "--view", view, "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines and max(len(line) for line in lines) <= 80, text
    # Every number of the first row's shown columns is printed whole (as the JSON gives it).
    piped = subprocess.run(
        [sys.executable, "-m", "htatui", "report", job, "--view", view, "--no-cache", "--format", "json"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        check=True,
        timeout=120,
    )
    first = json.loads(piped.stdout)[0]
    row = next(line for line in lines if line.startswith("│"))
    cells = [cell.strip() for cell in row.strip("│").split("│")]
    numbers = {f"{v:,.2f}" for v in first.values() if isinstance(v, float)} | {
        str(v) for v in first.values() if isinstance(v, int)
    }
    shown_numbers = [cell for cell in cells if re.fullmatch(r"[-\d,.]+", cell)]
    assert shown_numbers and all(cell in numbers for cell in shown_numbers), (cells, numbers)


def test_info_in_an_80_column_pty(tmp_path: Path) -> None:
    write_scenario("small", tmp_path / "small")
    text = run_in_pty(["info", str(tmp_path / "small"), "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    assert len([line for line in lines if line.startswith("│")]) == 2


def test_diff_table_keeps_the_change_columns_at_80(tmp_path: Path) -> None:
    write_scenario("diff", tmp_path)
    text = run_in_pty(["diff", str(tmp_path / "base"), str(tmp_path / "test"), "--format", "table", "--no-cache"])
    lines = [line for line in text.splitlines() if line.strip()]
    assert max(len(line) for line in lines) <= 80, text
    header = next(line for line in lines if "name" in line)
    assert "delta µs" in header and "status" in header
    assert "--wide shows all" in text
