"""Bytes → typed events: gzip-aware reading and a msgspec decoder that skips unused fields.

msgspec decoding into Structs was measured ~2.5-6× faster than orjson dicts on the shared
traces (see benchmarks/load.py), so it is the main path; orjson is kept as the decode-floor
reference in the benchmark. Files that msgspec refuses (invalid UTF-8, integers wider than 64
bits in a field we read) fall back to Python's json, with one warning per file.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

Number = int | float
Scalar = int | float | str | None


class HostArgs(msgspec.Struct, frozen=True):
    """The `args` keys htatui reads from host events (ops, runtime and driver calls)."""

    correlation: Scalar = None
    stream: Scalar = None
    external_id: Scalar = msgspec.field(default=None, name="External id")
    kernel: Scalar = None


class DeviceArgs(msgspec.Struct, frozen=True):
    """The `args` keys htatui reads from device events (kernels, copies, syncs)."""

    correlation: Scalar = None
    stream: Scalar = None
    external_id: Scalar = msgspec.field(default=None, name="External id")
    device: Scalar = None
    nbytes: Scalar = msgspec.field(default=None, name="bytes")
    memory_bw: Scalar = msgspec.field(default=None, name="memory bandwidth (GB/s)")
    collective_name: Scalar = msgspec.field(default=None, name="Collective name")
    in_msg_nelems: Scalar = msgspec.field(default=None, name="In msg nelems")
    out_msg_nelems: Scalar = msgspec.field(default=None, name="Out msg nelems")
    in_msg_size: Scalar = msgspec.field(default=None, name="In msg size")
    out_msg_size: Scalar = msgspec.field(default=None, name="Out msg size")
    group_size: Scalar = msgspec.field(default=None, name="Group size")
    pg_name: Scalar = msgspec.field(default=None, name="Process Group Name")
    msg_dtype: Scalar = msgspec.field(default=None, name="dtype")
    grid: list[Number] | Scalar = None
    block: list[Number] | Scalar = None
    occupancy: Scalar = msgspec.field(default=None, name="est. achieved occupancy %")
    blocks_per_sm: Scalar = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Scalar = msgspec.field(default=None, name="warps per SM")
    registers: Scalar = msgspec.field(default=None, name="registers per thread")
    shared_memory: Scalar = msgspec.field(default=None, name="shared memory")
    wait_on_stream: Scalar = None


class MetaArgs(msgspec.Struct, frozen=True):
    """The payload of `ph: M` metadata events."""

    name: Scalar = None
    labels: Scalar = None


NO_ARGS = msgspec.Raw(b"")


class Event(msgspec.Struct, gc=False):
    """One trace event; `args` stays raw JSON until a category that needs it is decoded."""

    ph: str = ""
    cat: Scalar = None
    name: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Number | None = None
    dur: Number | None = None
    id: Scalar = None
    args: msgspec.Raw = NO_ARGS


class TraceDoc(msgspec.Struct):
    """A Kineto trace's top-level object, reduced to what htatui keeps."""

    traceEvents: list[Event] | None = None
    schemaVersion: Scalar = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: Scalar = None
    displayTimeUnit: Scalar = None
    traceName: Scalar = None


class TraceFormatError(Exception):
    """The file is readable but is not a usable Chrome trace; the message is one line."""


_DOC_DECODER = msgspec.json.Decoder(TraceDoc)
HOST_ARGS_DECODER = msgspec.json.Decoder(HostArgs)
DEVICE_ARGS_DECODER = msgspec.json.Decoder(DeviceArgs)
META_ARGS_DECODER = msgspec.json.Decoder(MetaArgs)
_LIST_DECODER = msgspec.json.Decoder(list[Event])


def decode_trace(raw: bytes | bytearray) -> tuple[TraceDoc, list[str]]:
    """Decode JSON bytes into a TraceDoc, falling back to Python's json where msgspec refuses."""
    warnings: list[str] = []
    stripped = raw.lstrip()
    if not stripped:
        raise TraceFormatError("empty file")
    is_list = stripped[:1] == b"["
    try:
        if is_list:
            return TraceDoc(traceEvents=_LIST_DECODER.decode(raw)), warnings
        return _DOC_DECODER.decode(raw), warnings
    except msgspec.ValidationError as exc:
        if stripped[:1] not in (b"{", b"["):
            raise TraceFormatError("not JSON") from None
        reason = f"unexpected value types ({exc}); decoded with the slower fallback"
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        text = str(exc)
        if "invalid utf-8" not in text.lower() and not isinstance(exc, UnicodeDecodeError):
            if not _at_nan_or_infinity(raw, text):
                raise TraceFormatError(f"invalid JSON ({text})") from None
            # Python's json reads NaN/Infinity literals; only tried there, as it is slow and big.
            fallback_warnings = ["non-standard JSON (NaN or Infinity literals); decoded with the slower fallback"]
            try:
                return _decode_fallback(raw, fallback_warnings), fallback_warnings
            except TraceFormatError:
                raise TraceFormatError(f"invalid JSON ({text})") from None
        reason = "invalid UTF-8 replaced with U+FFFD"
    warnings.append(reason)
    return _decode_fallback(raw, warnings), warnings


_BYTE_POSITION = re.compile(r"\(byte (\d+)\)")


def _at_nan_or_infinity(raw: bytes | bytearray, message: str) -> bool:
    """Whether msgspec stopped at a NaN/Infinity literal (its message names the byte)."""
    match = _BYTE_POSITION.search(message)
    if not match:
        return False
    at = int(match.group(1))
    return bytes(raw[at : at + 3]) in (b"NaN", b"Inf", b"-In")


def _decode_fallback(raw: bytes | bytearray, warnings: list[str]) -> TraceDoc:
    """Python's json accepts what msgspec refuses; odd values are nulled event by event."""
    text = raw.decode("utf-8", errors="replace")
    try:
        obj = json.loads(text, parse_int=_parse_int_64)
    except ValueError as exc:
        raise TraceFormatError(f"invalid JSON ({exc})") from None
    events_obj = obj if isinstance(obj, list) else obj.get("traceEvents") if isinstance(obj, dict) else None
    header = {k: v for k, v in obj.items() if k != "traceEvents"} if isinstance(obj, dict) else {}
    doc = _header_fallback(header, warnings)
    if events_obj is None:
        return doc
    if not isinstance(events_obj, list):
        raise TraceFormatError("traceEvents is not a list")
    events: list[Event] = []
    dropped = 0
    for item in events_obj:
        try:
            if isinstance(item, dict) and "args" in item:
                item = dict(item, args=msgspec.Raw(msgspec.json.encode(item["args"])))
            events.append(msgspec.convert(item, Event, strict=False))
        except msgspec.ValidationError:
            dropped += 1
    if dropped:
        warnings.append(f"{dropped} malformed events skipped")
    doc.traceEvents = events
    return doc


def _header_fallback(header: dict[str, Any], warnings: list[str]) -> TraceDoc:
    """Header keys one by one, so one malformed value (or list item) does not lose the rank."""
    if isinstance(header.get("deviceProperties"), list):
        items = header["deviceProperties"]
        kept = [item for item in items if isinstance(item, dict)]
        if len(kept) < len(items):
            warnings.append(f"{len(items) - len(kept)} malformed deviceProperties item(s) ignored")
            header = dict(header, deviceProperties=kept)
    fields: dict[str, Any] = {}
    for key, value in header.items():
        if key not in TraceDoc.__struct_fields__:
            continue
        try:
            msgspec.convert({key: value}, TraceDoc, strict=False)
        except msgspec.ValidationError:
            warnings.append(f"malformed '{key}' ignored")
            continue
        fields[key] = value
    return msgspec.convert(fields, TraceDoc, strict=False)


def _parse_int_64(text: str) -> int | float:
    """Integers wider than 64 bits (e.g. NCCL 'Comms Id') become floats instead of failing."""
    value = int(text)
    if -(2**63) <= value < 2**63:
        return value
    return float(value)
