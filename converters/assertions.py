"""Runtime checks on values: ``torch._assert(cond, message)``, ``torch._assert_async(cond)``,
``torch._check_tensor_all(cond, message)`` and ``torch._check_tensor_all_with(error_type, cond, message)``
with a condition computed from the inputs. The last is how transformers' ``torch_compilable_check``
checks a tensor condition (``n_image_tokens * hidden == image_features.numel()`` in vision-language
models): torch evaluates it as ``cond._is_all_true().item()``, a value read the guard would refuse;
converted here before that read, as the check on every engine run it is in eager PyTorch.

Eager PyTorch checked the condition only on the traced inputs; the engine must check it on every run.
TensorRT's ``IAssertionLayer`` cannot: it evaluates its condition as a *shape tensor* (computed from
sizes only), and a condition on values turns the inputs it reads into shape inputs. TensorRT-RTX 1.7
refuses such a network ("Input shape tensor input_0 has type Float but input shape tensors must have
type INT32 or INT64"; an int64 input: "Network has dynamic or shape inputs, but no optimization
profile has been defined"). So the condition, reduced to one BOOL, becomes an extra engine output
(``assert_<k>``) that ``TRTModule`` reads after each run, raising ``RuntimeExecutionError`` with the
model's message when it is False. In a bare plan (trtexec, Triton, C++) it is one more output to
check. A condition on sizes alone (a Python bool) is checked by PyTorch while tracing and needs
nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.registry import Call, converter

from .impl import elementwise as E
from .impl import reduce as R
from .impl import shape as S
from .impl.active import user_location

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def _message(call: Call, index: int, name: str) -> str:
    msg = call.arg(index, name, None)
    if isinstance(msg, str) and msg:
        return msg
    fixed = _fixed_message(msg)
    if fixed:
        return fixed
    # NOTE: a callable message is PyTorch's lazy form, built only on failure (it may read values): the
    # engine gets the call's place instead
    return f"{call.qualname} failed at {user_location(3)}"


def _assertion(ctx: ConversionContext, cond: Any, message: str) -> None:
    it = E.to_bool(ctx, ctx.itensor(cond))
    n = len(tuple(it.shape))
    if n:
        it = ctx.cast(R.reduce(ctx, ctx.cast(it, torch.int32), "MIN", list(range(n)), False), torch.bool)  # all()
    ctx.assertions.append((S.reshape(ctx, it, [1]), message))


def _check_single(call: Call) -> str | None:
    cond = call.args[0] if call.args else None
    if isinstance(cond, torch.Tensor) and cond.numel() != 1:
        return f"an assertion on a tensor of {cond.numel()} elements (PyTorch needs one: use .all())"
    return None


@converter(torch._assert, check=_check_single)
def convert_assert(ctx: ConversionContext, call: Call) -> Any:
    _assertion(ctx, call.args[0], _message(call, 1, "message"))
    return None


@converter(torch._assert_async, check=_check_single)
def convert_assert_async(ctx: ConversionContext, call: Call) -> Any:
    _assertion(ctx, call.args[0], _message(call, 1, "assert_msg"))
    return None


@converter(torch._check_tensor_all)
def convert_check_tensor_all(ctx: ConversionContext, call: Call) -> Any:
    _assertion(ctx, call.args[0], _message(call, 1, "message"))
    return None


def _check_with(call: Call) -> str | None:
    cond = call.arg(1, "cond", None)
    if not isinstance(cond, torch.Tensor) or cond.dtype != torch.bool:
        return "the condition must be a bool tensor (as torch requires)"
    return None


@converter(torch._check_tensor_all_with, check=_check_with)
def convert_check_tensor_all_with(ctx: ConversionContext, call: Call) -> Any:
    error_type = call.arg(0, "error_type", None)
    message = _message(call, 2, "message")
    name = getattr(error_type, "__name__", "")
    _assertion(ctx, call.arg(1, "cond"), f"{name}: {message}" if name else message)
    return None


def _fixed_message(msg: Any) -> str | None:
    """The string a lazy message returns when it only wraps a fixed string: transformers'
    ``torch_compilable_check`` wraps its (already formatted) message in a closure ``msg_callable``
    returning it. Any other callable is not called (it may read values)."""
    if not callable(msg) or not getattr(msg, "__qualname__", "").endswith("torch_compilable_check.<locals>.msg_callable"):
        return None
    cells = getattr(msg, "__closure__", None) or ()
    values = [c.cell_contents for c in cells]
    if len(values) == 1 and isinstance(values[0], str) and values[0]:
        return f"{values[0]} (a message formatted when the model was traced)"
    return None
