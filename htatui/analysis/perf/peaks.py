"""Device peaks (dense TFLOP/s per dtype, memory TB/s) kept as data, extendable by the user.

The shipped table is `peaks.toml` beside this module; users add devices in TOML files of the same
shape named in ``HTATUI_DEVICE_PEAKS`` (``os.pathsep``-separated), tried before the shipped
ones. A trace names its device in `deviceProperties` (e.g. "NVIDIA H100 80GB HBM3").
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from htatui.sources.user_file import read_user_text

ENV_VAR = "HTATUI_DEVICE_PEAKS"
SHIPPED = Path(__file__).with_name("peaks.toml")


class DevicePeaksError(ValueError):
    """A peaks file that cannot be read or has a bad entry; the message names the file."""


@dataclass(frozen=True)
class Device:
    name: str
    match: str
    memory_tbps: float
    tflops: dict[str, float]
    sms: int | None = None
    """When set, a trace's `numSms`, if recorded, must equal it too (AMD GPUs often report a
    generic name)."""

    def peak_tflops(self, dtype: str | None) -> float | None:
        """The dense peak for a peak-table dtype ("bf16"), None when the table lacks it."""
        return self.tflops.get(dtype) if dtype else None


def _device(entry: Any, path: Path) -> Device:
    if not isinstance(entry, dict):
        raise DevicePeaksError(f"{path}: each [[device]] must be a table")
    name, match = entry.get("name"), entry.get("match")
    memory, tflops = entry.get("memory_tbps"), entry.get("tflops", {})
    if not isinstance(name, str) or not isinstance(match, str):
        raise DevicePeaksError(f"{path}: a [[device]] needs a string name and match")
    try:
        re.compile(match)
    except re.error as exc:
        raise DevicePeaksError(f"{path}: device {name!r} has a bad match regex ({exc})") from None
    if not isinstance(memory, int | float) or isinstance(memory, bool) or memory <= 0:
        raise DevicePeaksError(f"{path}: device {name!r} needs a positive memory_tbps")
    if not isinstance(tflops, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in tflops.values()
    ):
        raise DevicePeaksError(f"{path}: device {name!r} needs tflops as a table of positive numbers")
    sms = entry.get("sms")
    if sms is not None and (not isinstance(sms, int) or isinstance(sms, bool) or sms <= 0):
        raise DevicePeaksError(f"{path}: device {name!r} has a bad sms (a positive integer)")
    return Device(name, match, float(memory), {str(k): float(v) for k, v in tflops.items()}, sms)


def read_devices(path: Path) -> list[Device]:
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


def devices() -> tuple[Device, ...]:
    """The user's devices, then the shipped ones (read once per distinct HTATUI_DEVICE_PEAKS)."""
    value = os.environ.get(ENV_VAR, "")
    return _load(tuple(part for part in value.split(os.pathsep) if part.strip()))


def find_device(device_name: str | None, sms: int | None = None) -> Device | None:
    """The first device whose `match` is found in `device_name` (case-insensitive), or whose
    own name equals it, and whose `sms` (if both it and the trace name one) equals the trace's
    `numSms`; None when none does."""
    if not device_name:
        return None
    for device in devices():
        named = device.name.lower() == device_name.lower() or re.search(device.match, device_name, re.IGNORECASE)
        if named and (device.sms is None or sms is None or device.sms == sms):
            return device
    return None


def ridge_flop_per_byte(device: Device, dtype: str | None) -> float | None:
    """The roofline's ridge point: peak FLOP/s over bandwidth (FLOP per byte)."""
    peak = device.peak_tflops(dtype)
    return None if peak is None else peak / device.memory_tbps


def add_user_peaks_file(path: Path) -> None:
    """Add `path` to HTATUI_DEVICE_PEAKS for this process, after checking it reads."""
    read_devices(path)
    value = os.environ.get(ENV_VAR, "")
    os.environ[ENV_VAR] = os.pathsep.join([*(p for p in value.split(os.pathsep) if p.strip()), str(path)])
