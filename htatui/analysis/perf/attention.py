"""Fused attention, forward and backward (TraceLens SDPA, after flash-attention's benchmark count).

With B batch, H_Q / H_KV heads, N_Q / N_KV sequence lengths, d_qk / d_v head sizes:
forward FLOPs = 2·B·H_Q·N_Q·N_KV·(d_qk + d_v) (S = QKᵀ and O = PV; the softmax is left out),
halved when causal with N_Q = N_KV; bytes = (|Q| + |K| + |V| + |O|)·element size.
Backward FLOPs = recomputing S (2·B·H_Q·N_Q·N_KV·d_qk) + dV, dP, dQ, dK (2·B·H_Q·N_Q·N_KV·d each)
+ the GQA reduction of dK and dV over H_Q/H_KV heads, halved when causal; bytes = (|Q| + |K| +
|V| + |dO| + |dQ| + |dK| + |dV|)·element size.
"""

from __future__ import annotations

from dataclasses import dataclass

from htatui.analysis.perf.call import Estimate, OpCall, Shape
from htatui.analysis.perf.dtypes import element_bytes

CATEGORY = "attention"


@dataclass(frozen=True)
class Problem:
    batch: int
    n_q: int
    h_q: int
    n_kv: int
    h_kv: int
    d_qk: int
    d_v: int
    causal: bool


def forward_flops(p: Problem) -> float:
    flops = 2 * p.batch * p.h_q * p.n_q * p.n_kv * (p.d_qk + p.d_v)
    return flops / 2 if p.causal and p.n_q == p.n_kv else float(flops)


def forward_bytes(p: Problem, size: int) -> float:
    q = p.batch * p.n_q * p.h_q * p.d_qk
    k = p.batch * p.n_kv * p.h_kv * p.d_qk
    v = p.batch * p.n_kv * p.h_kv * p.d_v
    out = p.batch * p.n_q * p.h_q * p.d_v
    return float((q + k + v + out) * size)


def backward_flops(p: Problem) -> float:
    pair = 2 * p.batch * p.h_q * p.n_q * p.n_kv
    reduce_heads = max(p.h_q // p.h_kv - 1, 0) * p.batch * p.n_kv
    flops = pair * p.d_qk  # recompute S = QKᵀ
    flops += pair * p.d_v + reduce_heads * p.d_v  # dV = Pᵀ·dO (+ GQA sum)
    flops += pair * p.d_v  # dP = dO·Vᵀ
    flops += pair * p.d_qk  # dQ = dS·K
    flops += pair * p.d_qk + reduce_heads * p.d_qk  # dK = dSᵀ·Q (+ GQA sum)
    return flops / 2 if p.causal and p.n_q == p.n_kv else float(flops)


def backward_bytes(p: Problem, size: int) -> float:
    q = p.batch * p.n_q * p.h_q * p.d_qk
    k = p.batch * p.n_kv * p.h_kv * p.d_qk
    v = p.batch * p.n_kv * p.h_kv * p.d_v
    grad_out = p.batch * p.n_q * p.h_q * p.d_v
    return float((2 * (q + k + v) + grad_out) * size)


# name → (index of q; q, k, v laid out as (B, H, N, d) or (B, N, H, d); index of is_causal; backward?)
_OPS: dict[str, tuple[int, str, int, bool]] = {
    "aten::scaled_dot_product_attention": (0, "bhnd", 5, False),
    "aten::_scaled_dot_product_flash_attention": (0, "bhnd", 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, "bhnd", 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, "bhnd", 6, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, "bhnd", 11, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, "bhnd", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, "bhnd", 14, True),
    "aten::_flash_attention_forward": (0, "bnhd", 8, False),
    "flash_attn::_flash_attn_forward": (0, "bnhd", 5, False),
    "FlashAttnFunc": (0, "bnhd", 5, False),
    # The kernels' own entry points under SDPA (PyTorch 2.5+ records these; their schemas):
    "aten::_cudnn_attention_forward": (0, "bhnd", 10, False),
    "aten::_cudnn_attention_backward": (1, "bhnd", 14, True),
    "aten::_flash_attention_backward": (1, "bnhd", 11, True),
    "aten::_efficient_attention_forward": (0, "bnhd", 9, False),
    "aten::_efficient_attention_backward": (1, "bnhd", 14, True),
    "flash_attn::_flash_attn_backward": (1, "bnhd", 11, True),
}


def names() -> tuple[str, ...]:
    return tuple(_OPS)


def problem(q: Shape, k: Shape, v: Shape, layout: str, causal: bool) -> Problem | None:
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    b, h, n = (0, 1, 2) if layout == "bhnd" else (0, 2, 1)
    if q[b] != k[b] or k[h] != v[h] or k[n] != v[n] or q[3] != k[3] or k[h] == 0:
        return None
    return Problem(q[b], q[n], q[h], k[n], k[h], q[3], v[3], causal)


def estimate(call: OpCall) -> Estimate | None:
    spec = _OPS.get(call.name)
    if spec is None:
        return None
    at, layout, causal_at, is_backward = spec
    if len(call.concrete) <= causal_at:
        return None  # is_causal not recorded (older traces): FLOPs unknown within a factor of 2
    q, k, v = call.shape(at), call.shape(at + 1), call.shape(at + 2)
    if not q or not k or not v:
        return None
    # A bool is_causal, or xformers' custom_mask_type (0: none, 1 and 2: causal).
    mask = call.ints(causal_at)
    causal = bool(mask and mask[0]) if mask is not None and len(mask) == 1 else call.flag(causal_at)
    p = problem(q, k, v, layout, causal)
    if p is None:
        return None
    size = element_bytes(call.type(at))
    if is_backward:
        moved = None if size is None else backward_bytes(p, size)
        return Estimate(backward_flops(p), moved, "attention.bwd", CATEGORY, call.type(at))
    moved = None if size is None else forward_bytes(p, size)
    return Estimate(forward_flops(p), moved, "attention.fwd", CATEGORY, call.type(at))


# Variable-length and paged attention: q [T_q, H_q, d] over B sequences; the keys are T_k tokens
# (name → index of q, of cu_seqlens_q, of the key count's source, of is_causal, backward?).
_VARLEN: dict[str, tuple[int, int, int, int, bool]] = {
    "flash_attn::_flash_attn_varlen_forward": (0, 3, 1, 9, False),
    "flash_attn::_flash_attn_varlen_backward": (1, 9, 2, 15, True),
    "aiter::mha_batch_prefill": (0, 3, 5, 12, False),
}


def varlen_names() -> tuple[str, ...]:
    return tuple(_VARLEN)


def varlen(call: OpCall) -> Estimate | None:
    """Sequences of equal length (the lengths are device tensors, not in the trace): each of the
    B = |cu_seqlens_q| − 1 sequences has T_q/B queries and T_k/B keys, T_k from the keys' first
    dimension, or for aiter's paged prefill the count of `kv_page_indices` (one token a page;
    × the page size when the cache is [pages, page, H, d]). Causal masking is bottom-right: each
    query sees the keys up to its own position, n_q·n_k − n_q·(n_q − 1)/2 pairs of a sequence.
    FLOPs = 2·B·H_q·pairs·(d_qk + d_v) (the backward: × 5/2, as `backward_flops` counts five
    products to the forward's two); bytes = (|q| + 2·T_k·H_k·d + |out|)·size (× 2 backward, with dO)."""
    spec = _VARLEN.get(call.name)
    if spec is None:
        return None
    q_at, cu_at, keys_at, causal_at, is_backward = spec
    q, k, cu = call.shape(q_at), call.shape(q_at + 1), call.shape(cu_at)
    size = element_bytes(call.type(q_at))
    if q is None or k is None or cu is None or len(q) != 3 or len(cu) != 1 or cu[0] < 2:
        return None
    batch = cu[0] - 1
    if call.name == "aiter::mha_batch_prefill":
        pages = call.shape(keys_at)
        if pages is None:
            return None
        keys = pages[0] * (k[1] if len(k) == 4 else 1)
    else:
        keys = k[0]
    h_kv, d = k[-2], q[2]
    n_q, n_k = q[0] / batch, keys / batch
    pairs = n_q * n_k - (n_q * (n_q - 1) / 2 if call.flag(causal_at) and n_k >= n_q else 0.0)
    flops = 2 * batch * q[1] * pairs * (d + d)
    moved = None if size is None else float((q[0] * q[1] * d * 2 + 2 * keys * h_kv * d) * size)
    if is_backward:
        return Estimate(
            flops * 2.5, None if moved is None else 2 * moved, "attention.varlen_bwd", CATEGORY, call.type(q_at)
        )
    return Estimate(flops, moved, "attention.varlen", CATEGORY, call.type(q_at))
