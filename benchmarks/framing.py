"""The candidates for framing a trace's events (issue 40), measured piece by piece on one trace.

    python benchmarks/framing.py --trace ../shared/traces/df_index_resolver/df_index_resolver.json.gz
    PYTHONPATH=/tmp/pa python benchmarks/framing.py --trace /tmp/big556/rank-0.json.gz   # with pyarrow

Each ~4 MB piece of `traceEvents` (as the loader cuts it) is handed to every candidate; the figure is
CPU seconds (process_time: every thread, so polars' and pyarrow's threads count) summed over the
pieces, and MB of JSON per CPU-second:

- `msgspec decode`: the typed decode alone (decode.py's structs), no columns.
- `htatui framing`: the loader's way, decode + `columns.piece_columns` (every frame column).
- `polars read_json`: the piece (a JSON array) with an explicit schema of the fields the frame keeps.
- `polars read_ndjson`, `pyarrow read_json`: the same events as NDJSON (one object a line, written
  beforehand and not counted: their best case, as a Kineto file is a pretty-printed array), with an
  explicit schema. pyarrow is measured only where it can be imported (it is no dependency).

The readers that build columns natively get the top-level fields and the args keys of launches; they
do not produce the frame (pid/tid as their exact text, integers wider than 64 bits counted, launch
shapes as text, the categories' aliases), so their figures are a floor of what they would cost.
"""

from __future__ import annotations

import argparse
import io
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import polars as pl

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from htatui.trace.chunks import Window, decode_window, locate_in  # noqa: E402
from htatui.trace.columns import piece_columns  # noqa: E402
from htatui.trace.events import _typed_piece  # noqa: E402
from htatui.trace.read import open_trace  # noqa: E402

ARGS = {"correlation": pl.Int64, "External id": pl.Int64, "stream": pl.Int64, "device": pl.Int64}
SCHEMA = {
    "ph": pl.Utf8,
    "cat": pl.Utf8,
    "name": pl.Utf8,
    "pid": pl.Utf8,
    "tid": pl.Utf8,
    "ts": pl.Float64,
    "dur": pl.Float64,
    "id": pl.Int64,
    "args": pl.Struct(ARGS),
}


def pieces(path: Path) -> list[bytes]:
    """The trace's pieces as the loader cuts them (`[` + events + `]`), the tail's events included."""
    cut: list[bytes] = []

    def keep(piece: Any) -> list[Any]:
        cut.append(bytes(piece))
        return []

    def keep_tail(rest: bytes) -> list[Any]:
        events = msgspec.json.decode(rest, type=dict[str, Any])["traceEvents"] if not rest.startswith(b"[") else []
        cut.append(msgspec.json.encode(events))
        return []

    with open_trace(path) as source:
        window = Window(source.blocks())
        span = locate_in(window)
        window.at = span.start
        for _ in decode_window(window, span, keep, keep_tail):
            pass
    return cut


def cpu(run: Callable[[], object]) -> float:
    start = time.process_time()
    run()
    return time.process_time() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", type=Path, required=True)
    args = parser.parse_args(argv)
    totals: dict[str, float] = {}
    errors: dict[str, str] = {}
    size = 0
    try:
        import pyarrow as pa
        import pyarrow.json as pa_json

        pa_schema = pa.schema(
            [(k, pa.string()) for k in ("ph", "cat", "name")]
            + [("ts", pa.float64()), ("dur", pa.float64()), ("id", pa.int64())]
            + [("args", pa.struct([(k, pa.int64()) for k in ARGS]))]
        )
        pa_options = pa_json.ParseOptions(explicit_schema=pa_schema, unexpected_field_behavior="ignore")
    except ImportError:
        pa_json = None
    for piece in pieces(args.trace):
        size += len(piece)
        ndjson = b"\n".join(msgspec.json.encode(event) for event in msgspec.json.decode(piece))
        runs: dict[str, Callable[[], object]] = {
            "msgspec decode": lambda piece=piece: _typed_piece(piece),
            "htatui framing": lambda piece=piece: piece_columns(_typed_piece(piece), 0),
            "polars read_json": lambda piece=piece: pl.read_json(io.BytesIO(piece), schema=SCHEMA),
            "polars read_ndjson": lambda ndjson=ndjson: pl.read_ndjson(io.BytesIO(ndjson), schema=SCHEMA),
        }
        if pa_json is not None:
            runs["pyarrow read_json"] = lambda ndjson=ndjson: pa_json.read_json(
                io.BytesIO(ndjson), parse_options=pa_options
            )
        for name, run in runs.items():
            if name in errors:
                continue
            try:
                totals[name] = totals.get(name, 0.0) + cpu(run)
            except Exception as exc:  # noqa: BLE001 - a candidate that refuses the trace is reported, not fatal
                errors[name] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:100]}"
    mb = size / 1e6
    print(f"{args.trace.name}: {mb:.1f} MB of JSON in pieces")
    print(f"{'candidate':22s} {'CPU s':>8s} {'MB per CPU-s':>13s}")
    for name, seconds in totals.items():
        if name not in errors:
            print(f"{name:22s} {seconds:8.3f} {mb / seconds:13.1f}")
    for name, error in errors.items():
        print(f"{name:22s} refused: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
