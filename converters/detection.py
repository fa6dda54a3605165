"""Detection post-processing with data-dependent output sizes: torchvision's ``nms`` and ``batched_nms``,
``torch.unique``, and top-k / sort beyond TensorRT's k limit or along a dynamic dim.

**NMS** (``torchvision.ops.nms``, ``batched_nms`` and the two implementations batched_nms dispatches
to, ``_batched_nms_coordinate_trick`` and ``_batched_nms_vanilla``) becomes TensorRT's INMSLayer. Its
documented semantics match torchvision's where it matters:

* candidates are visited in decreasing score order and a box is kept when its IoU with every kept box
  is <= the threshold (torchvision: "discards all overlapping boxes with IoU > iou_threshold");
* boxes are corner pairs (CORNER_PAIRS; torchvision's x1y1x2y2 with x1 < x2, y1 < y2 is one of them);
* the selected indices come sorted by decreasing score within the batch item (INMSLayer's
  SelectedIndices), which is torchvision's output order: column 2 of the [n, 3] rows is the result.

Where they differ, the converter closes the gap or refuses:

* INMSLayer keeps only scores *above* a score threshold (default 0): it gets the lowest float, so every
  finite score is a candidate (a score of -inf, NaN or the lowest float is dropped; torchvision keeps -inf
  last and visits NaN first, see the README);
* INMSLayer considers at most 5000 candidates per batch item (its top-k box limit, over all classes):
  ``nms`` of more boxes is refused (a static count, or a dynamic count whose range goes above 5000),
  since boxes beyond the limit would silently never be kept. ``batched_nms`` of more boxes (a detector's
  91 classes: 90 x 400) puts class groups in batch items (:func:`grouped_nms_indices`), and an engine
  output checks on every run that no group exceeds 5000 candidates;
* the count while tracing decides nothing: a filter that kept no box then builds the same engine;
* INMSLayer's IoU threshold lies in [0, 1]: a threshold above 1 suppresses nothing in either (IoU <= 1)
  and is clamped to 1; a negative one is refused;
* boxes with x1 > x2 or y1 > y2 (outside torchvision's contract) are normalized by TensorRT.

``batched_nms`` runs as torchvision's coordinate trick inside the network (boxes of class c shifted by
``c * (max coordinate + 1)``, one NMS): exactly ``_batched_nms_coordinate_trick``; for
``_batched_nms_vanilla`` (per-class NMS; torchvision picks it on CPU above 4000 box coordinates) the
same holds up to the rounding of the shifted coordinates. Ties: TensorRT leaves the order of equal
scores unspecified (torchvision sorts stably on CPU); the sim keeps box order among equal scores.

The result has a data-dependent length (-1 in the network; TRTModule returns it through an output
allocator) and is int64; ``boxes[keep]`` is a gather by it.

**top-k with k > 3840** (ITopKLayer's limit; EfficientDet takes 5000): rounds of at most 3840, each on the
input with the elements already taken masked out by a scatter (at most 16 rounds). Values equal
torch's; indices too where values do not tie (TensorRT orders ties as it likes). An input holding -inf
(+inf for smallest) where a later round reaches it may repeat an index taken before (the mask value
ties with it); the values stay right. **sort / argsort / topk along a dynamic dim** give k to
ITopKLayer as a shape tensor (``set_input(1, k)``; TensorRT-RTX builds it); a dynamic size whose range
goes past 3840 is refused. ``sort(stable=True)`` / ``argsort(stable=True)`` reorder tied indices by one
more (INT64) top-k of ``run * n + index`` (:func:`stable_order`), so they equal torch's exactly.

**torch.unique** (sorted, ``return_inverse``, ``return_counts``, ``dim=None``): sort of the flattened
input, a "differs from its predecessor" mask, INonZeroLayer for the positions of the first of each run
(the data-dependent count), gathers for the values, an exclusive count (cumsum) scattered back through
the sort's permutation for the inverse, and differences of run starts for the counts. ``sorted=False``
(torch leaves the order unspecified) gives the sorted result too. The count is data-dependent, so the
engine needs NonZero: TensorRT documents INonZeroLayer; TensorRT-RTX 1.7's CPU-only builder has no
implementation of it (nor of INMSLayer: "has no runners that implement it"), so those engines build
where a GPU is. NaN elements are each their own value (as torch), in the order the engine's sort puts them.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torch2trt_lite.errors import ConverterRefusal
from torch2trt_lite.registry import Call, converter, when_imported

from .impl import elementwise as E
from .impl import reduce as R
from .impl import shape as S
from .impl import sizes as Y
from .impl.active import user_location

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext

NMS_TOPK_LIMIT = 5000  # INMSLayer's topk_box_limit maximum (SM 5.3 / 6.2 devices: 2000)
TOPK_MAX_ROUNDS = 16  # top-k beyond 3840 in at most this many rounds (k <= 61440)
_LOWEST = float(np.finfo(np.float32).min)


# ------------------------------------------------------------------------------------------ NMS
def _upper(v: Any) -> float:
    """The largest value a (maybe dynamic) size takes."""
    if Y.is_sym(v):
        return float(Y.bounds(v)[1])
    return float(v)


def _nms_check(call: Call) -> str | None:
    boxes, scores = call.arg(0, "boxes"), call.arg(1, "scores")
    thr = call.args[-1] if len(call.args) >= (4 if "batched" in call.qualname else 3) else call.kwargs.get(
        "iou_threshold")
    if not isinstance(boxes, torch.Tensor) or not isinstance(scores, torch.Tensor):
        return "boxes and scores must be tensors"
    if boxes.dim() != 2 or boxes.shape[-1] != 4 or scores.dim() != 1:
        return f"boxes must be [N, 4] and scores [N], got {tuple(boxes.shape)} and {tuple(scores.shape)}"
    if boxes.is_quantized:
        return "quantized boxes are not supported"
    if boxes.dtype not in (torch.float32, torch.float16) or scores.dtype != boxes.dtype:
        return (f"TensorRT's NMS takes float32 or float16 boxes and scores of one dtype, got {boxes.dtype} and "
                f"{scores.dtype}")
    if isinstance(thr, torch.Tensor):
        return "iou_threshold must be a Python number, not a tensor"
    if thr is None or not float(thr) >= 0.0:
        return f"iou_threshold must be >= 0 (TensorRT's NMS takes an IoU threshold in [0, 1]), got {thr}"
    return None


def column(ctx: ConversionContext, it: Any, col: int) -> Any:
    """Column ``col`` of a [n, m] tensor as [n] (a gather by a 0-D index)."""
    return ctx.network.add_gather(it, ctx.constant(np.asarray(col, dtype=np.int32)), 1).get_output(0)


def nms_indices(ctx: ConversionContext, boxes: Any, scores: Any, n_boxes: Any, iou_threshold: float,
                kept: torch.Tensor) -> Any:
    """int64 indices [-1] of the boxes INMSLayer keeps, by decreasing score (boxes [N, 4], scores [N];
    ``kept``: the traced result, whose length names the data-dependent size)."""
    if _upper(n_boxes) > NMS_TOPK_LIMIT:
        count = (f"up to {int(_upper(n_boxes))} boxes" if math.isfinite(_upper(n_boxes))
                 else f"a box count with no upper bound ({n_boxes.describe()})")
        raise ConverterRefusal(
            f"NMS of {count} exceeds TensorRT's NMS limit of {NMS_TOPK_LIMIT} candidate boxes of one class "
            f"(boxes past it would never be kept); keep the best {NMS_TOPK_LIMIT} first, e.g. "
            f"scores.topk({NMS_TOPK_LIMIT})"
        )
    net = ctx.network
    b3 = S.unsqueeze(ctx, boxes, 0)  # [1, N, 4]
    s3 = S.unsqueeze(ctx, S.unsqueeze(ctx, scores, 0), -1)  # [1, N, 1]
    limit = NMS_TOPK_LIMIT if Y.is_sym(n_boxes) else int(n_boxes)
    max_out = ctx.constant(np.asarray(limit, dtype=np.int32))
    layer = net.add_nms(b3, s3, max_out)
    layer.bounding_box_format = ctx.trt.BoundingBoxFormat.CORNER_PAIRS
    layer.topk_box_limit = NMS_TOPK_LIMIT
    layer.set_input(3, ctx.constant(np.asarray(min(float(iou_threshold), 1.0), dtype=np.float32)))
    layer.set_input(4, ctx.constant(np.asarray(_LOWEST, dtype=np.float32)))
    out = ctx.cast(column(ctx, layer.get_output(0), 2), torch.int64)
    data_dependent(ctx, out, kept, "NMS kept count", _upper(n_boxes))
    return out


def data_dependent(ctx: ConversionContext, it: Any, traced: torch.Tensor, what: str, hi: float) -> None:
    """Make the -1 dims of ``it`` symbolic data-dependent sizes while tracing (``ctx.data_dependent``)."""
    ctx.data_dependent(it, tuple(traced.shape), what, hi=hi)


def convert_nms(ctx: ConversionContext, call: Call) -> Any:
    boxes, scores = call.arg(0, "boxes"), call.arg(1, "scores")
    thr = float(call.arg(2, "iou_threshold"))
    n = Y.sizes_of(ctx, boxes)[0]
    return nms_indices(ctx, ctx.itensor(boxes), ctx.itensor(scores), n, thr, call.output)


def convert_batched_nms(ctx: ConversionContext, call: Call) -> Any:
    """torchvision's coordinate trick in the network: class c's boxes shifted by c * (max + 1); beyond
    5000 boxes, one NMS batch item per class group (:func:`grouped_nms_indices`)."""
    boxes, scores, idxs = call.arg(0, "boxes"), call.arg(1, "scores"), call.arg(2, "idxs")
    thr = float(call.arg(3, "iou_threshold"))
    dt = boxes.dtype
    bt = ctx.itensor(boxes)
    top = R.reduce(ctx, bt, "MAX", [0, 1], False)  # boxes.max()
    step = E.ew(ctx, top, E.scalar(ctx, 1, dt), "SUM")
    cls = ctx.cast(ctx.itensor(idxs), dt)
    offsets = E.ew(ctx, cls, step, "PROD")  # [N]
    shifted = E.ew(ctx, bt, S.unsqueeze(ctx, offsets, 1), "SUM")
    n = Y.sizes_of(ctx, boxes)[0]
    if _upper(n) <= NMS_TOPK_LIMIT:
        return nms_indices(ctx, shifted, ctx.itensor(scores), n, thr, call.output)
    return grouped_nms_indices(ctx, shifted, ctx.itensor(scores), ctx.itensor(idxs), n, thr, call.output)


def grouped_nms_indices(ctx: ConversionContext, boxes: Any, scores: Any, idxs: Any, n_boxes: Any,
                        iou_threshold: float, kept: torch.Tensor) -> Any:
    """``batched_nms`` of more than 5000 boxes (a detector's 91 classes: up to 90 x 400). INMSLayer's
    5000-candidate limit holds per batch item, so the boxes go to ``G`` batch items by class group
    (``idxs mod G``, G = 4 x ceil(N_max / 5000)): in each, the other groups' scores are -inf (never a
    candidate), and boxes of different classes in one group never overlap (the coordinate trick), so
    each group's NMS is torchvision's. An engine output checks on every run that no group holds more than
    5000 candidates (``TRTModule`` raises with the message below; boxes past the limit would be lost).
    The kept boxes, listed group by group, are ordered by decreasing score with a top-k over ``N_max``
    (rounds of 3840, :func:`topk`), as torchvision returns them."""
    hi = _upper(n_boxes)
    if not math.isfinite(hi):
        raise ConverterRefusal(
            f"batched_nms of a box count with no upper bound ({n_boxes.describe()}): TensorRT's NMS takes at most "
            f"{NMS_TOPK_LIMIT} candidates per class group, and the engine needs a bound to group them; give "
            f"the input a range with a maximum or keep at most k boxes first (scores.topk(k))")
    limit_all = TOPK_MAX_ROUNDS * R.TOPK_MAX_K
    if hi > limit_all:
        raise ConverterRefusal(
            f"batched_nms of up to {int(hi)} boxes: ordering the kept boxes by score needs TensorRT's top-k "
            f"over all of them, possible up to {limit_all} ({TOPK_MAX_ROUNDS} rounds of {R.TOPK_MAX_K}); keep "
            f"at most {limit_all} boxes first (scores.topk({limit_all}))")
    u = int(hi)
    groups = 4 * math.ceil(u / NMS_TOPK_LIMIT)
    net = ctx.network
    dt = E.dtype_of(ctx, scores)
    cls = ctx.cast(idxs, torch.int32)
    g_i = E.scalar(ctx, groups, torch.int32)
    group = E.ew(ctx, cls, E.ew(ctx, E.ew(ctx, cls, g_i, "FLOOR_DIV"), g_i, "PROD"), "SUB")  # idxs mod G
    member = E.ew(ctx, S.unsqueeze(ctx, group, 0),
                  ctx.constant(torch.arange(groups, dtype=torch.int32).reshape(groups, 1)), "EQUAL")  # [G, N]
    s_g = E.select(ctx, member, S.unsqueeze(ctx, scores, 0), E.scalar(ctx, float("-inf"), dt, rank=2))
    b_g = E.ew(ctx, S.unsqueeze(ctx, boxes, 0), ctx.constant(torch.zeros((groups, 1, 1), dtype=dt)), "SUM")
    layer = net.add_nms(b_g, S.unsqueeze(ctx, s_g, -1), ctx.constant(np.asarray(NMS_TOPK_LIMIT, dtype=np.int32)))
    layer.bounding_box_format = ctx.trt.BoundingBoxFormat.CORNER_PAIRS
    layer.topk_box_limit = NMS_TOPK_LIMIT
    layer.set_input(3, ctx.constant(np.asarray(min(float(iou_threshold), 1.0), dtype=np.float32)))
    layer.set_input(4, ctx.constant(np.asarray(_LOWEST, dtype=np.float32)))
    # the check: candidates (scores above the threshold) per group <= the limit
    cand = E.ew(ctx, ctx.cast(s_g, torch.float32), E.scalar(ctx, _LOWEST, torch.float32, rank=2), "GREATER")
    most = R.reduce(ctx, R.reduce(ctx, ctx.cast(cand, torch.int32), "SUM", [1], False), "MAX", [0], False)
    ok = E.ew(ctx, most, E.scalar(ctx, NMS_TOPK_LIMIT + 1, torch.int32), "LESS")
    ctx.assertions.append((S.reshape(ctx, ok, [1]), (
        f"batched_nms at {user_location(3)}: more than {NMS_TOPK_LIMIT} candidate boxes fell into one of the "
        f"engine's {groups} class groups (class index mod {groups}); TensorRT's NMS considers at most "
        f"{NMS_TOPK_LIMIT} per group, so boxes past it would be lost: keep fewer boxes per class before the "
        f"NMS (e.g. scores.topk per class)")))
    kept_idx = ctx.cast(column(ctx, layer.get_output(0), 2), torch.int32)  # [K], group by group
    ks = net.add_gather(scores, kept_idx, 0).get_output(0)
    pad = ctx.constant(torch.full((u,), float("-inf"), dtype=dt))
    padded = net.add_slice(S.concat(ctx, [ks, pad], 0), (0,), (u,), (1,)).get_output(0)  # [N_max]
    _, order = topk(ctx, padded, u, 0, True)
    first = net.add_slice(ctx.cast(order, torch.int32), (0,), (1,), (1,))
    first.set_input(2, S.shape_of(ctx, kept_idx))  # the first K positions: the kept boxes by score
    out = ctx.cast(net.add_gather(kept_idx, first.get_output(0), 0).get_output(0), torch.int64)
    data_dependent(ctx, out, kept, "NMS kept count", hi)
    return out


def _batched_check(call: Call) -> str | None:
    why = _nms_check(call)
    if why is not None:
        return why
    idxs = call.arg(2, "idxs")
    if not isinstance(idxs, torch.Tensor) or idxs.dim() != 1:
        return "idxs must be a 1-D tensor of category indices"
    return None


def _register_torchvision() -> None:
    # NOTE: the op too: ``from torchvision.ops import nms`` taken before the conversion patched the module
    converter("torchvision.ops.boxes.nms", "torch.ops.torchvision.nms", check=_nms_check)(convert_nms)
    converter("torchvision.ops.boxes.batched_nms", "torchvision.ops.boxes._batched_nms_coordinate_trick",
              "torchvision.ops.boxes._batched_nms_vanilla", check=_batched_check)(convert_batched_nms)


when_imported("torchvision", _register_torchvision)


# ---------------------------------------------------------------------------------------- top-k
def _k_tensor(ctx: ConversionContext, k: Any) -> Any:
    """A 0-D INT32 shape tensor holding the (dynamic) size ``k``."""
    return Y.scalar(ctx, k, torch.int32)


def topk(ctx: ConversionContext, it: Any, k: Any, dim: int, largest: bool) -> tuple[Any, Any]:
    """(values, int64 indices) of the top ``k`` along ``dim``, sorted, for any k: ``k`` may be a dynamic
    size (a shape-tensor k) or exceed ITopKLayer's 3840 (rounds of at most 3840, see the docstring)."""
    n = len(tuple(it.shape))
    if n == 0 or (not Y.is_sym(k) and int(k) <= R.TOPK_MAX_K):
        return R.topk(ctx, it, int(k), dim, largest)
    if n == 1:  # TensorRT's top-k needs at least 2 dims: run on [1, N]
        v, i = topk(ctx, S.unsqueeze(ctx, it, 0), k, 1, largest)
        return S.squeeze(ctx, v, 0), S.squeeze(ctx, i, 0)
    d = S.norm_dim(dim, n)
    if d < n - 4:  # TensorRT sorts along one of the last four dims: move it last
        perm = [i for i in range(n) if i != d] + [d]
        inv = [perm.index(i) for i in range(n)]
        v, i = topk(ctx, S.permute(ctx, it, perm), k, n - 1, largest)
        return S.permute(ctx, v, inv), S.permute(ctx, i, inv)
    if Y.is_sym(k):
        if _upper(k) > R.TOPK_MAX_K:
            raise ConverterRefusal(
                f"top-k/sort of a dynamic size ({k.describe()}) that may exceed TensorRT's top-k limit of "
                f"{R.TOPK_MAX_K}; convert with a static size or a range up to {R.TOPK_MAX_K}"
            )
        if Y.bounds(k)[0] < 1:
            return _topk_maybe_none(ctx, it, k, d, largest)
        return _topk_layer(ctx, it, k, d, largest)
    return _topk_rounds(ctx, it, int(k), d, largest)


def _topk_maybe_none(ctx: ConversionContext, it: Any, k: Any, axis: int, largest: bool) -> tuple[Any, Any]:
    """Top-k where the dynamic ``k`` may be 0 (``scores.topk(min(n, 400))`` of a class no box reached):
    ITopKLayer takes k >= 1, so an empty input becomes one fill element (-inf for largest; a non-empty
    input stays itself), the top ``max(k, 1)`` is taken, and its first ``k`` kept."""
    dt = E.dtype_of(ctx, it)
    if dt.is_floating_point:
        fill: float | int = float("-inf") if largest else float("inf")
    else:
        fill = torch.iinfo(dt).min if largest else torch.iinfo(dt).max
    rank = len(tuple(it.shape))
    sizes = list(Y.network_sizes(ctx, it))
    sizes[axis] = 1
    layer = ctx.network.add_slice(E.scalar(ctx, fill, dt, rank=rank), (0,) * rank, (1,) * rank, (0,) * rank)
    layer.set_input(2, Y.shape_tensor(ctx, sizes))
    whole = list(Y.network_sizes(ctx, it))
    n = whole[axis]
    # NOTE: [fill] where the input is empty, else the input itself (its ties then resolve as without the fill)
    whole[axis] = Y.sym_max(n, 1) if Y.is_sym(n) else max(int(n), 1)
    cut = ctx.network.add_slice(S.concat(ctx, [it, layer.get_output(0)], axis), (0,) * rank, (1,) * rank, (1,) * rank)
    cut.set_input(2, Y.shape_tensor(ctx, whole))
    v, i = _topk_layer(ctx, cut.get_output(0), Y.sym_max(k, 1), axis, largest)
    sizes[axis] = k
    out = []
    for t in (v, i):  # the first k along axis
        first = ctx.network.add_slice(t, (0,) * rank, (1,) * rank, (1,) * rank)
        first.set_input(2, Y.shape_tensor(ctx, sizes))
        out.append(first.get_output(0))
    return out[0], out[1]


def _topk_layer(ctx: ConversionContext, it: Any, k: Any, axis: int, largest: bool) -> tuple[Any, Any]:
    """One ITopKLayer; a dynamic ``k`` goes in as a shape tensor (input 1)."""
    src_dt = E.dtype_of(ctx, it)
    x = R._topk_input(ctx, it)
    op = ctx.trt.TopKOperation.MAX if largest else ctx.trt.TopKOperation.MIN
    layer = ctx.network.add_topk(x, op, 1 if Y.is_sym(k) else int(k), 1 << axis)
    if Y.is_sym(k):
        layer.set_input(1, _k_tensor(ctx, k))
    return ctx.cast(layer.get_output(0), src_dt), ctx.cast(layer.get_output(1), torch.int64)


def _topk_rounds(ctx: ConversionContext, it: Any, k: int, axis: int, largest: bool) -> tuple[Any, Any]:
    rounds = math.ceil(k / R.TOPK_MAX_K)
    if rounds > TOPK_MAX_ROUNDS:
        raise ConverterRefusal(
            f"top-k/sort of {k} elements: TensorRT's top-k takes k <= {R.TOPK_MAX_K}, and more than "
            f"{TOPK_MAX_ROUNDS * R.TOPK_MAX_K} would need over {TOPK_MAX_ROUNDS} rounds of it"
        )
    dt = E.dtype_of(ctx, it)
    if dt.is_floating_point:
        fill: float | int = float("-inf") if largest else float("inf")
    else:
        fill = torch.iinfo(dt).min if largest else torch.iinfo(dt).max
    values, indices = [], []
    cur = it
    left = k
    for r in range(rounds):
        step = min(left, R.TOPK_MAX_K)
        v, i = R.topk(ctx, cur, step, axis, largest)
        values.append(v)
        indices.append(i)
        left -= step
        if r + 1 < rounds:  # mask out what this round took
            upd = S.expand(ctx, E.scalar(ctx, fill, dt, rank=len(tuple(it.shape))), tuple(v.shape)) \
                if all(s >= 0 for s in v.shape) else filled_like(ctx, v, fill, dt)
            layer = ctx.network.add_scatter(cur, i, upd, ctx.trt.ScatterMode.ELEMENT)
            layer.axis = axis
            cur = layer.get_output(0)
    return S.concat(ctx, values, axis), S.concat(ctx, indices, axis)


def filled_like(ctx: ConversionContext, it: Any, value: float | int, dt: torch.dtype) -> Any:
    """A tensor of ``it``'s (dynamic) shape holding ``value``: a scalar broadcast by a stride-0 slice whose
    size is ``it``'s shape tensor (``it * 0 + value`` would carry NaN and inf along)."""
    rank = len(tuple(it.shape))
    layer = ctx.network.add_slice(E.scalar(ctx, value, dt, rank=rank), (0,) * rank, (1,) * rank, (0,) * rank)
    layer.set_input(2, S.shape_of(ctx, it))
    return layer.get_output(0)


# --------------------------------------------------------------------------------------- unique
def _unique_args(call: Call) -> tuple[bool, bool, bool, Any]:
    """(sorted, return_inverse, return_counts, dim) of torch.unique / Tensor.unique."""
    names = ("sorted", "return_inverse", "return_counts", "dim")
    defaults: list[Any] = [True, False, False, None]
    for i, name in enumerate(names):
        if i + 1 < len(call.args):
            defaults[i] = call.args[i + 1]
        elif name in call.kwargs:
            defaults[i] = call.kwargs[name]
    return bool(defaults[0]), bool(defaults[1]), bool(defaults[2]), defaults[3]


def _unique_check(call: Call) -> str | None:
    x = call.arg(0, "input")
    _, _, _, dim = _unique_args(call)
    if dim is not None:
        return "torch.unique(dim=...) (unique slices) is not supported; only dim=None (unique elements)"
    if isinstance(x, torch.Tensor):
        if x.dtype in (torch.float64, torch.complex64, torch.complex128):
            return f"torch.unique of {x.dtype} (TensorRT has no such type)"
        if x.numel() > TOPK_MAX_ROUNDS * R.TOPK_MAX_K:
            return (f"torch.unique of {x.numel()} elements: its sort needs TensorRT's top-k (k <= {R.TOPK_MAX_K}) in "
                    f"more than {TOPK_MAX_ROUNDS} rounds")
    return None


def _axis_slice(ctx: ConversionContext, s: Any, axis: int, start: int, length: int | None = None) -> Any:
    """``s`` along ``axis`` from ``start``: ``length`` elements, or (None) the dim's size - 1; the other
    dims whole. Dynamic dims take the size from ``s``'s shape tensor."""
    shape = tuple(int(v) for v in s.shape)
    n = len(shape)
    size = list(shape)
    size[axis] = shape[axis] - 1 if length is None else length
    starts = [0] * n
    starts[axis] = start
    layer = ctx.network.add_slice(s, tuple(starts), tuple(max(v, 1) for v in size), (1,) * n)
    if any(v < 0 for v in size):
        sh = S.shape_of(ctx, s)
        e = S._const_i64(ctx, [int(k == axis) for k in range(n)])
        if length is None:
            dims = E.ew(ctx, sh, e, "SUB")
        else:
            keep = E.ew(ctx, sh, S._const_i64(ctx, [int(k != axis) for k in range(n)]), "PROD")
            dims = E.ew(ctx, keep, E.ew(ctx, e, S._const_i64(ctx, [length] * n), "PROD"), "SUM")
        layer.set_input(2, dims)
    return layer.get_output(0)


def run_starts(ctx: ConversionContext, s: Any, axis: int) -> Any:
    """``[True, s[1:] != s[:-1]]`` along ``axis`` of ``s`` (sorted along it): where each run of equal values
    starts. The dim must be longer than 1 or dynamic."""
    first = filled_like(ctx, _axis_slice(ctx, s, axis, 0, 1), True, torch.bool)
    ne = E.compare(ctx, _axis_slice(ctx, s, axis, 1), _axis_slice(ctx, s, axis, 0), "ne")
    return S.concat(ctx, [first, ne], axis)


def _shift_compare(ctx: ConversionContext, s: Any) -> Any:
    """Run starts of 1-D sorted ``s``."""
    if int(tuple(s.shape)[0]) == 1:
        return ctx.constant(np.asarray([True]))
    return run_starts(ctx, s, 0)


def stable_order(ctx: ConversionContext, values: Any, indices: Any, axis: int, size: Any) -> Any:
    """The indices of a sort made stable: ``values``/``indices`` are a sort along ``axis`` (``size``
    elements) whose tied values may come in any order; within each run of equal values the indices are
    put in increasing order (torch.sort(stable=True)) by an ascending top-k of ``run * size + index``.
    The values stay as they are (a run holds one value). NaNs count as different from each other."""
    if not Y.is_sym(size) and int(size) <= 1:
        return indices
    run = R.cumsum(ctx, ctx.cast(run_starts(ctx, values, axis), torch.int64), axis)
    scale = Y.scalar(ctx, size, torch.int64) if Y.is_sym(size) else E.scalar(ctx, int(size), torch.int64)
    rank = len(tuple(values.shape))
    key = E.ew(ctx, E.ew(ctx, run, E.unsqueeze_to(ctx, scale, rank), "PROD"), indices, "SUM")
    _, order = topk(ctx, key, size, axis, False)
    layer = ctx.network.add_gather_v2(indices, order, ctx.trt.GatherMode.ELEMENT)
    layer.axis = axis
    return layer.get_output(0)


def convert_unique(ctx: ConversionContext, call: Call) -> Any:
    """Sort, run starts (NonZero: the data-dependent count), gathers, and a scatter for the inverse."""
    x = call.arg(0, "input")
    _, want_inverse, want_counts, _ = _unique_args(call)
    out = call.output if isinstance(call.output, tuple) else (call.output,)
    it = ctx.itensor(x)
    flat = S.reshape(ctx, it, (1,)) if x.dim() == 0 else S.flatten(ctx, it, 0, -1)
    m: Any = 1
    for d in Y.sizes_of(ctx, x):  # the element count, with its range when dims are dynamic
        m = m * d
    values, perm = topk(ctx, flat, m, 0, False)  # ascending
    starts_mask = _shift_compare(ctx, values)
    nz = ctx.network.add_non_zero(starts_mask)
    nz.indices_type = ctx.trt.int64
    starts = S.reshape(ctx, nz.get_output(0), (-1,))  # [U]
    data_dependent(ctx, starts, out[0], "torch.unique count", float(x.numel()) if not Y.is_sym(m) else _upper(m))
    uniq = ctx.network.add_gather(values, starts, 0).get_output(0)
    results = [uniq]
    if want_inverse:
        run = E.ew(ctx, R.cumsum(ctx, ctx.cast(starts_mask, torch.int64), 0), E.scalar(ctx, 1, torch.int64), "SUB")
        layer = ctx.network.add_scatter(run, perm, run, ctx.trt.ScatterMode.ELEMENT)  # every position written
        layer.axis = 0
        inv = layer.get_output(0)
        results.append(S.reshape(ctx, inv, Y.sizes_of(ctx, x)) if x.dim() != 1 else inv)
    if want_counts:
        total = S.reshape(ctx, ctx.cast(S.shape_of(ctx, flat), torch.int64), (1,))
        ext = S.concat(ctx, [starts, total], 0)  # [U + 1]
        nxt = ctx.network.add_slice(ext, (1,), (1,), (1,))
        nxt.set_input(2, S.shape_of(ctx, starts))  # ext[1 : 1 + U]: the next run's start
        results.append(E.ew(ctx, nxt.get_output(0), starts, "SUB"))
    count = Y.network_sizes(ctx, starts)[0]  # the values and counts have the count, the inverse x's sizes
    kinds = ["values"] + (["inverse"] if want_inverse else []) + (["counts"] if want_counts else [])
    for r, t, kind in zip(results, out, kinds, strict=False):
        ctx.known_sizes(r, list(Y.sizes_of(ctx, x)) if kind == "inverse" else [count], tuple(t.shape))
    return results[0] if len(results) == 1 else tuple(results)


converter(torch.unique, torch.Tensor.unique, check=_unique_check)(convert_unique)
