"""Collectives' message bytes from the host ops' input shapes where kernels carry no message args
(older NCCL traces) or there are no kernels (gloo): hand-built jobs and the shared trace_filter job."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kineto_util import cpu_op, kernel, named, runtime, traces_of

from htatui.analysis.views import ranks
from htatui.analysis.views.ranks import RanksOptions
from htatui.analysis.views.ranks.op_bytes import element_bytes, input_bytes
from htatui.trace import TraceSet


def op(name: str, ts: float, dur: float, dims: list[list[int]], types: list[str]) -> dict[str, Any]:
    return {**cpu_op(name, ts, dur), "args": {"Input Dims": dims, "Input type": types}}


def test_element_sizes_and_the_largest_tensor_input() -> None:
    assert [element_bytes(t) for t in ("float", "c10::BFloat16", "long int", "unsigned char", "c10::Half")] == [
        4,
        2,
        8,
        1,
        2,
    ]
    assert [element_bytes(t) for t in ("Scalar", "TensorList", "", None, "c10::SomethingNew")] == [None] * 5
    # [4096] bf16 output and [1024] bf16 input: the output, 8192 B; Scalars and the list are no tensors.
    assert input_bytes([[4096], [1024], [], []], ["c10::BFloat16", "c10::BFloat16", "Scalar", "TensorList"]) == 8192
    assert input_bytes([[], []], ["TensorList", "Scalar"]) is None
    assert input_bytes([[2, 3]], ["float"]) == 24  # elements multiply
    assert input_bytes([[]], ["float"]) == 4  # a 0-d tensor holds one element


def _nccl_rank(rank: int) -> list[dict[str, Any]]:
    """An all_gather launched under c10d > record_param_comms > nccl: ops (no message args on the
    kernel), then an all_reduce whose kernel carries the args."""
    start = 100.0 * rank
    return [
        op("c10d::_allgather_base_", 0.0, 50.0, [[4096], [1024], []], ["c10::BFloat16", "c10::BFloat16", ""]),
        op("record_param_comms", 2.0, 40.0, [[1024], [], []], ["c10::BFloat16", "Scalar", "Scalar"]),
        op("nccl:_all_gather_base", 4.0, 30.0, [[1024]], ["c10::BFloat16"]),
        runtime("cudaLaunchKernel", 10.0, 5.0, 1),
        kernel("ncclKernel_AllGather_RING_LL_Sum_int8_t", 200.0 + start, 100.0, corr=1),
        op("nccl:all_reduce", 60.0, 30.0, [[6144]], ["float"]),
        runtime("cudaLaunchKernel", 65.0, 5.0, 2),
        kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            400.0 + start,
            100.0,
            corr=2,
            **named({"Collective name": "allreduce", "In msg nelems": 100, "Out msg nelems": 100, "dtype": "Float"}),
        ),
    ]


def test_kernels_without_args_take_the_bytes_of_the_ops_around_their_launch(tmp_path: Path) -> None:
    traces = traces_of(tmp_path, _nccl_rank(0), _nccl_rank(1))
    rows = {row["kind"]: row for row in ranks.collectives(traces, RanksOptions()).frame.to_dicts()}
    # all_gather: the largest input of the ops around the launch, c10d's [4096] bf16 output = 8192 B.
    assert rows["all_gather"]["msg_bytes"] == 8192.0
    assert rows["all_gather"]["total_bytes"] == 2 * 8192.0
    assert rows["all_gather"]["msg_bytes_from"] == "op input shapes"
    # 8192 B in 100 µs = 0.08192 GB/s; busbw × (2−1)/2.
    assert rows["all_gather"]["algbw_gbps"] == pytest.approx(0.08192)
    assert rows["all_gather"]["busbw_gbps"] == pytest.approx(0.04096)
    # all_reduce: the kernel's own args win (100 × 4 B), not the op's [6144] float.
    assert (rows["all_reduce"]["msg_bytes"], rows["all_reduce"]["msg_bytes_from"]) == (400.0, "message args")


def test_gloo_ops_take_their_own_input_shapes(tmp_path: Path) -> None:
    def gloo_rank(rank: int) -> list[dict[str, Any]]:
        return [
            op("gloo:all_reduce", 10.0 + rank, 20.0, [[6144]], ["float"]),
            op("gloo:broadcast", 40.0, 10.0, [[24]], ["long int"]),
            cpu_op("gloo:barrier", 60.0, 5.0),  # no shapes: no bytes
        ]

    traces = traces_of(tmp_path, gloo_rank(0), gloo_rank(1))
    rows = {row["kind"]: row for row in ranks.collectives(traces, RanksOptions()).frame.to_dicts()}
    assert (rows["all_reduce"]["msg_bytes"], rows["all_reduce"]["msg_bytes_from"]) == (6144 * 4.0, "op input shapes")
    assert rows["broadcast"]["msg_bytes"] == 24 * 8.0
    assert (rows["barrier"]["msg_bytes"], rows["barrier"]["msg_bytes_from"]) == (None, None)


def test_trace_filter_sizes_come_from_the_collective_ops(load_shared: Callable[[str], TraceSet]) -> None:
    """2 of 128 ranks, 2023: ncclKernel_SendRecv kernels without message args; each call's bytes
    are read off the `nccl:*` / `record_param_comms` / `c10d::*` ops around its launch."""
    result = ranks.analyse(load_shared("trace_filter"), RanksOptions())
    calls = result.calls.sort("rank", "seq")
    assert calls["bytes_derived"].all()
    assert calls["msg_bytes"].to_list() == [
        384 * 8,  # rank 0: record_param_comms [384] long (all_to_all)
        419_430_400 * 1,  # nccl:all_to_all [419430400] unsigned char
        19_618_307 * 4,  # nccl:all_reduce [19618307] float
        26_955_536 * 4,  # nccl:all_reduce [26955536] float
        1_073_741_824 * 1,  # c10d::_allgather_base_ output [1073741824] signed char (input [16777216])
        382_132_224 * 1,  # rank 1: c10d::alltoall_base_ output [382132224] unsigned char (input 339738624)
        2_846_720 * 4,  # record_param_comms [2846720] int
        19_618_307 * 4,
        26_258_430 * 4,  # nccl:all_reduce [26258430] float
        1_073_741_824 * 1,
    ]
    row = result.collectives.row(0, named=True)
    assert row["msg_bytes_from"] == "op input shapes" and row["total_bytes"] == sum(calls["msg_bytes"])
