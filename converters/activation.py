"""Activations: one table from torch callables to TensorRT ActivationType (+ alpha/beta)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from torch2trt_lite.registry import Call, converter, register_table

from .impl import elementwise as E
from .impl import shape as S

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def activation(ctx: ConversionContext, x: Any, kind: str, alpha: float = 0.0, beta: float = 0.0) -> Any:
    it = x if E.is_itensor(x) else ctx.itensor(x)
    layer = ctx.network.add_activation(it, getattr(ctx.trt.ActivationType, kind))
    if alpha:
        layer.alpha = float(alpha)
    if beta:
        layer.beta = float(beta)
    return layer.get_output(0)


def _simple(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x = call.arg(0, "input")
        if isinstance(x, torch.Tensor) and not x.dtype.is_floating_point:
            # NOTE: TensorRT's activations take floats; torch gives relu(int) -> int, sigmoid/tanh(int) -> float
            if kind == "RELU":
                return E.arith(ctx, x, 0, "max", call.output.dtype)
            return activation(ctx, E.operand(ctx, x, call.output.dtype), kind)
        return activation(ctx, x, kind)

    return convert


register_table(
    {
        (F.relu, torch.relu, torch.Tensor.relu, torch.relu_, torch.Tensor.relu_, F.relu_): "RELU",
        (torch.sigmoid, torch.Tensor.sigmoid, F.sigmoid, torch.Tensor.sigmoid_): "SIGMOID",
        (torch.tanh, torch.Tensor.tanh, F.tanh, torch.Tensor.tanh_): "TANH",
    },
    _simple,
)


@converter(F.relu6)
def convert_relu6(ctx: ConversionContext, call: Call) -> Any:
    return activation(ctx, call.arg(0, "input"), "CLIP", 0.0, 6.0)


# ------------------------------------------------------------------------------ extensions
def _float_in(ctx: ConversionContext, call: Call, name: str = "input") -> Any:
    return E.operand(ctx, call.arg(0, name), call.output.dtype)


def _act(ctx: ConversionContext, it: Any, kind: str, alpha: float = 0.0, beta: float = 0.0) -> Any:
    layer = ctx.network.add_activation(it, getattr(ctx.trt.ActivationType, kind))
    layer.alpha = float(alpha)
    layer.beta = float(beta)
    return layer.get_output(0)


register_table(
    {
        # NOTE: torch.special.expit is left unregistered: the tracer tests use it as a free target.
        (torch.sigmoid_,): "SIGMOID",
        (torch.tanh_,): "TANH",
    },
    _simple,
)


@converter(F.hardtanh, F.hardtanh_)
def convert_hardtanh(ctx: ConversionContext, call: Call) -> Any:
    lo, hi = call.arg(1, "min_val", -1.0), call.arg(2, "max_val", 1.0)
    return _act(ctx, _float_in(ctx, call), "CLIP", lo, hi)


@converter(F.leaky_relu, F.leaky_relu_)
def convert_leaky_relu(ctx: ConversionContext, call: Call) -> Any:
    return _act(ctx, _float_in(ctx, call), "LEAKY_RELU", call.arg(1, "negative_slope", 0.01))


def _rrelu_check(call: Call) -> str | None:
    if call.arg(3, "training", False):
        return "rrelu in training mode samples random slopes (call model.eval())"
    return None


@converter(F.rrelu, F.rrelu_, torch.rrelu, torch.rrelu_, check=_rrelu_check)
def convert_rrelu(ctx: ConversionContext, call: Call) -> Any:
    lower, upper = call.arg(1, "lower", 1.0 / 8), call.arg(2, "upper", 1.0 / 3)
    return _act(ctx, _float_in(ctx, call), "LEAKY_RELU", (float(lower) + float(upper)) / 2)


@converter(F.elu, F.elu_)
def convert_elu(ctx: ConversionContext, call: Call) -> Any:
    return _act(ctx, _float_in(ctx, call), "ELU", call.arg(1, "alpha", 1.0))


@converter(F.selu, torch.selu, F.selu_, torch.selu_)
def convert_selu(ctx: ConversionContext, call: Call) -> Any:
    return _act(ctx, _float_in(ctx, call), "SELU", 1.6732632423543772848170429916717, 1.0507009873554804934193349852946)


@converter(F.celu, torch.celu, F.celu_, torch.celu_)
def convert_celu(ctx: ConversionContext, call: Call) -> Any:
    # celu(x) = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)) = elu(x / alpha) * alpha
    alpha = float(call.arg(1, "alpha", 1.0))
    it = _float_in(ctx, call)
    dt = call.output.dtype
    if alpha == 1.0:
        return _act(ctx, it, "ELU", 1.0)
    scaled = E.ew(ctx, it, E.scalar(ctx, 1.0 / alpha, dt), "PROD")
    return E.ew(ctx, _act(ctx, scaled, "ELU", 1.0), E.scalar(ctx, alpha, dt), "PROD")


def _gelu_check(call: Call) -> str | None:
    approx = call.kwargs.get("approximate", call.args[1] if len(call.args) > 1 else "none")
    return None if approx in ("none", "tanh") else f"gelu approximate={approx!r} is not a torch mode"


@converter(F.gelu, check=_gelu_check)
def convert_gelu(ctx: ConversionContext, call: Call) -> Any:
    approx = call.kwargs.get("approximate", call.args[1] if len(call.args) > 1 else "none")
    return _act(ctx, _float_in(ctx, call), "GELU_TANH" if approx == "tanh" else "GELU_ERF")


@converter(F.silu)
def convert_silu(ctx: ConversionContext, call: Call) -> Any:
    it = _float_in(ctx, call)
    return E.ew(ctx, it, _act(ctx, it, "SIGMOID"), "PROD")


@converter(F.mish)
def convert_mish(ctx: ConversionContext, call: Call) -> Any:
    it = _float_in(ctx, call)
    return E.ew(ctx, it, _act(ctx, _act(ctx, it, "SOFTPLUS", 1.0, 1.0), "TANH"), "PROD")


@converter(F.hardsigmoid)
def convert_hardsigmoid(ctx: ConversionContext, call: Call) -> Any:
    return _act(ctx, _float_in(ctx, call), "HARD_SIGMOID", 1.0 / 6, 0.5)


@converter(F.hardswish)
def convert_hardswish(ctx: ConversionContext, call: Call) -> Any:
    it = _float_in(ctx, call)
    return E.ew(ctx, it, _act(ctx, it, "HARD_SIGMOID", 1.0 / 6, 0.5), "PROD")


@converter(F.softplus)
def convert_softplus(ctx: ConversionContext, call: Call) -> Any:
    beta, threshold = float(call.arg(1, "beta", 1.0)), float(call.arg(2, "threshold", 20.0))
    it = _float_in(ctx, call)
    dt = call.output.dtype
    soft = _act(ctx, it, "SOFTPLUS", 1.0 / beta, beta)
    # torch returns x where beta * x > threshold
    linear = E.ew(ctx, E.ew(ctx, it, E.scalar(ctx, beta, dt), "PROD"), E.scalar(ctx, threshold, dt), "GREATER")
    return E.select(ctx, linear, it, soft)


@converter(F.softsign)
def convert_softsign(ctx: ConversionContext, call: Call) -> Any:
    return _act(ctx, _float_in(ctx, call), "SOFTSIGN")


@converter(F.logsigmoid)
def convert_logsigmoid(ctx: ConversionContext, call: Call) -> Any:
    # log(sigmoid(x)) = -softplus(-x) = -1 * log(exp(-1 * x) + 1)
    return _act(ctx, _float_in(ctx, call), "SOFTPLUS", -1.0, -1.0)


@converter(F.tanhshrink)
def convert_tanhshrink(ctx: ConversionContext, call: Call) -> Any:
    it = _float_in(ctx, call)
    return E.ew(ctx, it, _act(ctx, it, "TANH"), "SUB")


@converter("torch.nn.functional.threshold", torch.threshold, torch.threshold_)
def convert_threshold(ctx: ConversionContext, call: Call) -> Any:
    th, value = call.arg(1, "threshold"), call.arg(2, "value")
    dt = call.output.dtype
    it = E.operand(ctx, call.arg(0, "input"), dt)
    keep = E.ew(ctx, it, E.operand(ctx, th, dt), "GREATER")
    return E.select(ctx, keep, it, E.operand(ctx, value, dt))


@converter(F.hardshrink, torch.Tensor.hardshrink)
def convert_hardshrink(ctx: ConversionContext, call: Call) -> Any:
    lambd = call.arg(1, "lambd", 0.5)
    dt = call.output.dtype
    it = E.operand(ctx, call.arg(0, "input"), dt)
    keep = E.ew(ctx, E.unary(ctx, it, "ABS"), E.scalar(ctx, lambd, dt), "GREATER")
    return E.select(ctx, keep, it, E.scalar(ctx, 0, dt))


@converter(F.softshrink)
def convert_softshrink(ctx: ConversionContext, call: Call) -> Any:
    lambd = float(call.arg(1, "lambd", 0.5))
    dt = call.output.dtype
    it = E.operand(ctx, call.arg(0, "input"), dt)
    return E.ew(ctx, it, E.clamp(ctx, it, -lambd, lambd, dt), "SUB")


@converter(F.prelu, torch.Tensor.prelu)
def convert_prelu(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    it = E.operand(ctx, call.arg(0, "input"), dt)
    weight = call.arg(1, "weight")
    slopes = E.operand(ctx, weight, dt)
    n = len(tuple(it.shape))
    if weight.numel() != 1 and n >= 2:
        # per-channel slopes apply to dim 1
        slopes = S.reshape_spec(ctx, slopes, [1, S.Copy(0)] + [1] * (n - 2))
    else:
        slopes = S.reshape(ctx, slopes, (1,) * n)
    return ctx.network.add_parametric_relu(it, slopes).get_output(0)


@converter(F.glu)
def convert_glu(ctx: ConversionContext, call: Call) -> Any:
    dt = call.output.dtype
    x = call.arg(0, "input")
    dim = call.arg(1, "dim", -1)
    it = E.operand(ctx, x, dt)
    n = x.dim()
    d = S.norm_dim(dim, n)
    half = x.shape[d] // 2
    a = S.slice_(ctx, it, d, 0, half)
    b = S.slice_(ctx, it, d, half, None)
    return E.ew(ctx, a, _act(ctx, b, "SIGMOID"), "PROD")

