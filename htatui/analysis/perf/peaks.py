"""Device roofs (matrix and vector TFLOP/s per dtype, memory TB/s, L2) kept as data, extendable by
the user.

The shipped table is `peaks.toml` beside this module; users add devices in TOML files of the same
shape named by the scope's rules (`core.rules.Rules.peaks_files`: `--device-peaks FILE`, or the
``HTATUI_DEVICE_PEAKS`` variable the faces read), tried before the shipped ones.
A trace names its device in `deviceProperties` (e.g. "NVIDIA H100 80GB HBM3", with numSms,
computeMajor/Minor, totalGlobalMem and on ROCm sometimes gcnArchName); a device whose name is
empty is found by its SM count, architecture and memory (`find_device`).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from htatui.analysis.core.rules import SHIPPED_RULES, Rules
from htatui.errors import HtatuiError
from htatui.sources.user_file import read_user_text
from htatui.trace.plausible import cut

SHIPPED = Path(__file__).with_name("peaks.toml")

Unit = Literal["matrix", "vector"]
"""Which units do a family's arithmetic: tensor/matrix cores (GEMM, convolution, attention) or the
vector units (everything else)."""

MIN_TFLOPS, MAX_TFLOPS = 1e-3, 1e6
"""A plausible peak lies between 1 GFLOP/s and 1 EFLOP/s: `inf` or 1e-300 is a typo, not a GPU."""
MIN_TBPS, MAX_TBPS = 1e-3, 1e3
MEMORY_SLACK = 0.1
"""totalGlobalMem may differ from a datasheet's capacity by what the driver reserves."""


class DevicePeaksError(HtatuiError, ValueError):
    """A peaks file that cannot be read or has a bad entry; the message names the file."""


@dataclass(frozen=True)
class Device:
    name: str
    match: str
    memory_tbps: float
    matrix: dict[str, float]
    vector: dict[str, float] = field(default_factory=dict)
    sms: int | None = None
    """When set, a trace's `numSms`, if recorded, must equal it too (AMD GPUs often report a
    generic name); with `arch` and `memory_gb` it finds a device whose name is empty."""
    arch: tuple[str, ...] = ()
    memory_gb: float | None = None
    l2_mb: float | None = None
    source: str = ""

    def roof(self, dtype: str | None, unit: Unit) -> float | None:
        """The peak TFLOP/s of `dtype` ("bf16") on `unit`: matrix work falls to the vector units
        for a dtype the matrix units lack (fp32 GEMMs on NVIDIA); vector work in a half type falls
        to fp32 (PyTorch's kernels compute it in float); a file with one table serves both."""
        if not dtype:
            return None
        if unit == "matrix":
            return self.matrix.get(dtype) or self.vector.get(dtype)
        if not self.vector:
            return self.matrix.get(dtype)
        found = self.vector.get(dtype)
        if found is None and dtype in ("bf16", "fp16", "fp8", "int8", "fp4"):
            return self.vector.get("fp32")
        return found

    def peak_tflops(self, dtype: str | None) -> float | None:
        """The matrix roof of a dtype (the dense tensor-core peak; `roof(dtype, "matrix")`)."""
        return self.roof(dtype, "matrix")


def _number(value: Any, low: float, high: float) -> bool:
    return (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and low <= value <= high
    )


def _table(entry: dict[str, Any], key: str, name: str, path: Path) -> dict[str, float]:
    table = entry.get(key, {})
    if not isinstance(table, dict) or not all(_number(v, MIN_TFLOPS, MAX_TFLOPS) for v in table.values()):
        raise DevicePeaksError(
            f"{path}: device {name!r} needs {key} as a table of positive numbers "
            f"({MIN_TFLOPS:g} to {MAX_TFLOPS:g} TFLOP/s)"
        )
    return {str(k): float(v) for k, v in table.items()}


def _device(entry: Any, path: Path) -> Device:
    if not isinstance(entry, dict):
        raise DevicePeaksError(f"{path}: each [[device]] must be a table")
    name, match = entry.get("name"), entry.get("match")
    if not isinstance(name, str) or not isinstance(match, str):
        raise DevicePeaksError(f"{path}: a [[device]] needs a string name and match")
    try:
        re.compile(match)
    except re.error as exc:
        raise DevicePeaksError(f"{path}: device {name!r} has a bad match regex ({exc})") from None
    if runaway_pattern(match):
        raise DevicePeaksError(
            f"{path}: device {name!r} has a match regex that can backtrack without end (a repeated group "
            "holding a repeat or an alternation, such as (a+)+): write it without the nesting"
        )
    memory = entry.get("memory_tbps")
    if not isinstance(memory, int | float) or not _number(memory, MIN_TBPS, MAX_TBPS):
        raise DevicePeaksError(f"{path}: device {name!r} needs a positive memory_tbps ({MIN_TBPS:g} to {MAX_TBPS:g})")
    matrix = _table(entry, "matrix", name, path) | _table(entry, "tflops", name, path)
    vector = _table(entry, "vector", name, path)
    sms = entry.get("sms")
    if sms is not None and (not isinstance(sms, int) or isinstance(sms, bool) or not 0 < sms < 2**20):
        raise DevicePeaksError(f"{path}: device {name!r} has a bad sms (a positive integer)")
    arch = entry.get("arch", [])
    if not isinstance(arch, list) or not all(isinstance(a, str) for a in arch):
        raise DevicePeaksError(f'{path}: device {name!r} has a bad arch (a list of strings such as "9.0", "gfx942")')
    sizes = {key: entry.get(key) for key in ("memory_gb", "l2_mb")}
    for key, value in sizes.items():
        if value is not None and not _number(value, 1e-3, 1e6):
            raise DevicePeaksError(f"{path}: device {name!r} has a bad {key} (a positive number)")
    source = entry.get("source", "")
    return Device(
        name,
        match,
        float(memory),
        matrix,
        vector,
        sms,
        tuple(arch),
        None if sizes["memory_gb"] is None else float(sizes["memory_gb"]),
        None if sizes["l2_mb"] is None else float(sizes["l2_mb"]),
        source if isinstance(source, str) else "",
    )


def runaway_pattern(pattern: str) -> bool:
    """Whether a regex repeats a group that itself holds a repeat or an alternation (`(a+)+`,
    `(a|ab)*`): the shapes whose backtracking grows exponentially with the text. A possessive
    outer repeat (`(a+)++`) does not backtrack and is allowed."""
    risky: list[bool] = []  # per open group: whether it holds a repeat or an alternation
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            i = _class_end(pattern, i)
            continue
        if char == "(":
            risky.append(False)
        elif char == "|" and risky:
            risky[-1] = True
        elif char in "*+{" and risky:
            risky[-1] = True
        elif char == ")" and risky:
            inner = risky.pop()
            repeated = _repeat_after(pattern, i + 1)
            if inner and repeated:
                return True
            if risky and (inner or repeated):
                risky[-1] = True
        i += 1
    return False


def _class_end(pattern: str, start: int) -> int:
    """The index after a character class that opens at `start`."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern) and pattern[i] != "]":
        i += 2 if pattern[i] == "\\" else 1
    return i + 1


def _repeat_after(pattern: str, at: int) -> bool:
    """Whether a backtracking repeat (*, +, {m,n}, not possessive) follows position `at`."""
    if at >= len(pattern) or pattern[at] not in "*+{":
        return False
    end = at + 1
    if pattern[at] == "{":
        close = pattern.find("}", at)
        if close < 0 or not re.fullmatch(r"\d*,?\d*", pattern[at + 1 : close]):
            return False
        bounds = pattern[at + 1 : close]
        if "," not in bounds:
            return False  # {n}: a fixed count
        end = close + 1
    return not (end < len(pattern) and pattern[end] == "+")


def read_devices(path: Path) -> list[Device]:
    """The devices of a peaks file; DevicePeaksError names the file and what is wrong."""
    try:
        data = tomllib.loads(read_user_text(path))
    except OSError as exc:
        raise DevicePeaksError(f"{path}: cannot read device peaks ({exc.strerror or exc})") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DevicePeaksError(f"{path}: not a valid TOML peaks file ({exc})") from None
    entries = data.get("device", [])
    if not isinstance(entries, list):
        raise DevicePeaksError(f"{path}: `device` must be an array of tables ([[device]])")
    return [_device(entry, path) for entry in entries]


@lru_cache(maxsize=8)
def _load(user_files: tuple[str, ...]) -> tuple[Device, ...]:
    devices: list[Device] = []
    for name in user_files:
        devices.extend(read_devices(Path(name)))
    devices.extend(read_devices(SHIPPED))
    return tuple(devices)


def devices(rules: Rules = SHIPPED_RULES) -> tuple[Device, ...]:
    """The user's devices in `rules`, then the shipped ones (read once per distinct list of files)."""
    return _load(rules.peaks_files)


def find_device(
    device_name: str | None,
    sms: int | None = None,
    arch: tuple[str, ...] = (),
    memory_gb: float | None = None,
    rules: Rules = SHIPPED_RULES,
) -> Device | None:
    """The first device whose `match` is found in `device_name` (case-insensitive, the name cut
    to `plausible.NAME_LIMIT` characters), or whose own name equals it, and whose `sms` (if both
    it and the trace name one) equals the trace's `numSms`. A trace with no name is matched by
    its SM count and architecture (any spelling in `arch`), and its memory when recorded (within
    10 %). None when no device fits."""
    if device_name:
        name = cut(device_name)
        for device in devices(rules):
            named = device.name.lower() == name.lower() or re.search(device.match, name, re.IGNORECASE)
            if named and (device.sms is None or sms is None or device.sms == sms):
                return device
        return None
    if sms is None or not arch:
        return None
    for device in devices(rules):
        if device.sms != sms or not set(arch) & set(device.arch):
            continue
        if memory_gb is None or device.memory_gb is None or abs(memory_gb / device.memory_gb - 1) <= MEMORY_SLACK:
            return device
    return None


def device_from_properties(props: Mapping[str, Any], rules: Rules = SHIPPED_RULES) -> Device | None:
    """The device a trace's `deviceProperties` entry describes (`find_device`)."""
    sms = props.get("numSms")
    arch: list[str] = []
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if (
        isinstance(major, int)
        and isinstance(minor, int)
        and not isinstance(major, bool)
        and not isinstance(minor, bool)
    ):
        arch.append(f"{major}.{minor}")
    gcn = props.get("gcnArchName")
    if isinstance(gcn, str) and gcn:
        arch.append(cut(gcn).split(":", 1)[0])
    memory = props.get("totalGlobalMem")
    memory_gb = (
        memory / 1e9 if isinstance(memory, int | float) and not isinstance(memory, bool) and memory > 0 else None
    )
    name = props.get("name")
    return find_device(
        name if isinstance(name, str) else "",
        sms if isinstance(sms, int) and not isinstance(sms, bool) else None,
        tuple(arch),
        memory_gb,
        rules,
    )


def ridge_flop_per_byte(device: Device, dtype: str | None, unit: Unit = "matrix") -> float | None:
    """The roofline's ridge point: peak FLOP/s over bandwidth (FLOP per byte)."""
    peak = device.roof(dtype, unit)
    return None if peak is None else peak / device.memory_tbps
