"""Resampling builders: interpolate (IResizeLayer), pad (ISliceLayer with an out-of-bounds mode),
grid sample, affine grid, pixel (un)shuffle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConversionError

from . import sizes as Y
from .nn_common import const, matmul, permute, rank, reshape

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

# torch interpolate mode -> (InterpolationMode, coordinate transformation when not align_corners, rounding)
_MODES = {
    "nearest": ("NEAREST", "ASYMMETRIC", "FLOOR"),
    "nearest-exact": ("NEAREST", "HALF_PIXEL", "HALF_UP"),
    "linear": ("LINEAR", "HALF_PIXEL", None),
    "bilinear": ("LINEAR", "HALF_PIXEL", None),
    "trilinear": ("LINEAR", "HALF_PIXEL", None),
    "bicubic": ("CUBIC", "HALF_PIXEL", None),
}


def interpolate(
    ctx: ConversionContext,
    it: Any,
    mode: str,
    out_shape: Sequence[int],
    scales: Sequence[float] | None = None,
    align_corners: bool = False,
) -> Any:
    """torch's ``F.interpolate`` of the spatial (trailing) dims.

    ``scales`` (one per spatial dim) are given when torch maps coordinates with ``1 / scale_factor``
    (a scale factor without ``recompute_scale_factor``); otherwise the output ``shape`` is set and the
    ratio is ``in / out``, as in torch.
    """
    if mode not in _MODES:
        raise ConversionError(f"interpolate mode {mode!r} is not supported by the resize layer")
    kind, transform, rounding = _MODES[mode]
    trt = ctx.trt
    layer = ctx.network.add_resize(it)
    r = rank(it)
    if scales is not None:
        layer.scales = [1.0] * (r - len(scales)) + [float(s) for s in scales]
    elif not isinstance(out_shape, (list, tuple)):  # a shape tensor (dynamic shapes)
        layer.set_input(1, out_shape)
    else:
        layer.shape = tuple(int(d) for d in out_shape)
    layer.resize_mode = getattr(trt.InterpolationMode, kind)
    if align_corners and kind != "NEAREST":
        transform = "ALIGN_CORNERS"
    layer.coordinate_transformation = getattr(trt.ResizeCoordinateTransformation, transform)
    if rounding is not None:
        layer.nearest_rounding = getattr(trt.ResizeRoundMode, rounding)
    if kind == "CUBIC":
        layer.cubic_coeff = -0.75
        layer.exclude_outside = False
    layer.selector_for_single_pixel = trt.ResizeSelector.FORMULA
    return layer.get_output(0)


_PAD_MODES = {"constant": "FILL", "reflect": "REFLECT", "replicate": "CLAMP", "circular": "WRAP"}


def pad(ctx: ConversionContext, it: Any, pads: Sequence[int], mode: str, value: float, dtype: torch.dtype) -> Any:
    """torch's ``F.pad``: ``pads`` lists (before, after) pairs from the last dim backwards; negative
    values crop. One slice layer whose out-of-bounds mode fills, reflects, clamps or wraps."""
    shape: list[Any] = list(it.shape)
    r = len(shape)
    if any(d < 0 for d in shape):
        shape = list(Y.network_sizes(ctx, it))  # dynamic dims: sizes computed as a shape tensor
    pairs = [(int(pads[2 * i]), int(pads[2 * i + 1])) for i in range(len(pads) // 2)]
    if mode != "constant" and any(b < 0 or a < 0 for b, a in pairs):
        # NOTE: torch crops first, then wraps / reflects / replicates what is left: two slices
        it = pad(ctx, it, [min(p, 0) for pair in pairs for p in pair], "constant", 0.0, dtype)
        shape = list(Y.network_sizes(ctx, it))
        pairs = [(max(b, 0), max(a, 0)) for b, a in pairs]
    start = [0] * r
    size = list(shape)
    for i, (before, after) in enumerate(pairs):
        axis = r - 1 - i
        start[axis] = -before
        size[axis] = shape[axis] + before + after
    layer = ctx.network.add_slice(it, tuple(start), tuple(1 if Y.is_sym(d) else d for d in size), (1,) * r)
    if Y.has_sym(size):
        layer.set_input(2, Y.shape_tensor(ctx, size))
    layer.mode = getattr(ctx.trt.SampleMode, _PAD_MODES[mode])
    if mode == "constant" and value != 0:
        layer.set_input(4, const(ctx, value, dtype))
    return layer.get_output(0)


_GRID_MODES = {"bilinear": "LINEAR", "nearest": "NEAREST", "bicubic": "CUBIC"}
_GRID_PADDING = {"zeros": "FILL", "border": "CLAMP", "reflection": "REFLECT"}


def grid_sample(ctx: ConversionContext, it: Any, grid: Any, mode: str, padding_mode: str, align_corners: bool) -> Any:
    layer = ctx.network.add_grid_sample(it, grid)
    layer.interpolation_mode = getattr(ctx.trt.InterpolationMode, _GRID_MODES[mode])
    layer.sample_mode = getattr(ctx.trt.SampleMode, _GRID_PADDING[padding_mode])
    layer.align_corners = bool(align_corners)
    return layer.get_output(0)


def _linspace(n: int, align_corners: bool) -> torch.Tensor:
    if n <= 1:
        return torch.zeros(max(n, 0), dtype=torch.float64)
    t = torch.linspace(-1.0, 1.0, n, dtype=torch.float64)
    return t if align_corners else t * (n - 1) / n


def affine_grid(ctx: ConversionContext, theta: Any, size: Sequence[int], align_corners: bool,
                dtype: torch.dtype) -> Any:
    """torch's ``F.affine_grid``: a constant base grid [1, S, k+1] times ``theta`` transposed (``size[0]``
    -1: theta's batch, a dynamic one)."""
    n, spatial = int(size[0]), [int(s) for s in size[2:]]
    axes = [_linspace(s, align_corners) for s in reversed(spatial)]  # x, y(, z)
    mesh = torch.meshgrid(*reversed(axes), indexing="ij")  # in spatial order (d, h, w)
    coords = [m.reshape(-1) for m in reversed(mesh)]  # x varies fastest
    base = torch.stack([*coords, torch.ones_like(coords[0])], dim=-1).unsqueeze(0)
    y = matmul(ctx, const(ctx, base, dtype), theta, transpose_b=True)
    return reshape(ctx, y, (n, *spatial, len(spatial)))


def pixel_shuffle(ctx: ConversionContext, it: Any, r: int, inverse: bool) -> Any:
    shape = list(Y.network_sizes(ctx, it))  # NOTE: symbolic where dynamic: reshapes by shape tensors there
    dynamic = any(Y.is_sym(d) for d in shape)
    lead, (c, h, w) = shape[:-3], shape[-3:]
    b: Any = 1
    for d in lead:
        b = b * d
    if dynamic:
        from . import shape as S

        def to(t: Any, dims: Sequence[Any]) -> Any:
            return S.reshape(ctx, t, list(dims))
    else:
        def to(t: Any, dims: Sequence[Any]) -> Any:
            return reshape(ctx, t, dims)
    if not inverse:
        oc = c // (r * r)
        y = to(it, (b, oc, r, r, h, w))
        y = permute(ctx, y, (0, 1, 4, 2, 5, 3))
        return to(y, (*lead, oc, h * r, w * r))
    oh, ow = h // r, w // r
    y = to(it, (b, c, oh, r, ow, r))
    y = permute(ctx, y, (0, 1, 3, 5, 2, 4))
    return to(y, (*lead, c * r * r, oh, ow))
