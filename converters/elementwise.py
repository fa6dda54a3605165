"""Binary elementwise ops: arithmetic, comparison, logical/bitwise, where/clamp/masked_fill, lerp, addc*.

Every form torch offers is registered: functions, methods, operators, reversed operators
(``2 - x`` is ``Tensor.__rsub__``) and in-place forms (``x += y`` is ``Tensor.__iadd__``). The
result dtype is the torch result's (``call.output.dtype``), so torch's type promotion holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter, register_table

from .impl import elementwise as E

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


def no_out(call: Call) -> str | None:
    if call.kwargs.get("out") is not None:
        return "out= is not supported (use the returned tensor)"
    return None


def _operand_ok(call: Call, *idx_names: tuple[int, str]) -> str | None:
    reason = no_out(call)
    if reason:
        return reason
    for i, name in idx_names:
        v = call.arg(i, name, None)
        if v is not None and not isinstance(v, (torch.Tensor, bool, int, float)):
            return f"argument '{name}' of type {type(v).__name__} is not a tensor or a number"
    return None


def _binary_check(call: Call) -> str | None:
    return _operand_ok(call, (0, "input"), (1, "other"))


def _scaled(ctx: ConversionContext, b: Any, alpha: Any, dtype: torch.dtype) -> Any:
    if alpha is None or (not isinstance(alpha, torch.Tensor) and alpha == 1):
        return b
    return E.arith(ctx, b, alpha, "mul", dtype)


def _arith(kind: str, reverse: bool = False, other: str = "other") -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        a, b = call.arg(0, "input"), call.arg(1, other)
        dtype = call.output.dtype
        k = kind
        if kind in ("add", "sub"):
            b = _scaled(ctx, b, call.kwargs.get("alpha"), dtype) if not reverse else b
            if reverse and call.kwargs.get("alpha") is not None:
                a = _scaled(ctx, a, call.kwargs.get("alpha"), dtype)
        if kind == "div":
            mode = call.kwargs.get("rounding_mode")
            k = {None: "div", "floor": "div_floor", "trunc": "div_trunc"}[mode]
        if reverse:
            a, b = b, a
        return E.arith(ctx, a, b, k, dtype)

    return convert


register_table(
    {
        (torch.add, T.add, T.__add__, T.__radd__, T.add_, T.__iadd__): "add",
        (torch.sub, torch.subtract, T.sub, T.subtract, T.__sub__, T.sub_, T.subtract_, T.__isub__): "sub",
        (torch.mul, torch.multiply, T.mul, T.multiply, T.__mul__, T.__rmul__, T.mul_, T.multiply_, T.__imul__): "mul",
        (torch.div, torch.divide, torch.true_divide, T.div, T.divide, T.true_divide, T.__truediv__,
         T.div_, T.divide_, T.true_divide_, "torch.Tensor.__itruediv__"): "div",
        (torch.floor_divide, T.floor_divide, T.floor_divide_, T.__floordiv__, T.__ifloordiv__): "div_floor",
        (torch.remainder, T.remainder, T.remainder_, T.__mod__, T.__imod__): "remainder",
        (torch.fmod, T.fmod, T.fmod_): "fmod",
        (torch.maximum, T.maximum): "max",
        (torch.minimum, T.minimum): "min",
        (torch.atan2, torch.arctan2, T.atan2, T.arctan2, T.atan2_, T.arctan2_): "atan2",
    },
    _arith,
    check=_binary_check,
)

register_table(
    {
        (T.__rsub__, torch.rsub): "sub",
        ("torch.Tensor.__rtruediv__",): "div",
        (T.__rfloordiv__,): "div_floor",
        (T.__rmod__,): "remainder",
    },
    lambda kind: _arith(kind, reverse=True),
    check=_binary_check,
)


def _pow_check(call: Call) -> str | None:
    return _operand_ok(call, (0, "input"), (1, "exponent"))


@converter(torch.pow, T.pow, "torch.Tensor.__pow__", T.pow_, "torch.Tensor.__ipow__", check=_pow_check)
def convert_pow(ctx: ConversionContext, call: Call) -> Any:
    a, b = call.arg(0, "input"), call.arg(1, "exponent")
    return _pow(ctx, a, b, call.output.dtype)


@converter(T.__rpow__, check=_binary_check)
def convert_rpow(ctx: ConversionContext, call: Call) -> Any:
    return _pow(ctx, call.arg(1, "other"), call.arg(0, "input"), call.output.dtype)


def _pow(ctx: ConversionContext, a: Any, b: Any, dtype: torch.dtype) -> Any:
    if isinstance(b, int) and not isinstance(b, bool) and not dtype.is_floating_point and dtype != torch.bool \
            and 0 <= b <= 64:
        # NOTE: an integer power by squaring, exact (and wrapping) like torch; fp32 pow loses digits past 2^24
        base = E.operand(ctx, a, dtype)
        result: Any = None
        while True:
            if b & 1:
                result = base if result is None else E.ew(ctx, result, base, "PROD")
            b >>= 1
            if not b:
                break
            base = E.ew(ctx, base, base, "PROD")
        if result is None:  # x ** 0
            result = E.ew(ctx, E.ew(ctx, base, base, "SUB"), E.scalar(ctx, 1, dtype), "SUM")
        return result
    if isinstance(b, (int, float)) and not isinstance(b, bool) and dtype.is_floating_point:
        if b == 1:
            return ctx.network.add_identity(E.operand(ctx, a, dtype)).get_output(0)
        if b == 2:  # exact, like torch
            it = E.operand(ctx, a, dtype)
            return E.ew(ctx, it, it, "PROD")
        if b == 0.5:
            return E.unary(ctx, E.operand(ctx, a, dtype), "SQRT")
    return E.arith(ctx, a, b, "pow", dtype)


# ---------------------------------------------------------------------------- comparisons
def _compare(kind: str, reverse: bool = False) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        a, b = call.arg(0, "input"), call.arg(1, "other")
        if reverse:
            a, b = b, a
        out = E.compare(ctx, a, b, kind)
        dtype = call.output.dtype
        return out if dtype == torch.bool else ctx.cast(out, dtype)  # in-place forms keep x's dtype

    return convert


register_table(
    {
        (torch.eq, T.eq, T.__eq__, T.eq_): "eq",
        (torch.ne, torch.not_equal, T.ne, T.not_equal, T.__ne__, T.ne_, T.not_equal_): "ne",
        (torch.lt, torch.less, T.lt, T.less, T.__lt__, T.lt_, T.less_): "lt",
        (torch.le, torch.less_equal, T.le, T.less_equal, T.__le__, T.le_, T.less_equal_): "le",
        (torch.gt, torch.greater, T.gt, T.greater, T.__gt__, T.gt_, T.greater_): "gt",
        (torch.ge, torch.greater_equal, T.ge, T.greater_equal, T.__ge__, T.ge_, T.greater_equal_): "ge",
    },
    _compare,
    check=_binary_check,
)


# ------------------------------------------------------------------------ logical / bitwise
def _logical(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = E.logical(ctx, call.arg(0, "input"), call.arg(1, "other"), kind)
        dtype = call.output.dtype
        return out if dtype == torch.bool else ctx.cast(out, dtype)

    return convert


register_table(
    {
        (torch.logical_and, T.logical_and, T.logical_and_): "and",
        (torch.logical_or, T.logical_or, T.logical_or_): "or",
        (torch.logical_xor, T.logical_xor, T.logical_xor_): "xor",
    },
    _logical,
    check=_binary_check,
)


def _bitwise(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        return E.bitwise(ctx, call.arg(0, "input"), call.arg(1, "other"), kind, call.output.dtype)

    return convert


def _bitwise_check(call: Call) -> str | None:
    reason = _binary_check(call)
    if reason:
        return reason
    if isinstance(call.output, torch.Tensor) and (call.output.dtype.is_floating_point or call.output.is_complex()):
        return f"bitwise ops need integer or bool tensors, got {call.output.dtype}"
    return None


register_table(
    {
        (torch.bitwise_and, T.bitwise_and, T.bitwise_and_, T.__and__, T.__rand__, T.__iand__): "and",
        (torch.bitwise_or, T.bitwise_or, T.bitwise_or_, T.__or__, T.__ror__, T.__ior__): "or",
        (torch.bitwise_xor, T.bitwise_xor, T.bitwise_xor_, T.__xor__, T.__rxor__, T.__ixor__): "xor",
    },
    _bitwise,
    check=_bitwise_check,
)


# --------------------------------------------------------------------- where / clamp / fill
def _where_check(call: Call) -> str | None:
    if len(call.args) + len(call.kwargs) == 1:
        return "torch.where(condition) returns data-dependent indices (use the three-argument form)"
    return no_out(call)


@converter(torch.where, check=_where_check)
def convert_where(ctx: ConversionContext, call: Call) -> Any:
    cond, a, b = call.arg(0, "condition"), call.arg(1, "input"), call.arg(2, "other")
    return E.where(ctx, cond, a, b, call.output.dtype)


@converter(T.where, check=no_out)
def convert_where_method(ctx: ConversionContext, call: Call) -> Any:
    a, cond, b = call.arg(0, "self"), call.arg(1, "condition"), call.arg(2, "other")
    return E.where(ctx, cond, a, b, call.output.dtype)


@converter(torch.clamp, torch.clip, T.clamp, T.clip, T.clamp_, T.clip_, check=no_out)
def convert_clamp(ctx: ConversionContext, call: Call) -> Any:
    return E.clamp(ctx, call.arg(0, "input"), call.arg(1, "min", None), call.arg(2, "max", None), call.output.dtype)


@converter(torch.clamp_min, T.clamp_min, T.clamp_min_, check=no_out)
def convert_clamp_min(ctx: ConversionContext, call: Call) -> Any:
    return E.clamp(ctx, call.arg(0, "input"), call.arg(1, "min"), None, call.output.dtype)


@converter(torch.clamp_max, T.clamp_max, T.clamp_max_, check=no_out)
def convert_clamp_max(ctx: ConversionContext, call: Call) -> Any:
    return E.clamp(ctx, call.arg(0, "input"), None, call.arg(1, "max"), call.output.dtype)


@converter(torch.masked_fill, T.masked_fill, T.masked_fill_)
def convert_masked_fill(ctx: ConversionContext, call: Call) -> Any:
    x, mask, value = call.arg(0, "input"), call.arg(1, "mask"), call.arg(2, "value")
    dtype = call.output.dtype
    return E.where(ctx, mask, value, x, dtype)


@converter(torch.lerp, T.lerp, T.lerp_, check=no_out)
def convert_lerp(ctx: ConversionContext, call: Call) -> Any:
    start, end, weight = call.arg(0, "input"), call.arg(1, "end"), call.arg(2, "weight")
    dtype = call.output.dtype
    diff = E.arith(ctx, end, start, "sub", dtype)
    return E.arith(ctx, start, E.arith(ctx, E.operand(ctx, weight, dtype), diff, "mul", dtype), "add", dtype)


def _addc(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        x, t1, t2 = call.arg(0, "input"), call.arg(1, "tensor1"), call.arg(2, "tensor2")
        value = call.kwargs.get("value", call.args[3] if len(call.args) > 3 else 1)
        dtype = call.output.dtype
        prod = E.arith(ctx, t1, t2, kind, dtype)
        if not (not isinstance(value, torch.Tensor) and value == 1):
            prod = E.arith(ctx, prod, value, "mul", dtype)
        return E.arith(ctx, x, prod, "add", dtype)

    return convert


register_table(
    {(torch.addcmul, T.addcmul, T.addcmul_): "mul", (torch.addcdiv, T.addcdiv, T.addcdiv_): "div"},
    _addc,
    check=no_out,
)


# ------------------------------------------------------------------------------- shifts
def _shift(left: bool, reverse: bool = False) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        a, b = call.arg(0, "input"), call.arg(1, "other")
        if reverse:
            a, b = b, a
        dtype = call.output.dtype
        bits = torch.iinfo(dtype).bits
        x = E.operand(ctx, a, dtype)
        # torch: a shift by b < 0 or b >= bits gives 0 (<<) or the sign, a >> (bits - 1) (>>); a << b
        # wraps. 2 ** b is exact in float32 up to b = bits - 2; bits - 1 is one doubling more.
        zero = E.scalar(ctx, 0, dtype)

        def sign() -> Any:  # what >> gives for amounts past the width: a >> (bits - 1)
            return E.select(ctx, E.compare(ctx, x, 0, "lt"), E.scalar(ctx, -1, dtype), zero)

        if isinstance(b, int):
            if b < 0 or b >= bits or (not left and b == bits - 1):
                return E.ew(ctx, E.ew(ctx, x, zero, "PROD"), zero if left else sign(), "SUM")  # shaped like x
            if left and b == bits - 1:
                return E.ew(ctx, E.arith(ctx, x, 1 << (bits - 2), "mul", dtype), E.scalar(ctx, 2, dtype), "PROD")
            return E.arith(ctx, x, 1 << b, "mul" if left else "div_floor", dtype)
        bt = E.operand(ctx, b, dtype)
        top = E.scalar(ctx, bits - 2, dtype)
        clamped = E.ew(ctx, E.ew(ctx, bt, zero, "MAX"), top, "MIN")
        factor = ctx.cast(E.ew(ctx, E.scalar(ctx, 2.0, torch.float32), ctx.cast(clamped, torch.float32), "POW"), dtype)
        in_range = E.logical(ctx, E.compare(ctx, bt, 0, "ge"), E.compare(ctx, bt, bits, "lt"), "and")
        if left:
            y = E.ew(ctx, x, factor, "PROD")
            y = E.select(ctx, E.compare(ctx, bt, bits - 1, "eq"), E.ew(ctx, y, E.scalar(ctx, 2, dtype), "PROD"), y)
            return E.select(ctx, in_range, y, zero)
        y = E.arith(ctx, x, factor, "div_floor", dtype)
        return E.select(ctx, E.logical(ctx, in_range, E.compare(ctx, bt, bits - 1, "lt"), "and"), y, sign())

    return convert


def _shift_check(call: Call) -> str | None:
    reason = _bitwise_check(call)
    if reason:
        return reason
    if isinstance(call.output, torch.Tensor) and call.output.dtype == torch.bool:
        return "shifts of bool tensors are not supported"
    return None


register_table(
    {
        (torch.bitwise_left_shift, T.bitwise_left_shift, T.bitwise_left_shift_, T.__lshift__, T.__ilshift__): True,
        (torch.bitwise_right_shift, T.bitwise_right_shift, T.bitwise_right_shift_, T.__rshift__,
         T.__irshift__): False,
    },
    _shift,
    check=_shift_check,
)
register_table({(T.__rlshift__,): True, (T.__rrshift__,): False}, lambda left: _shift(left, reverse=True),
               check=_shift_check)
