"""Foreach ops (`aten::_foreach_<op>(_)`, the optimizers' multi-tensor kernels; htatui's own).

Over the tensor lists of the call, with N = Σ |t| over the first list's tensors and L the number
of tensor-list arguments: FLOPs = k·N, k the op's operations per element (add, sub, mul, div,
neg, sqrt, reciprocal, exp, abs, copy 1, with a scalar `alpha` on add/sub 2; addcmul and addcdiv
3: x + v·a·b; lerp 3: a + w·(b − a)); bytes = N·s·(L + 1): each list read, one written (in
place, the first). Needs the trace to record each tensor's shape (a list of lists in `Input
Dims`) and element type (a list in `Input type`); PyTorch 2.11 records a TensorList argument
with neither (`[]`, "TensorList"), so such a call has no figure.
"""

from __future__ import annotations

import re

from htatui.analysis.perf.call import Estimate, OpCall, elements
from htatui.analysis.perf.dtypes import element_bytes

_NAME = re.compile(r"^aten::_foreach_([a-z]+)_?$")
_OPS_PER_ELEMENT = {
    "add": 1,
    "sub": 1,
    "mul": 1,
    "div": 1,
    "neg": 1,
    "sqrt": 1,
    "reciprocal": 1,
    "exp": 1,
    "abs": 1,
    "copy": 0,
    "zero": 0,
    "addcmul": 3,
    "addcdiv": 3,
    "lerp": 3,
    "maximum": 1,
    "minimum": 1,
    "pow": 1,
}


def op_of(name: str) -> str | None:
    found = _NAME.match(name)
    return found.group(1) if found and found.group(1) in _OPS_PER_ELEMENT else None


def estimate(call: OpCall) -> Estimate | None:
    op = op_of(call.name)
    lists = [i for i in range(len(call.dims)) if call.tensor_list(i)]
    if op is None or not lists:
        return None
    first = call.tensor_list(lists[0]) or ()
    types = call.list_types[lists[0]] if lists[0] < len(call.list_types) else None
    n = sum(elements(shape) for shape in first)
    per = _OPS_PER_ELEMENT[op] + (
        1 if op in ("add", "sub") and call.text(len(call.dims) - 1) not in ("", "1", "1.") else 0
    )
    sizes = [element_bytes(t) for t in types or ()]
    moved = None
    if types and len(sizes) == len(first) and all(s is not None for s in sizes):
        written = sum(elements(shape) * (s or 0) for shape, s in zip(first, sizes, strict=True))
        moved = float(written * (len(lists) + 1))
    return Estimate(float(per * n), moved, "foreach", "elementwise", types[0] if types else None)
