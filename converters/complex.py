"""Complex values from ``torch.stft(..., return_complex=True)``: the few ops speech front ends use.

A complex value is held in the network as a real ``[..., 2]`` tensor (real, imaginary; the layout
of ``torch.view_as_real``: ``converters/impl/complex.py``). :data:`COMPLEX_AWARE` maps the
qualnames of the converters that know that layout to their complex form; the tracer sends every
call with a complex argument or result there, and refuses the call when its op is not listed
(``torch2trt_lite/trace/complex_values.py``): no other converter ever sees a complex value, so
none can take the hidden pair dim for a dim of its own.

Converted on complex values: ``stft(return_complex=True)``, ``abs``, ``angle``, ``.real``, ``.imag``,
``view_as_real``, ``view_as_complex``, ``torch.complex``, ``conj``, ``neg``, ``+``/``-`` (complex or
real operands), ``*``/``/`` (complex, real tensor or number operands; in-place forms too),
indexing and slicing, ``reshape``/``view``/``flatten``/``squeeze``/``unsqueeze``/``permute``/
``transpose`` of the logical dims, ``cat``/``stack`` (complex and real tensors), ``sum``/``mean`` over logical dims, ``contiguous``/``clone``/
``detach``, ``istft`` (onesided, real result: ``converters/signal.py``). A model output cannot be complex (TensorRT outputs are real): return ``.abs()`` or
``torch.view_as_real(z)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConverterRefusal
from torch2trt_lite.registry import REGISTRY, Call, converter

from . import signal
from .elementwise import no_out
from .impl import complex as C
from .impl import reduce as R
from .impl import shape as S
from .impl.indexing import getitem
from .impl.nn_common import const, ew

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor
ComplexFn = Callable[["ConversionContext", Call], Any]
COMPLEX_AWARE = C.COMPLEX_AWARE  # qualname -> (converter, check): filled below when the families load


def _aware(*qualnames: str, check: Callable[[Call], str | None] | None = None) -> Callable[[ComplexFn], ComplexFn]:
    def add(fn: ComplexFn) -> ComplexFn:
        for q in qualnames:
            COMPLEX_AWARE[q] = (fn, check)
        return fn

    return add


_cx = C.is_complex


def _real_dtype(call: Call) -> torch.dtype:
    out = call.output
    dt = out.dtype if isinstance(out, torch.Tensor) else torch.float32
    return dt.to_real() if dt.is_complex else dt


def pairs(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    """The ``[..., 2]`` network tensor of complex ``x`` (traced, a constant, or a Python complex)."""
    if isinstance(x, torch.Tensor) and ctx.is_traced(x):
        return ctx.itensor(x)
    t = torch.tensor(x) if isinstance(x, complex) else x.detach().resolve_conj().resolve_neg()
    return ctx.constant(torch.view_as_real(t).to(dtype))


def _real(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    return ctx.itensor(x, dtype) if isinstance(x, torch.Tensor) else ctx.itensor(float(x), dtype)


def _operand(ctx: ConversionContext, x: Any, dtype: torch.dtype) -> Any:
    return pairs(ctx, x, dtype) if _cx(x) else C.from_real(ctx, _real(ctx, x, dtype), dtype)


# --------------------------------------------------------------------------- makers
_STFT = ("torch.functional.stft", "torch.Tensor.stft")
_aware(*_STFT, check=signal.check_stft)(signal.convert_stft)
_aware("torch.functional.istft", "torch.istft", "torch.Tensor.istft", check=signal.check_istft)(signal.convert_istft)


@converter(torch.view_as_real, torch.view_as_complex)
def convert_view_as_real(ctx: ConversionContext, call: Call) -> Any:
    """The same network tensor: a complex value is held as ``view_as_real`` lays it out."""
    return ctx.itensor(call.arg(0, "input"))


_aware("torch.view_as_real", "torch.view_as_complex")(convert_view_as_real)


def _check_complex(call: Call) -> str | None:
    re, im = call.arg(0, "real"), call.arg(1, "imag")
    if not all(isinstance(t, torch.Tensor) and t.is_floating_point() for t in (re, im)):
        return "torch.complex takes two real floating-point tensors"
    return None


@converter(torch.complex, check=_check_complex)
def convert_complex(ctx: ConversionContext, call: Call) -> Any:
    dt = _real_dtype(call)
    return C.pack(ctx, ctx.itensor(call.arg(0, "real"), dt), ctx.itensor(call.arg(1, "imag"), dt))


_aware("torch.complex", check=_check_complex)(convert_complex)


# --------------------------------------------------------------------------- complex -> real
@_aware("torch.abs", "torch.Tensor.abs", "torch.Tensor.__abs__")
def _abs(ctx: ConversionContext, call: Call) -> Any:
    return C.magnitude(ctx, pairs(ctx, call.args[0], _real_dtype(call)))


def _check_real_of(call: Call) -> str | None:
    x = call.arg(0, "input")
    if not _cx(x) and not call.qualname.endswith("real"):
        return f"{call.qualname} of a real tensor is not converted (use torch.where(x < 0, math.pi, 0.0) for angle)"
    return None


@converter(torch.real, torch.imag, "torch.Tensor.real", "torch.Tensor.imag", torch.angle, T.angle,
           check=_check_real_of)
def convert_real_imag_angle(ctx: ConversionContext, call: Call) -> Any:
    """``.real``, ``.imag`` (one gather of the pair dim) and ``angle`` (atan2) of a complex value."""
    dt = _real_dtype(call)
    x = call.arg(0, "input")
    if not _cx(x):  # .real of a real tensor: the tensor itself
        return ctx.itensor(x)
    z = pairs(ctx, x, dt)
    name = call.qualname.rsplit(".", 1)[-1]
    return C.angle(ctx, z, dt) if name == "angle" else C.part(ctx, z, 0 if name == "real" else 1)


_aware("torch.real", "torch.imag", "torch.Tensor.real", "torch.Tensor.imag", "torch.angle", "torch.Tensor.angle",
       check=_check_real_of)(convert_real_imag_angle)


# --------------------------------------------------------------------------- complex -> complex
@converter(torch.conj, T.conj, torch.conj_physical, T.conj_physical, torch.resolve_conj, T.resolve_conj,
           torch.resolve_neg, T.resolve_neg)
def convert_conj(ctx: ConversionContext, call: Call) -> Any:
    """``conj`` (of a real tensor: itself); ``resolve_conj``/``resolve_neg``: the value itself."""
    x = call.arg(0, "input")
    if not _cx(x) or "resolve" in call.qualname:
        return ctx.itensor(x)
    return C.conj(ctx, pairs(ctx, x, _real_dtype(call)), _real_dtype(call))


_aware("torch.conj", "torch.Tensor.conj", "torch.conj_physical", "torch.Tensor.conj_physical", "torch.resolve_conj",
       "torch.Tensor.resolve_conj", "torch.resolve_neg", "torch.Tensor.resolve_neg")(convert_conj)


@_aware("torch.Tensor.contiguous", "torch.Tensor.clone", "torch.clone", "torch.Tensor.detach", "torch.detach",
        "torch.Tensor.__pos__", "torch.positive", "torch.Tensor.positive")
def _same(ctx: ConversionContext, call: Call) -> Any:
    if call.qualname.endswith("clone") and call.kwargs.get("memory_format") not in (None, torch.preserve_format,
                                                                                   torch.contiguous_format):
        raise ConverterRefusal("clone with a memory_format of a complex value is not supported")
    return ctx.itensor(call.args[0])


@_aware("torch.neg", "torch.Tensor.neg", "torch.Tensor.__neg__")
def _neg(ctx: ConversionContext, call: Call) -> Any:
    dt = _real_dtype(call)
    return ew(ctx, pairs(ctx, call.args[0], dt), const(ctx, -1.0, dt, 1), "PROD")


def _alpha(call: Call) -> Any:
    alpha = call.kwargs.get("alpha", 1)
    if _cx(alpha) or not isinstance(alpha, (int, float)):
        raise ConverterRefusal("alpha must be a real number for complex operands")
    return alpha


_ADD = ("torch.add", "torch.Tensor.add", "torch.Tensor.__add__", "torch.Tensor.__radd__", "torch.Tensor.add_",
        "torch.Tensor.__iadd__")
_SUB = ("torch.sub", "torch.Tensor.sub", "torch.Tensor.__sub__", "torch.Tensor.sub_", "torch.Tensor.__isub__",
        "torch.subtract", "torch.Tensor.subtract")
_RSUB = ("torch.Tensor.__rsub__", "torch.rsub")


@_aware(*_ADD, *_SUB, *_RSUB)
def _add_sub(ctx: ConversionContext, call: Call) -> Any:
    dt = _real_dtype(call)
    a, b = call.args[0], call.arg(1, "other")
    if call.qualname in _RSUB:
        a, b = b, a
    za, zb = _operand(ctx, a, dt), _operand(ctx, b, dt)
    alpha = _alpha(call)
    if alpha != 1:
        zb = ew(ctx, zb, const(ctx, float(alpha), dt, 1), "PROD")
    return ew(ctx, za, zb, "SUM" if call.qualname in _ADD else "SUB")


_MUL = ("torch.mul", "torch.Tensor.mul", "torch.Tensor.__mul__", "torch.Tensor.__rmul__", "torch.Tensor.mul_",
        "torch.Tensor.__imul__", "torch.multiply", "torch.Tensor.multiply", "torch.Tensor.multiply_")
_DIV = ("torch.div", "torch.Tensor.div", "torch.Tensor.__truediv__", "torch.Tensor.div_", "torch.Tensor.__itruediv__",
        "torch.divide", "torch.Tensor.divide", "torch.Tensor.divide_", "torch.true_divide",
        "torch.Tensor.true_divide", "torch.Tensor.true_divide_")
_RDIV = ("torch.Tensor.__rtruediv__",)


@_aware(*_MUL, *_DIV, *_RDIV)
def _mul_div(ctx: ConversionContext, call: Call) -> Any:
    if call.kwargs.get("rounding_mode") is not None or call.kwargs.get("out") is not None:
        raise ConverterRefusal("rounding_mode= and out= are not supported with complex operands")
    dt = _real_dtype(call)
    a, b = call.args[0], call.arg(1, "other")
    if call.qualname in _RDIV:
        a, b = b, a
    div = call.qualname not in _MUL
    if _cx(a) and _cx(b):
        za, zb = pairs(ctx, a, dt), pairs(ctx, b, dt)
        return C.divide(ctx, za, zb, dt) if div else C.multiply(ctx, za, zb)
    if _cx(a):  # complex times or over a real tensor or number
        return C.scale(ctx, pairs(ctx, a, dt), _real(ctx, b, dt), "DIV" if div else "PROD")
    if not div:
        return C.scale(ctx, pairs(ctx, b, dt), _real(ctx, a, dt), "PROD")
    return C.divide(ctx, C.from_real(ctx, _real(ctx, a, dt), dt), pairs(ctx, b, dt), dt)


# ------------------------------------------------------------------- logical dims (the pair dim kept last)
def _proxy(ctx: ConversionContext, call: Call, args: tuple[Any, ...]) -> Any:
    """``call``'s own (real) converter on the ``view_as_real`` layout: ``args`` (the complex input
    replaced by its real view, dims adjusted by the caller) and the real view of the output."""
    x = call.args[0] if call.args else call.kwargs["input"]
    proxy = torch.view_as_real(x.detach().resolve_conj().resolve_neg()).clone()
    ctx.set_itensor(proxy, ctx.itensor(x))
    out = torch.view_as_real(call.output.detach().resolve_conj().resolve_neg())
    record = REGISTRY.get(call.qualname)
    assert record is not None
    return record.converter(ctx, Call(call.target, call.qualname, (proxy, *args), {}, out, call.module_path))


def _dims(call: Call, name: str) -> list[Any]:
    v = call.args[1:] if len(call.args) > 1 else call.kwargs.get(name, ())
    if len(v) == 1 and isinstance(v[0], (list, tuple, torch.Size)):
        v = v[0]
    return list(v)


@_aware("torch.Tensor.__getitem__")
def _getitem(ctx: ConversionContext, call: Call) -> Any:
    index = call.args[1]
    index = (*index, slice(None)) if isinstance(index, tuple) else (index, slice(None))
    x = call.args[0]
    proxy = torch.view_as_real(x.detach().resolve_conj().resolve_neg()).clone()
    ctx.set_itensor(proxy, ctx.itensor(x))
    return getitem(ctx, proxy, index, (*call.output.shape, 2))


@_aware("torch.Tensor.reshape", "torch.reshape", "torch.Tensor.view")
def _reshape(ctx: ConversionContext, call: Call) -> Any:
    dims = _dims(call, "shape")
    if any(isinstance(d, torch.dtype) for d in dims):
        raise ConverterRefusal("Tensor.view(dtype) of a complex value is not supported")
    return _proxy(ctx, call, (*dims, 2))


def _logical(call: Call) -> int:
    return int(call.args[0].dim())


@_aware("torch.Tensor.permute", "torch.permute")
def _permute(ctx: ConversionContext, call: Call) -> Any:
    n = _logical(call)
    return _proxy(ctx, call, ([int(d) % n for d in _dims(call, "dims")] + [n],))


@_aware("torch.Tensor.transpose", "torch.transpose")
def _transpose(ctx: ConversionContext, call: Call) -> Any:
    n = _logical(call)
    return _proxy(ctx, call, (int(call.arg(1, "dim0")) % n, int(call.arg(2, "dim1")) % n))


@_aware("torch.Tensor.flatten", "torch.flatten")
def _flatten(ctx: ConversionContext, call: Call) -> Any:
    n = max(_logical(call), 1)
    return _proxy(ctx, call, (int(call.arg(1, "start_dim", 0)) % n, int(call.arg(2, "end_dim", -1)) % n))


@_aware("torch.Tensor.unsqueeze", "torch.unsqueeze")
def _unsqueeze(ctx: ConversionContext, call: Call) -> Any:
    return _proxy(ctx, call, (int(call.arg(1, "dim")) % (_logical(call) + 1),))


@_aware("torch.Tensor.squeeze", "torch.squeeze")
def _squeeze(ctx: ConversionContext, call: Call) -> Any:
    x, dim = call.args[0], call.arg(1, "dim", None)
    n = x.dim()
    dims = [d for d in range(n) if x.shape[d] == 1] if dim is None else \
        [int(d) % n for d in ((dim,) if isinstance(dim, int) else dim) if x.shape[int(d) % n] == 1]
    if not dims:
        return ctx.itensor(x)
    return _proxy(ctx, call, (tuple(dims) if len(dims) > 1 else dims[0],))


def _joined(ctx: ConversionContext, call: Call) -> list[Any]:
    """The pairs of ``cat``/``stack``'s tensors (a real one as (x, 0), as torch promotes it); torch's
    legacy empty 1-D tensors are skipped by ``cat``."""
    dtype = _real_dtype(call)
    return [_operand(ctx, t, dtype) for t in call.arg(0, "tensors")
            if call.qualname == "torch.stack" or not (t.dim() == 1 and t.shape[0] == 0)]


@_aware("torch.cat", "torch.concat", "torch.concatenate", check=no_out)
def _cat(ctx: ConversionContext, call: Call) -> Any:
    dim = call.arg(1, "dim", call.kwargs.get("axis", 0))
    return S.concat(ctx, _joined(ctx, call), int(dim) % call.output.dim())  # the pair dim stays last


@_aware("torch.stack", check=no_out)
def _stack(ctx: ConversionContext, call: Call) -> Any:
    d = int(call.arg(1, "dim", 0)) % call.output.dim()
    return S.concat(ctx, [S.unsqueeze(ctx, it, d) for it in _joined(ctx, call)], d)


def _check_reduce(call: Call) -> str | None:
    if call.kwargs.get("dtype") is not None or call.kwargs.get("out") is not None:
        return "dtype= and out= are not supported for a sum or mean of complex values"
    return None


@_aware("torch.sum", "torch.Tensor.sum", "torch.mean", "torch.Tensor.mean", check=_check_reduce)
def _sum_mean(ctx: ConversionContext, call: Call) -> Any:
    x = call.args[0]
    dims = R.dims_of(call.arg(1, "dim", None), x.dim())
    it = ctx.itensor(x)
    if not dims:
        return ctx.itensor(x)
    op = "SUM" if call.qualname.endswith("sum") else "AVG"
    return R.reduce(ctx, it, op, dims, bool(call.arg(2, "keepdim", False)))


__all__ = ["convert_complex", "convert_conj", "convert_real_imag_angle", "convert_view_as_real", "pairs"]
