"""deform_conv2d plugin: torchvision.ops.deform_conv2d / DeformConv2d (v1 without mask, v2 with mask).

Contract in README.md; CUDA kernel in kernel.cu; :func:`reference` is the torch implementation the
sim runs (plain torch ops: gather + einsum, independent of torchvision's kernels).
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path
from typing import Any

import torch

from torch2trt_lite.errors import PluginError
from torch2trt_lite.plugins.api import (
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
    bool_attr,
    cdiv,
    declare_plugin,
    ints_attr,
)

KERNEL = Path(__file__).with_name("kernel.cu")
THREADS = 256
_MAX_GRID_YZ = 65535
ENTRY_POINTS = tuple(
    f"deform_conv2d_{dt}_{k}" for dt in ("fp32", "fp16") for k in ("gemm", "wprep", "splitk_sum", "m16")
)


def reference(
    input: torch.Tensor,  # noqa: A002 (torchvision's argument name)
    offset: torch.Tensor,
    weight: torch.Tensor,
    mask: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    *,
    stride: tuple[int, int] = (1, 1),
    padding: tuple[int, int] = (0, 0),
    dilation: tuple[int, int] = (1, 1),
) -> torch.Tensor:
    """Deformable convolution with plain torch ops; computes in fp32 (fp64 for fp64 inputs)."""
    acc = torch.float64 if input.dtype == torch.float64 else torch.float32
    x, off, w = input.to(acc), offset.to(acc), weight.to(acc)
    n, cin, h, wd = x.shape
    cout, cin_g, kh, kw = w.shape
    groups = cin // cin_g
    taps = kh * kw
    og = off.shape[1] // (2 * taps)
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    ho = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
    wo = (wd + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
    dev = x.device
    off = off.view(n, og, taps, 2, ho, wo)
    ki = torch.arange(kh, device=dev).repeat_interleave(kw)
    kj = torch.arange(kw, device=dev).repeat(kh)
    base_y = (torch.arange(ho, device=dev) * sh - ph)[None, :] + (ki * dh)[:, None]  # [taps, Ho]
    base_x = (torch.arange(wo, device=dev) * sw - pw)[None, :] + (kj * dw)[:, None]  # [taps, Wo]
    y = base_y.to(acc)[None, None, :, :, None] + off[:, :, :, 0]  # [N, og, taps, Ho, Wo]
    xx = base_x.to(acc)[None, None, :, None, :] + off[:, :, :, 1]
    inside = (y > -1) & (y < h) & (xx > -1) & (xx < wd)
    y0f, x0f = torch.floor(y), torch.floor(xx)
    ly, lx = y - y0f, xx - x0f
    hy, hx = 1 - ly, 1 - lx
    y0, x0 = y0f.long(), x0f.long()
    cpg = cin // og
    length = taps * ho * wo
    planes = x.view(n, og, cpg, h * wd)
    cols = torch.zeros(n, og, cpg, length, dtype=acc, device=dev)
    for dy, dx, wgt in ((0, 0, hy * hx), (0, 1, hy * lx), (1, 0, ly * hx), (1, 1, ly * lx)):
        yi, xi = y0 + dy, x0 + dx
        ok = inside & (yi >= 0) & (yi <= h - 1) & (xi >= 0) & (xi <= wd - 1)
        idx = (
            (yi.clamp(0, h - 1) * wd + xi.clamp(0, wd - 1)).view(n, og, 1, length).expand(n, og, cpg, length)
        )
        cols = cols + (wgt * ok).view(n, og, 1, length) * torch.gather(planes, 3, idx)
    if mask is not None:
        cols = cols * mask.to(acc).view(n, og, 1, length)
    cols = cols.view(n, groups, cin_g * taps, ho * wo)
    out = torch.einsum("gok,ngkp->ngop", w.view(groups, cout // groups, cin_g * taps), cols)
    out = out.reshape(n, cout, ho, wo)
    if bias is not None:
        out = out + bias.to(acc).view(1, cout, 1, 1)
    return out.to(input.dtype)


def _out_hw(h: Any, w: Any, kh: Any, kw: Any, a: Attrs) -> tuple[Any, Any]:
    (sh, sw), (ph, pw), (dh, dw) = a.stride, a.padding, a.dilation
    return (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1, (w + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1


def shape(ins: Shapes, a: Attrs) -> list[tuple[Any, ...]]:
    n, _, h, w = ins["input"]
    cout, _, kh, kw = ins["weight"]
    ho, wo = _out_hw(h, w, kh, kw, a)
    return [(n, cout, ho, wo)]


def validate(ins: Shapes, a: Attrs) -> str | None:
    """Shape contract beyond ranks (-1 = not known yet, skipped)."""
    if any(v < 1 for v in (*a.stride, *a.dilation)) or any(v < 0 for v in a.padding):
        return f"stride {a.stride} and dilation {a.dilation} must be >= 1, padding {a.padding} >= 0"
    n, cin, h, w = ins["input"]
    cout, cin_g, kh, kw = ins["weight"]
    on, oc, oh, ow = ins["offset"]
    if min(cin, cin_g) > 0 and cin % cin_g:
        return f"input channels {cin} are not a multiple of weight's in-channels per group {cin_g}"
    groups = cin // cin_g if min(cin, cin_g) > 0 else -1
    if groups > 0 and cout > 0 and cout % groups:
        return f"output channels {cout} are not divisible by groups {groups}"
    if min(kh, kw) > 0 and oc > 0:
        if oc % (2 * kh * kw):
            return f"offset has {oc} channels; expected a multiple of 2 * kh * kw = {2 * kh * kw}"
        og = oc // (2 * kh * kw)
        if cin > 0 and cin % og:
            return f"input channels {cin} are not divisible by the {og} offset groups"
    if min(h, w, kh, kw) > 0:
        ho, wo = _out_hw(h, w, kh, kw, a)
        if ho < 1 or wo < 1:
            return f"output size ({ho}, {wo}) is empty for input ({h}, {w}) and kernel ({kh}, {kw})"
        if min(oh, ow) > 0 and (oh, ow) != (ho, wo):
            return f"offset spatial size ({oh}, {ow}) must equal the output size ({ho}, {wo})"
        if h * w >= 2**31 or ho * wo >= 2**31:
            return "an input or output plane of 2**31 elements or more is not supported"
    if n > 0 and on > 0 and n != on:
        return f"offset batch {on} differs from input batch {n}"
    if "mask" in ins:
        mn, mc, mh, mw = ins["mask"]
        if min(oc, kh, kw, mc) > 0 and mc * 2 != oc:
            return f"mask has {mc} channels; expected offset_groups * kh * kw = {oc // 2}"
        if min(oh, ow, mh, mw) > 0 and (mh, mw) != (oh, ow):
            return f"mask spatial size ({mh}, {mw}) differs from offset's ({oh}, {ow})"
    if "bias" in ins and cout > 0 and ins["bias"][0] > 0 and ins["bias"][0] != cout:
        return f"bias has {ins['bias'][0]} values for {cout} output channels"
    return None


GEMM_BM = GEMM_BN = 128  # the gemm kernels' block tile (output channels x output pixels)
GEMM_BK = {torch.float32: 16, torch.float16: 32}  # channels per reduction chunk
SMALL_COUT_G = 16  # C_out / groups up to this: the direct m16 kernel (depthwise, thin groups)
SPLIT_BELOW = 132  # output tiles: fewer than one per SM of an H100/H200 -> split-K
# blocks to aim for when splitting: the fp32 gemm runs 1 block per SM (~240 registers), fp16 2
TARGET_BLOCKS = {torch.float32: 132, torch.float16: 264}
MAX_SPLITS = 8
_ALIGN = 256


def _geometry(info: LaunchInfo) -> dict[str, int]:
    n, cin, h, w = info.inputs["input"]
    cout, cin_g, kh, kw = info.inputs["weight"]
    groups = cin // cin_g
    _, _, ho, wo = info.outputs[0]
    return {
        "n": n,
        "cin": cin,
        "h": h,
        "w": w,
        "cout": cout,
        "cin_g": cin_g,
        "kh": kh,
        "kw": kw,
        "groups": groups,
        "cout_g": cout // groups,
        "og": info.inputs["offset"][1] // (2 * kh * kw),
        "ho": ho,
        "wo": wo,
    }


def launch_plan(info: LaunchInfo, splits: int | None = None) -> dict[str, int]:
    """Kernel choice, split-K factor and workspace layout (bytes) for one set of shapes; ``splits``
    forces the split-K factor of the gemm path (benchmarks and tests)."""
    d = _geometry(info)
    if d["cout_g"] <= SMALL_COUT_G:
        return {"small": 1, "splits": 1, "wt_bytes": 0, "part_offset": 0, "workspace": 0}
    esize = 2 if info.dtype == torch.float16 else 4
    mtiles = cdiv(d["cout_g"], GEMM_BM)
    tiles = cdiv(d["ho"] * d["wo"], GEMM_BN) * mtiles * d["n"] * d["groups"]
    chunks = d["kh"] * d["kw"] * cdiv(d["cin_g"], GEMM_BK[info.dtype])  # about: og boundaries add a few
    if splits is not None:
        splits = max(1, min(splits, chunks))
    elif tiles < SPLIT_BELOW:  # NOTE: fewer tiles than SMs: split the reduction, >= 4 chunks per split
        splits = max(1, min(TARGET_BLOCKS[info.dtype] // tiles, chunks // 4, MAX_SPLITS))  # whole waves
    else:
        splits = 1
    wt_bytes = d["groups"] * d["kh"] * d["kw"] * d["cin_g"] * mtiles * GEMM_BM * esize
    part_offset = cdiv(wt_bytes, _ALIGN) * _ALIGN
    part_bytes = splits * d["n"] * d["cout"] * d["ho"] * d["wo"] * 4 if splits > 1 else 0
    return {
        "small": 0,
        "splits": splits,
        "wt_bytes": wt_bytes,
        "part_offset": part_offset,
        "workspace": part_offset + part_bytes,
    }


def workspace(info: LaunchInfo, splits: int | None = None) -> int:
    return launch_plan(info, splits)["workspace"]


def launch(info: LaunchInfo, splits: int | None = None) -> list[Launch]:
    d = _geometry(info)
    plan = launch_plan(info, splits)
    n, groups, cout, ho, wo = d["n"], d["groups"], d["cout"], d["ho"], d["wo"]
    a = info.attrs
    dt = "fp16" if info.dtype == torch.float16 else "fp32"
    geometry = (
        I32(d["cin"]),
        I32(d["h"]),
        I32(d["w"]),
        I32(cout),
        I32(d["kh"]),
        I32(d["kw"]),
        I32(ho),
        I32(wo),
        I32(a.stride[0]),
        I32(a.stride[1]),
        I32(a.padding[0]),
        I32(a.padding[1]),
        I32(a.dilation[0]),
        I32(a.dilation[1]),
        I32(groups),
        I32(d["og"]),
    )
    if plan["small"]:
        grid = (cdiv(ho * wo, 128), cdiv(d["cout_g"], 16), n * groups)
        if grid[1] > _MAX_GRID_YZ or grid[2] > _MAX_GRID_YZ:
            raise PluginError(
                f"deform_conv2d: grid {grid} exceeds CUDA's 65535 limit on y/z (batch * groups too large)"
            )
        args = (In("input"), In("offset"), In("weight"), In("mask"), In("bias"), Out(0), *geometry)
        return [Launch(f"deform_conv2d_{dt}_m16", grid, THREADS, args)]
    splits = plan["splits"]
    grid = (cdiv(ho * wo, GEMM_BN), cdiv(d["cout_g"], GEMM_BM) * splits, n * groups)
    if grid[1] > _MAX_GRID_YZ or grid[2] > _MAX_GRID_YZ:
        raise PluginError(
            f"deform_conv2d: grid {grid} exceeds CUDA's 65535 limit on y/z (batch * groups too large)"
        )
    wt_elems = plan["wt_bytes"] // (2 if dt == "fp16" else 4)
    prep = Launch(
        f"deform_conv2d_{dt}_wprep",
        min(cdiv(wt_elems // (d["kh"] * d["kw"]), THREADS), 4096),
        THREADS,
        (In("weight"), Workspace(0), I32(cout), I32(d["cin_g"]), I32(d["kh"] * d["kw"]), I32(groups)),
    )
    gemm = Launch(
        f"deform_conv2d_{dt}_gemm",
        grid,
        THREADS,
        (
            In("input"),
            In("offset"),
            Workspace(0),
            In("mask"),
            In("bias"),
            Out(0),
            Workspace(plan["part_offset"]),
            *geometry,
            I32(splits),
        ),
    )
    if splits == 1:
        return [prep, gemm]
    total = n * cout * ho * wo
    reduce = Launch(
        f"deform_conv2d_{dt}_splitk_sum",
        min(cdiv(total, THREADS), 8192),
        THREADS,
        (Workspace(plan["part_offset"]), In("bias"), Out(0), I32(n), I32(cout), I32(ho * wo), I32(splits)),
    )
    return [prep, gemm, reduce]


def bind_function(call: Any) -> PluginCall:
    """torchvision.ops.deform_conv2d(input, offset, weight, bias=None, stride, padding, dilation, mask=None)."""
    input_ = call.arg(0, "input")
    offset = call.arg(1, "offset")
    weight = call.arg(2, "weight")
    bias = call.arg(3, "bias", None)
    stride = call.arg(4, "stride", (1, 1))
    padding = call.arg(5, "padding", (0, 0))
    dilation = call.arg(6, "dilation", (1, 1))
    mask = call.arg(7, "mask", None)
    return PluginCall(
        [input_, offset, weight, mask, bias], {"stride": stride, "padding": padding, "dilation": dilation}
    )


def bind_module(call: Any) -> PluginCall:
    """DeformConv2d.forward(input, offset, mask=None) with the module's weight, bias and geometry."""
    m = call.args[0]
    args = list(call.args[1:])
    input_ = args[0] if args else call.kwargs["input"]
    offset = args[1] if len(args) > 1 else call.kwargs["offset"]
    mask = args[2] if len(args) > 2 else call.kwargs.get("mask")
    return PluginCall(
        [input_, offset, m.weight, mask, m.bias],
        {"stride": m.stride, "padding": m.padding, "dilation": m.dilation},
    )


def _bind(call: Any) -> PluginCall:
    if isinstance(call.target, type):
        return bind_module(call)
    return bind_function(call)


PLUGIN = declare_plugin(
    "deform_conv2d",
    version="1",
    inputs=[
        Input("input", rank=4),
        Input("offset", rank=4),
        Input("weight", rank=4),
        Input("mask", rank=4, present="has_mask"),
        Input("bias", rank=1, present="has_bias"),
    ],
    outputs=["output"],
    attrs={
        "stride": ints_attr((1, 1), length=2, doc="(stride_h, stride_w)"),
        "padding": ints_attr((0, 0), length=2, doc="(pad_h, pad_w), zero padding"),
        "dilation": ints_attr((1, 1), length=2, doc="(dilation_h, dilation_w)"),
        "has_mask": bool_attr(False, doc="modulated (v2): a mask input follows weight"),
        "has_bias": bool_attr(False, doc="a bias input is last"),
    },
    shape=shape,
    validate=validate,
    reference=reference,
    dtypes=(torch.float32, torch.float16),
    cuda=CudaKernel(
        path=KERNEL,
        entry_points=ENTRY_POINTS,
        launch=launch,
        workspace=workspace,
    ),
    # NOTE: by name, registered once torchvision is imported (importing it here costs seconds); the
    # plugin itself (sim reference, kernel) works without torchvision
    targets=("torchvision.ops.deform_conv.deform_conv2d", "torchvision.ops.deform_conv.DeformConv2d"),
    bind=_bind,
    doc="Deformable 2-D convolution (torchvision.ops.deform_conv2d).",
)


def variant(*, splits: int | None = None, f32_simt: bool = False) -> PluginDef:
    """:data:`PLUGIN` with the gemm path's split-K factor forced (``splits``) and/or fp32 on CUDA-core
    FMAs on sm_80+ too (``f32_simt``, instead of 3xTF32 wmma): same contract and reference. The
    benchmarks time these against the default launch rule; tests check they compute the same."""
    if splits is not None and not 1 <= splits <= 64:
        raise PluginError(f"deform_conv2d: splits must be in 1..64, got {splits}")
    assert PLUGIN.cuda is not None
    cuda = dataclasses.replace(
        PLUGIN.cuda,
        launch=functools.partial(launch, splits=splits),
        workspace=functools.partial(workspace, splits=splits),
        options=PLUGIN.cuda.options + (("-DT2T_DEFORM_F32_SIMT",) if f32_simt else ()),
    )
    return dataclasses.replace(PLUGIN, cuda=cuda)


__all__ = ["ENTRY_POINTS", "KERNEL", "PLUGIN", "launch", "launch_plan", "reference", "shape", "validate", "variant", "workspace"]
