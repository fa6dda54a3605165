"""Elementwise builders: broadcasting to equal rank, torch's dtype promotion, composite ops.

Network tensors only meet in an elementwise layer when they have the same dtype and rank (the
network is strongly typed and TensorRT broadcasts only equal ranks); the builders here take care
of both. ``arith``/``compare``/``logical`` accept torch tensors, Python scalars or network tensors.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from .sizes import SymSize
from .sizes import scalar as sym_scalar

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

_INTS = (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64)


def unsqueeze_to(ctx: ConversionContext, it: Any, rank: int) -> Any:
    """Prepend size-1 dims so ``it`` has ``rank`` dims (TensorRT broadcasts only equal ranks)."""
    shape = tuple(it.shape)
    if len(shape) >= rank:
        return it
    layer = ctx.network.add_shuffle(it)
    if all(d >= 0 for d in shape):
        layer.reshape_dims = (1,) * (rank - len(shape)) + shape
    else:
        from .shape import Copy, dims_tensor

        layer.set_input(1, dims_tensor(ctx, it, [1] * (rank - len(shape)) + [Copy(i) for i in range(len(shape))]))
    return layer.get_output(0)


def is_itensor(x: Any) -> bool:
    return not isinstance(x, (torch.Tensor, bool, int, float)) and hasattr(x, "shape") and hasattr(x, "dtype")


def operand(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """A network tensor for an elementwise operand, in the computation dtype."""
    if is_itensor(x):
        return ctx.cast(x, dtype)
    if isinstance(x, SymSize):  # a dynamic size used as a value (``x / x.size(1)``)
        return sym_scalar(ctx, x, dtype)
    return ctx.itensor(x, dtype=dtype)


def broadcast(ctx: ConversionContext, *its: Any) -> list[Any]:
    """Network tensors brought to one rank (size-1 dims prepended)."""
    rank = max(len(tuple(it.shape)) for it in its)
    return [unsqueeze_to(ctx, it, rank) for it in its]


def ew(ctx: ConversionContext, a: Any, b: Any, op: str) -> Any:
    """An elementwise layer over two network tensors of one dtype (``op`` an ElementWiseOperation name)."""
    a, b = broadcast(ctx, a, b)
    return ctx.network.add_elementwise(a, b, getattr(ctx.trt.ElementWiseOperation, op)).get_output(0)


def unary(ctx: ConversionContext, it: Any, op: str) -> Any:
    """A unary layer (``op`` a UnaryOperation name)."""
    return ctx.network.add_unary(it, getattr(ctx.trt.UnaryOperation, op)).get_output(0)


def scalar(ctx: ConversionContext, value: float | int | bool, dtype: torch.dtype, rank: int = 0) -> Any:
    """A constant of ``rank`` size-1 dims holding ``value`` in ``dtype``."""
    return ctx.constant(torch.full((1,) * rank, value, dtype=dtype))


def binary(
    ctx: ConversionContext, a: Any, b: Any, op: Any, dtype: torch.dtype, out_dtype: torch.dtype | None = None
) -> Any:
    """``op(a, b)`` computed in ``dtype`` with broadcasting; cast to ``out_dtype`` when it differs."""
    ia, ib = broadcast(ctx, operand(ctx, a, dtype), operand(ctx, b, dtype))
    out = ctx.network.add_elementwise(ia, ib, op).get_output(0)
    if out_dtype is not None and out_dtype != torch.bool:
        out = ctx.cast(out, out_dtype)
    return out


def compute_dtype(*xs: Any) -> torch.dtype:
    """torch's result dtype of an arithmetic op over tensors and Python scalars."""
    vals = [x for x in xs if isinstance(x, (torch.Tensor, bool, int, float))]
    if not vals:
        return torch.get_default_dtype()
    dt = vals[0].dtype if isinstance(vals[0], torch.Tensor) else None
    if len(vals) == 1:
        return dt or (torch.bool if isinstance(vals[0], bool) else torch.int64 if isinstance(vals[0], int)
                      else torch.get_default_dtype())
    out = torch.result_type(vals[0], vals[1])
    for v in vals[2:]:
        out = torch.promote_types(out, torch.result_type(v, torch.empty((), dtype=out)))
    return out


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


# ------------------------------------------------------------------------------ arithmetic
def trunc(ctx: ConversionContext, it: Any) -> Any:
    """Round toward zero (floats): sign(x) * floor(|x|)."""
    return ew(ctx, unary(ctx, it, "SIGN"), unary(ctx, unary(ctx, it, "ABS"), "FLOOR"), "PROD")


def _float_for(dtype: torch.dtype) -> torch.dtype:
    return dtype if dtype.is_floating_point else torch.float32


def arith(ctx: ConversionContext, a: Any, b: Any, kind: str, dtype: torch.dtype) -> Any:
    """``a <kind> b`` in ``dtype`` (the result dtype torch gives).

    kind: add, sub, mul, div (true), div_floor, div_trunc, remainder, fmod, pow, max, min, atan2.
    """
    if dtype == torch.bool:
        if kind in ("add", "max"):
            return logical(ctx, a, b, "or")
        if kind in ("mul", "min"):
            return logical(ctx, a, b, "and")
        raise ConversionError(f"{kind} of bool tensors is not supported")
    if kind == "atan2":
        return _atan2(ctx, operand(ctx, a, dtype), operand(ctx, b, dtype))
    if kind == "pow" and not dtype.is_floating_point:
        fa, fb = operand(ctx, a, torch.float32), operand(ctx, b, torch.float32)
        return ctx.cast(ew(ctx, fa, fb, "POW"), dtype)
    if dtype.is_floating_point and kind in ("div_floor", "remainder", "fmod"):
        return _float_divmod(ctx, a, b, kind, dtype)
    ia, ib = operand(ctx, a, dtype), operand(ctx, b, dtype)
    simple = {"add": "SUM", "sub": "SUB", "mul": "PROD", "div": "DIV", "max": "MAX", "min": "MIN", "pow": "POW",
              "div_floor": "FLOOR_DIV"}
    if kind in simple:
        return ew(ctx, ia, ib, simple[kind])
    if kind == "div_trunc":
        q = ew(ctx, ia, ib, "DIV")
        return trunc(ctx, q) if dtype.is_floating_point else q  # TensorRT's integer DIV truncates
    if kind in ("remainder", "fmod"):
        if kind == "remainder":
            q = ew(ctx, ia, ib, "FLOOR_DIV") if not dtype.is_floating_point else unary(
                ctx, ew(ctx, ia, ib, "DIV"), "FLOOR")
        else:
            q = ew(ctx, ia, ib, "DIV")
            q = trunc(ctx, q) if dtype.is_floating_point else q
        return ew(ctx, ia, ew(ctx, q, ib, "PROD"), "SUB")
    raise ConversionError(f"unknown arithmetic kind {kind!r}")


def _two_product(ctx: ConversionContext, u: Any, v: Any, dtype: torch.dtype) -> tuple[Any, Any]:
    """Dekker's error-free product of float32 tensors: (p, e) with p = fl(u * v) and u * v = p + e
    exactly (no FMA needed; barring overflow)."""
    factor = scalar(ctx, 4097.0, dtype)  # 2^12 + 1 splits float32's 24-bit significand in halves

    def split(t: Any) -> tuple[Any, Any]:
        c = ew(ctx, factor, t, "PROD")
        hi = ew(ctx, c, ew(ctx, c, t, "SUB"), "SUB")
        return hi, ew(ctx, t, hi, "SUB")

    p = ew(ctx, u, v, "PROD")
    uh, ul = split(u)
    vh, vl = split(v)
    e = ew(ctx, ew(ctx, ew(ctx, ew(ctx, uh, vh, "PROD"), p, "SUB"), ew(ctx, uh, vl, "PROD"), "SUM"),
           ew(ctx, ul, vh, "PROD"), "SUM")
    return p, ew(ctx, e, ew(ctx, ul, vl, "PROD"), "SUM")


def _float_divmod(ctx: ConversionContext, a: Any, b: Any, kind: str, dtype: torch.dtype) -> Any:
    """torch's float floor division, remainder and fmod (fp16/bf16 computed in fp32).

    torch derives them from an exact fmod; TensorRT has none. Here ``r = a - trunc(a / b) * b``, with
    the product kept exact, is corrected by one ``|b|`` where the rounded quotient was one off
    (7 % 0.1: 7 / 0.1 rounds to 70, the true quotient is 69.99..), so the remainder has a's sign
    and ``|r| < |b|`` as fmod's does.
    """
    work = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    x, y = operand(ctx, a, work), operand(ctx, b, work)
    x, y = broadcast(ctx, x, y)
    zero = scalar(ctx, 0, work)
    q = trunc(ctx, ew(ctx, x, y, "DIV"))
    p, err = _two_product(ctx, q, y, work)  # q * b = p + err exactly: a - q * b without the product's rounding
    r = ew(ctx, ew(ctx, x, p, "SUB"), err, "SUB")
    ay = unary(ctx, y, "ABS")
    sa = unary(ctx, x, "SIGN")
    step = ew(ctx, sa, ay, "PROD")  # |b| with a's sign
    overshot = ew(ctx, ew(ctx, r, sa, "PROD"), zero, "LESS")  # r != 0 with the sign opposite to a's
    r = select(ctx, overshot, ew(ctx, r, step, "SUM"), r)
    r = select(ctx, ew(ctx, unary(ctx, r, "ABS"), ay, "LESS"), r, ew(ctx, r, step, "SUB"))  # undershot
    if kind == "fmod":
        return ctx.cast(r, dtype)
    # remainder / floor division: fmod's result moved to b's sign, as torch does
    wrong_sign = logical(ctx, compare(ctx, r, 0, "ne"),
                         compare(ctx, ew(ctx, r, zero, "LESS"), ew(ctx, y, zero, "LESS"), "ne"), "and")
    if kind == "remainder":
        return ctx.cast(select(ctx, wrong_sign, ew(ctx, r, y, "SUM"), r), dtype)
    div = ew(ctx, ew(ctx, x, r, "SUB"), y, "DIV")
    div = select(ctx, wrong_sign, ew(ctx, div, scalar(ctx, 1, work), "SUB"), div)
    fl = unary(ctx, div, "FLOOR")
    fl = select(ctx, ew(ctx, ew(ctx, div, fl, "SUB"), scalar(ctx, 0.5, work), "GREATER"),
                ew(ctx, fl, scalar(ctx, 1, work), "SUM"), fl)
    return ctx.cast(fl, dtype)


def _atan2(ctx: ConversionContext, y: Any, x: Any) -> Any:
    """atan2(y, x) from atan(y / x) with quadrant fixes (x == 0 handled by select)."""
    dt = _dtype_of(ctx, y)
    zero = scalar(ctx, 0, dt)
    base = unary(ctx, ew(ctx, y, x, "DIV"), "ATAN")
    pi = scalar(ctx, math.pi, dt)
    x_neg = ew(ctx, x, zero, "LESS")
    y_neg = ew(ctx, y, zero, "LESS")
    adj = select(ctx, y_neg, unary(ctx, pi, "NEG"), pi)
    base, adj = broadcast(ctx, base, adj)
    corrected = select(ctx, x_neg, ew(ctx, base, adj, "SUM"), base)
    # x == 0: +-pi/2 by the sign of y (0 when y == 0 too)
    half = ew(ctx, unary(ctx, y, "SIGN"), scalar(ctx, math.pi / 2, dt), "PROD")
    return select(ctx, ew(ctx, x, zero, "EQUAL"), half, corrected)


def _dtype_of(ctx: ConversionContext, it: Any) -> torch.dtype:
    return ctx.dtype_of(it)


def dtype_of(ctx: ConversionContext, it: Any) -> torch.dtype:
    """The torch dtype of a network tensor."""
    return _dtype_of(ctx, it)


# ------------------------------------------------------------------------------ comparison
def compare(ctx: ConversionContext, a: Any, b: Any, kind: str) -> Any:
    """``a <kind> b`` as a BOOL network tensor; kind: eq, ne, lt, le, gt, ge."""
    dt = compute_dtype(a, b) if not (is_itensor(a) or is_itensor(b)) else _pair_dtype(ctx, a, b)
    if dt == torch.bool and kind not in ("eq", "ne"):
        dt = torch.int32  # TensorRT orders only numbers
    ia, ib = operand(ctx, a, dt), operand(ctx, b, dt)
    if kind == "eq":
        return ew(ctx, ia, ib, "EQUAL")
    if kind == "ne":
        return unary(ctx, ew(ctx, ia, ib, "EQUAL"), "NOT")
    if kind == "lt":
        return ew(ctx, ia, ib, "LESS")
    if kind == "gt":
        return ew(ctx, ia, ib, "GREATER")
    if kind == "le":
        return unary(ctx, ew(ctx, ia, ib, "GREATER"), "NOT") if not dt.is_floating_point else ew(
            ctx, ew(ctx, ia, ib, "LESS"), ew(ctx, ia, ib, "EQUAL"), "OR")
    if kind == "ge":
        return unary(ctx, ew(ctx, ia, ib, "LESS"), "NOT") if not dt.is_floating_point else ew(
            ctx, ew(ctx, ia, ib, "GREATER"), ew(ctx, ia, ib, "EQUAL"), "OR")
    raise ConversionError(f"unknown comparison {kind!r}")


def _pair_dtype(ctx: ConversionContext, a: Any, b: Any) -> torch.dtype:
    da = _dtype_of(ctx, a) if is_itensor(a) else None
    db = _dtype_of(ctx, b) if is_itensor(b) else None
    ta = torch.empty((), dtype=da) if da is not None else a
    tb = torch.empty((), dtype=db) if db is not None else b
    if isinstance(ta, torch.Tensor) and isinstance(tb, torch.Tensor) and ta.dim() == 0 and tb.dim() == 0:
        return torch.promote_types(ta.dtype, tb.dtype)
    return compute_dtype(ta, tb)


def to_bool(ctx: ConversionContext, x: Any) -> Any:
    """``x != 0`` as BOOL (or ``x`` itself when already BOOL)."""
    if is_itensor(x):
        it = x
    else:
        it = ctx.itensor(x)
    if _dtype_of(ctx, it) == torch.bool:
        return it
    return ctx.cast(it, torch.bool)


def logical(ctx: ConversionContext, a: Any, b: Any, kind: str) -> Any:
    """Logical and/or/xor of truth values (non-zero is true) as BOOL."""
    op = {"and": "AND", "or": "OR", "xor": "XOR"}[kind]
    return ew(ctx, to_bool(ctx, a), to_bool(ctx, b), op)


# ------------------------------------------------------------------------------- bitwise
def _bits(ctx: ConversionContext, it: Any, dtype: torch.dtype, nbits: int) -> Any:
    """Two's-complement bits of an integer tensor along a new last axis (0/1, low bit first)."""
    from .shape import unsqueeze

    x = unsqueeze(ctx, it, -1)
    rank = len(tuple(x.shape))
    shape = (1,) * (rank - 1) + (nbits - 1,)
    pows = ctx.constant(torch.tensor([1 << k for k in range(nbits - 1)], dtype=dtype).reshape(shape))
    two = scalar(ctx, 2, dtype, rank)
    shifted = ew(ctx, x, pows, "FLOOR_DIV")  # x >> k (arithmetic shift)
    low = ew(ctx, shifted, ew(ctx, ew(ctx, shifted, two, "FLOOR_DIV"), two, "PROD"), "SUB")
    sign = ctx.cast(ew(ctx, x, scalar(ctx, 0, dtype, rank), "LESS"), dtype)
    from .shape import concat

    return concat(ctx, [low, sign], -1)


def bitwise(ctx: ConversionContext, a: Any, b: Any, kind: str, dtype: torch.dtype) -> Any:
    """Bitwise and/or/xor: logical on BOOL; integers through their two's-complement bits."""
    if dtype == torch.bool:
        return logical(ctx, a, b, kind)
    if dtype not in _INTS:
        raise ConversionError(f"bitwise {kind} needs integer or bool tensors, got {dtype}")
    work = torch.int64 if dtype == torch.int64 else torch.int32
    nbits = torch.iinfo(dtype).bits
    ia, ib = broadcast(ctx, operand(ctx, a, work), operand(ctx, b, work))
    ba, bb = _bits(ctx, ia, work, nbits), _bits(ctx, ib, work, nbits)
    if kind == "and":
        r = ew(ctx, ba, bb, "PROD")
    elif kind == "or":
        r = ew(ctx, ew(ctx, ba, bb, "SUM"), ew(ctx, ba, bb, "PROD"), "SUB")
    else:
        both = ew(ctx, ba, bb, "PROD")
        r = ew(ctx, ew(ctx, ba, bb, "SUM"), ew(ctx, both, scalar(ctx, 2, work), "PROD"), "SUB")
    rank = len(tuple(r.shape))
    weights = [1 << k for k in range(nbits - 1)] + [-(1 << (nbits - 1))]
    w = ctx.constant(torch.tensor(weights, dtype=work).reshape((1,) * (rank - 1) + (nbits,)))
    out = ctx.network.add_reduce(ew(ctx, r, w, "PROD"), ctx.trt.ReduceOperation.SUM, 1 << (rank - 1), False)
    return ctx.cast(out.get_output(0), dtype)


def bitwise_not(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """``~x``: NOT on BOOL, ``-x - 1`` on integers (two's complement)."""
    if dtype == torch.bool:
        return unary(ctx, to_bool(ctx, x), "NOT")
    work = torch.int64 if dtype == torch.int64 else torch.int32
    it = operand(ctx, x, work)
    return ctx.cast(ew(ctx, unary(ctx, it, "NEG"), scalar(ctx, 1, work), "SUB"), dtype)


# ----------------------------------------------------------------------------- selection
def select(ctx: ConversionContext, cond: Any, a: Any, b: Any) -> Any:
    """``where(cond, a, b)`` over network tensors (a and b of one dtype), ranks equalized."""
    cond, a, b = broadcast(ctx, cond, a, b)
    return ctx.network.add_select(cond, a, b).get_output(0)


def where(ctx: ConversionContext, cond: Any, a: Any, b: Any, dtype: torch.dtype) -> Any:
    """``torch.where(cond, a, b)`` with a and b (tensors or scalars) promoted to ``dtype``."""
    return select(ctx, to_bool(ctx, cond), operand(ctx, a, dtype), operand(ctx, b, dtype))


def clamp(ctx: ConversionContext, x: Any, lo: Any, hi: Any, dtype: torch.dtype) -> Any:
    """``torch.clamp(x, lo, hi)`` (either bound may be None, a scalar or a tensor)."""
    it = operand(ctx, x, dtype)
    if lo is not None:
        it = ew(ctx, it, operand(ctx, lo, dtype), "MAX")
    if hi is not None:
        it = ew(ctx, it, operand(ctx, hi, dtype), "MIN")
    return it


def float_of(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """``x`` as a network tensor in ``dtype`` when floating, else in float32."""
    return operand(ctx, x, _float_for(dtype))


# ----------------------------------------------------------------------------- unary math
_DIRECT = {
    "exp": "EXP", "log": "LOG", "sqrt": "SQRT", "reciprocal": "RECIP", "abs": "ABS", "neg": "NEG", "sin": "SIN",
    "cos": "COS", "tan": "TAN", "sinh": "SINH", "cosh": "COSH", "asin": "ASIN", "acos": "ACOS", "atan": "ATAN",
    "asinh": "ASINH", "acosh": "ACOSH", "atanh": "ATANH", "ceil": "CEIL", "floor": "FLOOR", "erf": "ERF",
    "sign": "SIGN", "round": "ROUND",
}
_INT_KEEP = {"abs", "neg", "sign", "square", "positive"}  # integer in, integer out
_INT_IDENTITY = {"floor", "ceil", "round", "trunc", "fix"}  # identity on integers (torch)
_PREDICATES = {"isnan", "isinf", "isfinite", "isposinf", "isneginf", "signbit"}


def math_unary(ctx: ConversionContext, x: Any, kind: str, out_dtype: torch.dtype, in_dtype: torch.dtype) -> Any:
    """The unary op ``kind`` (torch's name) of ``x``; the result has ``out_dtype``."""
    if kind in _PREDICATES:
        return _predicate(ctx, x, kind, in_dtype)
    if kind == "logical_not":
        return ctx.cast(unary(ctx, to_bool(ctx, x), "NOT"), out_dtype)
    if kind == "bitwise_not":
        return bitwise_not(ctx, x, out_dtype)
    if not out_dtype.is_floating_point:
        it = operand(ctx, x, out_dtype)
        if kind in _INT_IDENTITY or kind == "positive" or (kind == "sign" and out_dtype == torch.bool):
            return ctx.network.add_identity(it).get_output(0)  # the sign of a bool is itself
        if kind == "square":
            return ew(ctx, it, it, "PROD")
        if kind in _INT_KEEP:
            return unary(ctx, it, _DIRECT[kind])
        raise ConversionError(f"{kind} of an integer tensor is not supported")
    it = operand(ctx, x, out_dtype)
    dt = out_dtype
    if kind in _DIRECT:
        return unary(ctx, it, _DIRECT[kind])
    if kind == "positive":
        return ctx.network.add_identity(it).get_output(0)
    if kind == "square":
        return ew(ctx, it, it, "PROD")
    if kind == "rsqrt":
        return unary(ctx, unary(ctx, it, "SQRT"), "RECIP")
    if kind == "expm1":
        return ew(ctx, unary(ctx, it, "EXP"), scalar(ctx, 1, dt), "SUB")
    if kind == "log1p":
        return unary(ctx, ew(ctx, it, scalar(ctx, 1, dt), "SUM"), "LOG")
    if kind in ("log2", "log10"):
        base = 2.0 if kind == "log2" else 10.0
        return ew(ctx, unary(ctx, it, "LOG"), scalar(ctx, 1.0 / math.log(base), dt), "PROD")
    if kind == "exp2":
        return ew(ctx, scalar(ctx, 2.0, dt), it, "POW")
    if kind in ("trunc", "fix"):
        return trunc(ctx, it)
    if kind == "frac":
        return ew(ctx, it, trunc(ctx, it), "SUB")
    if kind == "erfc":
        return ew(ctx, scalar(ctx, 1, dt), unary(ctx, it, "ERF"), "SUB")
    if kind == "deg2rad":
        return ew(ctx, it, scalar(ctx, math.pi / 180.0, dt), "PROD")
    if kind == "rad2deg":
        return ew(ctx, it, scalar(ctx, 180.0 / math.pi, dt), "PROD")
    if kind == "sigmoid":
        return ctx.network.add_activation(it, ctx.trt.ActivationType.SIGMOID).get_output(0)
    if kind == "logit":
        return unary(ctx, ew(ctx, it, ew(ctx, scalar(ctx, 1, dt), it, "SUB"), "DIV"), "LOG")
    if kind == "sinc":
        pix = ew(ctx, it, scalar(ctx, math.pi, dt), "PROD")
        val = ew(ctx, unary(ctx, pix, "SIN"), pix, "DIV")
        return select(ctx, ew(ctx, it, scalar(ctx, 0, dt), "EQUAL"), scalar(ctx, 1, dt), val)
    raise ConversionError(f"unknown unary op {kind!r}")


def _predicate(ctx: ConversionContext, x: Any, kind: str, in_dtype: torch.dtype) -> Any:
    if not in_dtype.is_floating_point:
        it = operand(ctx, x, in_dtype if in_dtype != torch.bool else torch.int32)
        zero = scalar(ctx, 0, dtype_of(ctx, it))
        if kind == "signbit":
            return ew(ctx, it, zero, "LESS")
        value = kind == "isfinite"
        # NOTE: a constant of the right shape; the comparison keeps the dependency on x.
        eq = ew(ctx, it, it, "EQUAL")
        return eq if value else unary(ctx, eq, "NOT")
    it = operand(ctx, x, in_dtype)
    dt = in_dtype
    if kind == "isnan":
        return unary(ctx, it, "ISNAN")
    if kind == "isinf":
        return unary(ctx, it, "ISINF")
    if kind == "isfinite":
        bad = ew(ctx, unary(ctx, it, "ISNAN"), unary(ctx, it, "ISINF"), "OR")
        return unary(ctx, bad, "NOT")
    if kind == "isposinf":
        return ew(ctx, unary(ctx, it, "ISINF"), ew(ctx, it, scalar(ctx, 0, dt), "GREATER"), "AND")
    if kind == "isneginf":
        return ew(ctx, unary(ctx, it, "ISINF"), ew(ctx, it, scalar(ctx, 0, dt), "LESS"), "AND")
    if kind == "signbit":
        # NOTE: -0.0 has its sign bit set; 1/x tells it apart from +0.0.
        neg = ew(ctx, it, scalar(ctx, 0, dt), "LESS")
        neg_zero = ew(ctx, ew(ctx, it, scalar(ctx, 0, dt), "EQUAL"),
                      ew(ctx, unary(ctx, it, "RECIP"), scalar(ctx, 0, dt), "LESS"), "AND")
        return ew(ctx, neg, neg_zero, "OR")
    raise ConversionError(f"unknown predicate {kind!r}")


def round_decimals(ctx: ConversionContext, x: Any, decimals: int, dtype: torch.dtype) -> Any:
    """``torch.round(x, decimals=n)``: round(x * 10^n) / 10^n."""
    it = operand(ctx, x, dtype)
    if decimals == 0 or not dtype.is_floating_point:
        return unary(ctx, it, "ROUND") if dtype.is_floating_point else ctx.network.add_identity(it).get_output(0)
    scale = scalar(ctx, 10.0 ** decimals, dtype)
    return ew(ctx, unary(ctx, ew(ctx, it, scale, "PROD"), "ROUND"), scale, "DIV")


# ------------------------------------------------------------------------------ dtype casts
TRT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.int32, torch.int64,
              torch.bool)


def convert_dtype(ctx: ConversionContext, it: Any, dtype: torch.dtype) -> Any:
    """Cast like torch: float -> integer truncates toward zero, as TensorRT's cast does (its Cast
    operator docs: 5.6 -> 5, 8.9 -> 8), so one cast layer converts exactly."""
    src = dtype_of(ctx, it)
    if src == dtype:
        return it
    return ctx.cast(it, dtype)
