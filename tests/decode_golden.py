"""Digests of what the decoder makes of every shared trace, saved once so a rewrite can be held to them.

`tests/golden/decoded_traces.json` was written (commit bf6f526) by the code that still had two
event decoders, a whole-document one and a piece-by-piece one that a test kept equal on every
shared trace; since there is one decoder, tests/trace/test_decode_golden.py holds it to those figures.
Per file: each frame column's digest, the metadata, the warnings, the op-argument rows and the
`[memory]` recording; per odd hand-made document, what decoding it whole gave. Run
`python -m tests.decode_golden` to write it again, only on purpose (a deliberate change of output).
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import polars as pl

ROOT = Path(__file__).resolve().parent.parent
SHARED_TRACES = ROOT.parent / "shared" / "traces"
GOLDEN = Path(__file__).resolve().parent / "golden" / "decoded_traces.json"
DECODED = ("frame", "meta", "warnings")
"""The parts of a file's figures that `decode_frame` gives."""


def expected(name: str) -> dict[str, Any]:
    """The saved figures of one shared trace (its path under the shared folder), or of the odd documents."""
    figures: dict[str, Any] = json.loads(GOLDEN.read_text())[name]
    return figures


def expected_names() -> list[str]:
    return sorted(name for name in json.loads(GOLDEN.read_text()) if name != "odd documents")


def shared_trace_files(folder: Path = SHARED_TRACES) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.name.endswith((".json", ".json.gz")))


def column_digest(series: pl.Series) -> str:
    """sha256 of the column's Python values (categories as their text), 64k rows at a time."""
    digest = hashlib.sha256()
    for start in range(0, max(series.len(), 1), 1 << 16):
        digest.update(repr(series.slice(start, 1 << 16).to_list()).encode())
    return digest.hexdigest()[:16]


def frame_digest(frame: pl.DataFrame) -> dict[str, Any]:
    return {
        "height": frame.height,
        "schema": {name: str(dtype) for name, dtype in frame.schema.items()},
        "columns": {name: column_digest(frame.get_column(name)) for name in frame.columns},
    }


def meta_digest(meta: Any) -> str:
    return hashlib.sha256(repr(meta).encode()).hexdigest()[:16]


def decoded(path: Path) -> dict[str, Any]:
    """The digest of `decode_frame` on the file streamed block by block, as the loader reads it."""
    from htatui.trace.read import open_trace

    with open_trace(path) as source:
        return decoded_bytes(source)


def decoded_bytes(raw: Any, chunk_bytes: int | None = None) -> dict[str, Any]:
    """The digest of `decode_frame` on JSON bytes (or an opened file)."""
    from htatui.trace.columns import decode_frame

    warnings: list[str] = []
    frame, meta = decode_frame(raw, warnings, chunk_bytes=chunk_bytes)
    return digests_of(frame, meta, warnings)


def digests_of(frame: pl.DataFrame, meta: Any, warnings: list[str]) -> dict[str, Any]:
    """The saved figures' form of what `decode_frame` gave."""
    return {"frame": frame_digest(frame), "meta": meta_digest(meta), "warnings": warnings}


@contextmanager
def decoded_whole() -> Iterator[None]:
    """Every document decoded whole, as one piece, as if the cutter could not find its events."""
    from htatui.trace.chunks import NotChunkable

    def refuse(*_: Any) -> Any:
        raise NotChunkable("decoded whole for the test")

    with mock.patch("htatui.trace.events.locate_in", refuse):
        yield


def op_args(path: Path) -> dict[str, Any]:
    from htatui.trace.op_args import read_op_args

    return frame_digest(read_op_args(path))


def memory(path: Path) -> dict[str, Any] | str:
    """The `[memory]` recording's tables, or the one-line refusal (most traces have no such events)."""
    from htatui.trace.memory_inputs import MemoryInputError, read_memory

    try:
        recording = read_memory(path)
    except MemoryInputError as exc:
        return str(exc).removeprefix(f"{path}: ")
    return {"events": frame_digest(recording.events), "spans": frame_digest(recording.spans), "rank": recording.rank}


def digests(path: Path) -> dict[str, Any]:
    return decoded(path) | {"op_args": op_args(path), "memory": memory(path)}


def odd_events() -> list[dict[str, Any]]:
    """Events that are hard to cut and type: the cut pattern in strings, metadata in the middle, args
    that do not fit (a list stream, args that are not an object), integers wider than 64 bits, a
    capitalised 2021-era category, float timestamps, and a `[memory]` event."""
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 100, "tid": 1, "ts": 0, "dur": 1000},
    ]
    for i in range(40):
        args = {"correlation": i, "External id": i}
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "launch",
                "pid": 100,
                "tid": 1,
                "ts": 10 + i * 20,
                "dur": 5,
                "args": args | {"kernel": f"k{i}"},
            }
        )
        device = {"device": 0, "stream": 7, "correlation": i, "grid": [i, 1, 1], "block": [128.0, 1, 1]}
        events.append(
            {
                "ph": "X",
                "cat": "Kernel" if i % 5 == 0 else "kernel",
                "name": f"k{i}" + "}, {" * (i % 3),
                "pid": 0,
                "tid": 7,
                "ts": 12.5 + i * 20,
                "dur": 8,
                "args": device,
            }
        )
    events.insert(30, {"ph": "M", "name": "thread_name", "pid": 100, "tid": 1, "args": {"name": "main }, {"}})
    events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": "odd",
            "pid": 0,
            "tid": 7,
            "ts": 900,
            "dur": 5,
            "args": {"stream": [1], "correlation": 99},
        }
    )
    events.append(
        {"ph": "X", "cat": "cpu_op", "name": "not an object", "pid": 100, "tid": 1, "ts": 905, "dur": 1, "args": 5}
    )
    events.append(
        {
            "ph": "X",
            "cat": "cuda_runtime",
            "name": "wide",
            "pid": 100,
            "tid": 1,
            "ts": 950,
            "dur": 5,
            "args": {"correlation": 2**70, "External id": 2**70},
        }
    )
    events.append(
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 100,
            "tid": 1,
            "ts": 960,
            "s": "t",
            "args": {
                "Total Reserved": 2048,
                "Total Allocated": 512,
                "Bytes": 512,
                "Addr": 7,
                "Device Id": 0,
                "Device Type": 1,
            },
        }
    )
    events.append({"ph": "f", "cat": "ac2g", "name": "flow", "id": 3, "pid": 0, "tid": 7, "ts": 970, "bp": "e"})
    return events


def odd_documents() -> dict[str, bytes]:
    """Documents the piece decoder cannot cut or type (decoded whole), and the same cut in pieces."""
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "Test GPU"}],
        "traceEvents": odd_events(),
        "logs": ["a ] b", "c }, { d ]"],
        "baseTimeNanoseconds": 1_700_000_000_000_000_000,
        "traceName": "t",
    }
    text = json.dumps(doc, indent=1).encode()
    late = json.dumps(doc | {"traceEvents": [*odd_events(), {"ph": "X", "cat": "cpu_op", "ts": "late"}]}).encode()
    junk_header = doc | {"deviceProperties": [{"id": 0}, "junk"], "schemaVersion": "one"}
    return {
        "pieces": text,
        "list form": json.dumps(odd_events()).encode(),
        "invalid utf-8": text.replace(b'"odd"', b'"odd\xff"'),
        "nan": text.replace(b'"ts": 950', b'"ts": NaN'),
        "wrong field type": late,
        "wrong field type, list form": json.dumps([*odd_events(), {"ph": "X", "ts": "late"}]).encode(),
        "malformed header": json.dumps(junk_header | {"traceEvents": [*odd_events(), {"ts": [1]}]}).encode(),
    }


def main() -> int:
    golden: dict[str, Any] = {str(path.relative_to(SHARED_TRACES)): digests(path) for path in shared_trace_files()}
    with decoded_whole():
        golden["odd documents"] = {name: decoded_bytes(raw) for name, raw in odd_documents().items()}
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(golden, indent=1, sort_keys=True) + "\n")
    print(f"{len(golden) - 1} traces and {len(golden['odd documents'])} odd documents written to {GOLDEN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
