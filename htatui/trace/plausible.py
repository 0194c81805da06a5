"""Bounds on the per-event inputs of the performance model and the CUPTI counters: the one place
they are checked (docs/input-safety.md, "Numbers a GPU cannot produce").

A value that fails is dropped, never computed with: the readers (op_args.py, counter_args.py)
leave it out and note the field it came from, and the views say, once per file, how many were
dropped. `cut` bounds a name before any regular expression reads it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

CLOCK_RESOLUTION_US = 0.001
"""Kineto writes nanosecond timestamps as µs with three decimals: a span of one tick or less is
below what the clock can tell apart, and no rate is taken over it."""

MAX_DIM = 2**63 - 1
"""A tensor dimension is an int64 in PyTorch."""

MAX_TENSOR_ELEMENTS = 2**42
"""About 4.4e12 elements (8.8 TB of bf16): more than any device or host holds in one tensor."""

MAX_COUNT = 1e18
"""FLOPs of one call, or one counter of one kernel: 1e18 is over 15 minutes of a 1 PFLOP/s GPU
on one call, far past any recorded op (an 8192³ GEMM is 1.1e12)."""

NAME_LIMIT = 1024
"""Characters of a name a regular expression may read: device names are tens of characters,
kernel names a few hundred; a longer one is cut first, so no pattern's time grows with it."""


def count(value: object) -> float | None:
    """A non-negative finite count no larger than MAX_COUNT, as a float; None for anything else
    (negative, NaN, infinite, beyond the bound, bool, text, null, a list)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, int) and not 0 <= value <= MAX_COUNT:
        return None
    number = float(value)
    return number if math.isfinite(number) and 0.0 <= number <= MAX_COUNT else None


def shape(value: object) -> tuple[int, ...] | None:
    """A tensor's dims as int64s, none negative, at most MAX_TENSOR_ELEMENTS in all; None when
    any dim fails (a float such as 2e19, a bool, text, beyond int64) or the product is absurd."""
    if not isinstance(value, list):
        return None
    dims: list[int] = []
    for dim in value:
        if isinstance(dim, bool) or not isinstance(dim, int) or not 0 <= dim <= MAX_DIM:
            return None
        dims.append(dim)
    return tuple(dims) if math.prod(dims) <= MAX_TENSOR_ELEMENTS else None


def dims_ok(value: object) -> bool:
    """Whether a recorded `Input Dims` list holds only plausible shapes: each entry a tensor's
    dims, or a list of them (a TensorList argument), or empty."""
    if not isinstance(value, list):
        return False
    for entry in value:
        if isinstance(entry, list) and entry and all(isinstance(inner, list) for inner in entry):
            if not all(shape(inner) is not None for inner in entry):
                return False
        elif shape(entry) is None:
            return False
    return True


def measurable(span_us: float | None) -> bool:
    """Whether a duration is longer than the clock's resolution (a rate may be taken over it)."""
    return span_us is not None and math.isfinite(span_us) and span_us > CLOCK_RESOLUTION_US


def cut(name: str) -> str:
    """`name` bounded to NAME_LIMIT characters, for regular expressions."""
    return name[:NAME_LIMIT]


def dropped_note(where: str, counts: Mapping[str, int]) -> str | None:
    """One sentence for a file: how many values of each field were dropped (None when none)."""
    parts = [f"{n:,} {field!r} value{'s' if n > 1 else ''}" for field, n in sorted(counts.items()) if n]
    if not parts:
        return None
    return (
        f"{where}: dropped {', '.join(parts)} no GPU can produce (negative, not finite, not a number or beyond bounds)"
    )
