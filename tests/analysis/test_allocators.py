"""Freed memory handed back: glibc's trim and polars' jemalloc purge (`allocators.release`)."""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from htatui.analysis.core import allocators

linux_x86 = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and platform.machine() == "x86_64"), reason="glibc and polars' ELF build"
)


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


@linux_x86
def test_polars_jemalloc_is_found_and_answers() -> None:
    # The installed polars keeps jemalloc's mallctl in its symbol table; a polars without it
    # (a new build) would make release() trim glibc alone, and this test says so.
    assert allocators.jemalloc_found()


@linux_x86
def test_release_hands_polars_freed_pages_back() -> None:
    allocators.release()
    before = resident_mib()
    frame = pl.DataFrame({"x": np.arange(20_000_000, dtype=np.int64)}).with_columns(y=pl.col("x") * 3)
    assert frame["y"][-1] == 3 * (20_000_000 - 1)
    held = resident_mib()
    assert held - before > 100  # the x copy and y: 2 × 153 MiB written
    del frame
    allocators.release()
    assert resident_mib() - before < 60  # jemalloc would keep them ~10 s without the purge


@linux_x86
def test_a_missing_symbol_or_a_file_that_is_not_elf_finds_nothing(tmp_path: Path) -> None:
    # Each is a step where release() falls back to trimming glibc alone, never calling an address.
    library = allocators._runtime_library()
    assert library is not None
    assert allocators._symbol_values(library, (b"_rjem_mallctl",)) is not None
    assert allocators._symbol_values(library, (b"no_such_function_in_polars",)) is None
    not_elf = tmp_path / "libnot.so"
    not_elf.write_bytes(b"not an ELF library" * 64)
    assert allocators._symbol_values(not_elf, (b"_rjem_mallctl",)) is None
    assert allocators._exported_address(library, "no_such_export") is None
