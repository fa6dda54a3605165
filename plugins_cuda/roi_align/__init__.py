"""roi_align plugin: torchvision.ops.roi_align / RoIAlign (boxes as a [K, 5] tensor or a list of [L, 4]).

Contract in README.md; CUDA kernel in kernel.cu; :func:`reference` is the torch implementation the
sim runs (plain torch ops: per-ROI interpolation matrices and einsum, independent of torchvision).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import torch

from torch2trt_lite.errors import ConversionError, PluginError
from torch2trt_lite.plugins.api import (
    F32,
    I32,
    Attrs,
    CudaKernel,
    In,
    Input,
    Launch,
    LaunchInfo,
    Out,
    PluginCall,
    PluginDef,
    Shapes,
    Workspace,
    add_plugin,
    bind_call,
    bool_attr,
    cdiv,
    declare_plugin,
    float_attr,
    int_attr,
    ints_attr,
    register_targets,
)
from torch2trt_lite.registry import when_imported

KERNEL = Path(__file__).with_name("kernel.cu")
THREADS = 256
ENTRY_POINTS = (
    "roi_align_fp32", "roi_align_fp16", "roi_align_nchw_to_nhwc_fp32", "roi_align_nchw_to_nhwc_fp16",
    "roi_align_nhwc_fp32", "roi_align_nhwc_fp16", "roi_align_nchw_to_nhwc_fp16x2",
)
_MAX_BLOCKS = 1 << 16  # grid-stride loop beyond this


def _axis_weights(
    start: torch.Tensor, bin_size: torch.Tensor, grid: torch.Tensor, bins: int, size: int, acc: torch.dtype
) -> torch.Tensor:
    """A[k, p, s]: total bilinear weight of input row (or column) s over the samples of bin p.

    RoIAlign's bilinear weight factors into a y part and an x part, so a bin's average is
    ``A_y[k] @ X[b_k] @ A_x[k]^T / count`` exactly.
    """
    k = start.shape[0]
    dev = start.device
    g = max(int(grid.max().item()), 1)
    it = torch.arange(g, device=dev, dtype=acc)
    bins_ix = torch.arange(bins, device=dev, dtype=acc)
    gridf = grid.to(acc).clamp(min=1)
    c = (
        start[:, None, None]
        + bins_ix[None, :, None] * bin_size[:, None, None]
        + (it[None, None, :] + 0.5) * bin_size[:, None, None] / gridf[:, None, None]
    )
    used = (it[None, :] < grid[:, None]).to(acc)[:, None, :]
    valid = ((c >= -1.0) & (c <= size)).to(acc) * used
    c = c.clamp(min=0.0)
    lo = c.long()  # NOTE: truncation == floor here since c >= 0, as the C cast in torchvision
    edge = lo >= size - 1
    lo = torch.where(edge, torch.full_like(lo, size - 1), lo)
    hi = torch.where(edge, lo, lo + 1)
    frac = torch.where(edge, torch.zeros_like(c), c - lo.to(acc))
    a = torch.zeros(k, bins, size, dtype=acc, device=dev)
    a.scatter_add_(2, lo.view(k, bins, g), ((1 - frac) * valid).view(k, bins, g))
    a.scatter_add_(2, hi.view(k, bins, g), (frac * valid).view(k, bins, g))
    return a


def reference(
    input: torch.Tensor,  # noqa: A002 (torchvision's argument name)
    rois: torch.Tensor,
    *,
    output_size: tuple[int, int],
    spatial_scale: float = 1.0,
    sampling_ratio: int = -1,
    aligned: bool = False,
) -> torch.Tensor:
    """RoIAlign with plain torch ops; computes in fp32 (fp64 for fp64 inputs)."""
    acc = torch.float64 if input.dtype == torch.float64 else torch.float32
    x, r = input.to(acc), rois.to(acc)
    _, c, h, w = x.shape
    ph, pw = output_size
    k = r.shape[0]
    out = torch.zeros(k, c, ph, pw, dtype=acc, device=x.device)
    if k == 0:
        return out.to(input.dtype)
    half = 0.5 if aligned else 0.0
    b = r[:, 0].long()
    x1 = r[:, 1] * spatial_scale - half
    y1 = r[:, 2] * spatial_scale - half
    rw = r[:, 3] * spatial_scale - half - x1
    rh = r[:, 4] * spatial_scale - half - y1
    if not aligned:
        rw, rh = rw.clamp(min=1.0), rh.clamp(min=1.0)
    # NOTE: divide by tensors, not Python numbers: CUDA torch computes ``t / number`` as
    # ``t * (1 / number)``, one ulp off torchvision's division, which moves FPN-sized coordinates
    # by ~3e-5 and can change an adaptive ceil(size / bins)
    bin_h, bin_w = rh / torch.full_like(rh, ph), rw / torch.full_like(rw, pw)
    if sampling_ratio > 0:
        gh = gw = torch.full((k,), sampling_ratio, device=x.device, dtype=torch.long)
    else:
        gh, gw = torch.ceil(bin_h).long(), torch.ceil(bin_w).long()
    count = (gh * gw).clamp(min=1).to(acc)
    ay = _axis_weights(y1, bin_h, gh, ph, h, acc)
    ax = _axis_weights(x1, bin_w, gw, pw, w, acc)
    for n in torch.unique(b).tolist():
        sel = (b == n).nonzero().view(-1)
        out[sel] = torch.einsum("kph,chw,kqw->kcpq", ay[sel], x[n], ax[sel])
    return (out / count.view(k, 1, 1, 1)).to(input.dtype)


def shape(ins: Shapes, a: Attrs) -> list[tuple[Any, ...]]:
    return [(ins["rois"][0], ins["input"][1], a.output_size[0], a.output_size[1])]


def validate(ins: Shapes, a: Attrs) -> str | None:
    if min(a.output_size) < 1:
        return f"output_size {a.output_size} must be positive"
    if ins["rois"][1] not in (-1, 5):
        return f"rois must be [K, 5] (batch index, x1, y1, x2, y2), got {tuple(ins['rois'])}"
    _, _, h, w = ins["input"]
    if h > 0 and w > 0 and h * w >= 2**31:
        return "an input plane of 2**31 elements or more is not supported"
    return None


NHWC_CHANNELS = 32  # kNhwcChannels in kernel.cu
NHWC_MAX_BINS = 196  # kNhwcMaxBins in kernel.cu


def _nhwc_possible(info: LaunchInfo) -> bool:
    c = info.inputs["input"][1]
    ph, pw = info.attrs.output_size
    return c >= NHWC_CHANNELS and ph * pw <= NHWC_MAX_BINS


def use_channels_last(info: LaunchInfo) -> bool:
    """The channels-last path pays when the taps per channel outnumber the input pixels it transposes.

    Per channel, the direct kernel makes K * bins * samples * 4 gathered loads (several cache lines
    per warp load); the channels-last one reads and writes the N * H * W pixels once (coalesced) and
    then makes one cache line per 32 lanes per tap. Adaptive sampling counts depend on the boxes, so
    they are taken as 1 sample per bin here (the rule then under-counts taps).
    """
    if not _nhwc_possible(info):
        return False
    n, _, h, w = info.inputs["input"]
    k = info.inputs["rois"][0]
    ph, pw = info.attrs.output_size
    sr = max(info.attrs.sampling_ratio, 1)
    return bool(k * ph * pw * sr * sr * 4 >= n * h * w)


def workspace(info: LaunchInfo) -> int:
    """The channels-last copy of the input whenever that path may run (so that any shape within a
    dynamic range has it: TensorRT asks for the workspace at the largest shapes)."""
    if not _nhwc_possible(info):
        return 0
    n, c, h, w = info.inputs["input"]
    return n * c * h * w * (2 if info.dtype == torch.float16 else 4)


def launch(info: LaunchInfo, layout: str = "auto") -> list[Launch]:
    """Launches for ``info``; ``layout`` "nchw" / "nhwc" forces a path (tests and benchmarks)."""
    n, c, h, w = info.inputs["input"]
    k = info.inputs["rois"][0]
    a = info.attrs
    ph, pw = a.output_size
    dt = "fp16" if info.dtype == torch.float16 else "fp32"
    box = (F32(a.spatial_scale), I32(a.sampling_ratio), I32(1 if a.aligned else 0))
    nhwc = use_channels_last(info) if layout == "auto" else layout == "nhwc"
    if nhwc:
        if not _nhwc_possible(info):
            raise PluginError(
                f"roi_align: the channels-last kernel needs >= {NHWC_CHANNELS} channels and at most "
                f"{NHWC_MAX_BINS} bins, got C={c}, output_size={a.output_size}"
            )
        if n > 65535 or cdiv(c, 32) > 65535:
            raise PluginError(f"roi_align: batch {n} or channels {c} exceed CUDA's grid limit")
        chunks = cdiv(c, NHWC_CHANNELS)
        half2 = dt == "fp16" and c % 2 == 0 and h * w % 2 == 0  # NOTE: half2 both ways, 64 x 64 tiles
        tile = 64 if half2 else 32
        return [
            Launch(f"roi_align_nchw_to_nhwc_{dt}{'x2' if half2 else ''}", (cdiv(h * w, tile), cdiv(c, tile), n),
                   (32, 8, 1), (In("input"), Workspace(), I32(c), I32(h * w))),
            Launch(f"roi_align_nhwc_{dt}", (k, chunks, 1), THREADS,
                   (Workspace(), In("rois"), Out(0), I32(c), I32(h), I32(w), I32(ph), I32(pw), *box)),
        ]
    total = k * c * ph * pw
    blocks = min(cdiv(total, THREADS), _MAX_BLOCKS)
    args = (In("input"), In("rois"), Out(0), I32(k), I32(c), I32(h), I32(w), I32(ph), I32(pw), *box)
    return [Launch(f"roi_align_{dt}", (blocks, 1, 1), THREADS, args)]


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return (int(v[0]), int(v[1]))
    return (int(v), int(v))


def bind(call: Any) -> PluginCall:
    """roi_align(input, boxes, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=False),
    RoIAlign(output_size, spatial_scale, sampling_ratio, aligned).forward(input, rois), or the op
    torch.ops.torchvision.roi_align(input, rois, spatial_scale, pooled_height, pooled_width,
    sampling_ratio, aligned) that torchvision.ops.roi_align calls."""
    if str(call.qualname).startswith(_OP):
        attrs = {
            "output_size": (int(call.arg(3, "pooled_height")), int(call.arg(4, "pooled_width"))),
            "spatial_scale": call.arg(2, "spatial_scale"),
            "sampling_ratio": call.arg(5, "sampling_ratio"),
            "aligned": call.arg(6, "aligned"),
        }
        return PluginCall([call.arg(0, "input"), call.arg(1, "rois")], attrs)
    if isinstance(call.target, type):
        m = call.args[0]
        args = list(call.args[1:])
        input_ = args[0] if args else call.kwargs["input"]
        boxes = args[1] if len(args) > 1 else call.kwargs["rois"]
        attrs = {
            "output_size": _pair(m.output_size), "spatial_scale": m.spatial_scale,
            "sampling_ratio": m.sampling_ratio, "aligned": m.aligned,
        }
        return PluginCall([input_, boxes], attrs)
    attrs = {
        "output_size": _pair(call.arg(2, "output_size")),
        "spatial_scale": call.arg(3, "spatial_scale", 1.0),
        "sampling_ratio": call.arg(4, "sampling_ratio", -1),
        "aligned": call.arg(5, "aligned", False),
    }
    return PluginCall([call.arg(0, "input"), call.arg(1, "boxes")], attrs)


def rois_from_boxes(ctx: Any, boxes: list[torch.Tensor] | tuple[torch.Tensor, ...]) -> Any:
    """The [K, 5] rois network tensor for a list of per-image [L_i, 4] boxes (torchvision's format)."""
    if not any(ctx.is_traced(b) for b in boxes):
        dtype = boxes[0].dtype if boxes else torch.float32
        idx = [torch.full((b.shape[0], 1), float(i), dtype=dtype, device=b.device) for i, b in enumerate(boxes)]
        return ctx.itensor(torch.cat([torch.cat([i, b], 1) for i, b in zip(idx, boxes, strict=True)], 0))
    from torch2trt_lite.converters.impl import shape as S
    from torch2trt_lite.converters.impl import sizes as Y

    parts = []
    for i, b in enumerate(boxes):
        it = ctx.itensor(b)
        if it.shape[0] < 0:  # a dynamic or data-dependent box count (detectors' proposals): a broadcast index
            if not Y.dynamic(ctx):
                raise ConversionError("roi_align: a box count of -1 outside a dynamic-shape conversion")
            col = S.expand(ctx, ctx.constant(torch.full((1, 1), float(i), dtype=b.dtype)), [Y.sizes_of(ctx, b)[0], 1])
        else:
            col = ctx.constant(torch.full((int(it.shape[0]), 1), float(i), dtype=b.dtype))
        cat = ctx.network.add_concatenation([col, it])
        cat.axis = 1
        parts.append(cat.get_output(0))
    if len(parts) == 1:
        return parts[0]
    cat = ctx.network.add_concatenation(parts)
    cat.axis = 0
    return cat.get_output(0)


def convert(ctx: Any, call: Any, pdef: PluginDef) -> Any:
    bound = bind(call)
    input_, boxes = bound.inputs
    if isinstance(boxes, (list, tuple)):
        if not all(isinstance(b, torch.Tensor) and b.dim() == 2 and b.shape[1] == 4 for b in boxes):
            raise ConversionError("roi_align: a list of boxes must hold [L, 4] tensors")
        rois = rois_from_boxes(ctx, boxes)
        attrs = pdef.resolve_attrs(dict(bound.attrs))
        return add_plugin(ctx, pdef, [input_, rois], attrs)
    inputs, attrs = bind_call(pdef, call)
    return add_plugin(ctx, pdef, inputs, attrs)


_OP = "torch.ops.torchvision.roi_align"


def _op_targets() -> tuple[str, ...]:
    """The torchvision op (packet and overload), registered by name: a model that bound
    ``torchvision.ops.roi_align`` before ``convert`` calls the original function, which calls the op."""
    try:
        torch.ops.torchvision.roi_align.default  # noqa: B018 (present when torchvision's C++ ops loaded)
    except (AttributeError, RuntimeError):
        return ()
    return (_OP, _OP + ".default")


PLUGIN = declare_plugin(
    "roi_align",
    version="1",
    inputs=[Input("input", rank=4), Input("rois", rank=2)],
    outputs=["output"],
    attrs={
        "output_size": ints_attr(length=2, doc="(pooled_h, pooled_w)"),
        "spatial_scale": float_attr(1.0, doc="box coordinates are multiplied by this"),
        "sampling_ratio": int_attr(-1, doc="samples per bin side; <= 0: adaptive ceil(roi size / bins)"),
        "aligned": bool_attr(False, doc="shift boxes by -0.5 pixel (pixel-centre alignment)"),
    },
    shape=shape,
    validate=validate,
    reference=reference,
    dtypes=(torch.float32, torch.float16),
    # NOTE: no FMA contraction: sample coordinates then round like the fp32 reference (seen on an H200:
    # with contraction, 1.5e-5 relative error on large feature maps, above the 1e-5 bound).
    cuda=CudaKernel(
        path=KERNEL,
        entry_points=ENTRY_POINTS,
        launch=launch,
        workspace=workspace,
        options=("--fmad=false",),
    ),
    # NOTE: by name, registered once torchvision is imported (importing it here costs seconds; the op
    # targets with it, in _register_torchvision); the plugin itself works without torchvision
    targets=("torchvision.ops.roi_align.roi_align", "torchvision.ops.roi_align.RoIAlign"),
    bind=bind,
    convert=convert,
    doc="RoIAlign (torchvision.ops.roi_align).",
)


def _column(ctx: Any, rois: Any, k: int, col: int) -> Any:
    if k < 0:  # a dynamic box count
        from torch2trt_lite.converters.impl import shape as S

        return ctx.cast(S.slice_(ctx, rois, 1, col, col + 1), torch.float32)
    layer = ctx.network.add_slice(rois, (0, col), (k, 1), (1, 1))
    return ctx.cast(layer.get_output(0), torch.float32)


def convert_multiscale(ctx: Any, call: Any) -> Any:
    """torchvision.ops.MultiScaleRoIAlign: RoIAlign of every box on every level, then each box takes
    the level LevelMapper gives it (a select per level; torchvision gathers the boxes of each level
    with data-dependent indices instead, which a static engine cannot)."""
    from torch2trt_lite.converters.impl.elementwise import ew, math_unary, scalar, select, unary

    m = call.args[0]
    x = call.arg(1, "x")
    boxes = call.arg(2, "boxes")
    if not isinstance(x, dict) or not isinstance(boxes, (list, tuple)):
        raise ConversionError("MultiScaleRoIAlign: expected a dict of feature maps and a list of [L, 4] boxes")
    feats = [v for k, v in x.items() if k in m.featmap_names]
    scales, mapper = m.scales, m.map_levels  # NOTE: set by the forward that just ran
    if not feats or scales is None or mapper is None:
        raise ConversionError("MultiScaleRoIAlign: no feature map of featmap_names was given")
    if not all(isinstance(b, torch.Tensor) and b.dim() == 2 and b.shape[1] == 4 for b in boxes):
        raise ConversionError("MultiScaleRoIAlign: boxes must be a list of [L, 4] tensors")
    rois = rois_from_boxes(ctx, boxes)
    attrs = {"output_size": _pair(m.output_size), "sampling_ratio": m.sampling_ratio, "aligned": False}
    pooled = [
        add_plugin(ctx, PLUGIN, [f, rois], PLUGIN.resolve_attrs(dict(attrs, spatial_scale=float(sc))))
        for f, sc in zip(feats, scales, strict=False)
    ]
    if len(pooled) == 1:
        return pooled[0]
    k = int(rois.shape[0])
    f32 = torch.float32
    # LevelMapper: floor(lvl0 + log2(sqrt(area) / s0) + eps), clamped to [k_min, k_max], minus k_min
    w = ew(ctx, _column(ctx, rois, k, 3), _column(ctx, rois, k, 1), "SUB")
    h = ew(ctx, _column(ctx, rois, k, 4), _column(ctx, rois, k, 2), "SUB")
    size = unary(ctx, ew(ctx, w, h, "PROD"), "SQRT")
    lg = math_unary(ctx, ew(ctx, size, scalar(ctx, float(mapper.s0), f32), "DIV"), "log2", f32, f32)
    t = ew(ctx, ew(ctx, scalar(ctx, float(mapper.lvl0), f32), lg, "SUM"), scalar(ctx, float(mapper.eps), f32), "SUM")
    t = unary(ctx, t, "FLOOR")
    t = ew(ctx, ew(ctx, t, scalar(ctx, float(mapper.k_min), f32), "MAX"), scalar(ctx, float(mapper.k_max), f32), "MIN")
    level = ew(ctx, t, scalar(ctx, float(mapper.k_min), f32), "SUB")
    shuffle = ctx.network.add_shuffle(level)
    shuffle.reshape_dims = (k if k >= 0 else -1, 1, 1, 1)
    level = shuffle.get_output(0)
    out = pooled[-1]
    for lvl in range(len(pooled) - 2, -1, -1):
        out = select(ctx, ew(ctx, level, scalar(ctx, float(lvl), f32), "EQUAL"), pooled[lvl], out)
    return out


def _register_torchvision() -> None:
    """The converters that need torchvision loaded: its C++ op and MultiScaleRoIAlign."""
    from torch2trt_lite.registry import converter as _converter

    register_targets(PLUGIN, _op_targets())
    _converter("torchvision.ops.poolers.MultiScaleRoIAlign")(convert_multiscale)


when_imported("torchvision", _register_torchvision)


def variant(layout: str) -> PluginDef:
    """:data:`PLUGIN` with its launch rule forced to the direct ("nchw") or the channels-last ("nhwc")
    path: same kernels, contract and reference (tests and benchmarks compare the two)."""
    if layout not in ("nchw", "nhwc"):
        raise PluginError(f"roi_align: layout must be 'nchw' or 'nhwc', got {layout!r}")
    assert PLUGIN.cuda is not None
    cuda = dataclasses.replace(PLUGIN.cuda, launch=functools.partial(launch, layout=layout))
    return dataclasses.replace(PLUGIN, cuda=cuda)


__all__ = [
    "KERNEL", "PLUGIN", "launch", "reference", "rois_from_boxes", "shape", "use_channels_last", "validate", "variant",
    "workspace",
]
