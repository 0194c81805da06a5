"""Pooling and ops that only move data (htatui's own; TraceLens models max pooling alike).

Max pooling, forward (`max_pool2d_with_indices(self, kernel_size, stride, padding, dilation,
ceil_mode)`): |out| = N·C·∏ out spatial, the output size as a convolution's (rounded up with
ceil_mode); FLOPs = |out|·∏kernel (one comparison per window element); bytes = |x|·size + |out|·size
+ |out|·8 (the int64 indices). Backward (`max_pool2d_with_indices_backward(grad_output, self,
kernel_size, stride, padding, dilation, ceil_mode, indices)`): FLOPs = |out| (one add per
gathered gradient); bytes = |out|·size + |out|·8 + |x|·size (grad_input written).
Fills (`fill_`, `zero_`): FLOPs 0; bytes = |x|·size written.
`index_select(self, dim, index)`: a gather of |index| slices: FLOPs 0; bytes = 2·|out|·size +
|index|·index size. `upsample_nearest1d/2d/3d(self, output_size, …)`: FLOPs |out|, bytes (|x| + |out|)·size.
`where(condition, self, other)`: FLOPs |out|; bytes = |cond| + |x|·a + |y|·b +
|out|·max(a, b). `masked_fill_(self, mask, value)`: FLOPs 0; bytes = 2·|x|·size + |mask|.
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall, elements
from htatui.analysis.perf.dtypes import element_bytes

POOL = frozenset(("aten::max_pool2d_with_indices", "aten::max_pool2d"))
POOL_BACKWARD = frozenset(("aten::max_pool2d_with_indices_backward",))
FILLS = frozenset(("aten::fill_", "aten::zero_"))
UPSAMPLE = frozenset(f"aten::upsample_nearest{n}d" for n in (1, 2, 3))


def _pooled(call: OpCall, x_at: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]] | None:
    """(x, out shape, kernel) of a 2-D max pooling call whose arguments start at `x_at`."""
    x = call.shape(x_at)
    kernel = call.ints(x_at + 1)
    if x is None or len(x) not in (3, 4) or not kernel:
        return None
    kernel = kernel * 2 if len(kernel) == 1 else kernel
    stride = call.ints(x_at + 2) or kernel
    stride = stride * 2 if len(stride) == 1 else stride
    padding = call.ints(x_at + 3) or (0,)
    padding = padding * 2 if len(padding) == 1 else padding
    dilation = call.ints(x_at + 4) or (1,)
    dilation = dilation * 2 if len(dilation) == 1 else dilation
    ceil = call.flag(x_at + 5)
    if not all(len(v) == 2 for v in (kernel, stride, padding, dilation)) or min(stride) <= 0:
        return None
    spatial = []
    for size, k, s, p, d in zip(x[-2:], kernel, stride, padding, dilation, strict=True):
        span = size + 2 * p - d * (k - 1) - 1
        out = (span + (s - 1 if ceil else 0)) // s + 1
        if ceil and (out - 1) * s >= size + p:
            out -= 1  # the last window must start inside the input (PyTorch's rule)
        spatial.append(max(out, 0))
    return x, (*x[:-2], *spatial), kernel


def max_pool(call: OpCall) -> Estimate | None:
    pooled = _pooled(call, 0)
    size = element_bytes(call.type(0))
    if pooled is None:
        return None
    x, out, kernel = pooled
    n_out = math.prod(out)
    indices = 8 if call.name.endswith("_with_indices") else 0
    moved = None if size is None else float(math.prod(x) * size + n_out * (size + indices))
    return Estimate(float(n_out * math.prod(kernel)), moved, "pool.max", "reduce", call.type(0))


def max_pool_backward(call: OpCall) -> Estimate | None:
    pooled = _pooled(call, 1)
    size = element_bytes(call.type(0))
    if pooled is None:
        return None
    x, out, _ = pooled
    n_out = math.prod(out)
    moved = None if size is None else float(n_out * (size + 8) + math.prod(x) * size)
    return Estimate(float(n_out), moved, "pool.max_bwd", "reduce", call.type(0))


def fill(call: OpCall) -> Estimate | None:
    size = element_bytes(call.type(0))
    if not call.dims or size is None:
        return None
    return Estimate(0.0, float(elements(call.shape(0)) * size), "fill", "elementwise", call.type(0))


def index_select(call: OpCall) -> Estimate | None:
    """aten::index_select(self, dim, index)."""
    x, index, dim = call.shape(0), call.shape(2), call.ints(1)
    size, index_size = element_bytes(call.type(0)), element_bytes(call.type(2))
    if x is None or not dim or len(dim) != 1 or size is None or index_size is None:
        return None
    axis = dim[0] % len(x)
    rows = elements(index)
    out = math.prod(x) // x[axis] * rows if x[axis] else 0
    return Estimate(0.0, float(2 * out * size + rows * index_size), "gather", "other", call.type(0))


def where(call: OpCall) -> Estimate | None:
    """aten::where(condition, self, other) with broadcasting."""
    from htatui.analysis.perf.gemm import broadcast

    cond, x, y = call.shape(0) or (), call.shape(1) or (), call.shape(2) or ()
    out = broadcast(cond, x)
    out = broadcast(out, y) if out is not None else None
    a, b = element_bytes(call.type(1)), element_bytes(call.type(2))
    if out is None or a is None:
        return None
    b = b or a
    n = elements(out)
    moved = float(elements(cond) + elements(x) * a + elements(y) * b + n * max(a, b))
    return Estimate(float(n), moved, "where", "elementwise", call.type(1))


def masked_fill(call: OpCall) -> Estimate | None:
    """aten::masked_fill_ / masked_fill(self, mask, value)."""
    x, mask = call.shape(0), call.shape(1)
    size = element_bytes(call.type(0))
    if x is None or size is None:
        return None
    return Estimate(0.0, float(2 * math.prod(x) * size + elements(mask)), "masked_fill", "elementwise", call.type(0))


def upsample_nearest(call: OpCall) -> Estimate | None:
    """aten::upsample_nearest1d/2d/3d(self, output_size, scales…): one copy per output element
    (TraceLens counts it as one FLOP each); bytes = (|x| + |out|)·size."""
    x, size_out = call.shape(0), call.ints(1)
    size = element_bytes(call.type(0))
    if x is None or not size_out or len(size_out) > len(x) - 2 or size is None:
        return None
    out = math.prod(x[: len(x) - len(size_out)]) * math.prod(size_out)
    return Estimate(float(out), float((math.prod(x) + out) * size), "upsample.nearest", "elementwise", call.type(0))
