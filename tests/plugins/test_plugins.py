"""Plugins without a GPU: torch references against torchvision, conversion and plans on the sim,
contract checks, the declaration API, the TensorRT plugin classes against a stand-in module, NVRTC
compiles of every kernel for sm_75..sm_90 with register/spill checks, and the CUDA kernels
themselves executed on the CPU by a small emulation harness (g++, one OS thread per CUDA thread).

GPU checks live in test_plugins_gpu.py.
"""

from __future__ import annotations

import ast
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torchvision

import torch2trt_lite
from torch2trt_lite import sim
from torch2trt_lite.errors import NetworkDefinitionError, PluginError
from torch2trt_lite.plugins import (
    F32,
    CudaKernel,
    Input,
    Launch,
    api,
    declaration,
    declare_plugin,
    float_attr,
    floats_attr,
    get_plugin,
    int_attr,
    ints_attr,
    load_builtin_plugins,
    nvrtc,
    str_attr,
    trt_plugin,
)
from torch2trt_lite.plugins_cuda.deform_conv2d import variant as deform_conv2d_variant
from torch2trt_lite.sim.layers import plugin as sim_plugin

REPO = Path(__file__).resolve().parents[2]
load_builtin_plugins()
DC = get_plugin("deform_conv2d", "1")
RA = get_plugin("roi_align", "1")
ARCHS = (75, 80, 86, 89, 90)
KERNEL_FILES = sorted((REPO / "plugins_cuda").glob("*/*.cu"))
BUILTIN_KERNELS = {p.parent.name: p for p in KERNEL_FILES}


# ------------------------------------------------------------------------------------ cases
def deform_inputs(
    seed: int, n: int, cin: int, h: int, w: int, cout: int, k: tuple[int, int], groups: int, og: int,
    stride: tuple[int, int], pad: tuple[int, int], dil: tuple[int, int], mask: bool, bias: bool,
) -> tuple[list[torch.Tensor | None], dict[str, Any]]:
    g = torch.Generator().manual_seed(seed)
    kh, kw = k
    ho = (h + 2 * pad[0] - (dil[0] * (kh - 1) + 1)) // stride[0] + 1
    wo = (w + 2 * pad[1] - (dil[1] * (kw - 1) + 1)) // stride[1] + 1
    x = torch.randn(n, cin, h, w, generator=g)
    off = torch.randn(n, 2 * og * kh * kw, ho, wo, generator=g) * 2.0  # NOTE: samples land outside too
    wt = torch.randn(cout, cin // groups, kh, kw, generator=g) / (cin // groups * kh * kw) ** 0.5
    m = torch.rand(n, og * kh * kw, ho, wo, generator=g) if mask else None
    b = torch.randn(cout, generator=g) if bias else None
    return [x, off, wt, m, b], {"stride": stride, "padding": pad, "dilation": dil}


DEFORM_CASES = [
    pytest.param(dict(n=2, cin=4, h=9, w=11, cout=6, k=(3, 3), groups=1, og=1, stride=(1, 1), pad=(1, 1),
                      dil=(1, 1), mask=True, bias=True), id="v2-mask-bias"),
    pytest.param(dict(n=2, cin=4, h=9, w=11, cout=6, k=(3, 3), groups=1, og=1, stride=(1, 1), pad=(1, 1),
                      dil=(1, 1), mask=False, bias=False), id="v1-plain"),
    pytest.param(dict(n=2, cin=8, h=9, w=11, cout=40, k=(3, 2), groups=2, og=4, stride=(2, 1), pad=(0, 2),
                      dil=(2, 1), mask=False, bias=True), id="groups2-og4-stride-dil-m64"),
    pytest.param(dict(n=1, cin=8, h=7, w=7, cout=8, k=(3, 3), groups=8, og=2, stride=(1, 1), pad=(1, 1),
                      dil=(1, 1), mask=True, bias=False), id="depthwise-og2"),
    pytest.param(dict(n=2, cin=6, h=12, w=10, cout=70, k=(3, 3), groups=1, og=3, stride=(1, 2), pad=(2, 1),
                      dil=(1, 1), mask=True, bias=True), id="og3-m64-tail"),
]


def roi_inputs(seed: int, k: int = 9, batch: int = 2) -> tuple[torch.Tensor, list[torch.Tensor], torch.Tensor]:
    """x, per-image boxes (list) and the equivalent [K, 5] rois; boxes reach outside the image."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, 13, 17, generator=g)
    boxes = []
    for _ in range(batch):
        xy = torch.rand(k, 2, generator=g) * torch.tensor([17.0, 13.0]) * 1.5 - 3
        wh = torch.rand(k, 2, generator=g) * 12
        b = torch.cat([xy, xy + wh], 1)
        b[0] = torch.tensor([2.0, 3.0, 2.0, 3.0])  # degenerate box
        boxes.append(b)
    rois = torch.cat([torch.cat([torch.full((b.shape[0], 1), float(i)), b], 1) for i, b in enumerate(boxes)])
    return x, boxes, rois


# ----------------------------------------------------------------- 1. references vs torchvision
@pytest.mark.parametrize("case", DEFORM_CASES)
def test_deform_conv2d_reference_matches_torchvision(case: dict[str, Any]) -> None:
    (x, off, w, m, b), kw = deform_inputs(0, **case)
    want = torchvision.ops.deform_conv2d(x, off, w, b, mask=m, **kw)
    got = DC.reference(x, off, w, m, b, **kw)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # fp32: same math, different summation order


def test_deform_conv2d_reference_float64_is_exact_to_rounding() -> None:
    (x, off, w, m, b), kw = deform_inputs(1, **DEFORM_CASES[2].values[0])
    x, off, w, b = (t.double() for t in (x, off, w, b))  # type: ignore[union-attr]
    torch.testing.assert_close(
        DC.reference(x, off, w, None, b, **kw), torchvision.ops.deform_conv2d(x, off, w, b, **kw), rtol=1e-12, atol=1e-12
    )


def test_deform_conv2d_reference_without_offsets_is_conv2d() -> None:
    (x, off, w, _, b), kw = deform_inputs(2, **DEFORM_CASES[2].values[0])
    got = DC.reference(x, torch.zeros_like(off), w, None, b, **kw)
    want = torch.nn.functional.conv2d(x, w, b, stride=kw["stride"], padding=kw["padding"], dilation=kw["dilation"], groups=2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [-1, 0, 2, 3], ids=["adaptive", "adaptive0", "sr2", "sr3"])
@pytest.mark.parametrize("as_list", [False, True], ids=["rois", "list"])
def test_roi_align_reference_matches_torchvision(aligned: bool, sampling_ratio: int, as_list: bool) -> None:
    x, boxes, rois = roi_inputs(3)
    want = torchvision.ops.roi_align(x, boxes if as_list else rois, (5, 4), 0.75, sampling_ratio, aligned)
    got = RA.reference(x, rois, output_size=(5, 4), spatial_scale=0.75, sampling_ratio=sampling_ratio, aligned=aligned)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


class CudaScalarDivision(torch.overrides.TorchFunctionMode):
    """Divides the way CUDA torch does on the CPU: ``tensor / python_number`` is computed as
    ``tensor * (1 / number)`` with the reciprocal rounded to the tensor's dtype (TensorIterator's
    CPU-scalar fast path in the CUDA true-division kernel); the CPU kernel divides exactly."""

    DIVS = {torch.Tensor.__truediv__, torch.Tensor.div, torch.div, torch.true_divide}

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        if func in self.DIVS and len(args) == 2 and not kwargs and isinstance(args[1], (int, float)):
            a = args[0]
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                return a * (torch.ones((), dtype=a.dtype) / float(args[1])).item()
        return func(*args, **kwargs)


def test_roi_align_reference_is_the_same_with_cuda_division() -> None:
    """The reference on CUDA must not drift from torchvision: at FPN coordinates (x ~ 300) a bin
    size one ulp off moves the samples by ~3e-5 of the feature values (the 2.8e-5 the H200 bench
    showed on 2026-11-29 for the fp32 FPN case), and an adaptive ceil(size / bins) can change."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 200, 304, generator=g)
    img = torch.tensor([304.0, 200.0]) / 0.25
    xy = torch.rand(400, 2, generator=g) * img * 0.8
    wh = torch.rand(400, 2, generator=g) * img * 0.3 + 4
    rois = torch.cat([torch.randint(0, 2, (400, 1), generator=g).float(), xy, xy + wh], 1)
    for sr, aligned in ((2, True), (-1, False)):
        want = torchvision.ops.roi_align(x, rois, (7, 7), 0.25, sr, aligned)
        kw = dict(output_size=(7, 7), spatial_scale=0.25, sampling_ratio=sr, aligned=aligned)
        with CudaScalarDivision():
            got = RA.reference(x, rois, **kw)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)  # fp32: only summation order differs


def test_roi_align_reference_float64_and_empty() -> None:
    x, _, rois = roi_inputs(4)
    x, rois = x.double(), rois.double()
    kw = dict(output_size=(3, 3), spatial_scale=0.5, sampling_ratio=-1, aligned=True)
    torch.testing.assert_close(
        RA.reference(x, rois, **kw), torchvision.ops.roi_align(x, rois, (3, 3), 0.5, -1, True), rtol=1e-12, atol=1e-12
    )
    assert RA.reference(x, rois[:0], **kw).shape == (0, 3, 3, 3)


# ------------------------------------------------------------------ 2. conversion on the sim
class PluginModel(torch.nn.Module):
    """Both built-ins, as functions and as modules, with boxes as a tensor and as lists."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.dcn = torchvision.ops.DeformConv2d(4, 8, 3, padding=1, groups=2, bias=True)
        self.w2 = torch.nn.Parameter(torch.randn(6, 4, 3, 3) * 0.2)
        self.pool = torchvision.ops.RoIAlign((3, 3), spatial_scale=0.5, sampling_ratio=2, aligned=True)
        self.register_buffer("fixed", torch.tensor([[1.0, 1.0, 6.0, 7.0]]))

    def forward(self, x: torch.Tensor, off: torch.Tensor, mask: torch.Tensor, off2: torch.Tensor,
                rois: torch.Tensor, b0: torch.Tensor, b1: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = self.dcn(x, off, mask)
        z = torchvision.ops.deform_conv2d(y, off2, self.w2, stride=1, padding=1)
        a = torchvision.ops.roi_align(y, rois, 2, 1.0, -1, False)
        p = self.pool(z, [b0, b1])
        c = torchvision.ops.roi_align(z, [self.fixed, self.fixed * 2], (2, 3), aligned=False)
        return y, z, a, p, c


def plugin_model_inputs() -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 4, 10, 12, generator=g)
    off = torch.randn(2, 18, 10, 12, generator=g)
    mask = torch.rand(2, 9, 10, 12, generator=g)
    off2 = torch.randn(2, 36, 10, 12, generator=g)
    rois = torch.tensor([[0, 1.0, 1, 9, 7], [1, 3, 2, 11, 8], [1, -2, -1, 4, 3]])
    b0 = torch.tensor([[1.0, 1, 9, 7], [2, 3, 11, 9]])
    b1 = torch.tensor([[0.0, 0, 5, 5]])
    return [x, off, mask, off2, rois, b0, b1]


def test_convert_model_with_plugins_on_sim_matches_torchvision(tmp_path: Path) -> None:
    model = PluginModel().eval()
    inputs = plugin_model_inputs()
    trt_model = torch2trt_lite.convert(model, inputs, backend="sim")
    assert _plugin_layers(bytes(trt_model.plan)) == ["deform_conv2d", "deform_conv2d", "roi_align", "roi_align", "roi_align"]
    with torch.no_grad():
        want = model(*inputs)
        got = trt_model(*inputs)
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
    # the saved engine finds its plugins again by (name, version, namespace)
    path = tmp_path / "plugins.engine"
    trt_model.save(path)
    again = torch2trt_lite.load(str(path))
    with torch.no_grad():
        for g, w in zip(again(*inputs), want, strict=True):
            torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)


def _plugin_layers(plan: bytes) -> list[str]:
    """Plugin names of the IPluginV3Layer records of a sim plan (its JSON header), in order."""
    from torch2trt_lite.sim import _plan

    header, _ = _plan.parse(plan)
    return [r["extra"]["__m__"]["plugin"]["__m__"]["name"] for r in header["layers"] if r["cls"] == "IPluginV3Layer"]


def _sim_engine(build: Any, profile: dict[str, tuple[Sequence[int], ...]] | None = None,
                flags: int = 0) -> tuple[Any, Any]:
    logger = sim.Logger()
    builder = sim.Builder(logger)
    net = builder.create_network(flags)
    outs = build(net)
    for i, o in enumerate(outs):
        o.name = f"out{i}"
        net.mark_output(o)
    cfg = builder.create_builder_config()
    if profile:
        p = builder.create_optimization_profile()
        for name, (lo, opt, hi) in profile.items():
            p.set_shape(name, lo, opt, hi)
        cfg.add_optimization_profile(p)
    plan = builder.build_serialized_network(net, cfg)
    assert plan is not None, logger._messages
    engine = sim.Runtime(logger).deserialize_cuda_engine(plan)
    return engine, logger


def _run(engine: Any, feeds: dict[str, torch.Tensor], n_out: int) -> tuple[bool, list[torch.Tensor]]:
    ctx = engine.create_execution_context()
    for name, t in feeds.items():
        ctx.set_input_shape(name, tuple(t.shape))
        ctx.set_tensor_address(name, t)
    outs = []
    for i in range(n_out):
        shape = tuple(ctx.get_tensor_shape(f"out{i}"))
        o = torch.empty(shape, dtype=sim.torch_dtype(engine.get_tensor_dtype(f"out{i}")))
        ctx.set_tensor_address(f"out{i}", o)
        outs.append(o)
    return ctx.execute_async_v3(0), outs


def _plugin(pdef: api.PluginDef, **attrs: Any) -> Any:
    return api.create_backend_plugin(sim, "sim", pdef, pdef.resolve_attrs(attrs))


def test_sim_plugin_layers_with_dynamic_shapes_and_plan_roundtrip() -> None:
    kw = {"stride": (1, 1), "padding": (1, 1), "dilation": (1, 1)}
    w = torch.randn(5, 3, 3, 3)

    def build(net: Any) -> list[Any]:
        x = net.add_input("x", sim.float32, (-1, 3, -1, -1))
        off = net.add_input("off", sim.float32, (-1, 18, -1, -1))
        weight = net.add_constant(tuple(w.shape), w.numpy()).get_output(0)
        dcn = net.add_plugin_v3([x, off, weight], [], _plugin(DC, **kw))
        assert tuple(dcn.get_output(0).shape) == (-1, 5, -1, -1)
        assert dcn.type == sim.LayerType.PLUGIN_V3 and dcn.plugin.plugin_name == "deform_conv2d"
        rois = net.add_input("rois", sim.float32, (-1, 5))
        ra = net.add_plugin_v3([dcn.get_output(0), rois], [], _plugin(RA, output_size=(2, 2), sampling_ratio=2))
        assert tuple(ra.get_output(0).shape) == (-1, 5, 2, 2)
        return [dcn.get_output(0), ra.get_output(0)]

    shapes = {"x": ((1, 3, 4, 4), (2, 3, 8, 8), (4, 3, 16, 16)), "off": ((1, 18, 4, 4), (2, 18, 8, 8), (4, 18, 16, 16)),
              "rois": ((1, 5), (4, 5), (16, 5))}
    engine, _ = _sim_engine(build, shapes)
    plan = bytes(engine.serialize())
    engine = sim.Runtime(sim.Logger()).deserialize_cuda_engine(plan)  # fresh layers from JSON, registry lookup
    for n, hw, k in ((1, 5, 3), (3, 11, 7)):
        x, off = torch.randn(n, 3, hw, hw), torch.randn(n, 18, hw, hw)
        rois = torch.cat([torch.randint(0, n, (k, 1)).float(), torch.rand(k, 2) * hw, torch.rand(k, 2) * hw + hw / 2], 1)
        ok, (y, p) = _run(engine, {"x": x, "off": off, "rois": rois}, 2)
        assert ok
        want = torchvision.ops.deform_conv2d(x, off, w, **kw)
        torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(p, torchvision.ops.roi_align(want, rois, 2, 1.0, 2, False), rtol=1e-5, atol=1e-5)


def test_sim_plugin_fp16_strongly_typed() -> None:
    (x, off, w, m, b), kw = deform_inputs(6, **DEFORM_CASES[0].values[0])
    strongly = 1 << int(sim.NetworkDefinitionCreationFlag.STRONGLY_TYPED)

    def build(net: Any) -> list[Any]:
        ins = [net.add_input(n, sim.float16, tuple(t.shape)) for n, t in zip("xomwb", (x, off, m, w, b), strict=True)]
        xi, oi, mi, wi, bi = ins
        layer = net.add_plugin_v3([xi, oi, wi, mi, bi], [], _plugin(DC, has_mask=True, has_bias=True, **kw))
        assert layer.get_output(0).dtype == sim.DataType.HALF
        return [layer.get_output(0)]

    engine, _ = _sim_engine(build, flags=strongly)
    feeds = {n: t.half() for n, t in zip("xomwb", (x, off, m, w, b), strict=True)}  # type: ignore[union-attr]
    ok, (y,) = _run(engine, feeds, 1)
    assert ok and y.dtype == torch.float16
    want = torchvision.ops.deform_conv2d(x, off, w, b, mask=m, **kw)
    torch.testing.assert_close(y.float(), want, rtol=1e-2, atol=1e-2 * want.abs().max().item())


@pytest.mark.parametrize(
    "inputs, attrs, match",
    [
        ([("x", sim.int32, (1, 3, 8, 8)), ("o", sim.int32, (1, 18, 8, 8)), ("w", sim.int32, (4, 3, 3, 3))],
         {"padding": (1, 1)}, "has dtype torch.int32"),
        ([("x", sim.float32, (1, 3, 8, 8)), ("o", sim.float16, (1, 18, 8, 8)), ("w", sim.float32, (4, 3, 3, 3))],
         {"padding": (1, 1)}, "must share one dtype"),
        ([("x", sim.float32, (3, 8, 8)), ("o", sim.float32, (1, 18, 8, 8)), ("w", sim.float32, (4, 3, 3, 3))],
         {"padding": (1, 1)}, "must have rank 4"),
        ([("x", sim.float32, (1, 3, 8, 8)), ("o", sim.float32, (1, 17, 8, 8)), ("w", sim.float32, (4, 3, 3, 3))],
         {"padding": (1, 1)}, "multiple of 2 \\* kh \\* kw"),
        ([("x", sim.float32, (1, 3, 8, 8)), ("o", sim.float32, (1, 18, 7, 8)), ("w", sim.float32, (4, 3, 3, 3))],
         {"padding": (1, 1)}, "must equal the output size"),
        ([("x", sim.float32, (1, 3, 8, 8)), ("o", sim.float32, (1, 18, 8, 8))], {"padding": (1, 1)},
         "expected 3 inputs"),
    ],
    ids=["int32", "mixed-float", "rank", "offset-channels", "offset-size", "missing-weight"],
)
def test_sim_refuses_inputs_that_break_the_contract(inputs: list[Any], attrs: dict[str, Any], match: str) -> None:
    net = sim.Builder(sim.Logger()).create_network(0)
    its = [net.add_input(n, dt, shape) for n, dt, shape in inputs]
    with pytest.raises(NetworkDefinitionError, match=match):
        net.add_plugin_v3(its, [], _plugin(DC, **attrs))


def test_sim_refuses_foreign_plugin_objects_and_bad_rois() -> None:
    net = sim.Builder(sim.Logger()).create_network(0)
    x = net.add_input("x", sim.float32, (1, 3, 8, 8))
    with pytest.raises(NetworkDefinitionError, match="declare_plugin"):
        net.add_plugin_v3([x], [], object())
    r = net.add_input("r", sim.float32, (4, 4))
    with pytest.raises(NetworkDefinitionError, match=r"rois must be \[K, 5\]"):
        net.add_plugin_v3([x, r], [], _plugin(RA, output_size=(2, 2)))


def _toy_plugin(name: str, reference: Any = None, **kw: Any) -> api.PluginDef:
    return declare_plugin(
        name, inputs=["x"], attrs={"scale": float_attr(2.0)}, shape=lambda ins, a: [ins["x"]],
        reference=reference or (lambda x, *, scale: x * scale), replace=True, **kw,
    )


def test_plan_with_an_undeclared_plugin_fails_to_load_with_plugin_error() -> None:
    pdef = _toy_plugin("t2t_test_ephemeral")

    def build(net: Any) -> list[Any]:
        x = net.add_input("x", sim.float32, (2, 3))
        return [net.add_plugin_v3([x], [], _plugin(pdef, scale=3.0)).get_output(0)]

    engine, _ = _sim_engine(build)
    plan = bytes(engine.serialize())
    ok, (y,) = _run(sim.Runtime(sim.Logger()).deserialize_cuda_engine(plan), {"x": torch.ones(2, 3)}, 1)
    assert ok and torch.equal(y, torch.full((2, 3), 3.0))
    del declaration._PLUGINS[pdef.key]  # NOTE: simulates a fresh process that never declared it
    # like TensorRT: deserialization returns None and logs why (the plugin is unknown here)
    from torch2trt_lite.backends import CapturingLogger

    log = CapturingLogger(sim)
    assert sim.Runtime(log.logger).deserialize_cuda_engine(plan) is None
    assert any(re.search("t2t_test_ephemeral.*not declared in this process", e) for e in log.errors), log.errors


def test_reference_that_breaks_its_shape_rule_fails_at_run_time() -> None:
    pdef = _toy_plugin("t2t_test_liar", reference=lambda x, *, scale: x[:1] * scale)

    def build(net: Any) -> list[Any]:
        x = net.add_input("x", sim.float32, (2, 3))
        return [net.add_plugin_v3([x], [], _plugin(pdef)).get_output(0)]

    engine, logger = _sim_engine(build)
    ok, _ = _run(engine, {"x": torch.ones(2, 3)}, 1)
    assert not ok
    assert any("the shape rule says (2, 3)" in m for _, m in logger._messages)


class _Scale(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, scale: float) -> torch.Tensor:
        return x * scale

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        return g, None


class _ScaleModule(torch.nn.Module):
    def __init__(self, scale: float) -> None:
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def test_user_plugin_for_autograd_function_and_module_converts() -> None:
    calls: list[float] = []

    def reference(x: torch.Tensor, *, scale: float) -> torch.Tensor:
        calls.append(scale)
        return x * scale

    _toy_plugin("t2t_test_scale", reference=reference, targets=(_Scale, _ScaleModule))

    class M(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.s = _ScaleModule(0.5)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.s(_Scale.apply(x, 3.0))

    x = torch.randn(2, 5)
    trt_model = torch2trt_lite.convert(M().eval(), [x], backend="sim")
    calls.clear()
    torch.testing.assert_close(trt_model(x), x * 1.5)
    assert calls == [3.0, 0.5]  # both calls ran as plugin layers, in order, with their attributes


# ------------------------------------------------------------------------- 3. declaration API
def test_attributes_coerce_validate_and_roundtrip_through_plugin_fields() -> None:
    pdef = declare_plugin(
        "t2t_test_attrs", inputs=[Input("x", rank=2)], shape=lambda ins, a: [ins["x"]],
        reference=lambda x, **a: x, replace=True,
        attrs={"n": int_attr(3), "k": ints_attr((1, 1), length=2), "s": float_attr(0.1),
               "f": floats_attr((0.5,)), "mode": str_attr("linear")},
    )
    a = pdef.resolve_attrs({"k": 4, "s": 1, "f": [1, 2.5], "mode": "nearest"})
    assert dict(a) == {"n": 3, "k": (4, 4), "s": 1.0, "f": (1.0, 2.5), "mode": "nearest"} and a.k == (4, 4)
    fields = api.encode_fields(sim, pdef, a)
    assert [f.type for f in fields] == [sim.PluginFieldType.INT32, sim.PluginFieldType.INT32,
                                        sim.PluginFieldType.FLOAT64, sim.PluginFieldType.FLOAT64, sim.PluginFieldType.CHAR]
    assert api.decode_fields(pdef, fields) == a
    for bad, match in (({"n": 2.5}, "cannot use 2.5 as int"), ({"k": (1, 2, 3)}, "expected 2 values"),
                       ({"mode": 3}, "is not a str"), ({"zz": 1}, "unknown attribute")):
        with pytest.raises(PluginError, match=match):
            pdef.resolve_attrs(bad)
    with pytest.raises(PluginError, match="output_size.*required"):
        RA.resolve_attrs({})
    with pytest.raises(PluginError, match="already declared"):
        declare_plugin("t2t_test_attrs", inputs=["x"], shape=lambda i, a: [i["x"]], reference=lambda x: x)
    with pytest.raises(PluginError, match="must be declared as a bool_attr"):
        declare_plugin("t2t_test_bad", inputs=[Input("m", present="has_m")], shape=lambda i, a: [], reference=lambda m: m)


def test_launch_rules_and_kernel_arguments() -> None:
    (x, off, w, m, b), kw = deform_inputs(7, **DEFORM_CASES[2].values[0])
    attrs = DC.resolve_attrs({**kw, "has_bias": True})
    info = DC.launch_info(attrs, [x.shape, off.shape, w.shape, b.shape], [torch.float32] * 4)  # type: ignore[union-attr]
    prep, lc = DC.cuda.launches(info)  # type: ignore[union-attr]
    assert prep.kernel == "deform_conv2d_fp32_wprep" and lc.kernel == "deform_conv2d_fp32_gemm"
    assert lc.block == (256, 1, 1) and lc.grid == ((3 * 14 + 127) // 128, 1, 2 * 2)
    assert DC.cuda.workspace_bytes(info) == 2 * 6 * 4 * 128 * 4  # type: ignore[union-attr]  # relaid-out weights
    vals = nvrtc.pack_args(lc, info, [0x1000, 0x2000, 0x3000, 0x4000], [0x9000], 0x80000)
    ptrs = [v.value for v in vals[:7]]
    assert ptrs == [0x1000, 0x2000, 0x80000, None, 0x4000, 0x9000, 0x80000 + 2 * 6 * 4 * 128 * 4]  # mask: null
    assert [type(v) for v in vals[7:]] == [ctypes.c_int32] * 17
    info16 = DC.launch_info(DC.resolve_attrs({}), [(1, 4, 6, 6), (1, 18, 4, 4), (4, 4, 3, 3)], [torch.float16] * 3)
    assert DC.cuda.launches(info16)[0].kernel == "deform_conv2d_fp16_m16"  # type: ignore[union-attr]
    ra_info = RA.launch_info(RA.resolve_attrs({"output_size": (7, 7), "spatial_scale": 0.25}),
                             [(2, 256, 50, 50), (1000, 5)], [torch.float32] * 2)
    tr, lr = RA.cuda.launches(ra_info)  # type: ignore[union-attr]  # many boxes: channels-last path
    assert tr.kernel == "roi_align_nchw_to_nhwc_fp32" and tr.grid == (-(-2500 // 32), 8, 2) and tr.block == (32, 8, 1)
    assert lr.kernel == "roi_align_nhwc_fp32" and lr.grid == (1000, 8, 1)
    assert isinstance(lr.args[8], F32) and lr.args[8].value == 0.25
    assert RA.cuda.workspace_bytes(ra_info) == 2 * 256 * 50 * 50 * 4  # type: ignore[union-attr]
    few = RA.launch_info(ra_info.attrs, [(2, 256, 50, 50), (10, 5)], [torch.float32] * 2)
    (lr,) = RA.cuda.launches(few)  # type: ignore[union-attr]  # few boxes: direct kernel
    assert lr.kernel == "roi_align_fp32" and lr.grid == (-(-10 * 256 * 49 // 256), 1, 1)
    assert isinstance(lr.args[9], F32) and lr.args[9].value == 0.25
    with pytest.raises(PluginError, match="not a declared entry point"):
        CudaKernel(source="", entry_points=("a",), launch=lambda i: Launch("b", 1, 1, ())).launches(info)


# --------------------------------------------------- 4. TensorRT plugin classes (stand-in module)
class _Expr:
    """A stand-in IDimensionExpr: evaluates itself for given symbol values."""

    def __init__(self, fn: Any, const: int | None = None) -> None:
        self.fn, self.const = fn, const

    def is_constant(self) -> bool:
        return self.const is not None

    def get_constant_value(self) -> int:
        assert self.const is not None
        return self.const


class _ExprBuilder:
    OPS = {"SUM": lambda a, b: a + b, "SUB": lambda a, b: a - b, "PROD": lambda a, b: a * b,
           "FLOOR_DIV": lambda a, b: a // b, "CEIL_DIV": lambda a, b: -(-a // b), "MAX": max, "MIN": min}

    def __init__(self) -> None:
        self.ops: list[str] = []

    def constant(self, v: int) -> _Expr:
        return _Expr(lambda env: v, v)

    def operation(self, op: Any, a: _Expr, b: _Expr) -> _Expr:
        self.ops.append(op.name)
        f = self.OPS[op.name]
        if a.is_constant() and b.is_constant():
            v = f(a.const, b.const)
            return _Expr(lambda env: v, v)
        return _Expr(lambda env: f(a.fn(env), b.fn(env)))


def _fake_tensorrt() -> types.SimpleNamespace:
    """The TensorRT names trt_plugin uses, backed by the sim's enums and plugin registry."""

    def base(name: str) -> type:
        return type(name, (), {"__init__": lambda self: None})

    registry = sim_plugin.IPluginRegistry()
    return types.SimpleNamespace(
        IPluginV3=base("IPluginV3"), IPluginV3OneCore=base("IPluginV3OneCore"),
        IPluginV3OneBuild=base("IPluginV3OneBuild"), IPluginV3OneRuntime=base("IPluginV3OneRuntime"),
        IPluginCreatorV3One=sim_plugin.IPluginCreatorV3One, PluginField=sim_plugin.PluginField,
        PluginFieldCollection=sim_plugin.PluginFieldCollection, PluginFieldType=sim.PluginFieldType,
        DataType=sim.DataType, TensorFormat=sim.TensorFormat, DimensionOperation=sim.DimensionOperation,
        TensorRTPhase=sim.TensorRTPhase, DimsExprs=list, get_plugin_registry=lambda: registry,
    )


def _desc(dtype: Any, dims: Sequence[int] = (), fmt: Any = None, lo: Sequence[int] | None = None,
          hi: Sequence[int] | None = None) -> types.SimpleNamespace:
    """A DynamicPluginTensorDesc stand-in; ``lo`` / ``hi`` give the profile's min / max (default: dims)."""
    d = types.SimpleNamespace(type=dtype, format=fmt if fmt is not None else sim.TensorFormat.LINEAR, dims=tuple(dims))
    return types.SimpleNamespace(desc=d, min=tuple(lo if lo is not None else dims), opt=tuple(dims),
                                 max=tuple(hi if hi is not None else dims))


def test_tensorrt_plugin_build_and_runtime_methods_with_a_stand_in_module(monkeypatch: pytest.MonkeyPatch) -> None:
    trt = _fake_tensorrt()
    creators = trt_plugin.register_creators(trt)
    assert {(c.name, c.plugin_version, c.plugin_namespace) for c in creators} >= {
        ("deform_conv2d", "1", "torch2trt_lite"), ("roi_align", "1", "torch2trt_lite")}
    attrs = DC.resolve_attrs({"stride": (2, 1), "padding": (1, 0), "dilation": (1, 2), "has_mask": True})
    plugin = trt_plugin.create_plugin(DC, attrs, trt)
    assert (plugin.plugin_name, plugin.plugin_version, plugin.num_outputs) == ("deform_conv2d", "1", 1)
    assert plugin.get_capability_interface(sim.PluginCapabilityType.BUILD) is plugin
    # dtypes
    F, H = sim.DataType.FLOAT, sim.DataType.HALF
    assert plugin.get_output_data_types([H, H, H, H]) == [H]
    with pytest.raises(PluginError, match="supports"):
        plugin.get_output_data_types([sim.DataType.INT32] * 4)
    # shapes: batch, H and W symbolic; channel and kernel dims constant
    b = _ExprBuilder()
    n, h, w = (_Expr(lambda env, k=k: env[k]) for k in "nhw")
    ho = _Expr(lambda env: (env["h"] + 2 - 3) // 2 + 1)
    wo = _Expr(lambda env: (env["w"] - 5) // 1 + 1)
    c = b.constant
    (out,) = plugin.get_output_shapes(
        [[n, c(4), h, w], [n, c(18), ho, wo], [c(6), c(4), c(3), c(3)], [n, c(9), ho, wo]], [], b)
    for env in ({"n": 1, "h": 9, "w": 11}, {"n": 3, "h": 20, "w": 7}):
        want = DC.output_shapes(attrs, [(env["n"], 4, env["h"], env["w"]), (0,) * 4, (6, 4, 3, 3), (0,) * 4])[0]
        assert tuple(d.fn(env) for d in out) == want
    assert {"SUM", "FLOOR_DIV"} <= set(b.ops)
    # formats: LINEAR only, fp32/fp16, every float input and the output at the first input's type
    io = [_desc(H), _desc(H), _desc(H), _desc(F), _desc(H)]
    assert plugin.supports_format_combination(0, io, 4)
    assert not plugin.supports_format_combination(3, io, 4)  # mask fp32 vs input fp16
    assert plugin.supports_format_combination(4, io, 4)
    assert not plugin.supports_format_combination(0, [_desc(H, fmt=sim.TensorFormat.CHW32)] + io[1:], 4)
    assert not plugin.supports_format_combination(0, [_desc(sim.DataType.BF16)] + io[1:], 4)
    ws_in = [(1, 4, 9, 9), (1, 18, 5, 5), (6, 4, 3, 3), (1, 9, 5, 5)]
    assert plugin.get_workspace_size([_desc(F, s) for s in ws_in], [_desc(F)]) == 0  # C_out/groups <= 16: none
    ws_in[2] = (40, 4, 3, 3)  # gemm path: relaid-out weights (C_out_g padded to 128) + 2 split-K partials
    assert plugin.get_workspace_size([_desc(F, s) for s in ws_in], [_desc(F)]) == 9 * 4 * 128 * 4 + 2 * 40 * 25 * 4
    # a dynamic batch: the workspace must cover the profile's largest shapes (TensorRT allocates it once)
    big = [(3, *s[1:]) if k != 2 else s for k, s in enumerate(ws_in)]
    small = [(1, *s[1:]) if k != 2 else s for k, s in enumerate(ws_in)]
    dyn = [_desc(F, (-1, *s[1:]) if k != 2 else s, lo=lo, hi=hi)
           for k, (s, lo, hi) in enumerate(zip(ws_in, small, big, strict=True))]
    want = plugin.get_workspace_size([_desc(F, s) for s in big], [_desc(F)])
    assert want > plugin.get_workspace_size([_desc(F, s) for s in small], [_desc(F)])
    assert plugin.get_workspace_size(dyn, [_desc(F)]) == want
    # serialization: fields -> creator (RUNTIME phase) -> the same attributes
    fields = plugin.get_fields_to_serialize()
    creator = trt.get_plugin_registry().get_creator("deform_conv2d", "1", "torch2trt_lite")
    again = creator.create_plugin("dcn", fields, sim.TensorRTPhase.RUNTIME)
    assert again._attrs == attrs and again.attach_to_context(None)._attrs == attrs
    assert plugin.clone()._attrs == attrs
    # enqueue: concrete shapes -> the launch rule -> pointers, workspace and TensorRT's stream
    seen: dict[str, Any] = {}

    def fake_run(cuda: Any, info: Any, ins: Any, outs: Any, ws: int, stream: int) -> None:
        seen.update(kernels=[lc.kernel for lc in cuda.launches(info)], ins=ins, outs=outs, ws=ws, stream=stream,
                    out_shape=info.outputs[0])

    monkeypatch.setattr(nvrtc, "run_launches", fake_run)
    shapes = [(2, 4, 9, 11), (2, 18, 5, 7), (6, 4, 3, 3), (2, 9, 5, 7)]
    again.enqueue([_desc(H, s).desc for s in shapes], [_desc(H).desc], [1, 2, 3, 4], [5], 4096, 77)
    assert seen == {"kernels": ["deform_conv2d_fp16_m16"], "ins": [1, 2, 3, 4], "outs": [5], "ws": 4096,
                    "stream": 77, "out_shape": (2, 6, 5, 7)}
    shapes[2] = (40, 4, 3, 3)  # the gemm path: its launches use the workspace TensorRT passes
    again.enqueue([_desc(H, s).desc for s in shapes], [_desc(H).desc], [1, 2, 3, 4], [5], 8192, 78)
    assert seen["kernels"][:2] == ["deform_conv2d_fp16_wprep", "deform_conv2d_fp16_gemm"]
    assert (seen["ws"], seen["stream"], seen["out_shape"]) == (8192, 78, (2, 40, 5, 7))


def test_tensorrt_roi_align_plugin_with_a_stand_in_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """roi_align through the same TensorRT wrapper: the output's first dimension is the number of
    boxes (symbolic), the channels-last path's workspace covers the profile's largest input, and
    enqueue hands the kernels TensorRT's workspace and stream."""
    trt = _fake_tensorrt()
    trt_plugin.register_creators(trt)
    attrs = RA.resolve_attrs({"output_size": (7, 7), "spatial_scale": 0.25, "sampling_ratio": 2, "aligned": True})
    plugin = trt_plugin.create_plugin(RA, attrs, trt)
    b = _ExprBuilder()
    n, h, w, k = (_Expr(lambda env, s=s: env[s]) for s in "nhwk")
    (out,) = plugin.get_output_shapes([[n, b.constant(64), h, w], [k, b.constant(5)]], [], b)
    for env in ({"n": 1, "h": 20, "w": 30, "k": 7}, {"n": 2, "h": 50, "w": 40, "k": 1000}):
        assert tuple(d.fn(env) for d in out) == (env["k"], 64, 7, 7)
    F = sim.DataType.FLOAT
    ins = [_desc(F, (-1, 64, 50, 50), lo=(1, 64, 50, 50), hi=(2, 64, 50, 50)),
           _desc(F, (-1, 5), lo=(1, 5), hi=(1000, 5))]
    assert plugin.get_workspace_size(ins, [_desc(F)]) == 2 * 64 * 50 * 50 * 4  # NHWC copy at the max shapes
    seen: dict[str, Any] = {}

    def fake_run(cuda: Any, info: Any, ins: Any, outs: Any, ws: int, stream: int) -> None:
        seen.update(kernels=[lc.kernel for lc in cuda.launches(info)], ws=ws, stream=stream, out=info.outputs[0])

    monkeypatch.setattr(nvrtc, "run_launches", fake_run)
    plugin.enqueue([_desc(F, (2, 64, 50, 50)).desc, _desc(F, (1000, 5)).desc], [_desc(F).desc], [1, 2], [3], 512, 9)
    assert seen == {"kernels": ["roi_align_nchw_to_nhwc_fp32", "roi_align_nhwc_fp32"], "ws": 512, "stream": 9,
                    "out": (1000, 64, 7, 7)}


def _manifest(version: str) -> dict[str, Any]:
    return json.loads((REPO / "torch2trt_lite/sim/_manifests" / f"tensorrt-{version}.json").read_text())


def test_tensorrt_names_used_by_plugins_exist_in_every_supported_version() -> None:
    used: set[tuple[str, ...]] = set()
    for path in (REPO / "torch2trt_lite/plugins/trt_plugin.py", REPO / "torch2trt_lite/plugins/api.py",
                 REPO / "torch2trt_lite/plugins/declaration.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "trt":
                used.add((node.attr,))
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and isinstance(node.value.value, ast.Name) and node.value.value.id == "trt"):
                used.add((node.value.attr, node.attr))
            if isinstance(node, ast.Import | ast.ImportFrom) and node.col_offset == 0:
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.split(".")[0] == "tensorrt" for n in names), "tensorrt must be imported lazily"
    assert ("IPluginV3OneBuild",) in used and ("TensorFormat", "LINEAR") in used
    for version in ("10.13", "10.16", "11.1"):
        m = _manifest(version)
        for name in used:
            top = name[0]
            assert top in m["classes"] or top in m["enums"] or top in m["functions"], (version, top)
            if len(name) == 2 and top in m["enums"]:
                assert name[1] in m["enums"][top], (version, name)
            elif len(name) == 2:
                assert name[1] == "__init__" or name[1] in m["classes"][top]["methods"], (version, name)
    # the overridden plugin methods are TensorRT's hooks, with TensorRT's positional arity
    src = ast.parse((REPO / "torch2trt_lite/plugins/trt_plugin.py").read_text())
    cls = next(n for n in ast.walk(src) if isinstance(n, ast.ClassDef) and n.name == "Torch2TRTLitePlugin")
    bases = ("IPluginV3", "IPluginV3OneCore", "IPluginV3OneBuild", "IPluginV3OneRuntime")
    for version in ("10.13", "10.16", "11.1"):
        classes = _manifest(version)["classes"]
        for fn in (n for n in cls.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")):
            owners = [classes[b] for b in bases if fn.name in classes[b].get("overridable", [])]
            assert owners, f"{fn.name} is not a TensorRT {version} plugin hook"
            sig = owners[0]["methods"].get(fn.name, [{"args": None}])[0]["args"]
            if sig is not None:
                assert len(fn.args.args) - 1 == len(sig), (version, fn.name)
        # the creator too: its overridden methods are IPluginCreatorV3One's hooks, with their arguments
        creator = next(n for n in ast.walk(src) if isinstance(n, ast.ClassDef) and n.name == "Torch2TRTLitePluginCreator")
        hooks = classes["IPluginCreatorV3One"].get("overridable", [])
        for fn in (n for n in creator.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("_")):
            assert fn.name in hooks, f"{fn.name} is not a TensorRT {version} plugin creator hook"
            want = [a["name"] for a in classes["IPluginCreatorV3One"]["methods"][fn.name][0]["args"]]
            assert [a.arg for a in fn.args.args[1:]] == want, (version, fn.name)


# ---------------------------------------------------------------------------- 5. NVRTC checks
@pytest.fixture(scope="session")
def nvrtc_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("cuda.bindings.nvrtc", reason="needs cuda-python (pip install cuda-python) for NVRTC")
    path = tmp_path_factory.mktemp("nvrtc-cache")
    old = os.environ.get(nvrtc.CACHE_ENV)
    os.environ[nvrtc.CACHE_ENV] = str(path)
    yield path
    if old is None:
        os.environ.pop(nvrtc.CACHE_ENV, None)
    else:
        os.environ[nvrtc.CACHE_ENV] = old


_COMPILED: dict[tuple[Path, int, tuple[str, ...]], nvrtc.CompiledModule] = {}
# NVRTC options of the built-ins: their own (roi_align: --fmad=false) and those of the launch
# variants the benchmarks time (deform_conv2d: fp32 on CUDA cores on sm_80+)
BUILTIN_OPTIONS = {
    "deform_conv2d": [DC.cuda.options, deform_conv2d_variant(f32_simt=True).cuda.options],  # type: ignore[union-attr]
    "roi_align": [RA.cuda.options],  # type: ignore[union-attr]
}


def _compile(path: Path, arch: int, options: tuple[str, ...] | None = None) -> nvrtc.CompiledModule:
    if options is None:
        options = BUILTIN_OPTIONS[path.parent.name][0] if path.parent.name in BUILTIN_OPTIONS else ()
    key = (path, arch, options)
    if key not in _COMPILED:
        _COMPILED[key] = nvrtc.compile_source(
            path.read_text(), arch=arch, filename=str(path), options=options, ptxas_verbose=True
        )
    return _COMPILED[key]


@pytest.mark.parametrize("arch", ARCHS, ids=[f"sm_{a}" for a in ARCHS])
@pytest.mark.parametrize("path", KERNEL_FILES, ids=[p.parent.name for p in KERNEL_FILES])
def test_every_kernel_compiles_with_nvrtc(nvrtc_cache: Path, path: Path, arch: int) -> None:
    mod = _compile(path, arch)
    assert mod.kind == "cubin" and mod.arch == f"sm_{arch}" and mod.image[:4] == b"\x7fELF"
    pdef = {"deform_conv2d": DC, "roi_align": RA}.get(path.parent.name)
    if pdef is not None:
        assert set(nvrtc.ptxas_resources(mod.log)) == set(pdef.cuda.entry_points)  # type: ignore[union-attr]


def _nvcc_resources(path: Path, arch: int, out: Path, options: tuple[str, ...]) -> dict[str, nvrtc.KernelResources]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return {}
    incs = [f"-I{d}" for d in nvrtc.include_dirs()]
    res = subprocess.run([nvcc, "-cubin", f"-arch=sm_{arch}", "-Xptxas", "-v", *options, *incs, "-o", str(out), str(path)],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, f"nvcc failed on {path.name}:\n{res.stderr[-2000:]}"
    return nvrtc.ptxas_resources(res.stdout + res.stderr)


_SPILLS = """extern "C" __global__ void heavy(const float* __restrict__ x, float* __restrict__ y, int n) {
  float acc[48];
#pragma unroll
  for (int i = 0; i < 48; ++i) acc[i] = x[threadIdx.x + i * n];
  for (int k = 0; k < n; ++k) {
#pragma unroll
    for (int i = 0; i < 48; ++i) acc[i] = acc[i] * acc[(i + 1) % 48] + x[k + i];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 48; ++i) s += acc[i] * (float)i;
  y[threadIdx.x] = s;
}
"""


def test_spills_are_seen_in_real_compiler_logs(nvrtc_cache: Path, tmp_path: Path) -> None:
    """The spill check below would pass vacuously if ptxas's lines stopped parsing: a kernel held
    to 24 registers must be reported with its spills, from NVRTC's log and from nvcc's."""
    mod = nvrtc.compile_source(_SPILLS, arch=90, filename="spills.cu", options=("--maxrregcount=24",),
                               ptxas_verbose=True)
    r = nvrtc.ptxas_resources(mod.log)["heavy"]
    assert r.complete and r.registers <= 24 and r.spill_stores > 0 and r.spill_loads > 0 and r.stack_bytes > 0
    if shutil.which("nvcc"):
        src = tmp_path / "spills.cu"
        src.write_text(_SPILLS)
        r2 = _nvcc_resources(src, 90, tmp_path / "spills.cubin", ("-maxrregcount=24",))["heavy"]
        assert r2.complete and r2.spill_stores > 0


def test_builtin_kernels_register_usage_and_no_spills(nvrtc_cache: Path, tmp_path: Path) -> None:
    rows = []
    spills = []
    for name, path in BUILTIN_KERNELS.items():
        for arch in ARCHS:
            for options in BUILTIN_OPTIONS[name]:
                found = nvrtc.ptxas_resources(_compile(path, arch, options).log)
                assert found and all(r.complete for r in found.values()), (name, arch, options, found)
                for kernel, r in sorted(found.items()):
                    rows.append(f"{r.arch:7} {kernel:26} regs={r.registers:3} stack={r.stack_bytes} "
                                f"spill_st={r.spill_stores} spill_ld={r.spill_loads} smem={r.shared_bytes} "
                                f"{' '.join(options)}")
                    if r.spill_stores or r.spill_loads or r.stack_bytes:
                        spills.append(rows[-1])
        by_nvcc = _nvcc_resources(path, 90, tmp_path / f"{name}.cubin", BUILTIN_OPTIONS[name][0])
        assert all(r.complete for r in by_nvcc.values()), by_nvcc
        for kernel, r in sorted(by_nvcc.items()):
            rows.append(f"nvcc {r.arch:4} {kernel:24} regs={r.registers:3} spill_st={r.spill_stores} "
                        f"spill_ld={r.spill_loads}")
            if r.spill_stores or r.spill_loads:
                spills.append(rows[-1])
    print("\n" + "\n".join(rows))
    assert rows and not spills, "local-memory spills:\n" + "\n".join(spills)


def test_nvrtc_cache_errors_and_headers(nvrtc_cache: Path) -> None:
    src = 'extern "C" __global__ void k(float* y) { y[threadIdx.x] = 1.f; }\n'
    first = nvrtc.compile_source(src, arch=80, filename="k.cu")
    space = b" "  # NOTE: CPython's shared one-byte object, which NVRTC wrote a NUL into when handed
    assert space[0] == 0x20 and first.log == ""  # the empty log's 1-byte buffer (it then broke plans)
    second = nvrtc.compile_source(src, arch=80, filename="k.cu")
    assert not first.from_cache and second.from_cache and first.image == second.image
    assert nvrtc.compile_source(src, arch=80, filename="k.cu", options=("-DX=1",)).key != first.key
    assert (nvrtc_cache / f"{first.key}.cubin").is_file()
    bad = '#include <cuda_fp16.h>\nextern "C" __global__ void k(float* y) {\n  y[0] = undefined_thing;\n}\n'
    with pytest.raises(PluginError, match=r"bad\.cu:3: error: identifier \"undefined_thing\" is undefined") as ei:
        nvrtc.compile_source(bad, arch=90, filename="bad.cu")
    assert "y[0] = undefined_thing;" in str(ei.value) and "sm_90" in str(ei.value)
    with pytest.raises(PluginError, match="open source file.*\n(.|\n)*CUDA_HOME"):
        nvrtc.compile_source('#include "no_such_header.h"\n', arch=90, filename="h.cu")
    assert any((Path(d) / "cuda_fp16.h").is_file() for d in nvrtc.include_dirs())
    assert nvrtc.arch_target(90) == ("sm_90", "cubin")
    newest = max(nvrtc.supported_archs())
    assert nvrtc.arch_target(newest + 1) == (f"compute_{newest}", "ptx")
    with pytest.raises(PluginError, match="invalid CUDA architecture"):
        nvrtc.arch_target("hopper")


# ---------------------------------------------------------- 6. kernels executed on the CPU
# NOTE: tests/plugins/test_plugins_emu.py runs every built-in kernel through the host emulator (torch2trt_lite.plugins.host_emulator).


# -------------------------------------------------------------------------------- 7. sample
def test_custom_plugin_sample_runs_end_to_end(tmp_path: Path) -> None:
    env = {**os.environ, nvrtc.CACHE_ENV: str(tmp_path / "cache")}
    res = subprocess.run([sys.executable, str(REPO / "samples/custom_plugin.py"), "--backend", "sim"],
                         capture_output=True, text=True, env=env, check=False, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert re.search(r"backend=sim: max \|converted - torch\| = 0\b", res.stdout), res.stdout


def test_plugin_field_collection_type_matches_numpy_kinds() -> None:
    f = sim_plugin.PluginField("s", api.field_array("str", "hello"), sim.PluginFieldType.CHAR)
    assert f.size == 6 and np.asarray(f.data).dtype == np.int8
    with pytest.raises(PluginError, match="32-bit"):
        api.field_array("int", 2**40)


def test_first_convert_does_not_import_torchvision() -> None:
    """The built-in plugins wait for torchvision to be imported by the user (it costs ~1.5 s): their
    converters are registered at the next conversion after that import."""
    import subprocess
    import sys

    code = (
        "import sys, torch, torch2trt_lite\n"
        "m = torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2)], backend='sim')\n"
        "assert 'torchvision' not in sys.modules, 'loading the built-in plugins imported torchvision'\n"
        "import torchvision\n"
        "x = torch.randn(1, 3, 8, 8); b = torch.tensor([[0, 1.0, 1.0, 5.0, 5.0]])\n"
        "op = torchvision.ops.RoIAlign((2, 2), 1.0, 2).eval()\n"
        "trt = torch2trt_lite.convert(op, [x, b], backend='sim')\n"
        "torch.testing.assert_close(trt(x, b), op(x, b), rtol=1e-5, atol=1e-5)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
