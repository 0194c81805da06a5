"""`report`'s table format: rows per second of htatui's renderer against rich's Table (issue 35).

    PYTHONPATH=. python benchmarks/report_table.py [--rows 1000 5000 20000]

Renders a frame shaped like the job critical path's edges (rank, index, a kernel name, an edge
kind, three µs columns) into a string at 160 columns, best of 3, both ways: `render_frame` (fitted
and drawn by `text/box_table.py`) and rich's Table over the same fitted cells (what `report` used
before). Prints seconds and µs a row; rich is left out past 5,000 rows (it takes minutes).
"""

from __future__ import annotations

import argparse
import io
import os
import time

import polars as pl

from htatui.text.render import render_frame


def frame_of(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        {
            "rank": [i % 2 for i in range(rows)],
            "index": list(range(rows)),
            "name": [f"void at::native::vectorized_elementwise_kernel<4, Functor{i % 97}>(int)" for i in range(rows)],
            "edge_type": ["critical_path_kernel_kernel_delay"] * rows,
            "start_us": [i * 10.0 for i in range(rows)],
            "dur_us": [i * 1.25 for i in range(rows)],
            "slack_us": [0.5] * rows,
        }
    )


def ours(frame: pl.DataFrame) -> float:
    started = time.perf_counter()
    render_frame(frame, "table", title="edges", out=io.StringIO())
    return time.perf_counter() - started


def rich_table(frame: pl.DataFrame) -> float:
    from rich.console import Console
    from rich.table import Table

    started = time.perf_counter()
    table = Table(title="edges", title_justify="left", header_style="bold")
    for name, dtype in frame.schema.items():
        table.add_column(name, justify="right" if dtype.is_numeric() else "left", no_wrap=True)
    for row in frame.iter_rows():
        table.add_row(*(f"{v:,.2f}" if isinstance(v, float) else str(v) for v in row))
    Console(file=io.StringIO(), width=160).print(table)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1000, 5000, 20000])
    args = parser.parse_args()
    os.environ["COLUMNS"] = "160"
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(f"{'rows':>8} {'ours s':>8} {'µs/row':>8} {'rich s':>8} {'µs/row':>8}")
    for rows in args.rows:
        frame = frame_of(rows)
        mine = min(ours(frame) for _ in range(3))
        theirs = min(rich_table(frame) for _ in range(3)) if rows <= 5000 else float("nan")
        print(f"{rows:>8} {mine:>8.3f} {1e6 * mine / rows:>8.1f} {theirs:>8.3f} {1e6 * theirs / rows:>8.1f}")


if __name__ == "__main__":
    main()
