"""Convolutions, forward and backward (TraceLens CONV, after torch/utils/flop_counter.py).

Forward: FLOPs = 2·|out|·(C_in/groups)·∏kernel (+ |out| with a bias), where |out| is the output's
element count (for a transposed convolution, the input's takes its place); bytes = (|x| + |w| +
|out| + C_out if bias)·element size. Backward: grad_input and grad_weight each cost the forward's
multiply-adds (2·|out|·C_in/groups·∏kernel), grad_bias |out|; bytes: each gradient reads the two
other tensors and writes its own (|out| + |w| + |x| per gradient), grad_bias reads |out| and
writes C_out. `output_mask` says which gradients the call computes.
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall, Shape
from htatui.analysis.perf.dtypes import element_bytes

CATEGORY = "conv"

# Where each op keeps (input, weight, bias, stride, padding, dilation, transposed, output_padding,
# groups); None: the op has no such argument (its default holds).
LAYOUT: dict[str, tuple[int, int, int | None, int, int, int, int | None, int | None, int]] = {
    "aten::convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::_convolution": (0, 1, 2, 3, 4, 5, 6, 7, 8),
    "aten::conv1d": (0, 1, 2, 3, 4, 5, None, None, 6),
    "aten::conv2d": (0, 1, 2, 3, 4, 5, None, None, 6),
    "aten::conv3d": (0, 1, 2, 3, 4, 5, None, None, 6),
    # cudnn_convolution(self, weight, padding, stride, dilation, groups, benchmark, deterministic, allow_tf32)
    "aten::cudnn_convolution": (0, 1, None, 3, 2, 4, None, None, 5),
    "aten::miopen_convolution": (0, 1, 2, 4, 3, 5, None, None, 6),
}


def out_dim(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def transposed_out_dim(size: int, kernel: int, stride: int, padding: int, dilation: int, output_padding: int) -> int:
    return (size - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1


def output_shape(
    x: Shape, w: Shape, stride: Shape, padding: Shape, dilation: Shape, transposed: bool, output_padding: Shape
) -> Shape:
    spatial = []
    for i, size in enumerate(x[2:]):
        if transposed:
            spatial.append(transposed_out_dim(size, w[2 + i], stride[i], padding[i], dilation[i], output_padding[i]))
        else:
            spatial.append(out_dim(size, w[2 + i], stride[i], padding[i], dilation[i]))
    return (x[0], w[1] if transposed else w[0], *spatial)


def forward_flops(x: Shape, w: Shape, out: Shape, bias: bool, transposed: bool = False) -> float:
    per_element = 2 * math.prod(w[1:])
    conv = math.prod(x if transposed else out) * per_element
    return float(conv + (math.prod(out) if bias else 0))


def forward_bytes(x: Shape, w: Shape, out: Shape, bias: bool, size: int) -> float:
    return float((math.prod(x) + math.prod(w) + math.prod(out) + (out[1] if bias else 0)) * size)


def _per_dim(values: tuple[int, ...] | None, ndim: int, default: int) -> Shape:
    if not values:
        return (default,) * ndim
    return values * ndim if len(values) == 1 else values


def forward(call: OpCall) -> Estimate | None:
    layout = LAYOUT.get(call.name)
    x = call.shape(0)
    w = call.shape(1)
    if layout is None or not x or not w or len(x) < 3 or len(w) != len(x):
        return None
    _, _, bias_at, stride_at, padding_at, dilation_at, transposed_at, output_padding_at, _ = layout
    if len(call.concrete) <= max(stride_at, padding_at, dilation_at):
        return None  # no recorded stride/padding (older traces): the output size is unknown
    ndim = len(x) - 2
    stride = _per_dim(call.ints(stride_at), ndim, 1)
    padding = _per_dim(call.ints(padding_at), ndim, 0)
    dilation = _per_dim(call.ints(dilation_at), ndim, 1)
    if len(stride) != ndim or len(padding) != ndim or len(dilation) != ndim:
        return None  # e.g. padding="same" on conv2d: no numbers to use
    transposed = transposed_at is not None and call.flag(transposed_at)
    output_padding = _per_dim(call.ints(output_padding_at) if output_padding_at is not None else None, ndim, 0)
    bias = bias_at is not None and call.shape(bias_at) is not None
    out = output_shape(x, w, stride, padding, dilation, transposed, output_padding)
    size = element_bytes(call.type(0))
    flops = forward_flops(x, w, out, bias, transposed)
    moved = None if size is None else forward_bytes(x, w, out, bias, size)
    return Estimate(flops, moved, "conv.fwd", CATEGORY, call.type(0))


def backward(call: OpCall) -> Estimate | None:
    """aten::convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask)."""
    grad_out, x, w = call.shape(0), call.shape(1), call.shape(2)
    if not grad_out or not x or not w:
        return None
    if len(call.concrete) <= 10:
        return None  # no recorded output_mask or stride (older traces)
    mask = call.bools(10) or (True, True, True)
    if len(mask) != 3:
        return None
    transposed = call.flag(7)
    multiply_adds = 2 * math.prod(w) * x[0] * math.prod((x if transposed else grad_out)[2:])
    flops = multiply_adds * (int(mask[0]) + int(mask[1])) + (math.prod(grad_out) if mask[2] else 0)
    size = element_bytes(call.type(1))
    moved = None
    if size is not None:
        each = math.prod(grad_out) + math.prod(w) + math.prod(x)
        bias_bytes = math.prod(grad_out) + grad_out[1] if mask[2] else 0
        moved = float((each * (int(mask[0]) + int(mask[1])) + bias_bytes) * size)
    return Estimate(float(flops), moved, "conv.bwd", CATEGORY, call.type(1))
