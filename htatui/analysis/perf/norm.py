"""Normalization: layer, RMS, batch and group norm, forward and backward (TraceLens Normalization).

With E elements, C channels (layer/RMS norm: the normalized shape's size; batch/group norm:
dimension 1), element sizes `in` (the input's, also used for the parameters, as TraceLens does)
and `out` (= in):
- forward FLOPs = 3·C (scale and shift from the statistics) + 3·E if training (mean and
  variance) + 3·C (1/√(var+ε)) + 2·E (x·α + β); bytes = E·in + E·out + T·C·in, where T counts the
  per-channel tensors: mean and variance (2), weight and bias when present, the running
  statistics written when training (2).
- RMS norm FLOPs = (E/C)·(2·C + 2) + E·(2 if weighted else 1); bytes = E·in + E·out + C·in if weighted.
- backward FLOPs = C·(4·E/C + (5·E/C if grad_input and training, 2·E/C if no grad_input) +
  3 if not training); bytes = E·out (grad_out) + E·in·(2 if grad_input and training else 1) +
  C·in (1/σ) if training + C·in (weight) + C·in·(2 with a bias, else 1) for the parameter
  gradients when affine and training.
"""

from __future__ import annotations

import math

from htatui.analysis.perf.call import Estimate, OpCall
from htatui.analysis.perf.dtypes import element_bytes

CATEGORY = "norm"


def forward_flops(elems: int, channels: int, training: bool) -> float:
    return float(3 * channels + (3 * elems if training else 0) + 3 * channels + 2 * elems)


def forward_bytes(elems: int, channels: int, training: bool, affine: bool, bias: bool, size: int) -> float:
    tensors = 2 + (1 if affine else 0) + (1 if affine and bias else 0) + (2 if training else 0)
    return float(elems * size * 2 + tensors * channels * size)


def backward_flops(elems: int, channels: int, training: bool, grad_input: bool) -> float:
    per_channel = elems / channels
    flops = (0 if training else 3) + 4 * per_channel
    if grad_input:
        flops += 5 * per_channel if training else 0
    else:
        flops += 2 * per_channel
    return float(channels * flops)


def backward_bytes(
    elems: int, channels: int, training: bool, affine: bool, bias: bool, grad_input: bool, size: int
) -> float:
    moved = elems * size + elems * size * (2 if grad_input and training else 1)
    if training:
        moved += channels * size
    if affine:
        moved += channels * size
        if training:
            moved += channels * size * (2 if bias else 1)
    return float(moved)


def _fwd(call: OpCall, model: str, channels: int, training: bool, affine: bool, bias: bool) -> Estimate | None:
    x = call.shape(0)
    if x is None or channels <= 0:
        return None
    elems = math.prod(x)
    size = element_bytes(call.type(0))
    moved = None if size is None else forward_bytes(elems, channels, training, affine, bias, size)
    return Estimate(forward_flops(elems, channels, training), moved, model, CATEGORY, call.type(0))


def layer_norm(call: OpCall) -> Estimate | None:
    """aten::layer_norm / native_layer_norm(input, normalized_shape, weight?, bias?, eps)."""
    normalized = call.ints(1)
    if not normalized:
        return None
    return _fwd(call, "norm.layer", math.prod(normalized), True, call.shape(2) is not None, call.shape(3) is not None)


def batch_norm(call: OpCall) -> Estimate | None:
    """aten::batch_norm / native_batch_norm / cudnn_batch_norm(input, weight?, bias?, running_mean,
    running_var, training, momentum, eps)."""
    x = call.shape(0)
    if x is None or len(x) < 2:
        return None
    affine = call.shape(1) is not None
    return _fwd(call, "norm.batch", x[1], call.flag(5, True), affine, call.shape(2) is not None)


def group_norm(call: OpCall) -> Estimate | None:
    """aten::group_norm(input, num_groups, weight?, bias?, …) / native_group_norm(input, weight?,
    bias?, N, C, HxW, group, eps): channels = dimension 1, as TraceLens."""
    x = call.shape(0)
    if x is None or len(x) < 2:
        return None
    weight_at = 2 if call.name in ("aten::group_norm", "aiter::_groupnorm_run") else 1
    affine = call.shape(weight_at) is not None
    return _fwd(call, "norm.group", x[1], True, affine, call.shape(weight_at + 1) is not None)


def instance_norm(call: OpCall) -> Estimate | None:
    """aten::instance_norm(input, weight?, bias?, running_mean?, running_var?, use_input_stats,
    momentum, eps, cudnn_enabled): channels = dimension 1, statistics per (sample, channel)
    computed when use_input_stats (as a training batch norm)."""
    x = call.shape(0)
    if x is None or len(x) < 2:
        return None
    affine = call.shape(1) is not None
    return _fwd(call, "norm.instance", x[1], call.flag(5, True), affine, call.shape(2) is not None)


def rms_norm(call: OpCall) -> Estimate | None:
    """aten::rms_norm / _fused_rms_norm(input, normalized_shape, weight?, eps)."""
    x, normalized = call.shape(0), call.ints(1)
    if x is None or not normalized:
        return None
    elems, channels = math.prod(x), math.prod(normalized)
    if channels <= 0:
        return None
    weighted = call.shape(2) is not None
    flops = (elems / channels) * (2 * channels + 2) + elems * (2 if weighted else 1)
    size = element_bytes(call.type(0))
    moved = None if size is None else float(elems * size * 2 + (channels * size if weighted else 0))
    return Estimate(float(flops), moved, "norm.rms", CATEGORY, call.type(0))


def _bwd(
    call: OpCall, model: str, x_at: int, channels: int, training: bool, affine: bool, bias: bool, grad_input: bool
) -> Estimate | None:
    x = call.shape(x_at)
    if x is None or channels <= 0:
        return None
    elems = math.prod(x)
    size = element_bytes(call.type(x_at))
    flops = backward_flops(elems, channels, training, grad_input)
    moved = None if size is None else backward_bytes(elems, channels, training, affine, bias, grad_input, size)
    return Estimate(flops, moved, model, CATEGORY, call.type(x_at))


def layer_norm_backward(call: OpCall) -> Estimate | None:
    """aten::native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?,
    bias?, output_mask): affine and bias from output_mask, as TraceLens."""
    normalized, mask = call.ints(2), call.bools(7)
    if not normalized or not mask or len(mask) != 3:
        return None
    return _bwd(call, "norm.layer_bwd", 1, math.prod(normalized), True, mask[1], mask[2], mask[0])


def batch_norm_backward(call: OpCall) -> Estimate | None:
    """aten::native_batch_norm_backward(grad_out, input, weight?, running_mean, running_var,
    save_mean, save_invstd, train, eps, output_mask); cudnn/miopen_batch_norm_backward(input,
    grad_output, weight, …) are not training by their contract (TraceLens)."""
    native = call.name == "aten::native_batch_norm_backward"
    x_at = 1 if native else 0
    x = call.shape(x_at)
    if x is None or len(x) < 2:
        return None
    training = call.flag(7, True) if native else False
    affine = call.shape(2) is not None
    return _bwd(call, "norm.batch_bwd", x_at, x[1], training, affine, True, True)


def group_norm_backward(call: OpCall) -> Estimate | None:
    """aten::native_group_norm_backward(grad_out, input, mean, rstd, weight?, N, C, HxW, group,
    output_mask): C/group channels (TraceLens), affine when a weight is recorded."""
    x, groups, mask = call.shape(1), call.ints(8), call.bools(9)
    if x is None or len(x) < 2 or not groups or len(groups) != 1 or groups[0] <= 0 or not mask or len(mask) != 3:
        return None
    channels = x[1] // groups[0]
    return _bwd(call, "norm.group_bwd", 1, channels, True, call.shape(4) is not None, True, mask[0])


def rms_norm_backward(call: OpCall) -> Estimate | None:
    """aten::_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, output_mask)
    (TraceLens RMSNormBwd): FLOPs = E (x·rstd) + E if weighted (weight·grad_out) + 6·E for
    grad_input + E for grad_weight (+ E to accumulate it when E/C > 1); bytes = E·out + 2·E·in
    (+ 2·C·in for the weight and its gradient)."""
    x, normalized, mask = call.shape(1), call.ints(2), call.bools(5)
    if x is None or not normalized or not mask or len(mask) != 2:
        return None
    elems, channels = math.prod(x), math.prod(normalized)
    weighted = call.shape(4) is not None
    flops = elems + (elems if weighted else 0)
    if mask[0]:
        flops += 6 * elems
    if mask[1] and weighted:
        flops += elems + (elems if elems // channels > 1 else 0)
    size = element_bytes(call.type(1))
    moved = None if size is None else float(3 * elems * size + (2 * channels * size if weighted else 0))
    return Estimate(float(flops), moved, "norm.rms_bwd", CATEGORY, call.type(1))
