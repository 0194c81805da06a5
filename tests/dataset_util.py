"""Jobs to ingest shared by the dataset tests (tests/store/, tests/jobs/, tests/analysis/): a tiny
hand-made job, the demo, a generated one, and `report --format json` in this process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from kineto_util import kernel, runtime, step, write_trace

from fixtures.scale import write_scale
from htatui.cli.main import main

DEMO = Path(__file__).resolve().parent.parent / "fixtures" / "demo"
RANK_VIEWS = ("stragglers", "rank-steps", "collectives")
"""The Ranks views a dataset answers from its stored cross-rank tables."""


def tiny_job(folder: Path) -> Path:
    """Two ranks; rank 1 starts 1 ms of base time later. Per rank: 2 steps of 100 µs, 2 kernels."""
    for rank in (0, 1):
        events = [
            step(1, 0, 100),
            step(2, 100, 100),
            runtime("cudaLaunchKernel", 10, 5, corr=1),
            kernel("gemm", 20, 30, corr=1),
            runtime("cudaLaunchKernel", 110, 5, corr=2),
            kernel("gemm", 120, 50 + 10 * rank, corr=2),
        ]
        write_trace(
            folder / f"rank-{rank}.json.gz", events, rank=rank, base_ns=1_700_000_000_000_000_000 + rank * 10**6
        )
    (folder / "notes.txt").write_text("not a trace")
    return folder


def demo_job(folder: Path) -> Path:
    shutil.copytree(DEMO, folder)
    return folder


def generated_job(folder: Path) -> Path:
    """4 ranks of the generated training loop (rank 1 its straggler), ~2,000 events each."""
    write_scale(folder, ranks=4, events=2000)
    return folder


def report_json(capsys: pytest.CaptureFixture[str], *args: str | Path) -> str:
    """`htatui report ARGS --format json` in this process: what it printed (it must exit 0)."""
    code = main(["report", *map(str, args), "--format", "json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out
