"""Fake quantization -> explicit Q/DQ: ``torch.fake_quantize_per_tensor_affine`` (float and tensor
scale forms), ``torch.fake_quantize_per_channel_affine``, torch2trt-lite's ``fake_quantize_fp8`` /
``fake_quantize_weight`` (:mod:`torch2trt_lite.quantization`) and NVIDIA Model Optimizer's
``TensorQuantizer`` (when ``modelopt`` is imported).

Each becomes ``IQuantizeLayer(INT8 | FP8) -> IDequantizeLayer(input float type)`` with the scale
as a constant of the input's float type (float32 for float32 models: strongly typed networks need
the scale type to equal the quantized tensor's), a 0-D scale per tensor, a 1-D scale and ``axis``
per channel.

TensorRT quantizes symmetrically to [-128, 127]: a nonzero zero point or another integer range is
refused, except [-127, 127] ("narrow range"), which is made exact by clamping the input to
[-127 * scale, 127 * scale] before the quantize layer (then round(x / scale) never leaves
[-127, 127]).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite import quantization as q
from torch2trt_lite.errors import ConverterRefusal
from torch2trt_lite.registry import Call, converter, when_imported

from .impl.nn_common import ew, float_dtype, is_traced, rank, reshape

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _qdq(
    ctx: ConversionContext, x: Any, scale: torch.Tensor, axis: int | None, qtype: str, dtype: torch.dtype,
    narrow: bool = False,
) -> Any:
    """Q/DQ of the network tensor ``x`` (float ``dtype``): per tensor (``axis`` None) or per channel."""
    s = scale.detach().to(dtype).reshape(()) if axis is None else scale.detach().to(dtype).reshape(-1)
    r = rank(x)
    scalar = r == 0
    if scalar:  # NOTE: TensorRT's Q/DQ input must not be 0-D
        x = reshape(ctx, x, (1,))
        r = 1
    if narrow:
        bound = (s.float() * q.QMAX[qtype]).to(dtype)  # [-127, 127] * scale: -128 is never reached
        if axis is not None:
            view = [1] * r
            view[axis] = s.numel()
            bound = bound.reshape(view)
        hi = ctx.constant(bound.reshape((1,) * r) if axis is None else bound)
        lo = ctx.constant((-bound).reshape((1,) * r) if axis is None else -bound)
        x = ew(ctx, ew(ctx, x, hi, "MIN"), lo, "MAX")
    sc = ctx.constant(s)
    to = ctx.trt.DataType.INT8 if qtype == "int8" else ctx.trt.DataType.FP8
    ql = ctx.network.add_quantize(x, sc, to)
    if axis is not None:
        ql.axis = int(axis)
    dq = ctx.network.add_dequantize(ql.get_output(0), sc, ctx.trt_dtype(dtype))
    if axis is not None:
        dq.axis = int(axis)
    y = dq.get_output(0)
    return reshape(ctx, y, ()) if scalar else y


def _int_range(qmin: Any, qmax: Any) -> tuple[str | None, bool]:
    """(refusal reason or None, narrow range) of a fake-quantize call's integer range."""
    lo, hi = int(qmin), int(qmax)
    if (lo, hi) == (q.INT8_MIN, q.INT8_MAX):
        return None, False
    if (lo, hi) == (-127, 127):
        return None, True
    return (
        f"quant range [{lo}, {hi}] cannot be expressed: TensorRT quantizes to INT8 [-128, 127] "
        "(symmetric, zero point 0; [-127, 127] is accepted too)", False,
    )


def _check_common(x: Any, scale: Any, zero_point: Any, qmin: Any, qmax: Any) -> str | None:
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return f"the input must be a float32/float16/bfloat16 tensor, got {getattr(x, 'dtype', type(x).__name__)}"
    if is_traced(scale) or is_traced(zero_point):
        return ("a scale or zero point computed from the network inputs cannot be expressed: TensorRT's Q/DQ "
                "scales are build-time constants")
    zp = zero_point if isinstance(zero_point, torch.Tensor) else torch.tensor(zero_point)
    if bool((zp != 0).any()):
        return (f"nonzero zero point {zp.tolist()} cannot be expressed: TensorRT quantization is symmetric "
                "(zero point 0); quantize with zero_point=0")
    sc = scale if isinstance(scale, torch.Tensor) else torch.tensor(float(scale))
    if not bool((sc > 0).all()) or not bool(torch.isfinite(sc).all()):
        return "every scale must be a positive finite number"
    reason, _ = _int_range(qmin, qmax)
    return reason


def _check_per_tensor(call: Call) -> str | None:
    return _check_common(call.arg(0, "input"), call.arg(1, "scale"), call.arg(2, "zero_point"),
                         call.arg(3, "quant_min"), call.arg(4, "quant_max"))


def _check_per_channel(call: Call) -> str | None:
    x, scale = call.arg(0, "input"), call.arg(1, "scale")
    reason = _check_common(x, scale, call.arg(2, "zero_point"), call.arg(4, "quant_min"), call.arg(5, "quant_max"))
    if reason:
        return reason
    axis = int(call.arg(3, "axis"))
    if not -x.dim() <= axis < x.dim():
        return f"axis {axis} is out of range for a rank-{x.dim()} input"
    return None


@converter(torch.fake_quantize_per_tensor_affine, check=_check_per_tensor, constant_inputs=True)
def convert_fake_quantize_per_tensor(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    scale = call.arg(1, "scale")
    sc = scale if isinstance(scale, torch.Tensor) else torch.tensor(float(scale))
    if sc.numel() != 1:
        raise ConverterRefusal(f"a per-tensor scale must hold one value, got shape {list(sc.shape)}")
    _, narrow = _int_range(call.arg(3, "quant_min"), call.arg(4, "quant_max"))
    return _qdq(ctx, ctx.itensor(x), sc.float(), None, "int8", x.dtype, narrow)


@converter(torch.fake_quantize_per_channel_affine, check=_check_per_channel, constant_inputs=True)
def convert_fake_quantize_per_channel(ctx: ConversionContext, call: Call) -> Any:
    x = call.arg(0, "input")
    axis = int(call.arg(3, "axis")) % x.dim()
    sc = call.arg(1, "scale").float().reshape(-1)
    if sc.numel() != x.shape[axis]:
        raise ConverterRefusal(f"{sc.numel()} scales for {x.shape[axis]} channels along axis {axis}")
    _, narrow = _int_range(call.arg(4, "quant_min"), call.arg(5, "quant_max"))
    return _qdq(ctx, ctx.itensor(x), sc, axis, "int8", x.dtype, narrow)


def _check_fp8(call: Call) -> str | None:
    x, scale = call.arg(0, "x"), call.arg(1, "scale")
    if not isinstance(x, torch.Tensor) or not float_dtype(x.dtype):
        return "the input must be a float32/float16/bfloat16 tensor"
    if is_traced(scale):
        return "a scale computed from the network inputs cannot be expressed: Q/DQ scales are build-time constants"
    return None


@converter(q.fake_quantize_fp8, check=_check_fp8, constant_inputs=True)
def convert_fake_quantize_fp8(ctx: ConversionContext, call: Call) -> Any:
    x, scale, axis = call.arg(0, "x"), call.arg(1, "scale"), call.arg(2, "axis", None)
    if axis is not None:
        axis = int(axis) % x.dim()
    return _qdq(ctx, ctx.itensor(x), scale.float(), axis if scale.numel() > 1 else None, "fp8", x.dtype)


def _check_weight(call: Call) -> str | None:
    w, scale = call.arg(0, "weight"), call.arg(1, "scale")
    if is_traced(scale):
        return "a scale computed from the network inputs cannot be expressed: Q/DQ scales are build-time constants"
    if not isinstance(w, torch.Tensor) or not float_dtype(w.dtype):
        return "the weight must be a float32/float16/bfloat16 tensor"
    return None


@converter(q.fake_quantize_weight, check=_check_weight, constant_inputs=True)
def convert_fake_quantize_weight(ctx: ConversionContext, call: Call) -> Any:
    w, scale, axis, dtype = call.arg(0, "weight"), call.arg(1, "scale"), call.arg(2, "axis"), call.arg(3, "dtype")
    # NOTE: the weight is a constant (constant_inputs: converted all the same): constant -> Q -> DQ
    return _qdq(ctx, ctx.itensor(w), scale.float().reshape(-1), int(axis) % w.dim(), str(dtype), w.dtype)


# --------------------------------------------------------------- NVIDIA Model Optimizer
def _register_modelopt() -> None:
    from modelopt.torch.quantization.nn import TensorQuantizer

    def _spec(m: Any) -> tuple[str | None, str, bool]:
        """(refusal reason or None, "int8" | "fp8", narrow range) of a TensorQuantizer."""
        bits = getattr(m, "num_bits", None)
        if getattr(m, "block_sizes", None):
            return "block quantization (block_sizes) is not supported", "", False
        if getattr(m, "pre_quant_scale", None) is not None:
            return "pre_quant_scale (SmoothQuant/AWQ) is not supported", "", False
        if getattr(m, "bias", None) is not None and getattr(m, "_bias", None):
            return "a quantizer bias is not supported", "", False
        if bits == 8:
            if getattr(m, "unsigned", False):
                return "unsigned INT8 cannot be expressed: TensorRT quantizes to signed INT8", "", False
            return None, "int8", bool(getattr(m, "narrow_range", False))
        if isinstance(bits, (tuple, list)) and tuple(bits) == (4, 3):
            return None, "fp8", False
        return f"num_bits={bits} is not supported (8 for INT8 or (4, 3) for FP8 E4M3)", "", False

    def check(call: Call) -> str | None:
        m = call.args[0]
        if not getattr(m, "is_enabled", True) or not getattr(m, "_if_quant", True):
            return None  # a disabled quantizer returns its input
        if getattr(m, "_if_calib", False):
            return "the quantizer is still calibrating; finish calibration (mtq.quantize) before converting"
        if not getattr(m, "_fake_quant", True):
            return "real quantization (fake_quant=False) is not supported; use fake quantization"
        reason, _, _ = _spec(m)
        if reason:
            return reason
        amax = getattr(m, "amax", None)
        if amax is None:
            return "the quantizer has no amax (it was never calibrated)"
        return None

    @converter(TensorQuantizer, check=check, constant_inputs=True)
    def convert_tensor_quantizer(ctx: ConversionContext, call: Call) -> Any:
        m, x = call.args[0], call.args[1] if len(call.args) > 1 else call.kwargs["inputs"]
        if not getattr(m, "is_enabled", True) or not getattr(m, "_if_quant", True):
            return ctx.itensor(x)
        _, qtype, narrow = _spec(m)
        amax = m.amax.detach().float()
        scale = (amax / q.QMAX[qtype]).clamp_min(1e-12)
        axis = None
        if amax.numel() > 1:
            dims = [d for d, n in enumerate(amax.shape) if n > 1]
            if len(dims) != 1 or amax.dim() != x.dim():
                raise ConverterRefusal(f"amax of shape {list(amax.shape)} is not per-tensor or per-channel")
            axis = dims[0]
        return _qdq(ctx, ctx.itensor(x), scale.reshape(-1), axis, qtype, x.dtype, narrow)


when_imported("modelopt.torch.quantization", _register_modelopt)
