"""JSON bytes → typed events: the one set of msgspec structs for a Kineto trace, and its decoders.

Every reader of a trace (the loader's frame, the op arguments, the `[memory]` recording) gets its
events from these structs, a piece of `traceEvents` at a time (events.py). For the event frame a
piece is decoded in one pass into `Event`s whose `args` hold every key the frame keeps (`EventArgs`).
Where an event's args do not fit, the piece is decoded again with the args left raw (`RawEvent`)
and each event's args are read by what the event is (`typed`), so an odd value costs that event
only. Readers of keys that few events carry (`MemoryArgs`, `OperatorArgs`) take raw-args events
and decode those keys themselves. A document that cannot be cut in pieces is decoded whole
(`decode_document`).

msgspec decoding into Structs was measured ~2.5-6× faster than orjson dicts on the shared
traces (see benchmarks/load.py). Files that msgspec refuses (invalid UTF-8, NaN literals, fields
of unexpected types) fall back to Python's json, with one warning per file.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from htatui.errors import HtatuiError
from htatui.trace.kineto import DEVICE_ARG_CATS, HOST_ARG_CATS

Number = int | float
Scalar = int | float | str | None


class EventArgs(msgspec.Struct, frozen=True, gc=False):
    """Every `args` key the event frame keeps, whatever the event: each key's JSON name and type, once."""

    # Host and device rows: the launch that links them, and the stream.
    correlation: Scalar = None
    external_id: Scalar = msgspec.field(default=None, name="External id")
    stream: Scalar = None
    # Host rows: the kernel a launch names.
    kernel: Scalar = None
    # Device rows: kernel, copy and collective details. Tuples, not lists: hashable, so each
    # distinct launch shape is turned into text once.
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
    grid: tuple[Number, ...] | Scalar = None
    block: tuple[Number, ...] | Scalar = None
    occupancy: Scalar = msgspec.field(default=None, name="est. achieved occupancy %")
    blocks_per_sm: Scalar = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Scalar = msgspec.field(default=None, name="warps per SM")
    registers: Scalar = msgspec.field(default=None, name="registers per thread")
    shared_memory: Scalar = msgspec.field(default=None, name="shared memory")
    wait_on_stream: Scalar = None
    # Metadata events (`ph: M`): process and thread labels.
    name: Scalar = None
    labels: Scalar = None


HOST_KEYS = ("correlation", "external_id", "stream", "kernel")
"""The keys host rows (HOST_ARG_CATS) read."""
META_KEYS = ("name", "labels")
"""The keys metadata events (`ph: M`) read."""
DEVICE_KEYS = tuple(k for k in EventArgs.__struct_fields__ if k not in ("kernel", *META_KEYS))
"""The keys device rows (DEVICE_ARG_CATS) read: the launch keys and every device detail."""

NO_EVENT_ARGS = EventArgs()
NO_ARGS = msgspec.Raw(b"")


class EventFields(msgspec.Struct, gc=False):
    """The fields of a trace event htatui reads, `args` aside."""

    ph: str = ""
    cat: Scalar = None
    name: Scalar = None
    pid: Scalar = None
    tid: Scalar = None
    ts: Number | None = None
    dur: Number | None = None
    id: Scalar = None


class Event(EventFields, gc=False):
    """One trace event with its args decoded."""

    args: EventArgs = NO_EVENT_ARGS


class RawEvent(EventFields, gc=False):
    """One trace event with its args left as raw JSON, read later by what the event is."""

    args: msgspec.Raw = NO_ARGS


class TraceHeader(msgspec.Struct):
    """A Kineto trace's top-level fields htatui keeps (before or after `traceEvents`)."""

    schemaVersion: Scalar = None
    deviceProperties: list[dict[str, Any]] | None = None
    distributedInfo: dict[str, Any] | None = None
    baseTimeNanoseconds: Scalar = None
    displayTimeUnit: Scalar = None
    traceName: Scalar = None

    @property
    def base_time_ns(self) -> int | None:
        """baseTimeNanoseconds as a whole number; None when absent or not a number."""
        base = self.baseTimeNanoseconds
        return int(base) if isinstance(base, (int, float)) and not isinstance(base, bool) else None


class TraceDoc(TraceHeader):
    """A trace's tail from its last piece on (`{"traceEvents":[` + the rest), events typed."""

    traceEvents: list[Event] | None = None


class RawTraceDoc(TraceHeader):
    """A whole trace (`decode_document`), its tail or its header (chunks.py), args left raw."""

    traceEvents: list[RawEvent] | None = None


class MemoryArgs(msgspec.Struct, frozen=True):
    """The args of a `[memory]` event (profile_memory=True), read from raw args by the memory reader:
    few events carry them, so they are kept out of the one-pass decode of every event."""

    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    bytes_delta: int | None = msgspec.field(default=None, name="Bytes")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")


class OperatorArgs(msgspec.Struct, frozen=True):
    """The args of an operator the event frame does not keep (record_shapes, with_flops): read from raw
    args by op_args.py on demand, never in the one-pass decode, as shapes are the bulk of an op's args."""

    input_dims: Any = msgspec.field(default=None, name="Input Dims")
    flops: Any = None
    input_type: Any = msgspec.field(default=None, name="Input type")
    input_strides: Any = msgspec.field(default=None, name="Input Strides")
    concrete_inputs: Any = msgspec.field(default=None, name="Concrete Inputs")


class TraceFormatError(HtatuiError):
    """The file is readable but is not a usable Chrome trace; the message is one line."""


EVENTS_DECODER = msgspec.json.Decoder(list[Event])
RAW_EVENTS_DECODER = msgspec.json.Decoder(list[RawEvent])
DOC_DECODER = msgspec.json.Decoder(TraceDoc)
RAW_DOC_DECODER = msgspec.json.Decoder(RawTraceDoc)
MEMORY_ARGS_DECODER = msgspec.json.Decoder(MemoryArgs)
OPERATOR_ARGS_DECODER = msgspec.json.Decoder(OperatorArgs)


def _keys_decoder(keys: tuple[str, ...]) -> msgspec.json.Decoder[Any]:
    """A decoder of only these EventArgs keys, with their names and types: other keys are skipped."""
    info = {field.name: field for field in msgspec.structs.fields(EventArgs)}
    fields = [(key, info[key].type, msgspec.field(default=None, name=info[key].encode_name)) for key in keys]
    return msgspec.json.Decoder(msgspec.defstruct("KindArgs", fields, frozen=True))


_HOST_ARGS = _keys_decoder(HOST_KEYS)
_DEVICE_ARGS = _keys_decoder(DEVICE_KEYS)
_META_ARGS = _keys_decoder(META_KEYS)


def typed(event: RawEvent) -> Event:
    """`event` with its args read by what it is: metadata, a host row or a device row.

    Args that do not fit its kind (a list where a number belongs, invalid UTF-8) leave the event
    with none of them, as if it had no args.
    """
    args = NO_EVENT_ARGS
    decoder = _args_decoder(event) if event.args else None
    if decoder is not None:
        try:
            args = EventArgs(**msgspec.structs.asdict(decoder.decode(event.args)))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
            pass
    return Event(event.ph, event.cat, event.name, event.pid, event.tid, event.ts, event.dur, event.id, args)


def _args_decoder(event: RawEvent) -> msgspec.json.Decoder[Any] | None:
    if event.ph == "M":
        return _META_ARGS
    if event.cat in HOST_ARG_CATS:
        return _HOST_ARGS
    if event.cat in DEVICE_ARG_CATS:
        return _DEVICE_ARGS
    return None


def decode_document(raw: bytes | bytearray) -> tuple[RawTraceDoc, list[str]]:
    """A whole document, falling back to Python's json where msgspec refuses; args stay raw."""
    warnings: list[str] = []
    stripped = raw.lstrip()
    if not stripped:
        raise TraceFormatError("empty file")
    is_list = stripped[:1] == b"["
    try:
        if is_list:
            return RawTraceDoc(traceEvents=RAW_EVENTS_DECODER.decode(raw)), warnings
        return RAW_DOC_DECODER.decode(raw), warnings
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


def _decode_fallback(raw: bytes | bytearray, warnings: list[str]) -> RawTraceDoc:
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
    events: list[RawEvent] = []
    dropped = 0
    for item in events_obj:
        try:
            if isinstance(item, dict) and "args" in item:
                item = dict(item, args=msgspec.Raw(msgspec.json.encode(item["args"])))
            events.append(msgspec.convert(item, RawEvent, strict=False))
        except msgspec.ValidationError:
            dropped += 1
    count_malformed(warnings, dropped)
    doc.traceEvents = events
    return doc


_MALFORMED_WARNING = re.compile(r"(\d+) malformed events skipped")


def count_malformed(warnings: list[str], count: int) -> None:
    """`count` more events skipped as malformed, added into the file's one warning that counts them."""
    if not count:
        return
    for at, warning in enumerate(warnings):
        if match := _MALFORMED_WARNING.fullmatch(warning):
            warnings[at] = f"{int(match.group(1)) + count} malformed events skipped"
            return
    warnings.append(f"{count} malformed events skipped")


def _header_fallback(header: dict[str, Any], warnings: list[str]) -> RawTraceDoc:
    """Header keys one by one, so one malformed value (or list item) does not lose the rank."""
    if isinstance(header.get("deviceProperties"), list):
        items = header["deviceProperties"]
        kept = [item for item in items if isinstance(item, dict)]
        if len(kept) < len(items):
            warnings.append(f"{len(items) - len(kept)} malformed deviceProperties item(s) ignored")
            header = dict(header, deviceProperties=kept)
    fields: dict[str, Any] = {}
    for key, value in header.items():
        if key not in TraceHeader.__struct_fields__:
            continue
        try:
            msgspec.convert({key: value}, TraceHeader, strict=False)
        except msgspec.ValidationError:
            warnings.append(f"malformed '{key}' ignored")
            continue
        fields[key] = value
    return msgspec.convert(fields, RawTraceDoc, strict=False)


def _parse_int_64(text: str) -> int | float:
    """Integers wider than 64 bits (e.g. NCCL 'Comms Id') become floats instead of failing; one past any
    float (over 308 digits) stays whole, to be refused where it is read (as msgspec leaves it)."""
    value = int(text)
    if -(2**63) <= value < 2**63:
        return value
    try:
        return float(value)
    except OverflowError:
        return value
