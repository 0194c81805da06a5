"""Element sizes of the profiler's `Input type` names, and the dtype a peak is looked up under."""

from __future__ import annotations

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
