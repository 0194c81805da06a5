"""Sites at the peak of the real H100 MLP snapshot, against an independent replay (skipped when absent).

The figures were derived outside htatui by replaying `device_traces[0]` in plain Python: an `alloc`
adds its size under the first `.py` frame outside site-packages/torch/the standard library, a
`free_completed` removes it; the state with the most live bytes is the peak (3,223,519,448 bytes in
58 blocks, as ../shared/oracles/h100_mlp_memory_snapshot.md says). The 3 blocks allocated before
recording (68,157,440 bytes) come on top, and 6 blocks (403,046,440 bytes) have no user frame.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from htatui.analysis.memory import usage as memory
from htatui.trace.memory_inputs import BEFORE_RECORDING_SITE, read_memory

SNAPSHOT = (
    Path(__file__).resolve().parents[2].parent / "shared" / "memory" / "h100_mlp_memory_snapshot" / "snapshot.pickle"
)
LOOP = "w_mlp_memory_snapshot (/tmp/gen/make_real_traces.py:{})"
REPLAYED_PYTHON_SITES = {
    LOOP.format(91): (1209139320, 18),
    LOOP.format(88): (1074069520, 24),
    LOOP.format(83): (403046440, 6),
    LOOP.format(87): (134217728, 4),
}
REPLAYED_CPP_ONLY = (403046440, 6)
PREEXISTING = (68157440, 3)


def test_sites_at_the_peak_match_an_independent_replay() -> None:
    if not SNAPSHOT.exists():
        pytest.skip(f"{SNAPSHOT} not found (clone with ../shared beside the checkout)")
    sites = memory.analyse(read_memory(SNAPSHOT)).sites_at_peak("cuda:0")
    rows = {row["site"]: (row["bytes"], row["count"]) for row in sites.iter_rows(named=True)}
    for site, figures in REPLAYED_PYTHON_SITES.items():
        assert rows.pop(site) == figures
    assert rows.pop(BEFORE_RECORDING_SITE) == PREEXISTING
    # What is left came from autograd's backward thread: C++ sites only, same total as the replay.
    assert rows and all("::" in site for site in rows)
    assert (sum(b for b, _ in rows.values()), sum(c for _, c in rows.values())) == REPLAYED_CPP_ONLY
    assert sites["share_pct"].sum() == pytest.approx(100.0)
    top = sites.row(0, named=True)
    assert top["site"] == LOOP.format(91)
    assert top["share_pct"] == pytest.approx(1209139320 * 100 / 3291676888)
    assert sites.filter(pl.col("bytes") <= 0).height == 0
