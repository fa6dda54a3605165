"""Linear algebra builders: torch.matmul semantics, linear, addmm-style blends, einsum, bilinear."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from .nn_common import const, ew, matmul, rank, reduce, reshape, squeeze, unsqueeze

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def torch_matmul(ctx: ConversionContext, a: Any, b: Any) -> Any:
    """``torch.matmul(a, b)`` for every rank combination (1D operands are promoted, then squeezed)."""
    ra, rb = rank(a), rank(b)
    if ra == 1 and rb == 1:
        y = matmul(ctx, reshape(ctx, a, (1, -1)), reshape(ctx, b, (-1, 1)))
        return reshape(ctx, y, ())
    if ra == 1:
        y = matmul(ctx, reshape(ctx, a, (1, -1)), b)
        return squeeze(ctx, y, [-2])
    if rb == 1:
        y = matmul(ctx, a, reshape(ctx, b, (-1, 1)))
        return squeeze(ctx, y, [-1])
    return matmul(ctx, a, b)


def linear(ctx: ConversionContext, x: Any, weight: Any, bias: Any | None) -> Any:
    """``x @ weight.T + bias`` with ``weight`` [out, in] (network tensors)."""
    if rank(x) == 1:
        y = squeeze(ctx, matmul(ctx, unsqueeze(ctx, x, [0]), weight, transpose_b=True), [0])
    else:
        y = matmul(ctx, x, weight, transpose_b=True)
    if bias is not None:
        y = ew(ctx, y, bias, "SUM")
    return y


def blend(ctx: ConversionContext, base: Any, prod: Any, beta: float, alpha: float, dtype: torch.dtype) -> Any:
    """``beta * base + alpha * prod`` (addmm/baddbmm); ``beta == 0`` ignores ``base`` like torch."""
    r = rank(prod)
    if alpha != 1:
        prod = ew(ctx, prod, const(ctx, alpha, dtype, r), "PROD")
    if beta == 0:
        return prod
    if beta != 1:
        base = ew(ctx, base, const(ctx, beta, dtype, rank(base)), "PROD")
    return ew(ctx, base, prod, "SUM")


def einsum(ctx: ConversionContext, equation: str, operands: Sequence[Any]) -> Any:
    """An IEinsumLayer; the equation is made explicit, with ellipses expanded and lowercase letters."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ConversionError(f"einsum equation {equation!r} names {len(terms)} operands, got {len(operands)}")
    used = {c for c in eq if c.isalpha()}
    spare = [c for c in string.ascii_lowercase + string.ascii_uppercase if c not in used]
    n_ell = max((rank(o) - (len(t) - 3) for t, o in zip(terms, operands, strict=True) if "..." in t), default=0)
    ell = "".join(spare[:n_ell])
    expanded = []
    for t, o in zip(terms, operands, strict=True):
        if "..." in t:
            k = rank(o) - (len(t) - 3)
            t = t.replace("...", ell[n_ell - k:] if k else "")
        expanded.append(t)
    if arrow:
        out = rhs.replace("...", ell)
    else:
        letters = "".join(expanded)
        out = ell + "".join(sorted(c for c in set(letters) if letters.count(c) == 1 and c not in ell))
    full = ",".join(expanded) + "->" + out
    letters_all = sorted({c for c in full if c.isalpha()})
    if len(letters_all) > 26:
        raise ConversionError(f"einsum {equation!r} uses more than 26 subscripts")
    lower = [c for c in string.ascii_lowercase]
    mapping = {c: c for c in letters_all if c.islower()}
    free = [c for c in lower if c not in mapping.values()]
    for c in letters_all:
        if c not in mapping:
            mapping[c] = free.pop(0)
    full = "".join(mapping.get(c, c) for c in full)
    return ctx.network.add_einsum(list(operands), full).get_output(0)


def bilinear(ctx: ConversionContext, x1: Any, x2: Any, weight: torch.Tensor, bias: Any | None,
             dtype: torch.dtype) -> Any:
    """``y[..., k] = x1 @ W[k] @ x2 + b[k]`` with ``W`` [out, in1, in2]."""
    out, in1, in2 = weight.shape
    if rank(x1) == 1:  # unbatched: [in1], [in2] -> [out]
        return squeeze(ctx, bilinear(ctx, unsqueeze(ctx, x1, [0]), unsqueeze(ctx, x2, [0]), weight, bias, dtype), [0])
    w = const(ctx, weight.detach().permute(1, 0, 2).reshape(in1, out * in2), dtype)
    t = matmul(ctx, x1, w)  # [..., out * in2]
    shape = tuple(t.shape)
    t = reshape(ctx, t, (*shape[:-1], out, in2))
    y = reduce(ctx, ew(ctx, t, unsqueeze(ctx, x2, [-2]), "PROD"), "SUM", [-1], keep_dims=False)
    if bias is not None:
        y = ew(ctx, y, bias, "SUM")
    return y
