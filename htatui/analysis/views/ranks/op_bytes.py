"""A collective's message bytes from its host ops' input shapes, where the kernels carry no sizes.

Older NCCL traces have no `In msg nelems`/`dtype` on their kernels and gloo has no kernels; both
record the collective's tensors as `Input Dims` × `Input type` on the host ops around the launch
(`nccl:all_reduce` inside `record_param_comms` inside `c10d::allreduce_`). A call's bytes are then
the largest tensor input (elements × element size) of the collective ops around its launch: the
`c10d::` op lists the output buffer too, so an all_gather or reduce_scatter counts its full
buffer as the kernel args' max(in, out) does (docs/semantics-ranks.md, collectives).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import polars as pl

from htatui.analysis.core.comm_rules import cpu_collective_names
from htatui.analysis.core.rules import Rules
from htatui.trace.comm_inputs import CommInputsError, read_comm_inputs
from htatui.trace.kineto import GPU_ACTIVITY_CATS
from htatui.trace.model import TraceSet

OP_BYTES_SCHEMA: dict[str, pl.DataType] = {"rank": pl.Int32(), "index": pl.Int64(), "op_bytes": pl.Float64()}

INPUT_TYPE_BYTES = {
    "bool": 1,
    "unsigned char": 1,
    "signed char": 1,
    "char": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
    "half": 2,
    "bfloat16": 2,
    "short": 2,
    "short int": 2,
    "unsigned short": 2,
    "int": 4,
    "unsigned int": 4,
    "float": 4,
    "complex<half>": 4,
    "long": 8,
    "long int": 8,
    "long long": 8,
    "unsigned long": 8,
    "double": 8,
    "complex<float>": 8,
    "complex<double>": 16,
}
"""Bytes per element of the type names an op's `Input type` holds: the C++ names of PyTorch's
scalar types ('float', 'long int', 'c10::BFloat16' with its namespace dropped), any case."""


def element_bytes(type_name: str | None) -> int | None:
    """Bytes per element of an op input's type name ('float', 'c10::BFloat16', 'unsigned char');
    None for a non-tensor ('Scalar', 'TensorList', '') or an unknown type."""
    if not type_name:
        return None
    return INPUT_TYPE_BYTES.get(type_name.strip().lower().replace("c10::", ""))


def input_bytes(dims: Sequence[Sequence[int] | None], types: Sequence[str | None]) -> int | None:
    """The largest tensor input's size in bytes (elements × element size); None when no input is
    a tensor of known type and shape."""
    sizes = [
        math.prod(shape) * size
        for shape, type_name in zip(dims, types, strict=False)
        if shape is not None and (size := element_bytes(type_name)) is not None
    ]
    return max(sizes) if sizes else None


def op_bytes(traces: TraceSet, ranks: Sequence[int], rules: Rules) -> pl.DataFrame:
    """rank, index, op_bytes of the collective host ops with usable inputs, read from the ranks'
    files (a file that cannot be read again gives none); the collectives by the rules in `rules`."""
    frames = []
    for rank in ranks:
        # The collectives by the communication rules, among the rank's host op names.
        host = traces.ranks[rank].events.filter(pl.col("cat").is_in(["cpu_op", "user_annotation"]))
        names = cpu_collective_names(host["name"].unique(), rules).to_list()
        try:
            inputs = read_comm_inputs(traces.ranks[rank].path, names)
        except CommInputsError:
            continue
        sizes = [
            input_bytes(dims, types)
            for dims, types in zip(inputs["input_dims"].to_list(), inputs["input_types"].to_list(), strict=True)
        ]
        frames.append(
            pl.DataFrame(
                {"rank": [rank] * inputs.height, "index": inputs["index"], "op_bytes": sizes}, schema=OP_BYTES_SCHEMA
            ).drop_nulls("op_bytes")
        )
    return pl.concat(frames, how="vertical") if frames else pl.DataFrame(schema=OP_BYTES_SCHEMA)


def launched_under(events: pl.DataFrame, kernels: pl.DataFrame, ops: pl.DataFrame) -> pl.DataFrame:
    """rank, correlation, op_bytes: for each kernel (rank, correlation), the largest op_bytes of
    the ops of `ops` (rank, index, op_bytes) around the host call that launched it, on its thread."""
    host = events.filter(~pl.col("cat").is_in(GPU_ACTIVITY_CATS) & (pl.col("ph") == "X"))
    launches = host.join(kernels.select("rank", "correlation").unique(), on=["rank", "correlation"]).select(
        "rank", "correlation", "pid", "tid", l_ts="ts", l_end="end"
    )
    around = host.join(ops, on=["rank", "index"]).select("rank", "pid", "tid", "ts", "end", "op_bytes")
    return (
        launches.join(around, on=["rank", "pid", "tid"])
        .filter((pl.col("ts") <= pl.col("l_ts")) & (pl.col("end") >= pl.col("l_end")))
        .group_by("rank", "correlation")
        .agg(pl.col("op_bytes").max())
    )
