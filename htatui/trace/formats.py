"""Files htatui does not read, named by their format with what to do instead.

A user holding an XPlane profile, a Perfetto protobuf, an Nsight Systems report, rocprofv3
output or a CUDA memory snapshot should hear what the file is, not "invalid JSON" or "no trace
files". The format is told by the file's name and, for local files, its first bytes; nothing
here reads a whole file.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

from htatui.sources import SourcePath

KINETO = "htatui reads PyTorch profiler (Kineto) JSON traces, *.json or *.json.gz"

_HEAD_BYTES = 64 << 10
_PICKLE_PROTOCOL_2_PLUS = b"\x80"
_SQLITE = b"SQLite format 3\x00"


@dataclass(frozen=True)
class ForeignFormat:
    """What a file is, and what to do with it instead."""

    name: str
    advice: str
    snapshot: bool = False
    """A CUDA memory snapshot: `htatui memory` reads it."""

    def reason(self, path: SourcePath) -> str:
        """What the file is and the way forward, without the file's name."""
        return f"{self.name}, not a Kineto trace ({KINETO}); {self.advice.replace('PATH', str(path))}"

    def message(self, path: SourcePath) -> str:
        """One line naming the file, its format and the way forward."""
        return f"{path}: {self.reason(path)}"

    def skipped(self, path: SourcePath) -> str:
        """The note for such a file beside traces in a folder."""
        return f"{path}: skipped ({self.name}, not a Kineto trace)"


XPLANE = ForeignFormat("a JAX/TensorFlow XPlane profile", "open it in TensorBoard or XProf")
PERFETTO = ForeignFormat(
    "a Perfetto protobuf trace", "open it in ui.perfetto.dev, or save the profile with prof.export_chrome_trace"
)
NSYS = ForeignFormat("an Nsight Systems report", "open it in Nsight Systems, or record the job with torch.profiler")
NCU = ForeignFormat("an Nsight Compute report", "open it in Nsight Compute")
ROCPROF = ForeignFormat(
    "rocprofv3 output", "its pftrace output opens in ui.perfetto.dev; record the job with torch.profiler for htatui"
)
SNAPSHOT = ForeignFormat("a CUDA memory snapshot", "open it with `htatui memory PATH`", snapshot=True)

_BY_SUFFIX = (
    (".xplane.pb", XPLANE),
    (".pftrace", PERFETTO),
    (".perfetto-trace", PERFETTO),
    (".perfetto", PERFETTO),
    (".nsys-rep", NSYS),
    (".qdrep", NSYS),
    (".ncu-rep", NCU),
    (".rocpd", ROCPROF),
)
_ROCPROF_CSV = ("_kernel_trace.csv", "_hip_api_trace.csv", "_memory_copy_trace.csv", "_agent_info.csv")
_ROCPROF_MARK = b'"rocprofiler-sdk-tool"'


def foreign_format(path: SourcePath) -> ForeignFormat | None:
    """The format of a file htatui does not read, or None (a trace, or nothing it can name).

    Local files are told by name and first bytes; remote ones by name alone (no extra request).
    """
    name = path.name.lower()
    for suffix, found in _BY_SUFFIX:
        if name.endswith(suffix):
            return found
    if name.endswith(_ROCPROF_CSV):
        return ROCPROF
    head = _head(path) if isinstance(path, Path) else b""
    if name.endswith(".pb"):
        # XPlane and Perfetto both start with a length-delimited field 1; XPlane names its planes.
        return XPLANE if b"/host:" in head or b"/device:" in head else PERFETTO
    text = _text_head(head)
    if text[:1] == _PICKLE_PROTOCOL_2_PLUS and len(text) > 1 and 2 <= text[1] <= 5:
        return SNAPSHOT
    if head.startswith(_SQLITE) and ("rocpd" in name or name.endswith("_results.db")):
        return ROCPROF
    if name.endswith((".json", ".json.gz")) and _ROCPROF_MARK in text:
        return ROCPROF
    return None


def _head(path: Path) -> bytes:
    """The file's first bytes (empty when it cannot be read or is not a regular file)."""
    try:
        if not path.is_file():
            return b""
        with open(path, "rb") as handle:
            return handle.read(_HEAD_BYTES)
    except OSError:
        return b""


def _text_head(head: bytes) -> bytes:
    """`head`, gunzipped as far as it goes when it is gzip."""
    if head[:2] != b"\x1f\x8b":
        return head
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEAD_BYTES)
    except zlib.error:
        return b""
