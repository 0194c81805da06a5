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
    decoded_bytes,
    decoded_whole,
    digests_of,
    expected,
    expected_names,
    memory,
    meta_digest,
    odd_documents,
    op_args,
    shared_trace_files,
)

from htatui.trace.columns import decode_frame
from htatui.trace.read import open_trace, read_trace_bytes

ODD = expected("odd documents")


@pytest.mark.parametrize("name", expected_names())
def test_shared_trace_streamed_in_pieces_and_decoded_whole_decodes_as_before(shared_traces: Path, name: str) -> None:
    """Both routes on one file: the streamed pieces' digests are the saved figures, and the whole
    document gives the very same frame (schema and values), metadata and warnings, so its digests
    are the figures too without computing them again (a digest costs as much as the decode)."""
    path, figures = shared_traces / name, expected(name)
    streamed_warnings: list[str] = []
    with open_trace(path) as source:
        streamed, streamed_meta = decode_frame(source, streamed_warnings)
    assert digests_of(streamed, streamed_meta, streamed_warnings) == {key: figures[key] for key in DECODED}
    assert op_args(path) == figures["op_args"]
    assert memory(path) == figures["memory"]
    whole_warnings: list[str] = []
    raw = read_trace_bytes(path)[0]
    with decoded_whole():
        whole, whole_meta = decode_frame(raw, whole_warnings)
    assert whole.schema == streamed.schema and whole.equals(streamed, null_equal=True)
    assert meta_digest(whole_meta) == meta_digest(streamed_meta) and whole_warnings == streamed_warnings


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
