"""`export critical-path`: HTA's overlay (args.critical on the path's events, flow arrows between them).

The trace is the one of test_critical_path's launch-delay test: aten::add [0,20] launches k1 at 5;
k1 runs 30–80; cudaDeviceSynchronize [25,85] waits for it (Context Sync 30–85); then op [90,100].
Its path: add.start → launch.start →(launch delay 25) k1.start → k1.end →(sync) sync.end
→(dependency) op.start → op.end. (`overlay_critical_path_analysis` itself gave the same marks and
arrows as this export on the shared critical_path traces; HTA numbers its arrows in set order.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from kineto_util import Event, cpu_op, kernel, meeting_rank, runtime, traces_of

from htatui.analysis.core.scope import Scope
from htatui.analysis.export.critical_path import export_critical_path, overlay_file_name
from htatui.analysis.export.traces import ExportError, ExportExistsError
from htatui.analysis.views import critical_path as cp
from htatui.cli.main import main

CONTEXT_SYNC: Event = {
    "ph": "X",
    "cat": "cuda_sync",
    "name": "Context Sync",
    "pid": 0,
    "tid": 7,
    "ts": 30,
    "dur": 55,
    "args": {"device": 0, "stream": -1, "correlation": 2},
}
EVENTS: list[Event] = [
    cpu_op("aten::add", 0, 20),
    runtime("cudaLaunchKernel", 5, 5, 1),
    kernel("k1", 30, 50, corr=1),
    runtime("cudaDeviceSynchronize", 25, 60, 2),
    CONTEXT_SYNC,
    cpu_op("op", 90, 10),
]


def _flow(ph: str, flow_id: int, pid: int, tid: int, ts: int, weight: int, kind: str) -> dict[str, Any]:
    flow = {
        "ph": ph,
        "id": flow_id,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "cat": "critical_path",
        "name": "critical_path",
        "args": {"weight": weight, "critical": True, "type": f"critical_path_{kind}"},
    }
    return flow | ({"bp": "e"} if ph == "f" else {})


ARROWS = [
    # launch call's start → the kernel's start, the 25 µs launch delay
    _flow("s", 0, 100, 1, 5, 25, "kernel_launch_delay"),
    _flow("f", 0, 0, 7, 30, 25, "kernel_launch_delay"),
    # the kernel's end (less 1 µs: a device event, so the arrow lands inside it) → the sync call's end
    _flow("s", 1, 0, 7, 79, 0, "sync_dependency"),
    _flow("f", 1, 100, 1, 85, 0, "sync_dependency"),
    # the sync call's end → the next op's start
    _flow("s", 2, 100, 1, 85, 0, "dependency"),
    _flow("f", 2, 100, 1, 90, 0, "dependency"),
]


def _written(path: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = json.loads(path.read_text())["traceEvents"]
    return events


@pytest.mark.parametrize("hta_compat", [False, True])
def test_marks_the_path_and_draws_its_arrows(tmp_path: Path, hta_compat: bool) -> None:
    traces = traces_of(tmp_path, EVENTS)
    source = tmp_path / "rank-0.json"
    before, stamp = source.read_bytes(), os.stat(source).st_mtime_ns
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    options = cp.CriticalPathOptions(scope=Scope(hta_compat=hta_compat), rank=0)
    path, marked, arrows = export_critical_path(traces, options, out_dir / "cp.json")
    assert (path, marked, arrows) == (out_dir / "cp.json", 5, 3)
    written = _written(path)
    critical = [e["name"] for e in written if e.get("args", {}).get("critical") == 1 and e["ph"] == "X"]
    assert critical == ["aten::add", "cudaLaunchKernel", "k1", "cudaDeviceSynchronize", "op"]
    assert written[4] == CONTEXT_SYNC  # off the path: as it was
    assert written[2]["args"] == {**EVENTS[2]["args"], "critical": 1}  # the rest of an event's args kept
    assert written[len(EVENTS) :] == ARROWS
    assert source.read_bytes() == before and os.stat(source).st_mtime_ns == stamp


def test_only_critical_keeps_the_path_alone(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, EVENTS)
    options = cp.CriticalPathOptions(rank=0)
    path, _marked, _arrows = export_critical_path(traces, options, tmp_path / "out.json", only_critical=True)
    names = [e["name"] for e in _written(path) if e["ph"] == "X"]
    assert names == ["aten::add", "cudaLaunchKernel", "k1", "cudaDeviceSynchronize", "op"]


def test_refuses_an_existing_file_an_input_and_a_missing_window(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, EVENTS)
    out = tmp_path / "out.json"
    out.write_text("keep")
    with pytest.raises(ExportExistsError):
        export_critical_path(traces, cp.CriticalPathOptions(rank=0), out)
    assert out.read_text() == "keep"
    export_critical_path(traces, cp.CriticalPathOptions(rank=0), out, force=True)
    assert len(_written(out)) == len(EVENTS) + len(ARROWS)
    with pytest.raises(ExportError, match="input traces"):
        export_critical_path(traces, cp.CriticalPathOptions(rank=0), tmp_path / "rank-0.json", force=True)
    with pytest.raises(ExportError, match="no event's name contains 'nope'"):
        export_critical_path(traces, cp.CriticalPathOptions(rank=0, annotation="nope"), tmp_path / "x.json")
    with pytest.raises(ExportError, match="rank 3 is not loaded"):
        export_critical_path(traces, cp.CriticalPathOptions(rank=3), tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()
    assert overlay_file_name(tmp_path / "rank-0.json") == "overlaid_critical_path_rank-0.json"


def test_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "job").mkdir()
    traces_of(tmp_path / "job", EVENTS)
    out = tmp_path / "cp.json.gz"
    command = ["export", "critical-path", str(tmp_path / "job"), "--no-cache"]
    args = [*command, "--rank", "0", "-o", str(out)]
    assert main(args) == 0
    assert capsys.readouterr().out.strip() == str(out)
    assert main(args) == 2
    assert "already exists (pass --force to overwrite)" in capsys.readouterr().err
    assert main([*command, "--rank", "5", "-o", str(tmp_path / "y.json")]) == 2
    assert "rank 5 is not in the traces" in capsys.readouterr().err


def test_job_marks_the_jobs_path_where_it_runs_through_the_rank(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 38 #4: `--job` was read as `--jobs` (argparse's abbreviation) and failed.

    Two ranks meet at an all-reduce (tests/kineto_util.py's `meeting_rank`); rank 1
    arrives at 5000 µs, rank 0 at 100. The job's path is rank 1's `work` (index 0), the first
    all-reduce where they meet (2 on both ranks), then rank 0's second (4), the sync that waits
    for them (5: the step model charges a blocking call's end, which HTA's graph weighs 0) and
    its `after` (7): rank 0's own path would mark its `work` too."""
    (tmp_path / "job").mkdir()
    traces_of(tmp_path / "job", meeting_rank(100), meeting_rank(5000))
    command = ["export", "critical-path", str(tmp_path / "job"), "--no-cache", "--job"]
    for rank, marked in ((0, [2, 4, 5, 7]), (1, [0, 2])):
        out = tmp_path / f"job-{rank}.json"
        assert main([*command, "--rank", str(rank), "-o", str(out)]) == 0
        events = _written(out)
        assert [i for i, e in enumerate(events) if e.get("args", {}).get("critical") == 1] == marked
        assert not any(e.get("cat") == "critical_path" for e in events)  # no arrows across files
        assert f"marked {len(marked)} events of the job's path on rank {rank}" in capsys.readouterr().err
    own = tmp_path / "own-0.json"
    assert main([*command[:-1], "--rank", "0", "-o", str(own)]) == 0
    assert 0 in [i for i, e in enumerate(_written(own)) if e.get("args", {}).get("critical") == 1]
    with pytest.raises(SystemExit):
        main([*command[:-1], "--jo", "1", "--rank", "0", "-o", str(tmp_path / "x.json")])
    assert "unrecognized arguments: --jo" in capsys.readouterr().err


def test_no_parser_takes_an_abbreviated_flag() -> None:
    from htatui.cli.main import SUBCOMMANDS, _build_app_parser, _build_parser

    def parsers(parser: Any) -> list[Any]:
        found = [parser]
        for action in parser._actions:
            if isinstance(action.choices, dict):
                found += [p for child in action.choices.values() for p in parsers(child)]
        return found

    every = parsers(_build_parser(SUBCOMMANDS)) + [_build_app_parser()]
    assert len(every) > 10 and all(not parser.allow_abbrev for parser in every)
