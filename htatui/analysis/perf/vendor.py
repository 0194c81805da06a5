"""Vendor ops whose inputs the trace records (vLLM `_C::`, SGLang `sgl_kernel::`, AMD `aiter::`),
from their documented semantics (htatui's own counts; docs/semantics-perf-model.md).

With E = |x| elements, C the normalized width, T tokens, element size s:
- RMS norm (`_C::rms_norm(out, input, weight, eps)`, `aiter::rmsnorm(out, input, weight, eps)`,
  `aiter::rms_norm(input, weight, eps, …)`):
  FLOPs as `norm.rms` (weighted), bytes = 2·E·s + C·s. With the residual add
  (`_C::fused_add_rms_norm(input, residual, weight, eps)` in place; `aiter::add_rmsnorm` and
  `aiter::rmsnorm2d_fwd_with_add_ck(out, input, residual_in, residual_out, weight, eps, …)`):
  + E FLOPs, bytes = 4·E·s + C·s (two read, two written).
- SiLU-and-mul (`_C::silu_and_mul` / `sgl_kernel::silu_and_mul(out [T, d], input [T, 2d])`):
  FLOPs = 5·T·d (sigmoid: exp, add, divide; two multiplies), bytes = |input|·s + |out|·s.
- Rotary embedding (`_C::` / `sgl_kernel::rotary_embedding(positions [T], query, key, head_size,
  cos_sin_cache [P, R], is_neox)`): each head's R rotated elements cost 3 FLOPs (a pair: four
  multiplies, two adds): FLOPs = 3·T·(H_q + H_k)·R; bytes = 2·(|q| + |k|)·s (read and written) +
  T·R·s (the cos/sin rows) + T·8.
- FP8 quantization (`_C::static_scaled_fp8_quant(out, input, scale)`, `_C::dynamic_scaled_fp8_quant`):
  FLOPs = 2·E (scale, clamp), bytes = E·s_in + E·s_out + 4.
- KV-cache writes (`_C_cache_ops::reshape_and_cache(_flash)(key [T, H, d], value, key_cache,
  value_cache, slot_mapping, …)`): FLOPs 0, bytes = 2·|key|·s (read) + 2·|key|·s_cache (written)
  + T·8.
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall
from htatui.analysis.perf.dtypes import element_bytes


def _rms(elems: int, channels: int) -> float:
    return (elems / channels) * (2 * channels + 2) + 2 * elems


def rms_norm(call: OpCall) -> Estimate | None:
    """out, input, weight, eps; aiter::rms_norm(input, weight, eps, …)."""
    x_at = 0 if call.name == "aiter::rms_norm" else 1
    x, w = call.shape(x_at), call.shape(x_at + 1)
    size = element_bytes(call.type(x_at))
    if x is None or w is None or size is None or not math.prod(w):
        return None
    elems, channels = math.prod(x), math.prod(w)
    return Estimate(_rms(elems, channels), float((2 * elems + channels) * size), "norm.rms", "norm", call.type(x_at))


def add_rms_norm(call: OpCall) -> Estimate | None:
    """vLLM: input, residual, weight, eps; aiter: out, input, residual_in, residual_out, weight, eps."""
    x_at, w_at = (0, 2) if call.name.startswith("_C::") else (1, 4)
    x, w = call.shape(x_at), call.shape(w_at)
    size = element_bytes(call.type(x_at))
    if x is None or w is None or size is None or not math.prod(w):
        return None
    elems, channels = math.prod(x), math.prod(w)
    flops = _rms(elems, channels) + elems
    return Estimate(flops, float((4 * elems + channels) * size), "norm.add_rms", "norm", call.type(x_at))


def silu_and_mul(call: OpCall) -> Estimate | None:
    """out [T, d], input [T, 2d]."""
    out, x = call.shape(0), call.shape(1)
    size_out, size_in = element_bytes(call.type(0)), element_bytes(call.type(1))
    if out is None or x is None or size_out is None or size_in is None:
        return None
    n = math.prod(out)
    moved = float(math.prod(x) * size_in + n * size_out)
    return Estimate(float(5 * n), moved, "elementwise.silu_and_mul", "elementwise", call.type(1))


def rotary_embedding(call: OpCall) -> Estimate | None:
    """positions [T], query [T, H_q·d], key [T, H_k·d], head_size, cos_sin_cache [P, R], is_neox."""
    positions, q, k, cache = call.shape(0), call.shape(1), call.shape(2), call.shape(4)
    head = call.ints(3)
    size = element_bytes(call.type(1))
    if positions is None or q is None or cache is None or len(cache) != 2 or not head or head[0] <= 0 or size is None:
        return None
    tokens, rotated = math.prod(positions), cache[1]
    heads = (math.prod(q) + (math.prod(k) if k else 0)) // max(tokens, 1) // head[0]
    flops = 3 * tokens * heads * rotated
    moved = 2 * (math.prod(q) + (math.prod(k) if k else 0)) * size + tokens * rotated * size + tokens * 8
    return Estimate(float(flops), float(moved), "elementwise.rotary", "elementwise", call.type(1))


def fp8_quant(call: OpCall) -> Estimate | None:
    """out (fp8), input, scale."""
    out, x = call.shape(0), call.shape(1)
    size_out, size_in = element_bytes(call.type(0)), element_bytes(call.type(1))
    if out is None or x is None or size_out is None or size_in is None:
        return None
    n = math.prod(x)
    return Estimate(float(2 * n), float(n * size_in + n * size_out + 4), "quant.fp8", "elementwise", call.type(1))


def cache_write(call: OpCall) -> Estimate | None:
    """key [T, H, d], value, key_cache, value_cache, slot_mapping, …: the new keys and values
    written into the paged cache."""
    key, slots = call.shape(0), call.shape(4)
    size, cache = element_bytes(call.type(0)), element_bytes(call.type(2))
    if key is None or size is None or cache is None:
        return None
    n = math.prod(key)
    tokens = math.prod(slots) if slots else key[0]
    return Estimate(0.0, float(2 * n * size + 2 * n * cache + tokens * 8), "kv_cache.write", "other", call.type(0))


FORMULAS = {
    "_C::rms_norm": rms_norm,
    "aiter::rmsnorm": rms_norm,
    "aiter::rms_norm": rms_norm,
    "aiter::rmsnorm2d_fwd_with_add_ck": add_rms_norm,
    "_C::fused_add_rms_norm": add_rms_norm,
    "aiter::add_rmsnorm": add_rms_norm,
    "_C::silu_and_mul": silu_and_mul,
    "sgl_kernel::silu_and_mul": silu_and_mul,
    "_C::rotary_embedding": rotary_embedding,
    "sgl_kernel::rotary_embedding": rotary_embedding,
    "_C::static_scaled_fp8_quant": fp8_quant,
    "_C::dynamic_scaled_fp8_quant": fp8_quant,
    "_C_cache_ops::reshape_and_cache": cache_write,
    "_C_cache_ops::reshape_and_cache_flash": cache_write,
}
"""Vendor op name → formula."""

CATEGORIES = {
    name: "norm" if formula in (rms_norm, add_rms_norm) else "other" if formula is cache_write else "elementwise"
    for name, formula in FORMULAS.items()
}
"""Vendor op name → category."""
