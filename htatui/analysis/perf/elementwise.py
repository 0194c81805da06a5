"""Elementwise ops, unary and binary, in place or not, with broadcasting (TraceLens's
UnaryElementwise / BinaryElementwise).

Unary: FLOPs = |x| (one operation per element); bytes = |x|·in + |x|·out, where the output's
size is that of a recorded output tensor (argument 1, as in `copy_(self, src)`) else the input's.
Binary: FLOPs = |broadcast(x, y)|; bytes = |x|·a + |y|·b + |out|·o, a scalar operand counting
one element of its type; the output's size is a recorded third tensor's, else the larger of two
tensor inputs', else the first's. htatui counts an input's `expand`ed (stride-0) dimensions once:
a broadcast view is read once, not once per index (TraceLens counts the view's full size).
"""

from __future__ import annotations

from htatui.analysis.perf.call import Estimate, OpCall, elements, read_elements
from htatui.analysis.perf.dtypes import element_bytes
from htatui.analysis.perf.gemm import broadcast

CATEGORY = "elementwise"

UNARY = frozenset(
    f"aten::{op}"
    for op in (
        "copy",
        "copy_",
        "clamp_min",
        "clamp_min_",
        "clamp_max",
        "clamp_max_",
        "clamp",
        "clamp_",
        "sigmoid",
        "sigmoid_",
        "rsqrt",
        "silu",
        "silu_",
        "neg",
        "pow",
        "relu",
        "relu_",
        "gelu",
        "gelu_",
        "tanh",
        "tanh_",
        "exp",
        "exp_",
        "log",
        "sqrt",
        "abs",
        "reciprocal",
        "erf",
        "sin",
        "cos",
        "hardtanh",
        "hardtanh_",
        "leaky_relu",
        "leaky_relu_",
    )
)
"""TraceLens's unary list (copy, copy_, clamp_min(_), clamp_max(_), sigmoid, rsqrt, silu, neg,
pow) and the same kind of one-tensor ops."""

BINARY = frozenset(
    f"aten::{op}"
    for op in (
        "div",
        "div_",
        "mul",
        "mul_",
        "add",
        "add_",
        "sub",
        "sub_",
        "rsub",
        "maximum",
        "minimum",
        "sigmoid_backward",
        "threshold_backward",
        "gelu_backward",
        "silu_backward",
        "tanh_backward",
        "eq",
        "ne",
        "lt",
        "le",
        "gt",
        "ge",
    )
)
"""TraceLens's binary list (div, mul, add and their in-place forms, sigmoid_backward,
threshold_backward) and the same kind of two-operand ops."""


def unary(call: OpCall) -> Estimate | None:
    if not call.dims or element_bytes(call.type(0)) is None:
        return None
    x = call.shape(0) or ()  # a 0-dim tensor: one element
    size_in = element_bytes(call.type(0))
    size_out = element_bytes(call.type(1)) if call.shape(1) is not None else size_in
    n = elements(x)
    moved = None
    if size_in is not None and size_out is not None:
        moved = float(read_elements(x or None, call.stride(0)) * size_in + n * size_out)
    return Estimate(float(n), moved, "elementwise.unary", CATEGORY, call.type(0))


def binary(call: OpCall) -> Estimate | None:
    # A 0-dim tensor operand records no dims, like a Python number: both count one element.
    if len(call.dims) < 2 or element_bytes(call.type(0)) is None:
        return None
    x, y = call.shape(0) or (), call.shape(1) or ()
    out_shape = broadcast(x, y)
    if out_shape is None:
        return None
    n_out = elements(out_shape)
    size_x, size_y = element_bytes(call.type(0)), element_bytes(call.type(1))
    if call.shape(2) is not None:
        size_out = element_bytes(call.type(2))
    elif size_x is not None and size_y is not None and y:
        size_out = max(size_x, size_y)
    else:
        size_out = size_x
    moved = None
    if size_x is not None and size_y is not None and size_out is not None:
        read = read_elements(x or None, call.stride(0)) * size_x + read_elements(y or None, call.stride(1)) * size_y
        moved = float(read + n_out * size_out)
    return Estimate(float(n_out), moved, "elementwise.binary", CATEGORY, call.type(0))
