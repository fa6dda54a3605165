"""torchvision's detection helpers that compute sizes in Python.

``torchvision.models.detection._utils._topk_min(input, k, axis)`` is ``min(k, input.size(axis))``
(SSD, RetinaNet, FCOS and the RPN call it before each ``topk``). Of the scores that passed a
threshold, the size is data-dependent, and Python's ``min`` would compare it with ``k``: a branch the
guard refuses (converters/impl/sizes.py). Converted as :func:`converters.impl.sizes.sym_min`, a size
the network computes (a MIN of shape tensors), so ``topk`` takes every count the engine meets.

The two-stage detectors' per-detection Python loops become vectorized converters: Mask R-CNN's
``paste_masks_in_image`` (:func:`convert_paste_masks`) and Keypoint R-CNN's ``heatmaps_to_keypoints``
(:func:`convert_heatmaps_to_keypoints`: a bicubic resize as two batched matmuls over image-sized maps,
bounded by ``RoIHeads.forward``'s ``image_shapes``, and a first-occurrence argmax).

Registered once the user has imported torchvision.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConverterRefusal
from torch2trt_lite.registry import Call, converter, when_imported

from .detection import column, filled_like
from .impl import sizes as Y

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def convert_topk_min(ctx: ConversionContext, call: Call) -> Any:
    x, k, axis = call.arg(0, "input"), call.arg(1, "orig_kval"), call.arg(2, "axis")
    n = Y.sizes_of(ctx, x)[axis]
    return Y.sym_min(k, n) if Y.is_sym(n) or Y.is_sym(k) else min(int(k), int(n))


def _nonempty_proposals(frame: Any, size: Any, op: str, other: Any, traced: bool) -> bool | None:
    """``BoxCoder.decode``'s ``if box_sum > 0:`` (the two-stage detectors' RoI heads) on a data-dependent
    proposal count: answered with the branch of a non-empty proposal set, the one every run with a
    proposal takes. With no proposal at all eager PyTorch skips two reshapes (its boxes are then
    ``[0, 4C]``, not ``[0, C, 4]``: another rank, which one engine cannot return); the engine, built for the
    general branch, fails that run with a RuntimeExecutionError (TensorRT cannot infer the reshape's -1 of
    zero rows) instead of returning a result (tests/converters/test_detection_ops.py)."""
    if op == "gt" and other == 0 and traced and frame.f_locals.get("box_sum") is size:
        return True
    return None


def _box_column(ctx: ConversionContext, boxes: Any, k: int) -> Any:
    """Coordinate ``k`` of ``[N, 4]`` boxes as ``[N, 1, 1]`` (a per-detection operand of [N, H, W] maps)."""
    from .impl import shape as S

    return S.unsqueeze(ctx, column(ctx, boxes, k), [1, 2])


# ------------------------------------------------------------------------------ mask pasting
# NOTE: the name GeneralizedRCNNTransform.postprocess calls it by (transform.py imports it from roi_heads)
_PASTE_TARGETS = ("torchvision.models.detection.transform.paste_masks_in_image",)


def _paste_check(call: Call) -> str | None:
    masks, boxes = call.arg(0, "masks"), call.arg(1, "boxes")
    if not (isinstance(masks, torch.Tensor) and masks.dim() == 4 and masks.shape[1] == 1
            and masks.shape[-1] == masks.shape[-2] and masks.dtype == torch.float32):
        return "paste_masks_in_image needs float32 masks [N, 1, M, M]"
    if not (isinstance(boxes, torch.Tensor) and boxes.dim() == 2 and boxes.shape[1] == 4):
        return "paste_masks_in_image needs boxes [N, 4]"
    return None


def convert_paste_masks(ctx: ConversionContext, call: Call) -> Any:
    """``paste_masks_in_image(masks, boxes, (H, W), padding)`` (Mask R-CNN's postprocess): torchvision
    resizes each detection's padded mask to its integer box with a bilinear interpolate and writes it
    into a zero image, in a Python loop over the detections. Here every pixel of every detection at once:
    inside its box, the bilinear sample the interpolate would compute there (PyTorch's source index
    ``max((dst + 0.5) * in / out - 0.5, 0)``, its neighbours and weights), else 0. The box expansion and
    its truncation to int64 repeat torchvision's float32 arithmetic."""
    from .impl import elementwise as E
    from .impl import shape as S

    masks, boxes = call.arg(0, "masks"), call.arg(1, "boxes")
    im_h, im_w = (int(v) for v in call.arg(2, "img_shape"))
    pad = int(call.arg(3, "padding", 1))
    m = int(masks.shape[-1])
    side = m + 2 * pad
    scale = float(side) / m
    f32, i64 = torch.float32, torch.int64
    b = ctx.cast(ctx.itensor(boxes), f32)

    def f(v: float) -> Any:
        return E.scalar(ctx, v, f32, 3)

    def i(v: int) -> Any:
        return E.scalar(ctx, v, i64, 3)

    x0, y0, x1, y1 = (_box_column(ctx, b, k) for k in range(4))
    half = f(0.5)
    w_half = E.ew(ctx, E.ew(ctx, E.ew(ctx, x1, x0, "SUB"), half, "PROD"), f(scale), "PROD")
    h_half = E.ew(ctx, E.ew(ctx, E.ew(ctx, y1, y0, "SUB"), half, "PROD"), f(scale), "PROD")
    x_c = E.ew(ctx, E.ew(ctx, x1, x0, "SUM"), half, "PROD")
    y_c = E.ew(ctx, E.ew(ctx, y1, y0, "SUM"), half, "PROD")
    e0, e2 = (ctx.cast(E.ew(ctx, x_c, w_half, op), i64) for op in ("SUB", "SUM"))
    e1, e3 = (ctx.cast(E.ew(ctx, y_c, h_half, op), i64) for op in ("SUB", "SUM"))
    one = i(1)
    w = E.ew(ctx, E.ew(ctx, E.ew(ctx, e2, e0, "SUB"), one, "SUM"), one, "MAX")
    h = E.ew(ctx, E.ew(ctx, E.ew(ctx, e3, e1, "SUB"), one, "SUM"), one, "MAX")

    def axis(n: int, dim: int, start: Any, stop: Any, out: Any) -> tuple[Any, Any, Any, Any, Any]:
        """Along one image axis (``dim`` 1: rows, 2: columns): inside-the-box mask, the two source
        indices in the padded mask and their weights."""
        shape = [1, 1, 1]
        shape[dim] = n
        pos = ctx.constant(torch.arange(n, dtype=i64).reshape(shape))
        inside = E.logical(ctx, E.compare(ctx, pos, start, "ge"), E.compare(ctx, pos, stop, "le"), "and")
        dst = ctx.cast(E.ew(ctx, pos, start, "SUB"), f32)
        ratio = E.ew(ctx, f(float(side)), ctx.cast(out, f32), "DIV")
        src = E.ew(ctx, E.ew(ctx, E.ew(ctx, dst, half, "SUM"), ratio, "PROD"), half, "SUB")
        src = E.ew(ctx, src, f(0.0), "MAX")
        lo = ctx.cast(src, i64)  # src >= 0: truncation is floor
        step = ctx.cast(E.compare(ctx, lo, i(side - 1), "lt"), i64)
        hi = E.ew(ctx, lo, step, "SUM")
        l1 = E.ew(ctx, E.ew(ctx, E.ew(ctx, src, ctx.cast(lo, f32), "SUB"), f(0.0), "MAX"), f(1.0), "MIN")
        l0 = E.ew(ctx, f(1.0), l1, "SUB")
        return inside, lo, hi, l0, l1

    in_y, ylo, yhi, ly0, ly1 = axis(im_h, 1, e1, e3, h)
    in_x, xlo, xhi, lx0, lx1 = axis(im_w, 2, e0, e2, w)
    flat = S.reshape(ctx, ctx.itensor(masks), [-1, m * m])

    def sample(yy: Any, xx: Any) -> Any:  # the padded mask at (yy, xx): [N, H, W]
        ry, rx = E.ew(ctx, yy, i(pad), "SUB"), E.ew(ctx, xx, i(pad), "SUB")
        ok = E.logical(ctx, E.logical(ctx, E.compare(ctx, ry, i(0), "ge"), E.compare(ctx, ry, i(m - 1), "le"), "and"),
                       E.logical(ctx, E.compare(ctx, rx, i(0), "ge"), E.compare(ctx, rx, i(m - 1), "le"), "and"), "and")
        ry = E.ew(ctx, E.ew(ctx, ry, i(0), "MAX"), i(m - 1), "MIN")
        rx = E.ew(ctx, E.ew(ctx, rx, i(0), "MAX"), i(m - 1), "MIN")
        idx = S.reshape(ctx, E.ew(ctx, E.ew(ctx, ry, i(m), "PROD"), rx, "SUM"), [-1, im_h * im_w])
        layer = ctx.network.add_gather_v2(flat, idx, ctx.trt.GatherMode.ELEMENT)
        layer.axis = 1
        v = S.reshape(ctx, layer.get_output(0), [-1, im_h, im_w])
        return E.select(ctx, ok, v, f(0.0))

    top = E.ew(ctx, E.ew(ctx, lx0, sample(ylo, xlo), "PROD"), E.ew(ctx, lx1, sample(ylo, xhi), "PROD"), "SUM")
    bottom = E.ew(ctx, E.ew(ctx, lx0, sample(yhi, xlo), "PROD"), E.ew(ctx, lx1, sample(yhi, xhi), "PROD"), "SUM")
    value = E.ew(ctx, E.ew(ctx, ly0, top, "PROD"), E.ew(ctx, ly1, bottom, "PROD"), "SUM")
    out = E.select(ctx, E.logical(ctx, in_y, in_x, "and"), value, f(0.0))
    return S.unsqueeze(ctx, out, 1)


# ------------------------------------------------------------------------------ keypoint decoding
_KEYPOINT_TARGETS = ("torchvision.models.detection.roi_heads.heatmaps_to_keypoints",)  # keypointrcnn_inference's name
_CUBIC_A = -0.75  # PyTorch's bicubic coefficient (aten's upsample_bicubic2d)


def _image_bound() -> tuple[int, int] | None:
    """The largest image (h, w) of the nearest caller's ``image_shapes`` (``RoIHeads.forward``'s
    argument, the images the RoIs were clipped to), or None when no caller has one."""
    frame = inspect.currentframe()
    while frame is not None:
        shapes = frame.f_locals.get("image_shapes")
        if isinstance(shapes, (list, tuple)) and shapes and all(
                isinstance(s, (list, tuple, torch.Size)) and len(s) == 2 for s in shapes):
            up = [[int(Y.bounds(v)[1]) if Y.is_sym(v) else int(v) for v in s] for s in shapes]
            return max(s[0] for s in up), max(s[1] for s in up)
        frame = frame.f_back
    return None


def _keypoints_check(call: Call) -> str | None:
    maps, rois = call.arg(0, "maps"), call.arg(1, "rois")
    if not (isinstance(maps, torch.Tensor) and maps.dim() == 4 and maps.dtype == torch.float32):
        return "heatmaps_to_keypoints needs float32 heatmaps [N, K, H, W]"
    if not (isinstance(rois, torch.Tensor) and rois.dim() == 2 and rois.shape[1] == 4
            and rois.dtype == torch.float32):
        return "heatmaps_to_keypoints needs float32 rois [N, 4]"
    if _image_bound() is None:
        return ("heatmaps_to_keypoints is converted with the image size as the bound of its RoIs' sizes, read "
                "from RoIHeads.forward's image_shapes: called outside RoIHeads.forward it has none (run it in a "
                "function with an `image_shapes` list of (h, w) of the images its RoIs were clipped to)")
    return None


def convert_heatmaps_to_keypoints(ctx: ConversionContext, call: Call) -> Any:
    """``heatmaps_to_keypoints(maps, rois)`` (Keypoint R-CNN's inference): torchvision resizes each
    detection's K heatmaps to ``(ceil(h), ceil(w))`` of its box with a bicubic interpolate, in a Python
    loop over the detections, and takes each map's argmax and its value. Here all at once: bicubic is
    separable, so detection n's resized maps are ``Ay[n] @ (maps[n] @ Ax[n]^T)``, with interpolation
    matrices over the image's rows/columns (the image size bounds every box: RoIHeads clips them to it)
    built as aten's CPU kernel computes its taps: source index ``(dst + 0.5) * in / out - 0.5`` (not
    clamped to 0, unlike bilinear), ``floor`` and the fraction, the cubic-convolution weights with
    A = -0.75 and the four taps clamped to the border; along x first, then y, as aten sums. Positions
    beyond the box's size are -inf, and the argmax is the first of the maxima in row-major order
    (torch's tie rule)."""
    from .impl import elementwise as E
    from .impl import reduce as R
    from .impl import shape as S

    bound = _image_bound()
    if bound is None:  # NOTE: _keypoints_check refused this call already
        raise ConverterRefusal("heatmaps_to_keypoints: no image_shapes to bound the RoI sizes")
    hb, wb = bound
    maps, rois = call.arg(0, "maps"), call.arg(1, "rois")
    mh, mw = int(maps.shape[-2]), int(maps.shape[-1])
    f32 = torch.float32
    b = ctx.cast(ctx.itensor(rois), f32)

    def f(v: float, rank: int = 3) -> Any:
        return E.scalar(ctx, v, f32, rank)

    x0, y0, x1, y1 = (_box_column(ctx, b, k) for k in range(4))
    widths = E.ew(ctx, E.ew(ctx, x1, x0, "SUB"), f(1.0), "MAX")
    heights = E.ew(ctx, E.ew(ctx, y1, y0, "SUB"), f(1.0), "MAX")
    widths_ceil, heights_ceil = E.unary(ctx, widths, "CEIL"), E.unary(ctx, heights, "CEIL")

    def cubic1(x: Any) -> Any:  # ((A + 2) x - (A + 3)) x x + 1
        t = E.ew(ctx, E.ew(ctx, f(_CUBIC_A + 2), x, "PROD"), f(_CUBIC_A + 3), "SUB")
        return E.ew(ctx, E.ew(ctx, E.ew(ctx, t, x, "PROD"), x, "PROD"), f(1.0), "SUM")

    def cubic2(x: Any) -> Any:  # ((A x - 5A) x + 8A) x - 4A
        t = E.ew(ctx, E.ew(ctx, f(_CUBIC_A), x, "PROD"), f(5 * _CUBIC_A), "SUB")
        t = E.ew(ctx, E.ew(ctx, t, x, "PROD"), f(8 * _CUBIC_A), "SUM")
        return E.ew(ctx, E.ew(ctx, t, x, "PROD"), f(4 * _CUBIC_A), "SUB")

    def weights(n_out: int, n_in: int, out_size: Any, out_last: bool) -> tuple[Any, Any]:
        """The interpolation matrix of one axis, [N, n_out, n_in] (``out_last``: transposed, [N, n_in,
        n_out]), and the mask of the output positions inside the box's size."""
        o_shape, c_shape = ([1, 1, n_out], [1, n_in, 1]) if out_last else ([1, n_out, 1], [1, 1, n_in])
        pos = ctx.constant(torch.arange(n_out, dtype=f32).reshape(o_shape))
        cols = ctx.constant(torch.arange(n_in, dtype=f32).reshape(c_shape))
        scale = E.ew(ctx, f(float(n_in)), out_size, "DIV")
        src = E.ew(ctx, E.ew(ctx, scale, E.ew(ctx, pos, f(0.5), "SUM"), "PROD"), f(0.5), "SUB")
        idx = E.ew(ctx, E.unary(ctx, src, "FLOOR"), f(float(n_in - 1)), "MIN")
        lam = E.ew(ctx, E.ew(ctx, E.ew(ctx, src, idx, "SUB"), f(0.0), "MAX"), f(1.0), "MIN")
        rest = E.ew(ctx, f(1.0), lam, "SUB")
        coeffs = (cubic2(E.ew(ctx, lam, f(1.0), "SUM")), cubic1(lam), cubic1(rest),
                  cubic2(E.ew(ctx, rest, f(1.0), "SUM")))
        w: Any = None
        for k, c in enumerate(coeffs):
            tap = E.ew(ctx, E.ew(ctx, E.ew(ctx, idx, f(float(k - 1)), "SUM"), f(0.0), "MAX"), f(float(n_in - 1)), "MIN")
            term = E.select(ctx, E.compare(ctx, tap, cols, "eq"), c, f(0.0))
            w = term if w is None else E.ew(ctx, w, term, "SUM")
        return S.unsqueeze(ctx, w, 1), S.unsqueeze(ctx, E.compare(ctx, pos, out_size, "lt"), 1)

    ax_t, in_x = weights(wb, mw, widths_ceil, True)  # [N, 1, mw, wb], [N, 1, 1, wb]
    ay, in_y = weights(hb, mh, heights_ceil, False)  # [N, 1, hb, mh], [N, 1, hb, 1]
    mm = ctx.trt.MatrixOperation.NONE
    rows = ctx.network.add_matrix_multiply(ctx.cast(ctx.itensor(maps), f32), mm, ax_t, mm).get_output(0)
    resized = ctx.network.add_matrix_multiply(ay, mm, rows, mm).get_output(0)  # [N, K, hb, wb]
    inside = E.logical(ctx, in_y, in_x, "and")
    resized = E.select(ctx, inside, resized, f(float("-inf"), 4))
    flat = S.reshape(ctx, resized, [-1, int(maps.shape[1]), hb * wb])
    score, pos = R.extreme(ctx, flat, 2, True)  # [N, K, 1]: the first maximum in row-major order
    i64 = torch.int64
    y_int = E.ew(ctx, pos, E.scalar(ctx, wb, i64, 3), "FLOOR_DIV")
    x_int = E.ew(ctx, pos, E.ew(ctx, y_int, E.scalar(ctx, wb, i64, 3), "PROD"), "SUB")
    w_corr = E.ew(ctx, widths, widths_ceil, "DIV")
    h_corr = E.ew(ctx, heights, heights_ceil, "DIV")
    x = E.ew(ctx, E.ew(ctx, E.ew(ctx, ctx.cast(x_int, f32), f(0.5), "SUM"), w_corr, "PROD"), x0, "SUM")
    y = E.ew(ctx, E.ew(ctx, E.ew(ctx, ctx.cast(y_int, f32), f(0.5), "SUM"), h_corr, "PROD"), y0, "SUM")
    vis = filled_like(ctx, x, 1.0, f32)  # torchvision's third row: 1 (also where x is not finite)
    xy = S.concat(ctx, [x, y, vis], 2)  # [N, K, 3]
    return xy, S.squeeze(ctx, score, 2)


def _raft_shape_check(frame: Any, size: Any, op: str, other: Any, traced: bool) -> bool | None:
    """RAFT's ``CorrBlock.index_pyramid`` checks its own output shape (``corr_features.shape !=
    expected_output_shape``, a ValueError otherwise). Its channels come from ``view(batch, h, w, -1)``,
    whose -1 TensorRT leaves dynamic under a dynamic batch although the module's arithmetic fixes it;
    the check holds by construction, so its equality is answered as traced (only where it held)."""
    if op == "eq" and traced and "expected_output_shape" in frame.f_locals:
        return True
    if op == "ne" and not traced and "expected_output_shape" in frame.f_locals:
        return False
    return None


def _register() -> None:
    converter("torchvision.models.detection._utils._topk_min", python_result=True)(convert_topk_min)
    from torchvision.models.detection import _utils

    Y.specialize_guard(_utils.BoxCoder.decode.__code__, _nonempty_proposals)
    converter(*_PASTE_TARGETS, check=_paste_check)(convert_paste_masks)
    from torchvision.models.optical_flow import raft

    Y.specialize_guard(raft.CorrBlock.index_pyramid.__code__, _raft_shape_check)
    converter(*_KEYPOINT_TARGETS, check=_keypoints_check)(convert_heatmaps_to_keypoints)


when_imported("torchvision", _register)
