"""add_iterations on a frame joined from pieces: the same steps as on one chunk, and an
`iteration` column cut like the other columns (else the next expression copies the whole frame)."""

from __future__ import annotations

import polars as pl
from polars.testing import assert_frame_equal

from htatui.trace.frame import add_iterations


def piece(rows: list[tuple[str, str, str, float, float, int | None]]) -> pl.DataFrame:
    ph, name, cat, ts, dur, corr = zip(*rows, strict=True)
    return pl.DataFrame(
        {
            "ph": pl.Series(ph, dtype=pl.Categorical),
            "name": pl.Series(name, dtype=pl.Categorical),
            "cat": pl.Series(cat, dtype=pl.Categorical),
            "ts": pl.Series(ts, dtype=pl.Float64),
            "end": pl.Series([t + d for t, d in zip(ts, dur, strict=True)], dtype=pl.Float64),
            "correlation": pl.Series(corr, dtype=pl.Int64),
        }
    )


def test_pieces_give_the_steps_of_one_chunk_cut_like_the_frame() -> None:
    # Step 1 is [0, 100), step 2 [100, 200); the kernel with correlation 7 runs after step 1 ends
    # but inherits step 1 from its launch; the op at 250 is in no step.
    pieces = [
        piece(
            [
                ("X", "ProfilerStep#1", "user_annotation", 0.0, 100.0, None),
                ("X", "launch", "cuda_runtime", 10.0, 5.0, 7),
            ]
        ),
        piece([("X", "ProfilerStep#2", "user_annotation", 100.0, 100.0, None), ("X", "gemm", "kernel", 120.0, 9.0, 7)]),
        piece([("X", "op", "cpu_op", 150.0, 1.0, None), ("X", "late", "cpu_op", 250.0, 1.0, None)]),
    ]
    joined = add_iterations(pl.concat(pieces, rechunk=False))
    whole = add_iterations(pl.concat(pieces, rechunk=True))
    assert_frame_equal(joined, whole)
    assert joined["iteration"].to_list() == [1, 1, 2, 1, 2, None]
    assert joined["iteration"].chunk_lengths() == joined["ts"].chunk_lengths() == [2, 2, 2]
    no_steps = add_iterations(pl.concat([p.filter(pl.col("name") != "ProfilerStep#1") for p in pieces[2:]]))
    assert no_steps["iteration"].null_count() == no_steps.height == 2
