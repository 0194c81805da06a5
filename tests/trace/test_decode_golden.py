"""The one decoder gives what the two decoders gave before it, on every shared trace and odd document.

The figures (tests/golden/decoded_traces.json, see tests/decode_golden.py) were written by the code
that still had a whole-document decoder and a piece decoder kept equal by a test; both of today's
routes through the one decoder are held to them: pieces cut from the file as the loader reads it,
and the whole document as one piece (the route for a file the cutter refuses).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from decode_golden import (
    DECODED,
    decoded,
    decoded_bytes,
    decoded_whole,
    expected,
    expected_names,
    memory,
    odd_documents,
    op_args,
    shared_trace_files,
)

from htatui.trace.read import read_trace_bytes

ODD = expected("odd documents")


@pytest.mark.parametrize("name", expected_names())
def test_shared_trace_streamed_in_pieces_decodes_as_before(shared_traces: Path, name: str) -> None:
    path, figures = shared_traces / name, expected(name)
    assert decoded(path) == {key: figures[key] for key in DECODED}
    assert op_args(path) == figures["op_args"]
    assert memory(path) == figures["memory"]


@pytest.mark.parametrize("name", expected_names())
def test_shared_trace_decoded_whole_decodes_as_before(shared_traces: Path, name: str) -> None:
    raw = read_trace_bytes(shared_traces / name)[0]
    with decoded_whole():
        assert decoded_bytes(raw) == {key: expected(name)[key] for key in DECODED}


def test_every_shared_trace_is_held(shared_traces: Path) -> None:
    names = [str(path.relative_to(shared_traces)) for path in shared_trace_files(shared_traces)]
    assert expected_names() == names and len(names) == 32


@pytest.mark.parametrize("name", sorted(ODD))
def test_odd_document_decodes_as_before(name: str) -> None:
    raw = odd_documents()[name]
    with decoded_whole():
        assert decoded_bytes(raw) == ODD[name]
    # In pieces where the cutter can (the rest is decoded whole whatever the piece size).
    for chunk_bytes in (64, 700, 1 << 20):
        assert decoded_bytes(raw, chunk_bytes) == ODD[name], chunk_bytes
