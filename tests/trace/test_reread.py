"""What is read again from a trace file is kept by one bounded, thread-safe keeper: once per file
version and read, the oldest going first past its count or bytes, one read for threads asking at once."""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from htatui.sources import SourcePath
from htatui.trace import comm_inputs, counter_args, op_args
from htatui.trace.reread import REREAD, Rereader


def _counted(reads: list[str]) -> Callable[[SourcePath], pl.DataFrame]:
    def read(path: SourcePath) -> pl.DataFrame:
        reads.append(str(path))
        return pl.DataFrame({"n": [len(reads)]})

    return read


def test_a_read_is_kept_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text("{}")
    keeper, reads = Rereader(), list[str]()
    read = _counted(reads)
    first = keeper.read(path, "shapes", read)
    assert keeper.read(path, "shapes", read) is first
    assert len(reads) == 1
    keeper.read(path, "counters", read)
    assert len(reads) == 2  # another read of the same file
    os.utime(path, ns=(1, 1))  # the file changed: read again
    assert keeper.read(path, "shapes", read)["n"].to_list() == [3]


def test_the_oldest_reads_go_past_the_count_or_the_bytes(tmp_path: Path) -> None:
    paths = []
    for n in range(3):
        paths.append(tmp_path / f"rank-{n}.json")
        paths[-1].write_text("{}")
    keeper, reads = Rereader(max_entries=2), list[str]()
    read = _counted(reads)
    for path in paths:
        keeper.read(path, "x", read)
    keeper.read(paths[2], "x", read)
    keeper.read(paths[1], "x", read)
    assert len(reads) == 3  # the two newest are kept
    keeper.read(paths[0], "x", read)
    assert len(reads) == 4  # the oldest was dropped
    big = Rereader(max_bytes=1000)
    frame = pl.DataFrame({"x": list(range(200))})  # 1,600 bytes

    def read_big(_path: SourcePath) -> pl.DataFrame:
        reads.append("big")
        return frame

    big.read(paths[0], "x", read_big)
    big.read(paths[1], "x", read_big)
    big.read(paths[0], "x", read_big)
    assert reads[-3:] == ["big", "big", "big"]  # one frame over the bytes: only the newest stays


def test_threads_asking_at_once_wait_for_one_read(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text("{}")
    keeper, reads = Rereader(), list[str]()

    def slow(_path: SourcePath) -> pl.DataFrame:
        reads.append("read")
        time.sleep(0.2)
        return pl.DataFrame({"x": [1]})

    got: list[pl.DataFrame] = []
    threads = [threading.Thread(target=lambda: got.append(keeper.read(path, "x", slow))) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert reads == ["read"] and len(got) == 6 and all(frame is got[0] for frame in got)


def test_a_failed_read_is_not_kept_and_is_tried_again(tmp_path: Path) -> None:
    path = tmp_path / "rank-0.json"
    path.write_text("{}")
    keeper, calls = Rereader(), list[int]()

    def flaky(_path: SourcePath) -> pl.DataFrame:
        calls.append(1)
        if len(calls) == 1:
            raise ValueError("truncated")
        return pl.DataFrame({"x": [1]})

    with pytest.raises(ValueError):
        keeper.read(path, "x", flaky)
    assert keeper.read(path, "x", flaky)["x"].to_list() == [1]


@pytest.mark.parametrize(
    ("read", "error"),
    [
        (op_args.read_call_args, op_args.OpArgsError),
        (counter_args.read_counter_args, counter_args.CounterArgsError),
        (functools.partial(comm_inputs.read_comm_inputs, names=("c10d::allreduce_",)), comm_inputs.CommInputsError),
    ],
)
def test_the_three_readers_share_the_keeper_and_name_a_file_that_is_gone(
    tmp_path: Path, read: object, error: type[Exception]
) -> None:
    assert callable(read)
    path = tmp_path / "rank-0.json"
    path.write_text('{"traceEvents": []}')
    REREAD.clear()
    first = read(path)
    assert read(path) is first
    path.unlink()
    with pytest.raises(error, match="rank-0.json: cannot read it again"):
        read(path)


def test_one_pass_reads_the_comm_inputs_and_the_call_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kineto_util import cpu_op, write_trace

    def shaped(name: str, ts: float, args: dict[str, object]) -> dict[str, object]:
        return {**cpu_op(name, ts, 10.0), "args": args}

    path = write_trace(
        tmp_path / "rank-0.json",
        [
            shaped("nccl:all_reduce", 0.0, {"Input Dims": [[6144]], "Input type": ["float"]}),
            shaped("aten::mm", 20.0, {"Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"]}),
            shaped("aten::addmm", 40.0, {"Input Dims": [[32], [64, 128], [128, 32]], "flops": 524288}),
        ],
    )
    passes: list[str] = []

    def counted(real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def read(*args: Any) -> Any:
            passes.append(name)
            return real(*args)

        return read

    for module in (comm_inputs, op_args):
        monkeypatch.setattr(module, "read_raw_events", counted(module.read_raw_events, module.__name__))
    REREAD.clear()
    alone = op_args.read_call_args(path)
    REREAD.clear()
    passes.clear()
    comm = comm_inputs.read_comm_inputs(path, ["nccl:all_reduce"])
    calls = op_args.read_call_args(path)
    assert passes == ["htatui.trace.comm_inputs"]  # the call arguments came with the comm inputs
    assert comm.rows() == [(0, [[6144]], ["float"])]
    assert calls.equals(alone) and calls["index"].to_list() == [0, 1, 2]
    assert calls["flops"].to_list() == [None, None, 524288.0]
    comm_inputs.read_comm_inputs(path, ["nccl:all_reduce"])
    assert len(passes) == 1
