"""Handing freed memory back to the system once an analysis is done with it.

Freed memory stays in the process: numpy's arrays and Python's objects go to glibc's malloc,
which keeps what it can reuse in its heap, and polars' frames to polars' own jemalloc, which
keeps freed pages about 10 s before a background thread returns them. After a page of the app
has been made (or left), most of its working set is such pages: on the real 541 MB trace the
Ops page leaves ~470 MiB of them beside ~370 MiB in use. `release()` returns them at once:
`malloc_trim(0)` for glibc, and jemalloc's `arena.<all>.purge` through its `mallctl`.

polars does not export its jemalloc's `mallctl` (`_rjem_mallctl`), so it is found by name in the
symbol table of polars' runtime library, checked against an exported symbol's real address,
and called only after it has answered a read of jemalloc's `version`. Where any step fails
(another platform, a stripped library, a polars built without jemalloc) only glibc is trimmed;
where glibc is not the C library, nothing is done. Measured on that trace: 1-40 ms a call.
"""

from __future__ import annotations

import ctypes
import mmap
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

_MALLCTL = b"_rjem_mallctl"
_ANCHOR = b"PyInit__polars_runtime"
"""An exported function of polars' runtime: its real address gives the library's load base."""
_ALL_ARENAS = 4096
"""jemalloc's MALLCTL_ARENAS_ALL: `arena.4096.purge` purges every arena."""
_SYMBOL = [("name", "<u4"), ("info", "u1"), ("other", "u1"), ("shndx", "<u2"), ("value", "<u8"), ("size", "<u8")]
"""An Elf64_Sym (little-endian)."""
_FUNC = 2

_Mallctl = Callable[[bytes, ctypes.c_void_p | None, ctypes.c_void_p | None, None, int], int]

_lock = threading.Lock()
_found: dict[str, object] = {}


def release() -> None:
    """Return the pages the allocators keep free to the system (glibc's and polars' jemalloc's)."""
    with _lock:
        trim = _malloc_trim()
        purge = _jemalloc_mallctl()
    if purge is not None:
        purge(b"arena.%d.purge" % _ALL_ARENAS, None, None, None, 0)
    if trim is not None:
        trim(0)


def jemalloc_found() -> bool:
    """Whether `release` purges polars' jemalloc too (its `mallctl` was found and answered)."""
    with _lock:
        return _jemalloc_mallctl() is not None


def _malloc_trim() -> Callable[[int], int] | None:
    if "trim" not in _found:
        trim = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                trim = libc.malloc_trim
                trim.argtypes = [ctypes.c_size_t]
                trim.restype = ctypes.c_int
            except (OSError, AttributeError):
                trim = None
        _found["trim"] = trim
    return _found["trim"]  # type: ignore[return-value]


def _jemalloc_mallctl() -> _Mallctl | None:
    if "mallctl" not in _found:
        try:
            _found["mallctl"] = _find_mallctl() if sys.platform.startswith("linux") else None
        except (OSError, ValueError, AttributeError, ImportError, IndexError, BufferError):
            _found["mallctl"] = None
    return _found["mallctl"]  # type: ignore[return-value]


def _find_mallctl() -> _Mallctl | None:
    """polars' jemalloc `mallctl`, found in its library's symbol table, or None."""
    import polars  # noqa: F401 - its runtime library must be loaded

    library = _runtime_library()
    if library is None:
        return None
    values = _symbol_values(library, (_MALLCTL, _ANCHOR))
    if values is None:
        return None
    anchor = _exported_address(library, _ANCHOR.decode())
    if anchor is None:
        return None
    base = anchor - values[_ANCHOR]
    address = base + values[_MALLCTL]
    if not _executable(address, library):
        return None
    prototype = ctypes.CFUNCTYPE(
        ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t
    )
    mallctl = prototype(address)
    version = ctypes.c_char_p()
    size = ctypes.c_size_t(ctypes.sizeof(version))
    if mallctl(b"version", ctypes.byref(version), ctypes.byref(size), None, 0) != 0 or version.value is None:
        return None
    if not re.match(rb"\d+\.\d+\.\d+", version.value):
        return None
    return mallctl


def _runtime_library() -> Path | None:
    """The loaded polars runtime library (a path in this process's memory map)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and "_polars_runtime" in parts[5] and parts[5].endswith(".so"):
            return Path(parts[5])
    return None


def _exported_address(library: Path, name: str) -> int | None:
    try:
        return ctypes.cast(getattr(ctypes.CDLL(str(library)), name), ctypes.c_void_p).value
    except (OSError, AttributeError):
        return None


def _executable(address: int, library: Path) -> bool:
    """Whether `address` lies in an executable mapping of `library`."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and parts[5] == str(library) and "x" in parts[1]:
            low, high = (int(x, 16) for x in parts[0].split("-"))
            if low <= address < high:
                return True
    return False


def _symbol_values(library: Path, names: tuple[bytes, ...]) -> dict[bytes, int] | None:
    """The values of these function symbols in the library's `.symtab` (a 64-bit little-endian
    ELF), read through a map of the file: only its headers, symbol table and the names' bytes."""
    import numpy as np

    with library.open("rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data[:6] != b"\x7fELF\x02\x01":
            return None
        section_offset = int.from_bytes(data[0x28:0x30], "little")
        entry_size = int.from_bytes(data[0x3A:0x3C], "little")
        count = int.from_bytes(data[0x3C:0x3E], "little")
        sections = []
        for i in range(count):
            at = section_offset + i * entry_size
            header = data[at : at + entry_size]
            kind = int.from_bytes(header[4:8], "little")
            offset = int.from_bytes(header[0x18:0x20], "little")
            size = int.from_bytes(header[0x20:0x28], "little")
            link = int.from_bytes(header[0x28:0x2C], "little")
            sections.append((kind, offset, size, link))
        tables = [s for s in sections if s[0] == 2]  # SHT_SYMTAB
        if not tables:
            return None
        _kind, offset, size, link = tables[0]
        _skind, names_offset, names_size, _slink = sections[link]
        symbols = np.frombuffer(data, dtype=np.dtype(_SYMBOL), count=size // 24, offset=offset)
        try:
            return _functions_named(data, symbols, names, names_offset, names_size)
        finally:
            del symbols  # the map cannot close while an array still views it


def _functions_named(
    data: mmap.mmap, symbols: Any, names: tuple[bytes, ...], names_offset: int, names_size: int
) -> dict[bytes, int] | None:
    """Each name's value among the function symbols, or None when one is missing or repeated."""
    import numpy as np

    found: dict[bytes, int] = {}
    for name in names:
        at = data.find(b"\0" + name + b"\0", names_offset, names_offset + names_size)
        if at < 0:
            return None
        match = np.flatnonzero((symbols["name"] == at + 1 - names_offset) & (symbols["info"] & 0xF == _FUNC))
        if len(match) != 1:
            return None
        found[name] = int(symbols["value"][match[0]])
    return found
