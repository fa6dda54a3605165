"""Normalizations: batch norm (folded into the preceding convolution when it can be), layer norm,
group norm, instance norm, RMS norm, local response norm and F.normalize."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter

from .impl import elementwise as E
from .impl import normalization as norm
from .impl import shape as S
from .impl.nn_common import const, float_dtype, is_traced, rank

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _float_input(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"input must be a floating-point tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    return None


# ------------------------------------------------------------------------------- batch norm
def _check_batch_norm(call: Call) -> str | None:
    bad = _float_input(call)
    if bad:
        return bad
    if any(is_traced(call.arg(i, n, None)) for i, n in ((1, "running_mean"), (2, "running_var"))):
        return "running statistics computed from the network inputs are not supported"
    return None


@converter(F.batch_norm, check=_check_batch_norm)
def convert_batch_norm(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    mean, var = call.arg(1, "running_mean"), call.arg(2, "running_var")
    weight, bias = call.arg(3, "weight", None), call.arg(4, "bias", None)
    training = bool(call.arg(5, "training", False))
    eps = float(call.arg(7, "eps", 1e-5))
    dtype = call.output.dtype
    it = ctx.itensor(x)
    if training or mean is None or var is None:
        # NOTE: batch statistics (training=True or no running stats): normalize over N and spatial dims
        r = rank(it)
        shape = (1, -1) + (1,) * (r - 2)
        return norm.normalize_axes(ctx, it, [0, *range(2, r)], eps, dtype, scale=norm.operand(ctx, weight, dtype, shape),
                                   bias=norm.operand(ctx, bias, dtype, shape))
    traced_affine = is_traced(weight) or is_traced(bias)
    if traced_affine:
        y = norm.batch_norm_eval(ctx, it, mean, var, None, None, eps, dtype)
    else:
        y = norm.batch_norm_eval(ctx, it, mean, var, weight, bias, eps, dtype)
    if traced_affine:
        y = norm.affine(ctx, y, weight, bias, dtype, (1, -1) + (1,) * (rank(it) - 2))
    return y


# ------------------------------------------------------------------- layer / group / ...
@converter(F.layer_norm, check=_float_input)
def convert_layer_norm(ctx: ConversionContext, call: Call) -> Any:
    shape = call.arg(1, "normalized_shape")
    ndims = 1 if isinstance(shape, int) else len(shape)
    return norm.layer_norm(ctx, ctx.itensor(call.arg(0, "input")), ndims, call.arg(2, "weight", None),
                           call.arg(3, "bias", None), float(call.arg(4, "eps", 1e-5)), call.output.dtype)


@converter(F.group_norm, check=_float_input)
def convert_group_norm(ctx: ConversionContext, call: Call) -> Any:
    return norm.group_norm(ctx, ctx.itensor(call.arg(0, "input")), int(call.arg(1, "num_groups")),
                           call.arg(2, "weight", None), call.arg(3, "bias", None), float(call.arg(4, "eps", 1e-5)),
                           call.output.dtype)


@converter(F.instance_norm, check=_float_input)
def convert_instance_norm(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    mean, var = call.arg(1, "running_mean", None), call.arg(2, "running_var", None)
    weight, bias = call.arg(3, "weight", None), call.arg(4, "bias", None)
    use_input_stats = bool(call.arg(5, "use_input_stats", True))
    eps = float(call.arg(7, "eps", 1e-5))
    it = ctx.itensor(x)
    if not use_input_stats and mean is not None and var is not None:
        y = norm.batch_norm_eval(ctx, it, mean, var, None, None, eps, call.output.dtype)
        return norm.affine(ctx, y, weight, bias, call.output.dtype, (1, -1) + (1,) * (rank(it) - 2))
    return norm.instance_norm(ctx, it, weight, bias, eps, call.output.dtype)


@converter(F.rms_norm, check=_float_input)
def convert_rms_norm(ctx: ConversionContext, call: Call) -> Any:
    shape = call.arg(1, "normalized_shape")
    ndims = 1 if isinstance(shape, int) else len(shape)
    eps = call.arg(3, "eps", None)
    return norm.rms_norm(ctx, ctx.itensor(call.arg(0, "input")), ndims, call.arg(2, "weight", None),
                         None if eps is None else float(eps), call.output.dtype)


@converter(F.local_response_norm, check=_float_input)
def convert_local_response_norm(ctx: ConversionContext, call: Call) -> Any:
    it = ctx.itensor(call.arg(0, "input"))
    size, alpha = int(call.arg(1, "size")), float(call.arg(2, "alpha", 1e-4))
    beta, k = float(call.arg(3, "beta", 0.75)), float(call.arg(4, "k", 1.0))
    shape = tuple(it.shape)
    if -1 in shape and not (len(shape) == 4 and size % 2 == 1 and 1 <= size <= 15 and 0.01 <= beta <= 1e5
                            and 1e-5 <= k <= 1e10 and abs(alpha) <= 1e20):
        return _lrn_pooled(ctx, it, size, alpha, beta, k, call.output.dtype)
    return norm.local_response_norm(ctx, it, size, alpha, beta, k, call.output.dtype)


def _lrn_pooled(ctx: ConversionContext, it: Any, size: int, alpha: float, beta: float, k: float,
                dtype: torch.dtype) -> Any:
    """LRN as ``norm.local_response_norm``'s pooled form (the mean of x^2 over a (size, 1) window of
    [N, 1, C, rest], zero padded), for inputs with dynamic dims: the reshapes copy the dims through
    shape tensors instead of taking the traced sizes (any rank, any size, any dim dynamic)."""
    r = rank(it)
    sq = S.reshape_spec(ctx, E.ew(ctx, it, it, "PROD"), [S.Copy(0), 1, S.Copy(1), -1])
    layer = ctx.network.add_pooling_nd(sq, ctx.trt.PoolingType.AVERAGE, (size, 1))
    layer.pre_padding = (size // 2, 0)
    layer.post_padding = ((size - 1) // 2, 0)
    layer.average_count_excludes_padding = False
    div = S.reshape(ctx, layer.get_output(0), S.shape_of(ctx, it))
    div = E.ew(ctx, E.ew(ctx, div, const(ctx, alpha, dtype, r), "PROD"), const(ctx, k, dtype, r), "SUM")
    div = E.ew(ctx, div, const(ctx, beta, dtype, r), "POW")
    return E.ew(ctx, it, div, "DIV")


def _check_normalize(call: Call) -> str | None:
    if call.arg(4, "out", None) is not None:
        return "out= is not supported"
    return _float_input(call)


@converter(F.normalize, check=_check_normalize)
def convert_normalize(ctx: ConversionContext, call: Call) -> Any:
    return norm.lp_normalize(ctx, ctx.itensor(call.arg(0, "input")), float(call.arg(1, "p", 2.0)),
                             int(call.arg(2, "dim", 1)), float(call.arg(3, "eps", 1e-12)), call.output.dtype)
