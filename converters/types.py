"""Types and creation: to(dtype)/type/type_as and the float()/int()/... casts, device moves, the *_like
creation functions and Tensor.new_* of traced tensors, fill_/zero_.

float64 results (``.double()``, ``dtype=torch.float64``) are computed in float32 or refused as
``convert(..., truncate_double=)`` says (``torch2trt_lite/trace/double.py``).

Creation functions with Python-int sizes (``torch.zeros(x.shape[0], 4)``) need no converter: they
build untraced tensors, which become constants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter, register_table

from .impl import elementwise as E
from .impl import shape as S
from .impl import sizes as Y
from .impl.active import active_context

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

T = torch.Tensor


def _dtype_check(call: Call) -> str | None:
    out = call.output
    if isinstance(out, torch.Tensor) and out.dtype == torch.float64:
        # NOTE: float64 is computed in float32, or refused, by the tracer (torch2trt_lite.trace.double)
        ctx = active_context()
        if ctx is not None and ctx.float64.allowed:
            return None
    if isinstance(out, torch.Tensor) and out.dtype not in E.TRT_DTYPES:
        return f"TensorRT has no {out.dtype} (supported: float32, float16, bfloat16, int8, uint8, int32, int64, bool)"
    return None


def _cast(ctx: ConversionContext, call: Call) -> Any:
    x = call.args[0]
    if not isinstance(call.output, torch.Tensor):  # x.type() names the type
        return None
    it = ctx.itensor(x)
    out = E.convert_dtype(ctx, it, call.output.dtype)
    filled = ctx.filled_value(x)
    if filled is not None and call.output.numel():  # a cast of a filled creation stays filled
        ctx.mark_filled(call.output, call.output.flatten()[0].item())
    if out is it and call.output is not x:  # a copy (copy=True, or .to() of another device)
        return ctx.network.add_identity(it).get_output(0)
    return out


register_table(
    {
        (T.to, T.type, T.type_as, T.float, T.half, T.bfloat16, T.int, T.long, T.bool, T.double, T.short, T.char,
         T.byte, T.cpu, T.cuda): None,
    },
    lambda _: _cast,
    check=_dtype_check,
)


def _like_value(kind: str, call: Call) -> Any:
    if kind == "zeros" or kind == "empty":
        return 0
    if kind == "ones":
        return 1
    return call.arg(1, "fill_value")


def _filled(ctx: ConversionContext, shape: tuple, value: Any, dtype: torch.dtype, out: Any = None) -> Any:
    """A tensor of ``shape`` filled with ``value``: a one-element constant broadcast (no big weights);
    ``out``: the traced result, whose dynamic sizes are those of ``shape`` (recorded)."""
    one = ctx.constant(torch.full((1,) * len(shape), value, dtype=dtype))
    it = S.expand(ctx, one, shape) if any(Y.is_sym(s) or s != 1 for s in shape) else one
    if out is not None:
        ctx.known_sizes(it, list(shape), tuple(out.shape))
    return it


def _like(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = call.output
        value = _like_value(kind, call)
        if isinstance(value, torch.Tensor):
            value = value.item()
        return _filled(ctx, Y.sizes_of(ctx, call.arg(0, "input")), value, out.dtype)

    return convert


register_table(
    {
        (torch.zeros_like,): "zeros",
        (torch.ones_like,): "ones",
        (torch.empty_like,): "empty",
        (torch.full_like,): "full",
    },
    _like,
    check=_dtype_check,
)


def _new(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = call.output
        if kind == "tensor":
            data = call.arg(1, "data")
            if isinstance(data, torch.Tensor) and ctx.is_traced(data):  # a copy of a traced tensor
                return E.convert_dtype(ctx, ctx.itensor(data), out.dtype)
            return ctx.constant(out.detach().clone())
        value = {"zeros": 0, "ones": 1, "empty": 0}.get(kind)
        if kind == "full":
            value = call.arg(2, "fill_value")
        sizes: Any = tuple(out.shape)
        if Y.dynamic(ctx):  # the sizes as given: dynamic ones stay symbolic
            sizes = _creation_sizes(call, 1) if call.args[1:] or "size" in call.kwargs else sizes
        return _filled(ctx, sizes, value, out.dtype, out)

    return convert


register_table(
    {
        (T.new_zeros,): "zeros",
        (T.new_ones,): "ones",
        (T.new_empty,): "empty",
        (T.new_full,): "full",
        (T.new_tensor,): "tensor",
    },
    _new,
    check=_dtype_check,
)


@converter(T.fill_, T.zero_)
def convert_fill(ctx: ConversionContext, call: Call) -> Any:
    x = call.args[0]
    shape = Y.sizes_of(ctx, x)
    if call.qualname.endswith("zero_"):
        return _filled(ctx, shape, 0, x.dtype)
    value = call.arg(1, "value")
    if isinstance(value, torch.Tensor) and ctx.is_traced(value):
        return S.expand(ctx, E.operand(ctx, value, x.dtype), shape)
    if isinstance(value, torch.Tensor):
        value = value.item()
    return _filled(ctx, shape, value, x.dtype)


# -------------------------------------------------------------- creation with dynamic sizes
# NOTE: torch.zeros(n, 4) with a dynamic size n (converters/impl/sizes.py): a dynamic conversion's
# tracer sees these calls as calls on traced values. With static sizes they are untraced and never
# reach these converters (they build constants, see the module docstring).
def _creation_check(call: Call) -> str | None:
    traced = [v for v in (*call.args, *call.kwargs.values()) if isinstance(v, torch.Tensor)]
    if traced:
        return "a tensor argument (the fill value or a bound) computed from the inputs is not supported here"
    return _dtype_check(call)


def _creation_sizes(call: Call, start: int = 0) -> list[Any]:
    """The sizes of a creation call, given as varargs from ``start`` or one sequence (dynamic ones kept)."""
    rest: Any = call.args[start:start + 1] if call.qualname.endswith("full") else call.args[start:]
    if len(rest) == 1 and isinstance(rest[0], (list, tuple)):
        rest = tuple(rest[0])
    if not rest and "size" in call.kwargs:
        v = call.kwargs["size"]
        rest = tuple(v) if isinstance(v, (list, tuple)) else (v,)
    return [s if Y.is_sym(s) else int(s) for s in rest]


def _create(kind: str) -> Any:
    def convert(ctx: ConversionContext, call: Call) -> Any:
        out = call.output
        value: Any = {"zeros": 0, "ones": 1, "empty": 0}.get(kind)
        if kind == "full":
            value = call.arg(1, "fill_value")
        sizes = _creation_sizes(call)
        if Y.is_sym(value):  # torch.full(shape, x.size(0)): the size's network value, not the traced one
            v = Y.scalar(ctx, value, out.dtype)
            it = S.expand(ctx, S.reshape(ctx, v, [1] * len(sizes)), sizes) if sizes else v
        else:
            ctx.mark_filled(out, out.flatten()[0].item() if out.numel() else value)
            one = ctx.constant(torch.full((1,) * len(sizes), value, dtype=out.dtype))
            it = S.expand(ctx, one, sizes) if sizes else ctx.constant(torch.full((), value, dtype=out.dtype))
        ctx.known_sizes(it, sizes, tuple(out.shape))  # the sizes given (torch.zeros(n, 4) is n by 4)
        return it

    return convert


register_table(
    {(torch.zeros,): "zeros", (torch.ones,): "ones", (torch.empty,): "empty", (torch.full,): "full"},
    _create,
    check=_creation_check,
)


@converter(torch.arange, check=_creation_check)
def convert_arange(ctx: ConversionContext, call: Call) -> Any:
    """``torch.arange`` with a dynamic bound: an IFillLayer LINSPACE of a computed length."""
    a, kw = list(call.args[:3]), call.kwargs
    if len(a) == 1 and "end" not in kw:
        start, end = 0, a[0]
    else:
        start = a[0] if a else kw.get("start", 0)
        end = a[1] if len(a) > 1 else kw["end"]
    step = a[2] if len(a) > 2 else kw.get("step", 1)
    out = call.output
    if any(isinstance(v, float) for v in (start, end, step)):
        Y.refuse("torch.arange", [start, end, step], "with float bounds or step its length needs the bound's value")
    start, end, step = (v if Y.is_sym(v) else int(v) for v in (start, end, step))
    if isinstance(step, Y.SymSize) or step == 0:
        Y.refuse("torch.arange", [step], "the step must be a static nonzero int")
    n = (end - start + step - 1) // step if step > 0 else (end - start + step + 1) // step
    n = Y.sym_max(n, 0)
    work = torch.int64 if not out.dtype.is_floating_point else torch.float32
    trt = ctx.trt
    layer = ctx.network.add_fill((0,), trt.FillOperation.LINSPACE, ctx.trt_dtype(work))
    layer.set_input(0, Y.to_itensor(ctx, n))
    layer.set_input(1, Y.scalar(ctx, start, work))
    layer.set_input(2, ctx.cast(Y.to_itensor(ctx, step), work))
    it = E.convert_dtype(ctx, layer.get_output(0), out.dtype)
    ctx.known_sizes(it, [n], tuple(out.shape))
    return it
