"""The sim's nn layers (torch2trt_lite/sim/layers/nn.py) against torch's own functions.

Every network is built, serialized with ``build_serialized_network``, deserialized with
``Runtime.deserialize_cuda_engine`` and run through an execution context, so each test also
round-trips the layer through a plan. References are torch functions (F.conv2d, F.max_pool2d,
F.interpolate, ...) or, where TensorRT's documented formula has no torch twin, a direct loop
implementation of that formula written here.

Tolerances: float32 results use rtol=1e-5, atol=1e-5 (torch and the sim may accumulate in a
different order); float16 results are compared with the fp32 reference at rtol=atol=1e-2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.sim.netbuilder import Net, infer
from torch2trt_lite.errors import NetworkDefinitionError
from torch2trt_lite.sim import api
from torch2trt_lite.sim.layers import nn as sim_nn

trt = api("10.16")
F32 = {"rtol": 1e-5, "atol": 1e-5}
F16 = {"rtol": 1e-3, "atol": 1e-3}  # fp16 rounding of the result (~5e-4 relative), with a margin


# ------------------------------------------------------------------------------ helpers
def run1(build: Callable[[Net, Any], Any], x: torch.Tensor, ns: Any = trt) -> torch.Tensor:
    """One input 'x', one output: build with ``build(net, x_tensor)`` and run."""
    net = Net(ns)
    xt = net.input("x", x.shape, trt.DataType.HALF if x.dtype == torch.float16 else trt.float32)
    engine = net.build(build(net, xt))
    return infer(engine, {"x": x})[0]


@pytest.fixture(params=["torch_fast_path", "general_path"])
def both_paths(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a test with and without the layers' torch fast paths (conv/pool padding, interpolate)."""
    monkeypatch.setattr(sim_nn, "_TORCH_FAST_PATHS", request.param == "torch_fast_path")


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g)


# -------------------------------------------------------------------------- convolution
CONV_CASES = [
    # (input shape, out channels, kernel, stride, dilation, pre, post, groups)
    ((2, 4, 9, 11), 6, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0), 1),
    ((1, 4, 10, 9), 6, (3, 2), (2, 1), (1, 2), (1, 2), (1, 2), 2),
    ((1, 6, 8, 8), 6, (3, 3), (2, 2), (2, 2), (2, 1), (0, 3), 3),
    ((1, 2, 5, 6, 7), 4, (2, 3, 3), (1, 2, 1), (1, 1, 2), (1, 0, 1), (0, 1, 2), 2),
]


@pytest.mark.parametrize("shape,k_out,kernel,stride,dil,pre,post,groups", CONV_CASES)
@pytest.mark.usefixtures("both_paths")
def test_convolution_matches_torch(shape: tuple[int, ...], k_out: int, kernel: tuple[int, ...],
                                   stride: tuple[int, ...], dil: tuple[int, ...], pre: tuple[int, ...],
                                   post: tuple[int, ...], groups: int) -> None:
    x = rand(*shape)
    w = rand(k_out, shape[1] // groups, *kernel, seed=1)
    b = rand(k_out, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_convolution_nd(t, k_out, kernel, w.numpy(), b.numpy())
        layer.stride_nd = stride
        layer.dilation_nd = dil
        layer.pre_padding = pre
        layer.post_padding = post
        layer.num_groups = groups
        assert layer.type == trt.LayerType.CONVOLUTION
        assert tuple(layer.kernel_size_nd) == kernel and layer.num_output_maps == k_out
        return layer.get_output(0)

    pads = [p for pair in zip(reversed(pre), reversed(post), strict=True) for p in pair]
    conv = F.conv2d if len(kernel) == 2 else F.conv3d
    ref = conv(F.pad(x, pads), w, b, stride, 0, dil, groups)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_convolution_padding_nd_sets_both_sides_and_reads_pre() -> None:
    net = Net()
    layer = net.network.add_convolution_nd(net.input("x", (1, 1, 5, 5)), 1, (3, 3), np.ones((1, 1, 3, 3), np.float32))
    assert tuple(layer.stride_nd) == (1, 1) and tuple(layer.dilation_nd) == (1, 1)
    assert tuple(layer.padding_nd) == (0, 0) and layer.padding_mode == trt.PaddingMode.EXPLICIT_ROUND_DOWN
    layer.padding_nd = (1, 2)
    assert tuple(layer.pre_padding) == (1, 2) and tuple(layer.post_padding) == (1, 2)
    layer.post_padding = (0, 0)
    assert tuple(layer.padding_nd) == (1, 2)
    assert tuple(layer.get_output(0).shape) == (1, 1, 4, 5)


@pytest.mark.filterwarnings("ignore:Using padding='same'")
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.usefixtures("both_paths")
def test_convolution_same_upper_matches_torch_same_padding(dilation: int) -> None:
    # torch's padding="same" (stride 1) puts the odd extra padding at the end, like SAME_UPPER.
    x, w = rand(1, 3, 7, 8), rand(5, 3, 4, 3, seed=1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_convolution_nd(t, 5, (4, 3), w.numpy())
        layer.dilation_nd = (dilation, dilation)
        layer.padding_mode = trt.PaddingMode.SAME_UPPER
        layer.pre_padding = (9, 9)  # the padding mode takes precedence
        return layer.get_output(0)

    ref = F.conv2d(x, w, None, 1, "same", dilation)
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_convolution_same_modes_with_stride(mode: str) -> None:
    size, k, s = 9, 4, 2
    x, w = rand(1, 2, size, size), rand(3, 2, k, k, seed=1)
    # the documented formula: O = ceil(I / S), P = floor((I - 1) / S) * S + K - I
    total = ((size - 1) // s) * s + k - size
    small, big = total // 2, total - total // 2
    before, after = (small, big) if mode == "SAME_UPPER" else (big, small)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_convolution_nd(t, 3, (k, k), w.numpy())
        layer.stride_nd = (s, s)
        layer.padding_mode = getattr(trt.PaddingMode, mode)
        return layer.get_output(0)

    ref = F.conv2d(F.pad(x, (before, after, before, after)), w, None, s)
    got = run1(build, x)
    assert got.shape[-1] == math.ceil(size / s)
    torch.testing.assert_close(got, ref, **F32)


def test_convolution_explicit_round_up() -> None:
    # O = ceil((M - K) / S) + 1: the last window reaches past the padded input (zeros there).
    x, w = rand(1, 1, 8, 8), rand(1, 1, 3, 3, seed=1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_convolution_nd(t, 1, (3, 3), w.numpy())
        layer.stride_nd = (2, 2)
        layer.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        return layer.get_output(0)

    got = run1(build, x)
    assert got.shape[-2:] == (math.ceil((8 - 3) / 2) + 1,) * 2
    torch.testing.assert_close(got, F.conv2d(F.pad(x, (0, 1, 0, 1)), w, None, 2), **F32)


def test_convolution_kernel_and_bias_as_tensors() -> None:
    x, w, b = rand(2, 4, 6, 6), rand(4, 2, 3, 3, seed=1), rand(4, seed=2)
    net = Net()
    layer = net.network.add_convolution_nd(net.input("x", x.shape), 4, (3, 3), trt.Weights())
    layer.num_groups = 2
    layer.set_input(1, net.const(w))
    layer.set_input(2, net.const(b))
    got = infer(net.build(layer.get_output(0)), {"x": x})[0]
    torch.testing.assert_close(got, F.conv2d(x, w, b, groups=2), **F32)


def test_convolution_leading_batch_dims() -> None:
    # A 2D kernel on a rank-5 input: dims before the channel dim are batch dims (conformance case_3d).
    x, w = rand(2, 3, 4, 7, 8), rand(5, 4, 3, 3, seed=1)

    def build(net: Net, t: Any) -> Any:
        return net.network.add_convolution_nd(t, 5, (3, 3), w.numpy()).get_output(0)

    ref = F.conv2d(x.reshape(6, 4, 7, 8), w).reshape(2, 3, 5, 5, 6)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_convolution_fp16() -> None:
    x, w = rand(1, 3, 8, 8), rand(4, 3, 3, 3, seed=1)

    def build(net: Net, t: Any) -> Any:
        return net.network.add_convolution_nd(t, 4, (3, 3), w.numpy()).get_output(0)

    got = run1(build, x.half())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), F.conv2d(x.half().float(), w), **F16)


@pytest.mark.usefixtures("both_paths")
def test_convolution_dynamic_shapes() -> None:
    w, b = rand(6, 3, 3, 3, seed=1), rand(6, seed=2)
    net = Net()
    t = net.input("x", (-1, 3, -1, -1))
    net.dynamic("x", (1, 3, 5, 5), (2, 3, 16, 16), (4, 3, 32, 32))
    layer = net.network.add_convolution_nd(t, 6, (3, 3), w.numpy(), b.numpy())
    layer.stride_nd = (2, 2)
    layer.padding_nd = (1, 1)
    assert tuple(layer.get_output(0).shape) == (-1, 6, -1, -1)
    engine = net.build(layer.get_output(0))
    for shape in [(1, 3, 5, 5), (3, 3, 17, 30)]:
        x = rand(*shape)
        torch.testing.assert_close(infer(engine, {"x": x})[0], F.conv2d(x, w, b, 2, 1), **F32)


def test_convolution_refusals_at_add() -> None:
    net = Net()
    w = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises(NetworkDefinitionError, match="rank"):
        net.network.add_convolution_nd(net.input("a", (1, 5, 5)), 1, (3, 3), w)  # rank 3 < 4
    with pytest.raises(NetworkDefinitionError, match="2 or 3 dimensions"):
        net.network.add_convolution_nd(net.input("b", (1, 1, 5)), 1, (3,), w)  # 1D is not TensorRT's
    with pytest.raises(NetworkDefinitionError, match="positive"):
        net.network.add_convolution_nd(net.input("c", (1, 1, 5, 5)), 1, (0, 3), w)
    with pytest.raises(NetworkDefinitionError, match="FLOAT"):
        net.network.add_convolution_nd(net.input("d", (1, 1, 5, 5), trt.int32), 1, (3, 3), w)
    assert net.network.num_layers == 0


@pytest.mark.parametrize("what", ["count", "groups", "empty", "both", "bias", "too_small"])
def test_convolution_refusals_at_build(what: str) -> None:
    net = Net()
    x = net.input("x", (1, 4, 5, 5))
    kernel = np.ones((2, 4, 3, 3), np.float32) if what != "count" else np.ones(7, np.float32)
    if what in ("empty", "both"):
        kernel = np.zeros(0, np.float32) if what == "empty" else kernel
    layer = net.network.add_convolution_nd(x, 2, (3, 3), kernel)
    if what == "groups":
        layer.num_groups = 3
    if what == "both":
        layer.set_input(1, net.const(np.ones((2, 4, 3, 3), np.float32)))
    if what == "bias":
        layer.bias = np.ones(3, np.float32)
    if what == "too_small":
        layer.kernel_size_nd = (7, 7)
        layer.kernel = np.ones((2, 4, 7, 7), np.float32)
    assert net.build_fails(layer.get_output(0))


# ------------------------------------------------------------------------ deconvolution
DECONV_CASES = [
    # (input shape, out channels, kernel, stride, dilation, padding (torch), output_padding, groups)
    ((2, 4, 5, 6), 6, (3, 3), (1, 1), (1, 1), (0, 0), (0, 0), 1),
    ((1, 4, 5, 4), 6, (3, 2), (2, 3), (1, 2), (1, 1), (1, 0), 2),
    ((1, 2, 3, 4, 3), 4, (2, 3, 3), (2, 1, 2), (1, 2, 1), (1, 0, 1), (1, 0, 0), 2),
]


@pytest.mark.parametrize("shape,k_out,kernel,stride,dil,pad,out_pad,groups", DECONV_CASES)
def test_deconvolution_matches_torch(shape: tuple[int, ...], k_out: int, kernel: tuple[int, ...],
                                     stride: tuple[int, ...], dil: tuple[int, ...], pad: tuple[int, ...],
                                     out_pad: tuple[int, ...], groups: int) -> None:
    # torch's padding p trims p at both ends and output_padding adds back at the end: TensorRT's
    # pre_padding = p, post_padding = p - output_padding.
    x = rand(*shape)
    w = rand(shape[1], k_out // groups, *kernel, seed=1)
    b = rand(k_out, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_deconvolution_nd(t, k_out, kernel, w.numpy(), b.numpy())
        layer.stride_nd = stride
        layer.dilation_nd = dil
        layer.pre_padding = pad
        layer.post_padding = tuple(p - o for p, o in zip(pad, out_pad, strict=True))
        layer.num_groups = groups
        assert layer.type == trt.LayerType.DECONVOLUTION
        return layer.get_output(0)

    deconv = F.conv_transpose2d if len(kernel) == 2 else F.conv_transpose3d
    ref = deconv(x, w, b, stride, pad, out_pad, groups, dil)
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_deconvolution_same_modes(mode: str) -> None:
    size, k, s = 5, 4, 2
    x, w = rand(1, 2, size, size), rand(2, 3, k, k, seed=1)
    full = F.conv_transpose2d(x, w, None, s)  # (I - 1) * S + K
    total = max(k - s, 0)
    small, big = total // 2, total - total // 2
    before = small if mode == "SAME_UPPER" else big
    out = min(size * s, (size - 1) * s + k)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_deconvolution_nd(t, 3, (k, k), w.numpy())
        layer.stride_nd = (s, s)
        layer.padding_mode = getattr(trt.PaddingMode, mode)
        return layer.get_output(0)

    ref = full[..., before:before + out, before:before + out]
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_deconvolution_refuses_negative_padding() -> None:
    net = Net()
    layer = net.network.add_deconvolution_nd(net.input("x", (1, 1, 4, 4)), 1, (3, 3), np.ones((1, 1, 3, 3), np.float32))
    layer.pre_padding = (-1, 0)
    assert net.build_fails(layer.get_output(0))


def test_deconvolution_kernel_as_tensor() -> None:
    x, w = rand(1, 2, 4, 4), rand(2, 3, 3, 3, seed=1)
    net = Net()
    layer = net.network.add_deconvolution_nd(net.input("x", x.shape), 3, (3, 3), trt.Weights())
    layer.set_input(1, net.const(w))
    got = infer(net.build(layer.get_output(0)), {"x": x})[0]
    torch.testing.assert_close(got, F.conv_transpose2d(x, w), **F32)


# ------------------------------------------------------------------------------ pooling
@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.usefixtures("both_paths")
def test_max_pooling_matches_torch(nd: int, ceil: bool) -> None:
    shape = (2, 3, 9, 10) if nd == 2 else (1, 2, 7, 8, 9)
    win, stride, pad = (3,) * nd, (2,) * nd, (1,) * nd
    x = rand(*shape)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_pooling_nd(t, trt.PoolingType.MAX, win)
        layer.stride_nd = stride
        layer.padding_nd = pad
        if ceil:
            layer.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        assert layer.type == trt.PoolingType.MAX  # IPoolingLayer.type is the pooling type, as in TensorRT
        return layer.get_output(0)

    pool = F.max_pool2d if nd == 2 else F.max_pool3d
    torch.testing.assert_close(run1(build, x), pool(x, win, stride, pad, ceil_mode=ceil), **F32)


@pytest.mark.parametrize("exclude", [True, False])
@pytest.mark.parametrize("ceil", [False, True])
@pytest.mark.parametrize("nd", [2, 3])
@pytest.mark.usefixtures("both_paths")
def test_average_pooling_matches_torch(nd: int, ceil: bool, exclude: bool) -> None:
    # average_count_excludes_padding <-> count_include_pad=False; with ceil mode torch also divides
    # by the overlap with the padded input, as TensorRT documents.
    shape = (2, 3, 8, 9) if nd == 2 else (1, 2, 6, 7, 8)
    win, stride, pad = (3,) * nd, (2,) * nd, (1,) * nd
    x = rand(*shape)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_pooling_nd(t, trt.PoolingType.AVERAGE, win)
        assert layer.average_count_excludes_padding is True  # TensorRT's default
        layer.stride_nd = stride
        layer.padding_nd = pad
        layer.average_count_excludes_padding = exclude
        if ceil:
            layer.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
        return layer.get_output(0)

    pool = F.avg_pool2d if nd == 2 else F.avg_pool3d
    ref = pool(x, win, stride, pad, ceil_mode=ceil, count_include_pad=not exclude)
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.parametrize("exclude", [False, True])
@pytest.mark.usefixtures("both_paths")
def test_average_pooling_round_up_overhang_is_not_padding(exclude: bool) -> None:
    """EXPLICIT_ROUND_UP: O = ceil((M - F) / S) + 1 with M = I + pre + post; the last window may reach
    past M, and that part is neither input nor padding: an average counting padding must not count it."""
    x = torch.arange(1.0, 8.0).reshape(1, 1, 1, 7)
    for pre, post in ((1, 0), (0, 0), (1, 1), (2, 0)):
        def build(net: Net, t: Any, pre: int = pre, post: int = post) -> Any:
            layer = net.network.add_pooling_nd(t, trt.PoolingType.AVERAGE, (1, 3))
            layer.stride_nd, layer.pre_padding, layer.post_padding = (1, 2), (0, pre), (0, post)
            layer.padding_mode = trt.PaddingMode.EXPLICIT_ROUND_UP
            layer.average_count_excludes_padding = exclude
            return layer.get_output(0)

        vals = x.flatten().tolist()
        m = len(vals) + pre + post
        want = []
        for o in range(-(-(m - 3) // 2) + 1):
            cells = [c for c in range(o * 2 - pre, o * 2 - pre + 3) if c < len(vals) + post]  # within M
            data = [vals[c] for c in cells if 0 <= c < len(vals)]
            want.append(sum(data) / (len(data) if exclude else len(cells)))
        got = run1(build, x).flatten().tolist()
        assert got == pytest.approx(want, rel=1e-6), (pre, post, got, want)


@pytest.mark.usefixtures("both_paths")
def test_pooling_defaults_stride_one_no_padding() -> None:
    x = rand(1, 2, 6, 9)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_pooling_nd(t, trt.PoolingType.MAX, (2, 2))
        assert tuple(layer.stride_nd) == (1, 1) and tuple(layer.padding_nd) == (0, 0)
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), F.max_pool2d(x, 2, 1), **F32)


@pytest.mark.parametrize("mode", ["SAME_UPPER", "SAME_LOWER"])
def test_average_pooling_same_mode_counts_padding(mode: str) -> None:
    x = rand(1, 2, 7, 7)
    # I=7, S=2, F=4: O = 4, P = 3 * 2 + 4 - 7 = 3
    before, after = (1, 2) if mode == "SAME_UPPER" else (2, 1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_pooling_nd(t, trt.PoolingType.AVERAGE, (4, 4))
        layer.stride_nd = (2, 2)
        layer.padding_mode = getattr(trt.PaddingMode, mode)
        layer.average_count_excludes_padding = False
        return layer.get_output(0)

    ref = F.avg_pool2d(F.pad(x, (before, after, before, after)), 4, 2)
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.usefixtures("both_paths")
def test_max_average_blend() -> None:
    x = rand(1, 3, 8, 8)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_pooling_nd(t, trt.PoolingType.MAX_AVERAGE_BLEND, (2, 2))
        layer.stride_nd = (2, 2)
        layer.blend_factor = 0.25
        return layer.get_output(0)

    ref = 0.75 * F.max_pool2d(x, 2, 2) + 0.25 * F.avg_pool2d(x, 2, 2)
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.usefixtures("both_paths")
def test_pooling_dynamic_shapes() -> None:
    net = Net()
    t = net.input("x", (-1, 2, -1, -1))
    net.dynamic("x", (1, 2, 4, 4), (1, 2, 8, 8), (3, 2, 20, 20))
    layer = net.network.add_pooling_nd(t, trt.PoolingType.AVERAGE, (3, 3))
    layer.stride_nd = (2, 2)
    layer.padding_nd = (1, 1)
    assert tuple(layer.get_output(0).shape) == (-1, 2, -1, -1)
    engine = net.build(layer.get_output(0))
    for shape in [(1, 2, 4, 5), (3, 2, 19, 20)]:
        x = rand(*shape)
        torch.testing.assert_close(infer(engine, {"x": x})[0], F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                                   **F32)


def test_pooling_refusals() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="2 or 3"):
        net.network.add_pooling_nd(net.input("a", (1, 1, 5)), trt.PoolingType.MAX, (2,))
    with pytest.raises(NetworkDefinitionError, match="rank"):
        net.network.add_pooling_nd(net.input("b", (2, 5, 5)), trt.PoolingType.MAX, (2, 2))
    with pytest.raises(NetworkDefinitionError, match="FLOAT"):
        net.network.add_pooling_nd(net.input("c", (1, 1, 5, 5), trt.int32), trt.PoolingType.MAX, (2, 2))
    small = net.network.add_pooling_nd(net.input("d", (1, 1, 2, 2)), trt.PoolingType.MAX, (3, 3))
    assert net.build_fails(small.get_output(0))  # window larger than the (unpadded) input
    net = Net()
    padded = net.network.add_pooling_nd(net.input("e", (1, 1, 2, 2)), trt.PoolingType.MAX, (3, 3))
    padded.padding_nd = (1, 1)  # valid once padded: checked when built, not when added
    assert tuple(padded.get_output(0).shape) == (1, 1, 2, 2)


# -------------------------------------------------------------------------------- scale
@pytest.mark.parametrize("mode", ["UNIFORM", "CHANNEL", "ELEMENTWISE"])
def test_scale_modes(mode: str) -> None:
    x = rand(2, 3, 4, 5).abs() + 0.5
    shape = {"UNIFORM": (1,), "CHANNEL": (3,), "ELEMENTWISE": (3, 4, 5)}[mode]
    bshape = {"UNIFORM": (1, 1, 1, 1), "CHANNEL": (1, 3, 1, 1), "ELEMENTWISE": (1, 3, 4, 5)}[mode]
    shift, scale, power = rand(*shape, seed=1).abs(), rand(*shape, seed=2).abs(), rand(*shape, seed=3) * 0.5 + 1

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_scale(t, getattr(trt.ScaleMode, mode), shift.numpy(), scale.numpy(), power.numpy())
        assert layer.type == trt.LayerType.SCALE and layer.channel_axis == 1
        return layer.get_output(0)

    ref = torch.pow(x * scale.reshape(bshape) + shift.reshape(bshape), power.reshape(bshape))
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_scale_empty_weights_use_defaults() -> None:
    x = rand(1, 2, 3, 4)

    def build(net: Net, t: Any) -> Any:
        return net.network.add_scale(t, trt.ScaleMode.CHANNEL, None, np.array([2.0, -1.0], np.float32)).get_output(0)

    torch.testing.assert_close(run1(build, x), x * torch.tensor([2.0, -1.0]).reshape(1, 2, 1, 1), **F32)


def test_scale_nd_channel_axis() -> None:
    x = rand(2, 3, 4, 5, 6)
    shift = rand(4, seed=1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_scale_nd(t, trt.ScaleMode.CHANNEL, shift.numpy(), None, None, 2)
        assert layer.channel_axis == 2
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), x + shift.reshape(1, 1, 4, 1, 1), **F32)
    with pytest.raises(TypeError):
        Net().network.add_scale_nd(None, trt.ScaleMode.CHANNEL, None, None, None)


def test_scale_channel_is_third_to_last_dim() -> None:
    # TensorRT's add_scale takes the channel axis nbDims - 3 (measured on the TensorRT-RTX 1.7
    # builder for ranks 4 to 6): D of [N, C, D, H, W], not C
    x = rand(2, 3, 4, 5, 6)
    shift = rand(4, seed=1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_scale(t, trt.ScaleMode.CHANNEL, shift.numpy())
        assert layer.channel_axis == 2
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), x + shift.reshape(1, 1, 4, 1, 1), **F32)
    net = Net()
    layer = net.network.add_scale(net.input("x", (2, 3, 4, 5, 6, 7)), trt.ScaleMode.CHANNEL, np.ones(3, np.float32))
    assert layer.channel_axis == 3
    assert net.build_fails(layer.get_output(0))  # 3 shift values: one per C, but the channel is dim 3 (5 of them)


def test_scale_int8_output_rounds_half_to_even_and_clamps() -> None:
    x = torch.tensor([0.5, 1.5, 2.5, -2.5, 300.0, -300.0, 1.2, -0.7]).reshape(1, 2, 2, 2)
    net = Net()
    layer = net.network.add_scale(net.input("x", x.shape), trt.ScaleMode.UNIFORM, None,
                                  np.array([1.0], np.float32))
    layer.set_output_type(0, trt.int8)
    out = layer.get_output(0)
    assert out.dtype == trt.int8
    got = infer(net.build(out), {"x": x})[0]
    assert torch.equal(got, torch.round(x).clamp(-128, 127).to(torch.int8))


def test_scale_refusals() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="at least 4"):
        net.network.add_scale(net.input("a", (2, 3, 4)), trt.ScaleMode.UNIFORM, np.ones(1, np.float32))
    layer = net.network.add_scale(net.input("b", (1, 3, 2, 2)), trt.ScaleMode.CHANNEL, np.ones(2, np.float32))
    assert net.build_fails(layer.get_output(0))  # 2 shift values for 3 channels


# ---------------------------------------------------------------------------------- LRN
@pytest.mark.parametrize("window", [1, 3, 5])
def test_lrn_matches_torch(window: int) -> None:
    x = rand(2, 7, 4, 5)
    alpha, beta, k = 0.3, 0.75, 1.5

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_lrn(t, window, alpha, beta, k)
        assert layer.type == trt.LayerType.LRN and layer.window_size == window
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), F.local_response_norm(x, window, alpha, beta, k), **F32)


@pytest.mark.parametrize("bad", [{"window": 4}, {"window": 17}, {"beta": 0.0}, {"k": 0.0}])
def test_lrn_refusals(bad: dict[str, float]) -> None:
    args = {"window": 3, "alpha": 1.0, "beta": 0.5, "k": 1.0} | bad
    net = Net()
    with pytest.raises(NetworkDefinitionError):
        net.network.add_lrn(net.input("x", (1, 4, 3, 3)), args["window"], args["alpha"], args["beta"], args["k"])


@pytest.mark.parametrize("shape", [(1, 4, 3), (2, 4)])
def test_lrn_refuses_fewer_than_4_dims(shape: tuple[int, ...]) -> None:
    # TensorRT: "at least 4 dimensions are required for input" (from add_lrn's shape check)
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="at least 4 dimensions"):
        net.network.add_lrn(net.input("x", shape), 3, 1.0, 0.5, 1.0)


# ------------------------------------------------------------------------ normalization
def _norm(net: Net, t: Any, s: torch.Tensor, b: torch.Tensor, axes: int, v2: bool = True) -> Any:
    add = net.network.add_normalization_v2 if v2 else net.network.add_normalization
    return add(t, net.const(s), net.const(b), axes)


def test_layer_normalization() -> None:
    x = rand(2, 3, 4, 5) * 3 + 1
    s, b = rand(1, 1, 4, 5, seed=1), rand(1, 1, 4, 5, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = _norm(net, t, s, b, 0b1100)
        assert layer.type == trt.LayerType.NORMALIZATION and layer.is_v2 and layer.num_groups == 1
        assert layer.epsilon == pytest.approx(1e-5)
        return layer.get_output(0)

    ref = F.layer_norm(x, (4, 5), s.reshape(4, 5), b.reshape(4, 5), 1e-5)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_instance_normalization() -> None:
    x = rand(2, 3, 4, 5) * 2
    s, b = rand(1, 3, 1, 1, seed=1), rand(1, 3, 1, 1, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = _norm(net, t, s, b, 0b1100, v2=False)
        layer.epsilon = 1e-3
        assert not layer.is_v2
        return layer.get_output(0)

    ref = F.instance_norm(x, weight=s.reshape(3), bias=b.reshape(3), eps=1e-3)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_group_normalization_v2_per_channel_scale() -> None:
    x = rand(2, 6, 3, 4)
    s, b = rand(1, 6, 1, 1, seed=1), rand(1, 6, 1, 1, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = _norm(net, t, s, b, 0b1100)
        layer.num_groups = 3
        return layer.get_output(0)

    ref = F.group_norm(x, 3, s.reshape(6), b.reshape(6), 1e-5)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_group_normalization_v1_per_group_scale() -> None:
    # The original add_normalization takes group norm scale/bias per group: [1, G, 1, ...].
    x = rand(2, 6, 3, 4)
    s, b = rand(1, 3, 1, 1, seed=1), rand(1, 3, 1, 1, seed=2)

    def build(net: Net, t: Any) -> Any:
        layer = _norm(net, t, s, b, 0b1100, v2=False)
        layer.num_groups = 3
        return layer.get_output(0)

    ref = F.group_norm(x, 3, s.reshape(3).repeat_interleave(2), b.reshape(3).repeat_interleave(2), 1e-5)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_normalization_half_compute_precision_rounds_to_fp16() -> None:
    x = rand(1, 2, 3, 8) * 4
    one, zero = torch.ones(1, 1, 1, 8), torch.zeros(1, 1, 1, 8)

    def build(net: Net, t: Any) -> Any:
        layer = _norm(net, t, one, zero, 0b1000)
        assert layer.compute_precision == trt.float32
        layer.compute_precision = trt.float16
        return layer.get_output(0)

    got = run1(build, x)
    assert got.dtype == torch.float32
    ref = F.layer_norm(x.half().float(), (8,))
    torch.testing.assert_close(got, ref, rtol=1e-3, atol=1e-3)
    assert torch.equal(got, got.half().float())  # values are fp16 values


def test_normalization_version_surface() -> None:
    assert not hasattr(api("10.13").INetworkDefinition, "add_normalization_v2")
    net11 = Net(api("11.1"))
    one = np.ones((1, 1, 1, 4), np.float32)
    layer = net11.network.add_normalization_v2(net11.input("x", (1, 1, 2, 4)), net11.const(one),
                                               net11.const(one * 0), 0b1000)
    with pytest.raises(AttributeError):
        layer.compute_precision  # noqa: B018 - removed in TensorRT 11
    assert layer.is_v2


def test_normalization_refusals() -> None:
    net = Net()
    x = net.input("x", (1, 6, 3, 3))
    s3, b3 = torch.ones(1, 3, 1, 1), torch.zeros(1, 3, 1, 1)
    layer = _norm(net, x, s3, b3, 0b1100)  # v2: per-channel scale needed once grouped
    layer.num_groups = 3
    assert net.build_fails(layer.get_output(0))
    net = Net()
    x = net.input("x", (1, 6, 3, 3))
    layer = _norm(net, x, torch.ones(1, 6, 1, 1), torch.zeros(1, 6, 1, 1), 0b1000)
    layer.num_groups = 3  # grouped normalization must reduce over every axis after C
    assert net.build_fails(layer.get_output(0))
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="axes"):
        _norm(net, net.input("x", (1, 6, 3, 3)), torch.ones(1, 6, 1, 1), torch.zeros(1, 6, 1, 1), 1 << 4)
    with pytest.raises(NetworkDefinitionError, match="rank"):
        _norm(net, net.input("y", (1, 6, 3, 3)), torch.ones(6, 1, 1), torch.zeros(6, 1, 1), 0b1100)
    net = Net()
    layer = _norm(net, net.input("x", (1, 6, 3, 3)), torch.ones(1, 5, 1, 1), torch.zeros(1, 5, 1, 1), 0b1100)
    assert net.build_fails(layer.get_output(0))  # [1, 5, 1, 1] does not broadcast to 6 channels


# ------------------------------------------------------------------------------- resize
def _resize(net: Net, t: Any, **attrs: Any) -> Any:
    layer = net.network.add_resize(t)
    for k, v in attrs.items():
        setattr(layer, k, v)
    return layer.get_output(0)


@pytest.mark.usefixtures("both_paths")
def test_resize_default_nearest_asymmetric_floor_matches_torch() -> None:
    x = rand(2, 3, 4, 5)
    got = run1(lambda net, t: _resize(net, t, shape=(2, 3, 7, 13)), x)
    torch.testing.assert_close(got, F.interpolate(x, size=(7, 13), mode="nearest"), rtol=0, atol=0)


@pytest.mark.usefixtures("both_paths")
def test_resize_nearest_half_pixel_half_up_is_nearest_exact() -> None:
    x = rand(1, 2, 5, 7)
    got = run1(lambda net, t: _resize(net, t, shape=(1, 2, 9, 4),
                                      coordinate_transformation=trt.ResizeCoordinateTransformation.HALF_PIXEL,
                                      nearest_rounding=trt.ResizeRoundMode.HALF_UP), x)
    torch.testing.assert_close(got, F.interpolate(x, size=(9, 4), mode="nearest-exact"), rtol=0, atol=0)


def _nearest_reference(x: np.ndarray, out: tuple[int, int], ct: str, rounding: str) -> np.ndarray:
    """TensorRT's documented nearest resize, pixel by pixel, on the last two axes."""
    h, w = x.shape[-2:]
    res = np.zeros((*x.shape[:-2], *out), x.dtype)
    for oy in range(out[0]):
        for ox in range(out[1]):
            idx = []
            for o, n_in, n_out in ((oy, h, out[0]), (ox, w, out[1])):
                if ct == "ALIGN_CORNERS":
                    src = o * (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
                elif ct == "HALF_PIXEL":
                    src = (o + 0.5) * n_in / n_out - 0.5
                else:
                    src = o * n_in / n_out
                r = {"FLOOR": math.floor(src), "CEIL": math.ceil(src),
                     "HALF_UP": math.floor(src + 0.5), "HALF_DOWN": math.ceil(src - 0.5)}[rounding]
                idx.append(min(max(r, 0), n_in - 1))
            res[..., oy, ox] = x[..., idx[0], idx[1]]
    return res


@pytest.mark.parametrize("sizes", [(14, 46), (26, 22), (30, 58), (4, 41), (6, 3), (5, 20), (7, 14), (6, 18)])
@pytest.mark.usefixtures("both_paths")
def test_resize_nearest_exact_source_coordinates(sizes: tuple[int, int]) -> None:
    """Source coordinates that are exact integers or .5 ties (23 * 14 / 46 = 7, (20 + 0.5) * 4 / 41 - 0.5
    = 1.5) must round as the rational formula says; a float32 scale puts them just below."""
    n_in, n_out = sizes
    x = torch.arange(float(2 * n_in)).reshape(1, 1, 2, n_in)
    for ct, rounding in (("ASYMMETRIC", "FLOOR"), ("HALF_PIXEL", "HALF_UP")):
        got = run1(lambda net, t, ct=ct, rounding=rounding: _resize(
            net, t, shape=(1, 1, 2, n_out), coordinate_transformation=getattr(trt.ResizeCoordinateTransformation, ct),
            nearest_rounding=getattr(trt.ResizeRoundMode, rounding)), x)
        np.testing.assert_array_equal(got.numpy(), _nearest_reference(x.numpy(), (2, n_out), ct, rounding))


@pytest.mark.parametrize("rounding", ["FLOOR", "CEIL", "HALF_UP", "HALF_DOWN"])
@pytest.mark.parametrize("ct", ["ASYMMETRIC", "HALF_PIXEL", "ALIGN_CORNERS"])
def test_resize_nearest_rounding_modes(ct: str, rounding: str) -> None:
    x = rand(1, 2, 4, 6)
    got = run1(lambda net, t: _resize(net, t, shape=(1, 2, 10, 3),
                                      coordinate_transformation=getattr(trt.ResizeCoordinateTransformation, ct),
                                      nearest_rounding=getattr(trt.ResizeRoundMode, rounding)), x)
    np.testing.assert_array_equal(got.numpy(), _nearest_reference(x.numpy(), (10, 3), ct, rounding))


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.usefixtures("both_paths")
def test_resize_linear_matches_torch(nd: int, align: bool) -> None:
    shape = {1: (2, 3, 7), 2: (2, 3, 5, 6), 3: (1, 2, 3, 4, 5)}[nd]
    size = {1: (12,), 2: (9, 4), 3: (5, 7, 3)}[nd]
    x = rand(*shape)
    ct = trt.ResizeCoordinateTransformation.ALIGN_CORNERS if align else trt.ResizeCoordinateTransformation.HALF_PIXEL
    got = run1(lambda net, t: _resize(net, t, shape=(*shape[:2], *size), resize_mode=trt.InterpolationMode.LINEAR,
                                      coordinate_transformation=ct), x)
    mode = {1: "linear", 2: "bilinear", 3: "trilinear"}[nd]
    torch.testing.assert_close(got, F.interpolate(x, size=size, mode=mode, align_corners=align), **F32)


@pytest.mark.parametrize("align", [True, False])
@pytest.mark.usefixtures("both_paths")
def test_resize_cubic_matches_torch_bicubic(align: bool) -> None:
    # torch's bicubic uses A = -0.75 (TensorRT's default cubic_coeff) and clamps neighbours to the edge.
    x = rand(2, 3, 6, 7)
    ct = trt.ResizeCoordinateTransformation.ALIGN_CORNERS if align else trt.ResizeCoordinateTransformation.HALF_PIXEL

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_resize(t)
        assert layer.cubic_coeff == pytest.approx(-0.75) and not layer.exclude_outside
        layer.shape = (2, 3, 11, 5)
        layer.resize_mode = trt.InterpolationMode.CUBIC
        layer.coordinate_transformation = ct
        return layer.get_output(0)

    ref = F.interpolate(x, size=(11, 5), mode="bicubic", align_corners=align)
    torch.testing.assert_close(run1(build, x), ref, **F32)


def _cubic_reference(x: np.ndarray, out: tuple[int, int], a: float, exclude: bool) -> np.ndarray:
    """Half-pixel bicubic from the documented weight function, pixel by pixel, in float64."""

    def weight(d: float) -> float:
        d = abs(d)
        if d <= 1:
            return ((a + 2) * d - (a + 3)) * d * d + 1
        if d < 2:
            return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
        return 0.0

    def taps(o: int, n_in: int, n_out: int) -> list[tuple[int, float]]:
        src = (o + 0.5) * n_in / n_out - 0.5
        base = math.floor(src)
        res = [(base + k, weight(src - (base + k))) for k in (-1, 0, 1, 2)]
        if exclude:
            res = [(i, w if 0 <= i < n_in else 0.0) for i, w in res]
            total = sum(w for _, w in res)
            res = [(i, w / total) for i, w in res]
        return [(min(max(i, 0), n_in - 1), w) for i, w in res]

    h, w_ = x.shape[-2:]
    res = np.zeros((*x.shape[:-2], *out))
    for oy in range(out[0]):
        for ox in range(out[1]):
            for iy, wy in taps(oy, h, out[0]):
                for ix, wx in taps(ox, w_, out[1]):
                    res[..., oy, ox] += wy * wx * x[..., iy, ix]
    return res


@pytest.mark.parametrize("exclude", [False, True])
def test_resize_cubic_coeff_and_exclude_outside(exclude: bool) -> None:
    x = rand(1, 2, 5, 6)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_resize(t)
        layer.shape = (1, 2, 8, 4)
        layer.resize_mode = trt.InterpolationMode.CUBIC
        layer.coordinate_transformation = trt.ResizeCoordinateTransformation.HALF_PIXEL
        layer.cubic_coeff = -0.5
        layer.exclude_outside = exclude
        return layer.get_output(0)

    ref = torch.from_numpy(_cubic_reference(x.numpy().astype(np.float64), (8, 4), -0.5, exclude)).float()
    torch.testing.assert_close(run1(build, x), ref, **F32)


@pytest.mark.parametrize("selector", ["FORMULA", "UPPER"])
@pytest.mark.usefixtures("both_paths")
def test_resize_single_pixel_selector(selector: str) -> None:
    x = rand(1, 2, 4, 6)
    got = run1(lambda net, t: _resize(net, t, shape=(1, 2, 1, 1), resize_mode=trt.InterpolationMode.LINEAR,
                                      coordinate_transformation=trt.ResizeCoordinateTransformation.HALF_PIXEL,
                                      selector_for_single_pixel=getattr(trt.ResizeSelector, selector)), x)
    if selector == "UPPER":
        ref = x[..., :1, :1]
    else:  # the formula samples the centre, like torch's half-pixel bilinear
        ref = F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=False)
    torch.testing.assert_close(got, ref, **F32)


@pytest.mark.parametrize("mode,tmode", [("NEAREST", "nearest"), ("LINEAR", "bilinear")])
@pytest.mark.usefixtures("both_paths")
def test_resize_scales(mode: str, tmode: str) -> None:
    # Output size floor(in * scale); coordinates use the given scale (torch: scale_factor without
    # recompute_scale_factor).
    x = rand(1, 2, 5, 6)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_resize(t)
        layer.scales = [1.0, 1.0, 1.5, 2.5]
        assert layer.scales == [1.0, 1.0, 1.5, 2.5]
        layer.resize_mode = getattr(trt.InterpolationMode, mode)
        if mode == "LINEAR":
            layer.coordinate_transformation = trt.ResizeCoordinateTransformation.HALF_PIXEL
        return layer.get_output(0)

    kw = {"align_corners": False} if mode == "LINEAR" else {}
    ref = F.interpolate(x, scale_factor=(1.5, 2.5), mode=tmode, **kw)
    got = run1(build, x)
    assert got.shape == (1, 2, 7, 15)
    torch.testing.assert_close(got, ref, **F32)


@pytest.mark.usefixtures("both_paths")
def test_resize_shape_from_tensor_and_dynamic_input() -> None:
    net = Net()
    t = net.input("x", (-1, 2, -1, -1))
    net.dynamic("x", (1, 2, 2, 2), (1, 2, 4, 4), (2, 2, 8, 8))
    layer = net.network.add_resize(t)
    layer.scales = [1, 1, 2, 3]
    layer.resize_mode = trt.InterpolationMode.LINEAR
    layer.coordinate_transformation = trt.ResizeCoordinateTransformation.ALIGN_CORNERS
    assert tuple(layer.get_output(0).shape) == (-1, 2, -1, -1)
    fixed = net.network.add_resize(t)
    fixed.set_input(1, net.const(np.array([2, 2, 3, 3], np.int32)))
    with pytest.raises(NetworkDefinitionError):
        fixed.shape = (1, 2, 3, 3)  # a dynamic resize layer takes its shape from input 1
    assert tuple(fixed.get_output(0).shape) == (2, 2, 3, 3)
    engine = net.build(layer.get_output(0), fixed.get_output(0))
    for shape in [(1, 2, 3, 2), (2, 2, 8, 5)]:
        x = rand(*shape)
        scaled, small = infer(engine, {"x": x})
        size = (shape[2] * 2, shape[3] * 3)
        torch.testing.assert_close(scaled, F.interpolate(x, size=size, mode="bilinear", align_corners=True), **F32)
        torch.testing.assert_close(small, F.interpolate(x, size=(3, 3), mode="nearest").expand(2, -1, -1, -1),
                                   rtol=0, atol=0)


@pytest.mark.usefixtures("both_paths")
def test_resize_shape_input_tensor() -> None:
    net = Net()
    t = net.input("x", (1, 2, 3, 4))
    shape_in = net.input("out_shape", (4,), trt.int32)
    net.shape_values("out_shape", (1, 2, 1, 1), (1, 2, 6, 8), (1, 2, 9, 12))
    layer = net.network.add_resize(t)
    layer.set_input(1, shape_in)
    assert tuple(layer.get_output(0).shape) == (-1, -1, -1, -1)
    engine = net.build(layer.get_output(0))
    assert engine.is_shape_inference_io("out_shape")
    x = rand(1, 2, 3, 4)
    got = infer(engine, {"x": x, "out_shape": torch.tensor([1, 2, 9, 5], dtype=torch.int32)})[0]
    torch.testing.assert_close(got, F.interpolate(x, size=(9, 5), mode="nearest"), rtol=0, atol=0)


def test_resize_refusals() -> None:
    net = Net()
    t = net.input("x", (1, 2, 3, 4, 5))
    linear = net.network.add_resize(t)
    linear.shape = (2, 3, 4, 5, 6)  # four axes change: LINEAR resizes at most three
    linear.resize_mode = trt.InterpolationMode.LINEAR
    assert net.build_fails(linear.get_output(0))
    net = Net()
    cubic = net.network.add_resize(net.input("x", (1, 2, 3, 4)))
    cubic.shape = (1, 4, 3, 4)  # cubic only resizes the two innermost axes
    cubic.resize_mode = trt.InterpolationMode.CUBIC
    assert net.build_fails(cubic.get_output(0))
    net = Net()
    wrong_rank = net.network.add_resize(net.input("x", (1, 2, 3, 4)))
    wrong_rank.shape = (2, 6, 8)
    assert net.build_fails(wrong_rank.get_output(0))
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="LINEAR"):
        layer = net.network.add_resize(net.input("x", (1, 2, 3, 4), trt.int32))
        layer.resize_mode = trt.InterpolationMode.LINEAR
        layer.get_output(0).shape  # noqa: B018 - runs the check


# ------------------------------------------------------------------------------ padding
@pytest.mark.parametrize("pre,post", [((1, 2), (3, 0)), ((-1, 0), (0, -2)), ((2, -1), (-1, 3))])
def test_padding_matches_torch(pre: tuple[int, int], post: tuple[int, int]) -> None:
    x = rand(2, 3, 4, 5)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_padding_nd(t, pre, post)
        assert layer.type == trt.LayerType.PADDING and tuple(layer.pre_padding_nd) == pre
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), F.pad(x, (pre[1], post[1], pre[0], post[0])), rtol=0, atol=0)


def test_padding_refusals() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="at least 4"):
        net.network.add_padding_nd(net.input("a", (3, 4, 5)), (1, 1), (1, 1))
    with pytest.raises(NetworkDefinitionError, match="2D"):
        net.network.add_padding_nd(net.input("b", (1, 3, 4, 5)), (1, 1, 1), (1, 1, 1))
    with pytest.raises(NetworkDefinitionError, match="crops"):
        net.network.add_padding_nd(net.input("c", (1, 3, 4, 5)), (-3, 0), (-2, 0))
    with pytest.raises(NetworkDefinitionError, match="FLOAT"):
        net.network.add_padding_nd(net.input("d", (1, 3, 4, 5), trt.bool), (1, 1), (1, 1))


# ---------------------------------------------------------------------- parametric relu
@pytest.mark.parametrize("slope_shape", [(1, 3, 1, 1), (1, 1, 1, 1), (2, 3, 4, 5), (1, 3, 4, 1)])
def test_parametric_relu_matches_torch(slope_shape: tuple[int, ...]) -> None:
    x, slopes = rand(2, 3, 4, 5), rand(*slope_shape, seed=1)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_parametric_relu(t, net.const(slopes))
        assert layer.type == trt.LayerType.PARAMETRIC_RELU
        return layer.get_output(0)

    ref = torch.where(x >= 0, x, x * slopes)
    if slope_shape == (1, 3, 1, 1):
        ref = F.prelu(x, slopes.reshape(3))
    torch.testing.assert_close(run1(build, x), ref, **F32)


def test_parametric_relu_refusals() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="rank"):
        net.network.add_parametric_relu(net.input("a", (2, 3, 4)), net.const(np.ones(3, np.float32)))
    with pytest.raises(NetworkDefinitionError, match="broadcast"):
        net.network.add_parametric_relu(net.input("b", (2, 3, 4)), net.const(np.ones((1, 2, 1), np.float32)))


# -------------------------------------------------------------------------- grid sample
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("sample", [("FILL", "zeros"), ("CLAMP", "border"), ("REFLECT", "reflection")])
@pytest.mark.parametrize("interp", [("LINEAR", "bilinear"), ("NEAREST", "nearest"), ("CUBIC", "bicubic")])
def test_grid_sample_matches_torch(interp: tuple[str, str], sample: tuple[str, str], align: bool) -> None:
    x = rand(2, 3, 5, 6)
    grid = rand(2, 4, 7, 2, seed=1) * 0.8  # some points fall outside [-1, 1]
    net = Net()
    layer = net.network.add_grid_sample(net.input("x", x.shape), net.input("g", grid.shape))
    assert layer.interpolation_mode == trt.InterpolationMode.LINEAR and layer.sample_mode == trt.SampleMode.FILL
    assert layer.align_corners is False
    layer.interpolation_mode = getattr(trt.InterpolationMode, interp[0])
    layer.sample_mode = getattr(trt.SampleMode, sample[0])
    layer.align_corners = align
    got = infer(net.build(layer.get_output(0)), {"x": x, "g": grid})[0]
    ref = F.grid_sample(x, grid, mode=interp[1], padding_mode=sample[1], align_corners=align)
    torch.testing.assert_close(got, ref, **F32)


def test_grid_sample_unsupported_mode_is_ignored_and_rank_checked() -> None:
    net = Net()
    layer = net.network.add_grid_sample(net.input("x", (1, 1, 4, 4)), net.input("g", (1, 2, 2, 2)))
    layer.sample_mode = trt.SampleMode.WRAP  # TensorRT: setSampleMode returns false, mode unchanged
    assert layer.sample_mode == trt.SampleMode.FILL
    with pytest.raises(NetworkDefinitionError, match="rank 4"):
        net.network.add_grid_sample(net.input("y", (1, 4, 4)), net.input("h", (1, 2, 2, 2)))


# ------------------------------------------------------------------------------ general
def test_deferred_validation_allows_attributes_set_after_add() -> None:
    # TensorRT accepts add_* with settings that only become valid later (conformance case_group).
    x = rand(1, 4, 6, 6)
    w = rand(4, 2, 3, 3, seed=1)
    net = Net()
    layer = net.network.add_convolution_nd(net.input("x", x.shape), 4, (3, 3), w.numpy())  # groups=1: 72 != 144
    layer.num_groups = 2
    got = infer(net.build(layer.get_output(0)), {"x": x})[0]
    torch.testing.assert_close(got, F.conv2d(x, w, groups=2), **F32)


def test_default_layer_names_follow_tensorrt() -> None:
    net = Net()
    t = net.input("x", (1, 3, 2, 2))
    prelu = net.network.add_parametric_relu(t, net.const(np.ones((1, 3, 1, 1), np.float32)))
    assert prelu.name.endswith("[Parametric ReLU]")
    assert prelu.get_output(0).name == prelu.name + "_output"
    conv = net.network.add_convolution_nd(t, 1, (1, 1), np.ones(3, np.float32))
    assert conv.name.endswith("[Convolution]")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_layers_run_on_cuda() -> None:
    x = rand(2, 4, 9, 9)
    w = rand(4, 4, 3, 3, seed=1)
    net = Net()
    t = net.input("x", x.shape)
    conv = net.network.add_convolution_nd(t, 4, (3, 3), w.numpy())
    pool = net.network.add_pooling_nd(conv.get_output(0), trt.PoolingType.AVERAGE, (2, 2))
    pool.padding_nd = (1, 1)
    resize = net.network.add_resize(pool.get_output(0))
    resize.shape = (2, 4, 12, 12)
    resize.resize_mode = trt.InterpolationMode.CUBIC
    # NOTE: TensorRT's default transformation is ASYMMETRIC; torch's bicubic is HALF_PIXEL.
    resize.coordinate_transformation = trt.ResizeCoordinateTransformation.HALF_PIXEL
    norm = _norm(net, resize.get_output(0), torch.ones(1, 4, 1, 1), torch.zeros(1, 4, 1, 1), 0b1100)
    norm.num_groups = 2
    engine = net.build(norm.get_output(0))
    ctx = engine.create_execution_context()
    xc = x.cuda()
    out = torch.empty(2, 4, 12, 12, device="cuda")
    ctx.set_tensor_address("x", xc)
    ctx.set_tensor_address(norm.get_output(0).name, out)
    assert ctx.execute_async_v3(0)
    torch.cuda.synchronize()
    y = F.avg_pool2d(F.conv2d(x, w), 2, 1, 1, count_include_pad=False)
    y = F.group_norm(F.interpolate(y, size=(12, 12), mode="bicubic", align_corners=False), 2)
    torch.testing.assert_close(out.cpu(), y, rtol=1e-4, atol=1e-4)
