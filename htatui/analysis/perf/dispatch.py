"""Which formula an op gets, by its name: `estimate(call)` and `category_of(name)`."""

from __future__ import annotations

from collections.abc import Callable

from htatui.analysis.perf import attention, conv, elementwise, foreach, gemm, memory_ops, norm, reduce, triton, vendor
from htatui.analysis.perf.call import Estimate, OpCall
from htatui.trace.plausible import count

Formula = Callable[[OpCall], Estimate | None]

CATEGORIES = ("GEMM", "attention", "conv", "elementwise", "norm", "reduce", "other")
"""The category summary's rows, in this order."""

FORMULAS: dict[str, Formula] = {
    "aten::mm": gemm.mm,
    "aten::addmm": gemm.addmm,
    "aten::bmm": gemm.bmm,
    "aten::baddbmm": gemm.baddbmm,
    "aten::matmul": gemm.matmul,
    "aten::linear": gemm.linear,
    "aten::_scaled_mm": gemm.scaled_mm,
    **{name: conv.forward for name in conv.LAYOUT},
    "aten::convolution_backward": conv.backward,
    **{name: attention.estimate for name in attention.names()},
    **{name: elementwise.unary for name in elementwise.UNARY},
    **{name: elementwise.binary for name in elementwise.BINARY},
    "aten::layer_norm": norm.layer_norm,
    "aten::native_layer_norm": norm.layer_norm,
    "aten::rms_norm": norm.rms_norm,
    "aten::_fused_rms_norm": norm.rms_norm,
    "aten::batch_norm": norm.batch_norm,
    "aten::native_batch_norm": norm.batch_norm,
    "aten::cudnn_batch_norm": norm.batch_norm,
    "aten::group_norm": norm.group_norm,
    "aten::native_group_norm": norm.group_norm,
    "aten::native_layer_norm_backward": norm.layer_norm_backward,
    "aten::native_batch_norm_backward": norm.batch_norm_backward,
    "aten::cudnn_batch_norm_backward": norm.batch_norm_backward,
    "aten::miopen_batch_norm_backward": norm.batch_norm_backward,
    "aten::native_group_norm_backward": norm.group_norm_backward,
    "aten::_fused_rms_norm_backward": norm.rms_norm_backward,
    **{name: reduce.reduction for name in reduce.REDUCTIONS},
    **{name: reduce.softmax for name in reduce.SOFTMAX},
    **{name: reduce.softmax_backward for name in reduce.SOFTMAX_BACKWARD},
    **{name: reduce.embedding for name in reduce.EMBEDDING},
    **{name: reduce.embedding_backward for name in reduce.EMBEDDING_BACKWARD},
    **{name: memory_ops.max_pool for name in memory_ops.POOL},
    **{name: memory_ops.max_pool_backward for name in memory_ops.POOL_BACKWARD},
    **{name: memory_ops.fill for name in memory_ops.FILLS},
    "aten::index_select": memory_ops.index_select,
    "aten::where": memory_ops.where,
    "aten::masked_fill_": memory_ops.masked_fill,
    "aten::masked_fill": memory_ops.masked_fill,
    "aten::miopen_batch_norm": norm.batch_norm,
    "aten::instance_norm": norm.instance_norm,
    "aiter::_groupnorm_run": norm.group_norm,
    **{name: memory_ops.upsample_nearest for name in memory_ops.UPSAMPLE},
    # Vendor GEMMs with linear's arguments (x [..., K], weight [N, K], bias?).
    "aiter::gemm_a16w16": gemm.linear,
    "vllm::rocm_unquantized_gemm": gemm.linear,
    "aten::_grouped_mm": gemm.grouped_mm,
    **{name: attention.varlen for name in attention.varlen_names()},
    **vendor.FORMULAS,
}
"""Op name → formula (docs/semantics-perf-model.md lists each)."""

_CATEGORY_ONLY: dict[str, str] = {
    # Ops that launch a family's kernels but whose arguments no formula reads.
    "aten::_scaled_dot_product_flash_attention_for_cpu": "attention",
    "aten::conv_transpose1d": "conv",
    "aten::conv_transpose2d": "conv",
    "aten::conv_transpose3d": "conv",
}


def _formula_category(name: str) -> str:
    family = FORMULAS[name].__module__.rsplit(".", 1)[-1]
    if name in reduce.EMBEDDING or name in reduce.EMBEDDING_BACKWARD or name == "aten::index_select":
        return "other"
    if name in memory_ops.POOL or name in memory_ops.POOL_BACKWARD:
        return "reduce"
    if family == "memory_ops":
        return "elementwise"
    if family == "vendor":
        return vendor.CATEGORIES[name]
    return {
        "gemm": "GEMM",
        "conv": "conv",
        "attention": "attention",
        "elementwise": "elementwise",
        "norm": "norm",
        "reduce": "reduce",
    }[family]


_CATEGORY_BY_NAME: dict[str, str] = {name: _formula_category(name) for name in FORMULAS} | _CATEGORY_ONLY


def category_of(name: str) -> str | None:
    """The category an op's name puts it in (None: no family; the summary calls it "other");
    an inductor Triton kernel's by its kind (`triton.category_of`); foreach ops are elementwise."""
    return _CATEGORY_BY_NAME.get(name) or triton.category_of(name) or ("elementwise" if foreach.op_of(name) else None)


def estimate(call: OpCall) -> Estimate | None:
    """The call's FLOPs and bytes by its formula; None when its op has none or its arguments do
    not fit the formula (missing shapes, a shape of the wrong rank)."""
    formula = FORMULAS.get(call.name) or (triton.estimate if triton.category_of(call.name) else None)
    formula = formula or (foreach.estimate if foreach.op_of(call.name) else None)
    if formula is None:
        return None
    try:
        found = formula(call)
    except (IndexError, ValueError, ZeroDivisionError):
        return None  # arguments recorded in an unexpected layout: no figure rather than a wrong one
    if found is None or count(found.flops) is None or (found.bytes is not None and count(found.bytes) is None):
        return None  # a product of plausible shapes can still be absurd: no figure
    return found
