"""Reductions, softmax and embedding lookups.

Reductions (TraceLens Reduce): FLOPs = |x| (one operation per input element); bytes = |x|·in +
|out|·out, where |out| follows the recorded `dim` and `keepdim` (all dimensions when none is
given; cumulative ops keep |x|).
Softmax and log-softmax (TraceLens Softmax: exp, sum and divide per element): forward FLOPs =
3·|x|, bytes = 2·|x|·size (read x, write y); backward (htatui's own: the backward reads the
output and its gradient and writes one tensor) FLOPs = 3·|x|, bytes = 3·|x|·size.
Embedding (htatui's own; no TraceLens model): a gather of n = |indices| rows of D elements:
forward FLOPs = 0, bytes = n·D·size read + n·D·size written + n·index size; dense backward
FLOPs = n·D (one add per gathered element), bytes = n·D·size (grad read) + n·index size +
V·D·size (the weight gradient written, V rows).
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall
from htatui.analysis.perf.dtypes import element_bytes

CATEGORY = "reduce"

REDUCTIONS = frozenset(
    f"aten::{op}"
    for op in (
        "sum",
        "mean",
        "max",
        "min",
        "amax",
        "amin",
        "norm",
        "linalg_norm",
        "linalg_vector_norm",
        "std",
        "var",
        "logsumexp",
        "cumsum",
        "cumprod",
        "prod",
        "argmax",
        "argmin",
    )
)
SOFTMAX = frozenset(("aten::softmax", "aten::_softmax", "aten::log_softmax", "aten::_log_softmax"))
SOFTMAX_BACKWARD = frozenset(("aten::_softmax_backward_data", "aten::_log_softmax_backward_data"))
EMBEDDING = frozenset(("aten::embedding",))
EMBEDDING_BACKWARD = frozenset(("aten::embedding_dense_backward",))

# Where the `dim` and `keepdim` arguments sit, per reduction (schema order).
_DIM_AT: dict[str, tuple[int, int]] = {
    "aten::norm": (2, 3),
    "aten::linalg_norm": (2, 3),
    "aten::linalg_vector_norm": (2, 3),
    "aten::std": (1, 3),
    "aten::var": (1, 3),
}


def output_elements(shape: tuple[int, ...], dims: tuple[int, ...] | None, keepdim: bool) -> int:
    """Elements left after reducing `dims` (all when None or empty) of `shape`."""
    if not dims:
        return 1
    ndim = len(shape)
    reduced = {d % ndim for d in dims} if ndim else set()
    kept = [1 if i in reduced else size for i, size in enumerate(shape) if keepdim or i not in reduced]
    return math.prod(kept)


def reduction(call: OpCall) -> Estimate | None:
    x = call.shape(0)
    if x is None:
        return None
    n_in = math.prod(x)
    if call.name in ("aten::cumsum", "aten::cumprod"):
        n_out = n_in
    else:
        dim_at, keep_at = _DIM_AT.get(call.name, (1, 2))
        n_out = output_elements(x, call.ints(dim_at), call.flag(keep_at))
    size_in = element_bytes(call.type(0))
    moved = None if size_in is None else float(n_in * size_in + n_out * size_in)
    return Estimate(float(n_in), moved, "reduce", CATEGORY, call.type(0))


def softmax(call: OpCall) -> Estimate | None:
    """aten::softmax / _softmax / log_softmax / _log_softmax(self, dim, …)."""
    x = call.shape(0)
    if x is None:
        return None
    n = math.prod(x)
    size = element_bytes(call.type(0))
    moved = None if size is None else float(2 * n * size)
    return Estimate(float(3 * n), moved, "softmax.fwd", CATEGORY, call.type(0))


def softmax_backward(call: OpCall) -> Estimate | None:
    """aten::_softmax_backward_data / _log_softmax_backward_data(grad_output, output, dim, input_dtype)."""
    x = call.shape(0)
    if x is None:
        return None
    n = math.prod(x)
    size = element_bytes(call.type(0))
    moved = None if size is None else float(3 * n * size)
    return Estimate(float(3 * n), moved, "softmax.bwd", CATEGORY, call.type(0))


def embedding(call: OpCall) -> Estimate | None:
    """aten::embedding(weight [V, D], indices, padding_idx, scale_grad_by_freq, sparse)."""
    weight, indices = call.shape(0), call.shape(1)
    if weight is None or len(weight) != 2:
        return None
    n = math.prod(indices) if indices else 1
    size, index_size = element_bytes(call.type(0)), element_bytes(call.type(1))
    moved = None if size is None or index_size is None else float(2 * n * weight[1] * size + n * index_size)
    return Estimate(0.0, moved, "embedding.fwd", "other", call.type(0))


def embedding_backward(call: OpCall) -> Estimate | None:
    """aten::embedding_dense_backward(grad_output [..., D], indices, num_weights, padding_idx, scale_grad_by_freq)."""
    grad, indices, rows = call.shape(0), call.shape(1), call.ints(2)
    if grad is None or not rows or len(rows) != 1:
        return None
    width = grad[-1]
    n = math.prod(indices) if indices else 1
    size, index_size = element_bytes(call.type(0)), element_bytes(call.type(1))
    moved = None
    if size is not None and index_size is not None:
        moved = float(n * width * size + n * index_size + rows[0] * width * size)
    return Estimate(float(n * width), moved, "embedding.bwd", "other", call.type(0))
