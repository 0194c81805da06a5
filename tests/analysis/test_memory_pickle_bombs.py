"""Snapshot pickles small in bytes but huge in structure (issue 22): shared references that
unfold to 2**60 leaves, a list of 20,000 references to a list of 20,000 entries, a list that
contains itself. Each is refused in one line naming the file, quickly, without the memory a
walk over the unfolded tree would take."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from memory_util import snapshot_a

from htatui.trace.memory_inputs import MAX_SNAPSHOT_DEPTH, shape_problem

REPO = Path(__file__).resolve().parents[2]


def _doubling(levels: int) -> list[Any]:
    """x = [x, x], `levels` times: 2**levels leaves from a few bytes per level."""
    x: Any = "x"
    for _ in range(levels):
        x = [x, x]
    doubled: list[Any] = x
    return doubled


def _bombs() -> dict[str, Any]:
    entry = {"size": 512, "state": "active_allocated", "address": 1, "frames": []}
    looped: list[Any] = []
    looped.append(looped)
    return {
        "doubling": {"segments": [{"blocks": [], "segment_type": _doubling(60)}]},
        "square": {"segments": [{"blocks": [[entry] * 20000] * 20000}]},
        "loop": {"segments": [{"blocks": [], "segment_type": looped}]},
    }


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("doubling", "the pickle unfolds to more than 50,000,000 objects (shared references)"),
        ("square", "the pickle unfolds to more than 50,000,000 objects (shared references)"),
        ("loop", "the pickle holds a container that contains itself"),
    ],
)
def test_a_pickle_bomb_is_one_line_and_exit_2(tmp_path: Path, case: str, why: str) -> None:
    path = tmp_path / f"{case}.pickle"
    path.write_bytes(pickle.dumps(_bombs()[case], protocol=4))
    assert path.stat().st_size < 100_000
    run = subprocess.run(
        [sys.executable, "-m", "htatui", "memory", str(path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert (run.returncode, run.stdout) == (2, "")
    assert run.stderr.strip() == f"htatui: {path}: refused: {why}"


def test_the_shape_check_counts_shared_references_each_time() -> None:
    # x = [x, x] n times unfolds to 2**(n+1) - 1 objects: 33,554,431 for n=24 (under the cap of
    # 50,000,000), 67,108,863 for n=25 (over it), though either holds only n + 1 distinct objects.
    assert shape_problem(_doubling(24)) is None
    assert shape_problem(_doubling(25)) == "the pickle unfolds to more than 50,000,000 objects (shared references)"


def test_nesting_deeper_than_the_cap_is_refused_and_a_real_layout_is_not() -> None:
    nested: Any = []
    for _ in range(MAX_SNAPSHOT_DEPTH):
        nested = [nested]
    assert shape_problem(nested) == f"the pickle nests containers more than {MAX_SNAPSHOT_DEPTH} deep"
    assert shape_problem(snapshot_a()) is None
