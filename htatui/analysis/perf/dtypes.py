"""Element sizes of the profiler's `Input type` names, and the dtype a peak is looked up under."""

from __future__ import annotations

import json

_BYTES: dict[str, int] = {
    "double": 8,
    "long int": 8,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
    "float": 4,
    "int": 4,
    "unsigned int": 4,
    "scalar": 4,  # a Python number passed as an argument (TraceLens's convention)
    "c10::half": 2,
    "c10::bfloat16": 2,
    "short int": 2,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e4m3fnuz": 1,
    "c10::float8_e5m2": 1,
    "c10::float8_e5m2fnuz": 1,
    "c10::float8_e8m0fnu": 1,
    "c10::float4_e2m1fn_x2": 1,
    "unsigned char": 1,
    "signed char": 1,
    "bool": 1,
}

_PEAK_DTYPE: dict[str, str] = {
    "double": "fp64",
    "float": "fp32",
    "c10::half": "fp16",
    "c10::bfloat16": "bf16",
    "c10::float8_e4m3fn": "fp8",
    "c10::float8_e4m3fnuz": "fp8",
    "c10::float8_e5m2": "fp8",
    "c10::float8_e5m2fnuz": "fp8",
    "c10::float4_e2m1fn_x2": "fp4",
    "signed char": "int8",
    "unsigned char": "int8",
}

SCALAR_TYPE_BYTES: dict[int, int] = {
    0: 1,
    1: 1,
    2: 2,
    3: 4,
    4: 8,
    5: 2,
    6: 4,
    7: 8,
    11: 1,
    15: 2,
    23: 1,
    24: 1,
    25: 1,
    26: 1,
}
"""c10::ScalarType codes (as a `dtype=` argument appears in `Concrete Inputs`) → element size."""


def element_bytes(type_name: str | None) -> int | None:
    """Bytes per element of an `Input type` name ("c10::BFloat16" → 2), None when unknown."""
    if not type_name:
        return None
    return _BYTES.get(type_name.lower())


def peak_dtype(type_name: str | None) -> str | None:
    """The peak table's key for a compute dtype ("c10::BFloat16" → "bf16"), None when unknown."""
    if not type_name:
        return None
    return _PEAK_DTYPE.get(type_name.lower())


_SHORT: dict[str, str] = {
    **_PEAK_DTYPE,
    "long int": "int64",
    "int": "int32",
    "bool": "bool",
    "scalar": "scalar",
    "c10::complex<float>": "c64",
    "c10::complex<double>": "c128",
}


def short_types(types_json: str | None) -> str | None:
    """A call's `Input type` list as a short key ("bf16,bf16,-"; a tensor list "[bf16]"), the
    dtypes part of a model row's key; None when the trace recorded none."""
    if not types_json:
        return None
    try:
        types = json.loads(types_json)
    except ValueError:
        return None
    if not isinstance(types, list):
        return None
    return ",".join(_short(t) for t in types)


def _short(value: object) -> str:
    if isinstance(value, str):
        return _SHORT.get(value.lower(), value.lower().removeprefix("c10::")) if value else "-"
    if isinstance(value, list):
        return "[" + ",".join(_short(v) for v in value) + "]"
    return "?"
