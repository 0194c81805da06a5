"""Matrix multiplications: mm, addmm, bmm, baddbmm, matmul, linear, _scaled_mm (TraceLens GEMM),
_grouped_mm (MoE experts), and vendor GEMMs with linear's arguments (aiter `gemm_a16w16`, vLLM
`rocm_unquantized_gemm`).

FLOPs = B·(2·M·N·K + M·N if a bias is added); bytes = B·(M·K·a + K·N·b + M·N·out + N·bias),
with a, b the inputs' element sizes; the output and the bias take the first input's size
(TraceLens: the output dtype is not recorded), except _scaled_mm (below).
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall, Shape
from htatui.analysis.perf.dtypes import SCALAR_TYPE_BYTES, element_bytes

CATEGORY = "GEMM"


def gemm_flops(m: int, n: int, k: int, batch: int = 1, bias: bool = False) -> float:
    return float(batch * (2 * m * n * k + (m * n if bias else 0)))


def gemm_bytes(m: int, n: int, k: int, a: int, b: int, out: int, batch: int = 1, bias: int = 0) -> float:
    """`bias`: the bias's element size when there is one (TraceLens reads a 1×N bias)."""
    return float(batch * (m * k * a + k * n * b + m * n * out + (n * bias if bias else 0)))


def _estimate(
    call: OpCall, model: str, mnk: tuple[int, int, int], batch: int, a_at: int, bias: bool
) -> Estimate | None:
    a, b = element_bytes(call.type(a_at)), element_bytes(call.type(a_at + 1))
    m, n, k = mnk
    flops = gemm_flops(m, n, k, batch, bias)
    moved = None if a is None or b is None else gemm_bytes(m, n, k, a, b, a, batch, a if bias else 0)
    return Estimate(flops, moved, model, CATEGORY, call.type(a_at))


def mm(call: OpCall) -> Estimate | None:
    """aten::mm(self [M,K], mat2 [K,N])."""
    x, w = call.shape(0), call.shape(1)
    if not x or not w or len(x) != 2 or len(w) != 2:
        return None
    return _estimate(call, "gemm.mm", (x[0], w[1], x[1]), 1, 0, False)


def addmm(call: OpCall) -> Estimate | None:
    """aten::addmm(bias, mat1 [M,K], mat2 [K,N], beta, alpha)."""
    x, w = call.shape(1), call.shape(2)
    if not x or not w or len(x) != 2 or len(w) != 2:
        return None
    return _estimate(call, "gemm.addmm", (x[0], w[1], x[1]), 1, 1, True)


def bmm(call: OpCall) -> Estimate | None:
    """aten::bmm(self [B,M,K], mat2 [B,K,N])."""
    x, w = call.shape(0), call.shape(1)
    if not x or not w or len(x) != 3 or len(w) != 3:
        return None
    return _estimate(call, "gemm.bmm", (x[1], w[2], x[2]), x[0], 0, False)


def baddbmm(call: OpCall) -> Estimate | None:
    """aten::baddbmm(bias, batch1 [B,M,K], batch2 [B,K,N], beta, alpha)."""
    x, w = call.shape(1), call.shape(2)
    if not x or not w or len(x) != 3 or len(w) != 3:
        return None
    return _estimate(call, "gemm.baddbmm", (x[1], w[2], x[2]), x[0], 1, True)


def linear(call: OpCall) -> Estimate | None:
    """aten::linear(input [..., K], weight [N, K], bias [N]?): M = the product of input's leading dims."""
    x, w = call.shape(0), call.shape(1)
    if not x or not w or len(w) != 2:
        return None
    m = math.prod(x[:-1]) if len(x) > 1 else 1
    return _estimate(call, "gemm.linear", (m, w[0], x[-1]), 1, 0, call.shape(2) is not None)


def matmul(call: OpCall) -> Estimate | None:
    """aten::matmul(a, b) with torch.matmul's rules: 1-D operands are a row/column vector,
    leading dims broadcast into the batch."""
    x, w = call.shape(0), call.shape(1)
    if not x or not w:
        return None
    xm: Shape = (1, *x) if len(x) == 1 else x
    wm: Shape = (*w, 1) if len(w) == 1 else w
    batch_shape = _broadcast(xm[:-2], wm[:-2])
    if batch_shape is None:
        return None
    return _estimate(call, "gemm.matmul", (xm[-2], wm[-1], xm[-1]), math.prod(batch_shape), 0, False)


def scaled_mm(call: OpCall) -> Estimate | None:
    """aten::_scaled_mm(self [M,K], mat2 [K,N], scale_a, scale_b, bias?, scale_result?, out_dtype?, …):
    the output's size is `out_dtype`'s when recorded, else 2 bytes for 1-byte (fp8) inputs and the
    input's size otherwise (TraceLens's assumption)."""
    x, w = call.shape(0), call.shape(1)
    if not x or not w or len(x) != 2 or len(w) != 2:
        return None
    a, b = element_bytes(call.type(0)), element_bytes(call.type(1))
    m, n, k = x[0], w[1], x[1]
    bias = call.shape(4) is not None
    flops = gemm_flops(m, n, k, 1, bias)
    if a is None or b is None:
        return Estimate(flops, None, "gemm.scaled_mm", CATEGORY, call.type(0))
    code = call.ints(6)
    out = SCALAR_TYPE_BYTES.get(code[0]) if code and len(code) == 1 else None
    out = out or (2 if a == 1 else a)
    bias_size = element_bytes(call.type(4)) or a if bias else 0
    return Estimate(flops, gemm_bytes(m, n, k, a, b, out, 1, bias_size), "gemm.scaled_mm", CATEGORY, call.type(0))


def grouped_mm(call: OpCall) -> Estimate | None:
    """aten::_grouped_mm(mat_a, mat_b, offs?, bias?, out_dtype?) (MoE experts): G groups over
    `offs`. a [M, K] × b [G, K, N] (the tokens split among the groups): 2·M·K·N, out [M, N];
    a [G, M, K] × b [G, K, N]: 2·G·M·N·K, out [G, M, N]; a [M, K] × b [K, N] split along K (the
    weights' gradient): 2·M·K·N, out [G, M, N]. Bytes = (|a| + |b| + |out|)·size."""
    a, b, offs = call.shape(0), call.shape(1), call.shape(2)
    size = element_bytes(call.type(0))
    if not a or not b:
        return None
    if len(a) == 2 and len(b) == 3 and a[1] == b[1]:
        flops, out = 2 * a[0] * a[1] * b[2], a[0] * b[2]
    elif len(a) == 3 and len(b) == 3 and a[0] == b[0] and a[2] == b[1]:
        flops, out = 2 * a[0] * a[1] * a[2] * b[2], a[0] * a[1] * b[2]
    elif len(a) == 2 and len(b) == 2 and a[1] == b[0] and offs:
        flops, out = 2 * a[0] * a[1] * b[1], offs[0] * a[0] * b[1]
    else:
        return None
    moved = None if size is None else float((math.prod(a) + math.prod(b) + out) * size)
    return Estimate(float(flops), moved, "gemm.grouped", CATEGORY, call.type(0))


def _broadcast(left: Shape, right: Shape) -> Shape | None:
    ndim = max(len(left), len(right))
    lpad, rpad = (1,) * (ndim - len(left)) + left, (1,) * (ndim - len(right)) + right
    out = []
    for p, q in zip(lpad, rpad, strict=True):
        if p != q and p != 1 and q != 1:
            return None
        out.append(max(p, q))
    return tuple(out)


broadcast = _broadcast
"""Two shapes broadcast as numpy and torch do (None when they do not)."""
