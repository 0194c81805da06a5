"""Decoding helpers shared by the decoder tests (tests/trace/): odd events, the whole-document
route and the one-process route that the other routes are held to."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
from decode_golden import decoded_whole
from kineto_util import kernel, runtime, step

from htatui.trace.columns import decode_columns, decode_frame
from htatui.trace.frame import finish_pieces
from htatui.trace.model import TraceMeta
from htatui.trace.read import open_trace


def whole(raw: bytes) -> tuple[pl.DataFrame, TraceMeta, list[str]]:
    """The document decoded whole, as one piece (the route for a file the cutter refuses)."""
    warnings: list[str] = []
    with decoded_whole():
        frame, meta = decode_frame(raw, warnings)
    return frame, meta, warnings


def tricky_events() -> list[dict[str, Any]]:
    """Events that make cutting and typing hard: strings holding the cut pattern, metadata in the
    middle, a device event whose stream is a list (its args are then unreadable: all null), and
    a correlation wider than 64 bits."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        step(1, 0, 1000),
    ]
    for i in range(40):
        events.append(runtime("cudaLaunchKernel", 10 + i * 20, 5, corr=i))
        events.append(kernel(f"k{i}" + "}, {" * (i % 3), 12 + i * 20, 8, corr=i, grid=[i, 1, 1]))
    events.insert(30, {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "main }, {"}})
    events.append(kernel("odd", 900, 5, corr=99, stream=7) | {"args": {"stream": [1], "correlation": 99}})
    events.append(runtime("wide", 950, 5, corr=2**70))
    events.append({"ph": "i", "cat": "cpu_instant_event", "name": "x", "pid": 100, "tid": 1, "ts": 990, "s": "t"})
    return events


Decoded = tuple[pl.DataFrame, TraceMeta, list[str], pl.DataFrame]
"""Frame, metadata, warnings and detail table."""


def one_process(path: Path, chunk_bytes: int) -> Decoded:
    warnings: list[str] = []
    with open_trace(path) as source:
        frame, details, meta = decode_columns(source, warnings, chunk_bytes=chunk_bytes)
    return finish_pieces(frame), meta, warnings, details
