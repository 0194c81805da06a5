"""How a byte count reads in a sentence: the one formatter of the memory command, page and messages."""

from __future__ import annotations


def byte_size(value: float | None) -> str:
    """1536 → '1.50 KiB', 100 → '100 B', None → 'unknown': binary units, as PyTorch's allocator
    reports them (exact bytes stay in the tables, CSV and JSON)."""
    if value is None:
        return "unknown"
    size = float(value)
    if abs(size) < 1024:
        return f"{size:,.0f} B"
    units = ("KiB", "MiB", "GiB")
    for position, unit in enumerate(units):
        size /= 1024
        if abs(size) < 1024 or position == len(units) - 1:
            return f"{size:,.2f} {unit}"
    raise AssertionError("unreachable: the last unit returns")
