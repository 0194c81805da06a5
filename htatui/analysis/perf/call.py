"""One operator call's recorded arguments, and what a formula makes of them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

Shape = tuple[int, ...]


@dataclass(frozen=True)
class OpCall:
    """The arguments `record_shapes=True` writes on a `cpu_op`: one entry per argument, in the
    op's schema order. A non-tensor argument has the shape `()` and an empty stride;
    `concrete` holds the text of scalar and list arguments ("" for tensors)."""

    name: str
    dims: tuple[Shape, ...]
    types: tuple[str, ...] = ()
    strides: tuple[Shape, ...] = ()
    concrete: tuple[str, ...] = ()
    tensor_lists: tuple[tuple[Shape, ...] | None, ...] = ()
    """Per argument, the shapes of a TensorList argument when the trace recorded them (a list of
    lists in `Input Dims`), else None."""
    list_types: tuple[tuple[str, ...] | None, ...] = ()
    """Per argument, the element types of a TensorList argument when recorded as a list."""

    def shape(self, i: int) -> Shape | None:
        """The i-th argument's shape, None when absent or not a tensor (an empty list)."""
        if i >= len(self.dims) or not self.dims[i]:
            return None
        return self.dims[i]

    def tensor_list(self, i: int) -> tuple[Shape, ...] | None:
        """The shapes of the i-th argument when it is a recorded tensor list."""
        return self.tensor_lists[i] if i < len(self.tensor_lists) else None

    def type(self, i: int) -> str | None:
        return self.types[i] if i < len(self.types) and self.types[i] else None

    def stride(self, i: int) -> Shape | None:
        return self.strides[i] if i < len(self.strides) and self.strides[i] else None

    def text(self, i: int) -> str:
        return self.concrete[i] if i < len(self.concrete) else ""

    def flag(self, i: int, default: bool = False) -> bool:
        """A bool argument ("True"/"False"; anything else: `default`)."""
        value = self.text(i).strip()
        return value == "True" if value in ("True", "False") else default

    def ints(self, i: int) -> tuple[int, ...] | None:
        """A list-of-ints argument ("[1, 1]" → (1, 1)); a single int as a 1-tuple; None if absent."""
        value = self.text(i).strip()
        if not value:
            return None
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        if isinstance(parsed, bool):
            return None
        if isinstance(parsed, int):
            return (parsed,)
        if isinstance(parsed, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in parsed):
            return tuple(parsed)
        return None

    def bools(self, i: int) -> tuple[bool, ...] | None:
        """A list-of-bools argument ("[True, False]")."""
        value = self.text(i).strip()
        if not (value.startswith("[") and value.endswith("]")):
            return None
        parts = [p.strip() for p in value[1:-1].split(",") if p.strip()]
        if not all(p in ("True", "False") for p in parts):
            return None
        return tuple(p == "True" for p in parts)


@dataclass(frozen=True)
class Estimate:
    """What one call computes and moves by its formula."""

    flops: float
    bytes: float | None
    model: str
    """The formula's name, e.g. "gemm.bmm" (docs/semantics-perf-model.md)."""
    category: str
    """GEMM, attention, conv, elementwise, norm, reduce or other."""
    dtype: str | None = None
    """The compute dtype's `Input type` name, for the device's peak."""


def elements(shape: Shape | None) -> int:
    """How many elements a shape holds (a scalar: 1)."""
    return math.prod(shape) if shape else 1


def read_elements(shape: Shape | None, stride: Shape | None) -> int:
    """Distinct elements behind a tensor argument: a dimension of stride 0 (an `expand`ed view)
    is read once, not once per index."""
    if not shape:
        return 1
    if stride is None or len(stride) != len(shape):
        return math.prod(shape)
    return math.prod(size for size, step in zip(shape, stride, strict=True) if step != 0)


def parse_call(
    name: str, dims: str | None, types: str | None, strides: str | None, concrete: str | None
) -> OpCall | None:
    """An OpCall from the JSON texts op_args.py keeps; None when the dims are missing or malformed."""
    if not dims:
        return None
    try:
        raw_dims = json.loads(dims)
        raw_types = json.loads(types) if types else []
        raw_strides = json.loads(strides) if strides else []
        raw_concrete = json.loads(concrete) if concrete else []
    except ValueError:
        return None
    if not isinstance(raw_dims, list):
        return None
    return OpCall(
        name,
        tuple(_shape(d) for d in raw_dims),
        tuple(t if isinstance(t, str) else "" for t in _list(raw_types)),
        tuple(_shape(s) for s in _list(raw_strides)),
        tuple(c if isinstance(c, str) else "" for c in _list(raw_concrete)),
        tuple(_shapes(d) for d in raw_dims),
        tuple(_types(t) for t in _list(raw_types)),
    )


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _shape(value: Any) -> Shape:
    # A TensorList argument's dims are a list of lists: it is not one tensor, so no shape.
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return tuple(value)
    return ()


def _shapes(value: Any) -> tuple[Shape, ...] | None:
    """A TensorList argument's shapes (a non-empty list of int lists), else None."""
    if not isinstance(value, list) or not value or not all(isinstance(v, list) for v in value):
        return None
    shapes = [_shape(v) if v else () for v in value]
    return tuple(shapes) if all(s or not v for s, v in zip(shapes, value, strict=True)) else None


def _types(value: Any) -> tuple[str, ...] | None:
    return tuple(t for t in value if isinstance(t, str)) if isinstance(value, list) else None
