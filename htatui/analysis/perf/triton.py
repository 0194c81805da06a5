"""Inductor's Triton kernels, from the launcher op's own metadata (htatui's own; TraceLens models
them alike from the same fields).

With `record_shapes`, PyTorch records each Triton launch as a `cpu_op` named after the kernel
(`triton_poi_fused_add_mul_0`, kind poi pointwise, red/per reduction, tem template, for foreach)
whose `Input Dims`/`Input type` are the kernel's tensor arguments and whose `Concrete Inputs` end
with the loop sizes (xnumel, then rnumel for a reduction). Bytes = Σ |t|·size over the tensor
arguments (each read or written once: a lower bound, as an in-place buffer is read and written);
FLOPs = xnumel·rnumel·(the fused ops named that compute, one operation each per element;
views, copies and casts compute nothing). A kernel named without its ops (`triton_0`, before
PyTorch 2.6's unique names) gets bytes and no FLOPs.
"""

from __future__ import annotations

import re

from htatui.analysis.perf.call import Estimate, OpCall, elements
from htatui.analysis.perf.dtypes import element_bytes
from htatui.trace.plausible import cut

_KIND = re.compile(r"^triton_(poi|red|per|tem|for|spl)_")
_CATEGORY = {
    "poi": "elementwise",
    "red": "reduce",
    "per": "reduce",
    "tem": "GEMM",
    "for": "elementwise",
    "spl": "reduce",
}

_NO_MATH = frozenset(
    "fused view unsafe view to copy clone cat transpose permute expand squeeze unsqueeze slice select "
    "stack split embedding arange index gather scatter constant pad full zeros ones new empty t "
    "reshape contiguous alias detach as strided lift fresh fill zero copy".split()
)
"""Words of a fused name that move or make data without arithmetic."""


def category_of(name: str) -> str | None:
    """GEMM, elementwise or reduce for an inductor Triton kernel's name; None for any other name."""
    found = _KIND.match(cut(name))
    return _CATEGORY[found.group(1)] if found else None


def fused_ops(name: str) -> int:
    """How many ops of the kernel's name compute (`triton_poi_fused_add_mul_silu_0` → 3; the
    words of a multi-word op such as native_layer_norm count once per word, as named)."""
    words = _KIND.sub("", cut(name)).split("_")
    return sum(1 for word in words if word and not word.isdigit() and word not in _NO_MATH)


def estimate(call: OpCall) -> Estimate | None:
    kind = _KIND.match(cut(call.name))
    if kind is None or kind.group(1) == "tem":
        return None  # a template GEMM's shapes are its blocks' pointers: no M, N, K to read
    moved = 0
    tensors = 0
    for i in range(len(call.dims)):
        shape, size = call.shape(i), element_bytes(call.type(i))
        if shape is not None and size is not None and call.type(i) != "Scalar":
            moved += elements(shape) * size
            tensors += 1
    if tensors == 0:
        return None
    sizes = [v for v in (call.ints(i) for i in range(len(call.concrete))) if v is not None and len(v) == 1]
    loops = [v[0] for v in sizes[-2:]] if kind.group(1) in ("red", "per") else [v[0] for v in sizes[-1:]]
    if not loops or any(n < 0 for n in loops):
        return None
    points = 1
    for n in loops:
        points *= n
    return Estimate(
        float(points * fused_ops(call.name)),
        float(moved),
        f"triton.{kind.group(1)}",
        _CATEGORY[kind.group(1)],
        call.type(0),
    )
