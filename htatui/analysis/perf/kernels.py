"""The dtype a kernel computes in, read from its name (docs/semantics-perf-model.md, "Dtype").

GEMM, convolution and attention libraries name their kernels by the types of the tile math:
cuBLAS/cuDNN `sm90_xmma_gemm_bf16bf16_bf16f32_f32…`, CUTLASS `cutlass_80_tensorop_bf16_s16816gemm…`
and `…_s1688gemm_tf32…`, `ampere_sgemm…`, flash-attention `…cutlass::bfloat16_t…`, TensorRT-LLM's
`fmhaSm100aKernel_QkvE4m3…`, MIOpen `igemm_fwd_gtcx3_nhwc_bf16…`, hipBLASLt `Cijk_…_BBS_…`
(inputs, output, compute: B bf16, H half, S single). A name without such a token (cuBLAS's
`nvjet_…`) tells nothing, and the launching op's input dtype stands instead.
"""

from __future__ import annotations

import re

from htatui.trace.plausible import cut

# Ordered: the first pattern found names the dtype ("bf16bf16_bf16f32" is bf16 math with an
# fp32 accumulator, so bf16 is looked for before f32).
_TOKENS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fp4", re.compile(r"e2m1|nvfp4|mxfp4|fp4", re.IGNORECASE)),
    ("fp8", re.compile(r"e4m3|e5m2|fp8|f8f8|_f8_", re.IGNORECASE)),
    ("int8", re.compile(r"i8i8|imma|int8|_i8_", re.IGNORECASE)),
    ("tf32", re.compile(r"tf32|xf32|s1688gemm_tf32", re.IGNORECASE)),
    ("bf16", re.compile(r"bf16|bfloat16|_B_?BS_", re.IGNORECASE)),
    ("fp16", re.compile(r"fp16|f16|half|hgemm|h884|h1688|h16816|_H_?HS_", re.IGNORECASE)),
    ("fp64", re.compile(r"dgemm|f64|fp64|double", re.IGNORECASE)),
    ("fp32", re.compile(r"sgemm|f32f32_f32|_S_?SS_", re.IGNORECASE)),
)


def kernel_dtype(name: str) -> str | None:
    """The peak-table dtype a kernel's name says it computes in ("bf16"), None when it says none."""
    text = cut(name)
    for dtype, pattern in _TOKENS:
        if pattern.search(text):
            return dtype
    return None
