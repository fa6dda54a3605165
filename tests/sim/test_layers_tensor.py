"""The sim's tensor-manipulation and quantization layers (torch2trt_lite/sim/layers/tensor.py).

Each network is built, serialized with ``build_serialized_network``, deserialized with
``Runtime.deserialize_cuda_engine`` and run through an execution context, so every test also
round-trips its layers through a plan. References are plain torch / numpy computations of the
semantics TensorRT documents (torch.reshape/permute, slicing, torch.cat, torch.gather,
Tensor.scatter, torch.where, F.one_hot, torch.nonzero, ...) or, where torch has no twin (slice
sample modes, FP4 rounding, block scales), a direct element-by-element implementation of the
documented formula written here.

Tolerances: data movement (shuffle, slice, gather, scatter, select, concat, ...) and integer
results are compared exactly (``rtol=atol=0``); computed float32 values (fill ramps, quantization
scales, dequantized values) use rtol=1e-6, atol=1e-6.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import tests.sim.netbuilder as netbuilder
from tests.sim.netbuilder import Net
from torch2trt_lite.errors import NetworkDefinitionError
from torch2trt_lite.sim import api

trt = api("10.16")
EXACT = {"rtol": 0.0, "atol": 0.0}
F32 = {"rtol": 1e-6, "atol": 1e-6}
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
infer = functools.partial(netbuilder.infer, device=DEVICE)


# ------------------------------------------------------------------------------ helpers
def run1(build: Any, x: torch.Tensor) -> torch.Tensor:
    """One input 'x', one output: build with ``build(net, x_tensor)`` and run."""
    net = Net()
    dt = {torch.float32: trt.float32, torch.float16: trt.float16, torch.int32: trt.int32,
          torch.bool: trt.bool, torch.int64: trt.int64}[x.dtype]
    xt = net.input("x", x.shape, dt)
    engine = net.build(build(net, xt))
    return infer(engine, {"x": x})[0]


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def arange(*shape: int) -> torch.Tensor:
    return torch.arange(int(np.prod(shape)), dtype=torch.float32).reshape(shape)


# ------------------------------------------------------------------------------ shuffle
@pytest.mark.parametrize(
    ("shape", "first", "reshape", "second"),
    [
        ((1, 3, 4, 5), (0, 2, 1, 3), (1, 4, 5, 3), (0, 2, 1, 3)),
        ((2, 3, 4), (2, 0, 1), (4, -1), (1, 0)),
        ((2, 3, 4), None, (0, 0, 2, 2), None),
        ((6, 4), (1, 0), None, None),
        ((1, 1, 1), None, (), None),  # reshape to a scalar
    ],
)
def test_shuffle_matches_permute_reshape_permute(
    shape: tuple[int, ...], first: Any, reshape: Any, second: Any
) -> None:
    x = arange(*shape)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_shuffle(t)
        if first is not None:
            layer.first_transpose = first
        if reshape is not None:
            layer.reshape_dims = reshape
        if second is not None:
            layer.second_transpose = second
        return layer.get_output(0)

    ref = x.permute(first) if first is not None else x
    if reshape is not None:
        dims = [ref.shape[i] if d == 0 else d for i, d in enumerate(reshape)]
        ref = ref.reshape(dims)
    if second is not None:
        ref = ref.permute(second)
    torch.testing.assert_close(run1(build, x), ref, **EXACT)


def test_shuffle_attributes_and_defaults() -> None:
    net = Net()
    layer = net.network.add_shuffle(net.input("x", (2, 3)))
    assert tuple(layer.reshape_dims) == ()  # never set: TensorRT reports no dimensions
    assert tuple(layer.first_transpose) == tuple(range(8))
    assert layer.zero_is_placeholder is True
    layer.first_transpose = (1, 0)
    assert tuple(layer.first_transpose) == (1, 0, 0, 0, 0, 0, 0, 0)  # a TensorRT Permutation has 8 slots
    assert tuple(layer.get_output(0).shape) == (3, 2)
    assert layer.type == trt.LayerType.SHUFFLE


def test_shuffle_zero_is_placeholder_false_makes_empty_tensor() -> None:
    net = Net()
    x = net.input("x", (1, 3, 4, 5))
    empty = net.network.add_constant([0], np.zeros((0,), np.float32)).get_output(0)
    sh = net.network.add_shuffle(empty)
    sh.zero_is_placeholder = False
    sh.reshape_dims = (1, 3, 4, 0)
    assert tuple(sh.get_output(0).shape) == (1, 3, 4, 0)
    cat = net.network.add_concatenation([x, sh.get_output(0)])
    cat.axis = 3
    engine = net.build(cat.get_output(0))
    data = arange(1, 3, 4, 5)
    torch.testing.assert_close(infer(engine, {"x": data})[0], data, **EXACT)


def test_shuffle_dynamic_reshape_from_shape_input() -> None:
    net = Net()
    x = net.input("x", (2, 3, 4))
    dims = net.input("dims", (3,), trt.int32)
    net.shape_values("dims", (-1, -1, -1), (4, 3, 2), (24, 24, 24))
    layer = net.network.add_shuffle(x)
    layer.set_input(1, dims)
    assert tuple(layer.get_output(0).shape) == (-1, -1, -1)  # values unknown until run time
    engine = net.build(layer.get_output(0))
    assert engine.is_shape_inference_io("dims")
    data = arange(2, 3, 4)
    for target in ([4, 3, 2], [0, 3, 0], [-1, 1, 2]):
        got = infer(engine, {"x": data, "dims": torch.tensor(target, dtype=torch.int32)})[0]
        want = data.reshape([data.shape[i] if d == 0 else d for i, d in enumerate(target)])
        torch.testing.assert_close(got, want, **EXACT)


def test_shuffle_reshape_from_shape_of_dynamic_input() -> None:
    # shape(x) ++ [1] -> reshape x to (..., 1), then slice that shape back to restore x's shape.
    net = Net()
    x = net.input("x", (-1, 3, -1))
    net.dynamic("x", (1, 3, 1), (2, 3, 4), (8, 3, 8))
    shp = net.network.add_shape(x).get_output(0)
    assert shp.dtype == trt.int64
    cat = net.network.add_concatenation([shp, net.ints([1], np.int64)])
    cat.axis = 0
    up = net.network.add_shuffle(x)
    up.set_input(1, cat.get_output(0))
    assert tuple(up.get_output(0).shape) == (-1, 3, -1, 1)
    back_shape = net.network.add_slice(net.network.add_shape(up.get_output(0)).get_output(0), [0], [3], [1])
    down = net.network.add_shuffle(up.get_output(0))
    down.set_input(1, back_shape.get_output(0))
    engine = net.build(up.get_output(0), down.get_output(0))
    for shape in ((2, 3, 4), (5, 3, 1)):
        data = arange(*shape)
        a, b = infer(engine, {"x": data})
        torch.testing.assert_close(a, data.unsqueeze(-1), **EXACT)
        torch.testing.assert_close(b, data, **EXACT)


def test_shuffle_setting_reshape_dims_drops_the_dims_input() -> None:
    net = Net()
    x = net.input("x", (2, 6))
    layer = net.network.add_shuffle(x)
    layer.set_input(1, net.ints([3, 4]))
    assert layer.num_inputs == 2
    layer.reshape_dims = (4, 3)
    assert layer.num_inputs == 1
    engine = net.build(layer.get_output(0))
    data = arange(2, 6)
    torch.testing.assert_close(infer(engine, {"x": data})[0], data.reshape(4, 3), **EXACT)


@pytest.mark.parametrize(
    ("attr", "value"),
    [
        ("first_transpose", (0, 0, 1)),  # not a permutation
        ("reshape_dims", (-1, -1)),  # two inferred dims
        ("reshape_dims", (5, 5)),  # volume mismatch
        ("reshape_dims", (0, 0, 0, 0)),  # copies a dimension the input lacks
        ("second_transpose", (1, 1)),
    ],
)
def test_shuffle_refusals(attr: str, value: Any) -> None:
    net = Net()
    layer = net.network.add_shuffle(net.input("x", (2, 3, 4)))
    if attr == "second_transpose":
        layer.reshape_dims = (6, 4)
    setattr(layer, attr, value)
    with pytest.raises(NetworkDefinitionError):
        layer.get_output(0).shape  # noqa: B018 - shape inference validates the layer
    assert net.build_fails(layer.get_output(0))


# -------------------------------------------------------------------------------- slice
def _slice_ref(x: np.ndarray, start: Sequence[int], size: Sequence[int], stride: Sequence[int], mode: str,
               fill: float = 0.0) -> np.ndarray:
    """TensorRT's slice formula element by element: x_i = y_i * stride_i + start_i, per sample mode."""
    out = np.empty(size, dtype=x.dtype)
    for y in np.ndindex(*size):
        coord = []
        inside = True
        for i, yi in enumerate(y):
            c, d = yi * stride[i] + start[i], x.shape[i]
            if mode == "WRAP":
                c = c % d
            elif mode == "CLAMP":
                c = min(max(c, 0), d - 1)
            elif mode == "REFLECT":
                if d == 1:
                    c = 0
                else:
                    c = abs(c) % (2 * d - 2)
                    c = 2 * d - 2 - c if c >= d else c
            elif not 0 <= c < d:
                inside = False
            coord.append(c)
        out[y] = x[tuple(coord)] if inside else fill
    return out


@pytest.mark.parametrize(
    ("start", "size", "stride"),
    [
        ((0, 1, 1), (2, 2, 3), (1, 1, 1)),
        ((1, 0, 4), (1, 2, 3), (1, 2, -2)),  # negative stride
        ((2, 2, 0), (3, 1, 2), (-1, 1, 3)),
    ],
)
def test_slice_in_bounds_matches_reference(start: Any, size: Any, stride: Any) -> None:
    x = arange(3, 4, 5)

    def build(net: Net, t: Any) -> Any:
        return net.network.add_slice(t, start, size, stride).get_output(0)

    want = torch.from_numpy(_slice_ref(x.numpy(), start, size, stride, "STRICT_BOUNDS"))
    torch.testing.assert_close(run1(build, x), want, **EXACT)


def test_slice_positive_stride_matches_python_slicing() -> None:
    x = arange(4, 9)

    def build(net: Net, t: Any) -> Any:
        return net.network.add_slice(t, (1, 2), (2, 3), (2, 2)).get_output(0)

    torch.testing.assert_close(run1(build, x), x[1:4:2, 2:7:2], **EXACT)


@pytest.mark.parametrize("mode", ["WRAP", "CLAMP", "FILL", "REFLECT"])
def test_slice_sample_modes(mode: str) -> None:
    x = arange(3, 4)
    start, size, stride = (-2, 3), (7, 5), (1, -2)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_slice(t, start, size, stride)
        layer.mode = getattr(trt.SampleMode, mode)
        if mode == "FILL":
            layer.set_input(4, net.const(np.array([-7.5], np.float32)))
        return layer.get_output(0)

    want = torch.from_numpy(_slice_ref(x.numpy(), start, size, stride, mode, fill=-7.5))
    torch.testing.assert_close(run1(build, x), want, **EXACT)


def test_slice_fill_default_value_is_zero() -> None:
    x = arange(2, 3) + 1

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_slice(t, (0, 1), (3, 3), (1, 1))
        layer.mode = trt.SampleMode.FILL
        return layer.get_output(0)

    want = torch.from_numpy(_slice_ref(x.numpy(), (0, 1), (3, 3), (1, 1), "FILL"))
    torch.testing.assert_close(run1(build, x), want, **EXACT)


def test_slice_axes_attribute() -> None:
    x = arange(2, 5, 6)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_slice(t, (1, 4), (3, 2), (1, -2))
        layer.axes = (-1, 1)  # start/size/stride apply to axis 2 then axis 1
        return layer.get_output(0)

    want = torch.from_numpy(_slice_ref(x.numpy(), (0, 4, 1), (2, 2, 3), (1, -2, 1), "STRICT_BOUNDS"))
    torch.testing.assert_close(run1(build, x), want, **EXACT)


def test_slice_dynamic_parameters_from_shape_inputs() -> None:
    net = Net()
    x = net.input("x", (1, 3, 4, 5))
    names = ("start", "size", "stride")
    tensors = [net.input(n, (4,), trt.int32) for n in names]
    net.shape_values("start", (0, 0, 0, 0), (0, 1, 1, 1), (0, 2, 2, 2))
    net.shape_values("size", (1, 1, 1, 1), (1, 2, 3, 4), (1, 3, 4, 5))
    net.shape_values("stride", (1, 1, 1, 1), (1, 1, 1, 1), (1, 1, 1, 1))
    layer = net.network.add_slice(x, (0, 0, 0, 0), (0, 0, 0, 0), (0, 0, 0, 0))
    for k, t in enumerate(tensors, 1):
        layer.set_input(k, t)
    assert tuple(layer.get_output(0).shape) == (-1, -1, -1, -1)
    engine = net.build(layer.get_output(0))
    data = arange(1, 3, 4, 5)
    for st, sz in (([0, 1, 1, 0], [1, 2, 3, 4]), ([0, 0, 2, 1], [1, 3, 2, 3])):
        feeds = {"x": data, "start": torch.tensor(st, dtype=torch.int32),
                 "size": torch.tensor(sz, dtype=torch.int32), "stride": torch.ones(4, dtype=torch.int32)}
        got = infer(engine, feeds)[0]
        want = data[0:1, st[1]:st[1] + sz[1], st[2]:st[2] + sz[2], st[3]:st[3] + sz[3]]
        torch.testing.assert_close(got, want, **EXACT)


def test_slice_strict_bounds_refusal_and_parameter_lengths() -> None:
    net = Net()
    x = net.input("x", (3, 4))
    oob = net.network.add_slice(x, (0, 2), (3, 3), (1, 1))  # reads column 4 of 4
    with pytest.raises(NetworkDefinitionError, match="STRICT_BOUNDS"):
        oob.get_output(0).shape  # noqa: B018
    short = net.network.add_slice(x, (0,), (1,), (1,))  # rank 2 needs 2 entries
    with pytest.raises(NetworkDefinitionError, match="expected 2"):
        short.get_output(0).shape  # noqa: B018
    assert net.build_fails(oob.get_output(0))


def test_slice_strict_bounds_checked_at_run_time_for_dynamic_inputs() -> None:
    net = Net()
    x = net.input("x", (-1, 4))
    net.dynamic("x", (1, 4), (4, 4), (8, 4))
    engine = net.build(net.network.add_slice(x, (2, 0), (2, 4), (1, 1)).get_output(0))
    data = arange(5, 4)
    torch.testing.assert_close(infer(engine, {"x": data})[0], data[2:4], **EXACT)
    ctx = engine.create_execution_context()
    small = arange(3, 4)
    ctx.set_input_shape("x", (3, 4))
    ctx.set_tensor_address("x", small)
    ctx.set_tensor_address(engine.get_tensor_name(1), torch.empty(2, 4))
    assert ctx.execute_async_v3(0) is False


# ------------------------------------------------------------------------ concatenation
def test_concatenation_default_axis_and_values() -> None:
    net = Net()
    a, b = net.input("a", (2, 3, 4, 5)), net.input("b", (2, 1, 4, 5))
    layer = net.network.add_concatenation([a, b])
    assert layer.axis == 1  # TensorRT default: rank - 3
    small = net.network.add_concatenation([net.input("c", (2, 3)), net.input("d", (1, 3))])
    assert small.axis == 0  # fewer than three dimensions: 0
    engine = net.build(layer.get_output(0), small.get_output(0))
    ta, tb, tc, td = arange(2, 3, 4, 5), -arange(2, 1, 4, 5), arange(2, 3), -arange(1, 3)
    got = infer(engine, {"a": ta, "b": tb, "c": tc, "d": td})
    torch.testing.assert_close(got[0], torch.cat([ta, tb], 1), **EXACT)
    torch.testing.assert_close(got[1], torch.cat([tc, td], 0), **EXACT)


def test_concatenation_last_axis_three_inputs() -> None:
    x = arange(2, 3)

    def build(net: Net, t: Any) -> Any:
        layer = net.network.add_concatenation([t, net.const(np.ones((2, 1), np.float32)), t])
        layer.axis = 1
        return layer.get_output(0)

    torch.testing.assert_close(run1(build, x), torch.cat([x, torch.ones(2, 1), x], 1), **EXACT)


@pytest.mark.parametrize(("shape_b", "dtype_b"), [((2, 4), None), ((2,), None), ((2, 3), "int32")])
def test_concatenation_refusals(shape_b: tuple[int, ...], dtype_b: Any) -> None:
    net = Net()
    a = net.input("a", (2, 3))
    b = net.input("b", shape_b, getattr(trt, dtype_b) if dtype_b else None)
    layer = net.network.add_concatenation([a, b])
    with pytest.raises(NetworkDefinitionError):
        layer.get_output(0).shape  # noqa: B018
    assert net.build_fails(layer.get_output(0))


# ------------------------------------------------------------------------------- gather
def test_gather_default_mode_with_negative_indices() -> None:
    x = arange(2, 3, 4, 5)
    idx = torch.tensor([[1, 0, 2], [0, 0, -1]], dtype=torch.int32)
    net = Net()
    xt, it = net.input("x", x.shape), net.input("i", idx.shape, trt.int32)
    layer = net.network.add_gather(xt, it, 2)
    assert layer.mode == trt.GatherMode.DEFAULT and layer.axis == 2
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"x": x, "i": idx})[0]
    want = x.index_select(2, (idx.long() % 4).reshape(-1)).reshape(2, 3, 2, 3, 5)
    torch.testing.assert_close(got, want, **EXACT)


def test_gather_default_mode_one_elementwise_dim() -> None:
    x = arange(2, 3, 4, 5)
    idx = torch.tensor([[1, 0, 2], [0, 3, -1]], dtype=torch.int32)
    net = Net()
    layer = net.network.add_gather_v2(net.input("x", x.shape), net.input("i", idx.shape, trt.int32),
                                      trt.GatherMode.DEFAULT)
    layer.axis = 2
    layer.num_elementwise_dims = 1
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"x": x, "i": idx})[0]
    want = torch.empty(2, 3, 3, 5)
    for n in range(2):
        for j in range(3):
            for k in range(3):
                want[n, j, k] = x[n, j, int(idx[n, k]) % 4]
    torch.testing.assert_close(got, want, **EXACT)


def test_gather_element_mode_matches_torch_gather() -> None:
    x = rand(3, 4, 5)
    idx = torch.randint(0, 4, (3, 2, 5), generator=torch.Generator().manual_seed(1), dtype=torch.int32)
    net = Net()
    layer = net.network.add_gather_v2(net.input("x", x.shape), net.input("i", idx.shape, trt.int32),
                                      trt.GatherMode.ELEMENT)
    layer.axis = 1
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"x": x, "i": idx})[0]
    torch.testing.assert_close(got, torch.gather(x, 1, idx.long()), **EXACT)


@pytest.mark.parametrize("elementwise", [0, 1])
def test_gather_nd_mode(elementwise: int) -> None:
    x = arange(2, 3, 4, 5)
    idx = torch.tensor([[1, 0, 2], [0, 2, -1]], dtype=torch.int64)
    net = Net()
    layer = net.network.add_gather_v2(net.input("x", x.shape), net.input("i", idx.shape, trt.int64),
                                      trt.GatherMode.ND)
    layer.num_elementwise_dims = elementwise
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"x": x, "i": idx})[0]
    rows = []
    for r in range(2):
        coord = [int(c) for c in idx[r]]
        if elementwise:
            coord = [r] + [c % x.shape[1 + k] for k, c in enumerate(coord)]
        else:
            coord = [c % x.shape[k] for k, c in enumerate(coord)]
        rows.append(x[tuple(coord)])
    torch.testing.assert_close(got, torch.stack(rows), **EXACT)


def test_gather_refusals() -> None:
    net = Net()
    x = net.input("x", (3, 4))
    bad_type = net.network.add_gather(x, net.input("f", (2,)), 0)  # float indices
    with pytest.raises(NetworkDefinitionError, match="INT32 or INT64"):
        bad_type.get_output(0).shape  # noqa: B018
    bad_axis = net.network.add_gather(x, net.input("i", (2,), trt.int32), 2)
    with pytest.raises(NetworkDefinitionError, match="axis"):
        bad_axis.get_output(0).shape  # noqa: B018
    element = net.network.add_gather_v2(x, net.input("j", (2,), trt.int32), trt.GatherMode.ELEMENT)
    with pytest.raises(NetworkDefinitionError, match="rank"):
        element.get_output(0).shape  # noqa: B018


# ------------------------------------------------------------------------------ scatter
def test_scatter_element_mode_matches_tensor_scatter() -> None:
    data, upd = arange(2, 4, 3), -arange(2, 4, 3) - 1
    idx = torch.stack([torch.randperm(4, generator=torch.Generator().manual_seed(s)) for s in range(6)])
    idx = idx.reshape(2, 3, 4).transpose(1, 2).contiguous().int()  # a permutation along axis 1: no collisions
    net = Net()
    layer = net.network.add_scatter(net.input("d", data.shape), net.input("i", idx.shape, trt.int32),
                                    net.input("u", upd.shape), trt.ScatterMode.ELEMENT)
    layer.axis = 1
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"d": data, "i": idx, "u": upd})[0]
    torch.testing.assert_close(got, data.scatter(1, idx.long(), upd), **EXACT)


def test_scatter_nd_mode() -> None:
    data = arange(2, 3, 4)
    idx = torch.tensor([[0, 2], [1, 0], [1, -1]], dtype=torch.int32)
    upd = -arange(3, 4) - 1
    net = Net()
    layer = net.network.add_scatter(net.input("d", data.shape), net.input("i", idx.shape, trt.int32),
                                    net.input("u", upd.shape), trt.ScatterMode.ND)
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"d": data, "i": idx, "u": upd})[0]
    want = data.clone()
    for r in range(3):
        want[int(idx[r, 0]), int(idx[r, 1]) % 3] = upd[r]
    torch.testing.assert_close(got, want, **EXACT)


def test_scatter_refusals() -> None:
    net = Net()
    d = net.input("d", (2, 3))
    layer = net.network.add_scatter(d, net.input("i", (2, 3), trt.int32), net.input("u", (2, 3), trt.int32),
                                    trt.ScatterMode.ELEMENT)
    with pytest.raises(NetworkDefinitionError, match="updates type"):
        layer.get_output(0).shape  # noqa: B018
    nd = net.network.add_scatter(d, net.input("j", (2, 1), trt.int32), net.input("v", (2, 2)), trt.ScatterMode.ND)
    with pytest.raises(NetworkDefinitionError, match="updates shape"):
        nd.get_output(0).shape  # noqa: B018


# ------------------------------------------------------------------------------- select
def test_select_broadcasts_like_torch_where() -> None:
    cond = torch.tensor([[True], [False], [True]])
    a, b = arange(3, 4), -arange(1, 4) - 1
    net = Net()
    layer = net.network.add_select(net.input("c", cond.shape, trt.bool), net.input("a", a.shape),
                                   net.input("b", b.shape))
    assert tuple(layer.get_output(0).shape) == (3, 4)
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"c": cond, "a": a, "b": b})[0]
    torch.testing.assert_close(got, torch.where(cond, a, b), **EXACT)


def test_select_refusals() -> None:
    net = Net()
    with pytest.raises(NetworkDefinitionError, match="BOOL"):
        net.network.add_select(net.input("c", (2,)), net.input("a", (2,)), net.input("b", (2,)))
    with pytest.raises(NetworkDefinitionError, match="same type"):
        net.network.add_select(net.input("d", (2,), trt.bool), net.input("e", (2,)),
                               net.input("f", (2,), trt.int32))


# -------------------------------------------------------------------------------- shape
def test_shape_layer_is_int64_and_follows_dynamic_dims() -> None:
    net = Net()
    x = net.input("x", (-1, 3, -1))
    net.dynamic("x", (1, 3, 1), (2, 3, 2), (9, 3, 9))
    out = net.network.add_shape(x).get_output(0)
    assert out.dtype == trt.int64 and tuple(out.shape) == (3,)
    engine = net.build(out)
    for shape in ((2, 3, 5), (7, 3, 1)):
        got = infer(engine, {"x": torch.zeros(shape)})[0]
        torch.testing.assert_close(got, torch.tensor(shape, dtype=torch.int64), **EXACT)


# --------------------------------------------------------------------------------- fill
def test_fill_linspace_static_and_alpha_beta_types() -> None:
    net = Net()
    layer = net.network.add_fill((6,), trt.FillOperation.LINSPACE, trt.float32)
    layer.alpha = 2.5
    layer.beta = -0.5
    assert not layer.is_alpha_beta_int64()
    assert layer.alpha == 2.5
    ints = net.network.add_fill((5,), trt.FillOperation.LINSPACE, trt.int32)
    ints.alpha = 3  # a Python int sets the int64 alpha too
    ints.beta = 2
    assert ints.is_alpha_beta_int64() and ints.alpha == 3 and isinstance(ints.alpha, int)
    ignored = net.network.add_fill((3,), trt.FillOperation.LINSPACE)
    ignored.alpha = [1000]  # not convertible: ignored, as TensorRT's binding does
    assert ignored.alpha == 0.0 and ignored.beta == 1.0
    engine = net.build(layer.get_output(0), ints.get_output(0), ignored.get_output(0))
    a, b, c = infer(engine, {})
    torch.testing.assert_close(a, 2.5 - 0.5 * torch.arange(6, dtype=torch.float32), **F32)
    torch.testing.assert_close(b, 3 + 2 * torch.arange(5, dtype=torch.int32), **EXACT)
    torch.testing.assert_close(c, torch.arange(3, dtype=torch.float32), **F32)


def test_fill_linspace_with_tensor_alpha_beta_and_shape_input() -> None:
    net = Net()
    dims = net.input("dims", (3,), trt.int32)
    alpha, beta = net.input("alpha", ()), net.input("beta", (3,))
    net.shape_values("dims", (1, 1, 1), (2, 3, 4), (4, 4, 4))
    layer = net.network.add_fill((), trt.FillOperation.LINSPACE)
    layer.set_input(0, dims)
    layer.set_input(1, alpha)
    layer.set_input(2, beta)
    assert tuple(layer.get_output(0).shape) == (-1, -1, -1)
    engine = net.build(layer.get_output(0))
    for shape in ((2, 3, 4), (4, 1, 2)):
        feeds = {"dims": torch.tensor(shape, dtype=torch.int32), "alpha": torch.tensor(1000.0),
                 "beta": torch.tensor([100.0, 10.0, 1.0])}
        got = infer(engine, feeds)[0]
        i, j, k = torch.meshgrid(*(torch.arange(n, dtype=torch.float32) for n in shape), indexing="ij")
        torch.testing.assert_close(got, 1000 + 100 * i + 10 * j + k, **F32)


def test_fill_random_uniform_and_normal_shapes_and_range() -> None:
    net = Net()
    uni = net.network.add_fill((200, 50), trt.FillOperation.RANDOM_UNIFORM)
    uni.alpha, uni.beta = -2.0, 3.0
    norm = net.network.add_fill((100, 100), trt.FillOperation.RANDOM_NORMAL, trt.float16)
    norm.alpha, norm.beta = 5.0, 0.5
    engine = net.build(uni.get_output(0), norm.get_output(0))
    u, n = infer(engine, {})
    assert u.shape == (200, 50) and u.min() >= -2.0 and u.max() <= 3.0
    assert abs(float(u.mean()) - 0.5) < 0.1  # 10000 samples: the standard error is ~0.014
    assert n.dtype == torch.float16 and abs(float(n.float().mean()) - 5.0) < 0.05
    assert abs(float(n.float().std()) - 0.5) < 0.05


def test_fill_refusals() -> None:
    net = Net()
    static_nd = net.network.add_fill((2, 3), trt.FillOperation.LINSPACE)
    with pytest.raises(NetworkDefinitionError, match="1-D"):
        static_nd.get_output(0).shape  # noqa: B018
    bad_type = net.network.add_fill((3,), trt.FillOperation.RANDOM_UNIFORM, trt.int32)
    with pytest.raises(NetworkDefinitionError, match="FLOAT or HALF"):
        bad_type.get_output(0).shape  # noqa: B018
    half_dynamic = net.network.add_fill((3,), trt.FillOperation.LINSPACE)
    half_dynamic.set_input(1, net.input("a", ()))
    with pytest.raises(NetworkDefinitionError, match="both"):
        half_dynamic.get_output(0).shape  # noqa: B018


# ------------------------------------------------------------------------------ one-hot
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot_matches_torch_one_hot(axis: int) -> None:
    idx = torch.tensor([[0, 3, -1], [2, 7, 1]], dtype=torch.int32)  # -1 wraps to depth-1, 7 is out of range
    depth = 5
    net = Net()
    values = net.const(np.array([-1.0, 2.0], np.float32))
    depth_t = net.network.add_constant([], np.array([depth], np.int32)).get_output(0)
    layer = net.network.add_one_hot(net.input("i", idx.shape, trt.int32), values, depth_t, axis)
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"i": idx})[0]
    wrapped = torch.where(idx < 0, idx + depth, idx).long()
    hot = F.one_hot(wrapped.clamp(0, depth - 1), depth) * (wrapped < depth).unsqueeze(-1)
    want = torch.where(hot.bool(), 2.0, -1.0).movedim(-1, axis if axis >= 0 else -1)
    torch.testing.assert_close(got, want, **EXACT)


# ----------------------------------------------------------------------------- non-zero
@pytest.mark.parametrize("indices_type", [None, "int64"])
def test_non_zero_data_dependent_output(indices_type: Any) -> None:
    x = torch.tensor([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]])
    net = Net()
    xt = net.input("x", x.shape)
    if indices_type is None:
        layer = net.network.add_non_zero(xt)
        assert layer.indices_type == trt.int32
    else:
        layer = net.network.add_non_zero(xt, trt.int64)
    assert tuple(layer.get_output(0).shape) == (2, -1)
    engine = net.build(layer.get_output(0))
    ctx = engine.create_execution_context()
    ctx.set_input_shape("x", x.shape)
    assert tuple(ctx.get_tensor_shape(engine.get_tensor_name(1))) == (2, -1)
    got = infer(engine, {"x": x}, context=ctx)[0]
    dt = torch.int32 if indices_type is None else torch.int64
    torch.testing.assert_close(got, torch.nonzero(x).t().to(dt), **EXACT)
    for other in (torch.zeros(2, 3), torch.ones(2, 3)):  # no hit and all hits with the same engine
        torch.testing.assert_close(infer(engine, {"x": other})[0], torch.nonzero(other).t().to(dt), **EXACT)


def test_non_zero_then_gather_nd_compresses() -> None:
    x = torch.tensor([[0.0, 4.0, 0.0, 5.0], [6.0, 0.0, 0.0, 7.0]])
    net = Net()
    xt = net.input("x", x.shape)
    nz = net.network.add_non_zero(xt, trt.int64)
    tr = net.network.add_shuffle(nz.get_output(0))
    tr.first_transpose = (1, 0)
    g = net.network.add_gather_v2(xt, tr.get_output(0), trt.GatherMode.ND)
    engine = net.build(g.get_output(0))
    torch.testing.assert_close(infer(engine, {"x": x})[0], x[x != 0], **EXACT)


def test_non_zero_indices_type_refusal_and_versions() -> None:
    net = Net()
    layer = net.network.add_non_zero(net.input("x", (2,)))
    with pytest.raises(NetworkDefinitionError, match="INT32 or INT64"):
        layer.indices_type = trt.float32
    with pytest.raises(NetworkDefinitionError, match="INT32 or INT64"):
        net.network.add_non_zero(net.input("y", (2,)), trt.float32)
    old = api("10.13")
    net13 = Net(old)
    x13 = net13.input("x", (2,))
    assert net13.network.add_non_zero(x13).get_output(0).dtype == old.int32
    with pytest.raises(TypeError):  # the indices_type overload arrived in TensorRT 10.16
        net13.network.add_non_zero(x13, old.int64)


# --------------------------------------------------------------------- reverse sequence
@pytest.mark.parametrize(("batch_axis", "seq_axis"), [(1, 0), (0, 1), (2, 0)])
def test_reverse_sequence(batch_axis: int, seq_axis: int) -> None:
    x = arange(4, 3, 5)
    lens = torch.tensor([4, 1, 0, 3, 2][: x.shape[batch_axis]], dtype=torch.int32).clamp(max=x.shape[seq_axis])
    net = Net()
    layer = net.network.add_reverse_sequence(net.input("x", x.shape), net.input("l", lens.shape, trt.int32))
    layer.batch_axis = batch_axis
    layer.sequence_axis = seq_axis
    engine = net.build(layer.get_output(0))
    got = infer(engine, {"x": x, "l": lens})[0]
    want = x.clone()
    for b in range(x.shape[batch_axis]):
        n = int(lens[b])
        src = x.select(batch_axis, b)
        dst = want.select(batch_axis, b)
        s = seq_axis if seq_axis < batch_axis else seq_axis - 1
        dst.narrow(s, 0, n).copy_(src.narrow(s, 0, n).flip(s))
    torch.testing.assert_close(got, want, **EXACT)


def test_reverse_sequence_refusal() -> None:
    net = Net()
    layer = net.network.add_reverse_sequence(net.input("x", (4, 3)), net.input("l", (4,), trt.int32))
    with pytest.raises(NetworkDefinitionError, match="batch axis"):
        layer.get_output(0).shape  # noqa: B018 - default batch_axis 1 has 3 entries, lens has 4


# --------------------------------------------------------------------- squeeze/unsqueeze
def test_squeeze_and_unsqueeze_match_torch() -> None:
    x = arange(3, 1, 1, 4)
    net = Net()
    xt = net.input("x", x.shape)
    sq = net.network.add_squeeze(xt, net.ints([1, -2]))
    un = net.network.add_unsqueeze(sq.get_output(0), net.ints([0, -1], np.int64))
    assert tuple(sq.get_output(0).shape) == (3, 4)
    engine = net.build(sq.get_output(0), un.get_output(0))
    a, b = infer(engine, {"x": x})
    torch.testing.assert_close(a, x.squeeze(2).squeeze(1), **EXACT)
    torch.testing.assert_close(b, x.reshape(3, 4).unsqueeze(0).unsqueeze(-1), **EXACT)


def test_squeeze_refusals() -> None:
    net = Net()
    x = net.input("x", (3, 2))
    with pytest.raises(NetworkDefinitionError, match="cannot squeeze"):
        net.network.add_squeeze(x, net.ints([1]))
    with pytest.raises(NetworkDefinitionError, match="distinct"):
        net.network.add_unsqueeze(x, net.ints([0, 0]))
    with pytest.raises(NetworkDefinitionError, match="build-time constant"):
        net.network.add_squeeze(x, net.input("axes", (1,), trt.int32))


# -------------------------------------------------------------------------- quantization
def _fp4_grid_round(v: np.ndarray) -> np.ndarray:
    """Nearest FP4 (E2M1) value, ties to the value with an even mantissa, saturating at 6."""
    grid = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    even = np.array([True, False, True, False, True, False, True, False])
    out = np.empty_like(v)
    for i, x in enumerate(v.reshape(-1)):
        m = min(abs(float(x)), 6.0)
        d = np.abs(grid - m)
        best = np.flatnonzero(d == d.min())
        pick = best[0] if len(best) == 1 else best[even[best]][0]
        out.reshape(-1)[i] = np.copysign(grid[pick], x)
    return out


def test_quantize_int8_per_tensor_rounds_half_to_even_and_saturates() -> None:
    # at scale 0.5, +-1.25 / 0.75 / 0.25 are ties (+-2.5, 1.5, 0.5): they round to the even neighbour
    x = torch.tensor([-300.0, -2.5, -1.5, -1.25, -0.75, -0.5, -0.25, 0.25, 0.5, 0.75, 1.25, 1.5, 2.5, 3.4, 126.6,
                      127.5, 400.0])
    net = Net()
    xt = net.input("x", x.shape)
    scale = net.const(np.array(0.5, np.float32))
    q = net.network.add_quantize(xt, scale, trt.int8)
    dq = net.network.add_dequantize(q.get_output(0), scale, trt.float32)
    assert q.axis == -1 and q.to_type == trt.int8
    engine = net.build(q.get_output(0), dq.get_output(0))
    qv, dv = infer(engine, {"x": x})
    want = np.clip(np.rint(x.numpy() / 0.5), -128, 127).astype(np.int8)  # np.rint: half to even
    torch.testing.assert_close(qv, torch.from_numpy(want), **EXACT)
    torch.testing.assert_close(dv, torch.from_numpy(want.astype(np.float32) * 0.5), **F32)


def test_quantize_per_channel_axis() -> None:
    x = rand(2, 3, 4)
    s = torch.tensor([0.01, 0.02, 0.05])
    net = Net()
    q = net.network.add_quantize(net.input("x", x.shape), net.const(s), trt.int8)
    q.axis = 1
    dq = net.network.add_dequantize(q.get_output(0), net.const(s), trt.float32)
    dq.axis = 1
    engine = net.build(dq.get_output(0))
    got = infer(engine, {"x": x})[0]
    sv = s.view(1, 3, 1)
    want = torch.from_numpy(np.clip(np.rint((x / sv).numpy()), -128, 127)) * sv
    torch.testing.assert_close(got, want, **F32)


def test_quantize_fp8_and_fp4_and_int4_block() -> None:
    x = rand(4, 8) * 3
    s8 = torch.tensor(0.01)
    s4 = torch.rand(4, 2, generator=torch.Generator().manual_seed(3)) * 0.5 + 0.1  # blocks of 4 along axis 1
    net = Net()
    xt = net.input("x", x.shape)
    fp8 = net.network.add_quantize(xt, net.const(s8.reshape(1)), trt.fp8)
    fp4 = net.network.add_quantize(xt, net.const(s4), trt.fp4)
    int4 = net.network.add_quantize(xt, net.const(s4), trt.int4)
    dq4 = net.network.add_dequantize(int4.get_output(0), net.const(s4), trt.float32)
    assert fp4.get_output(0).dtype == trt.fp4 and int4.get_output(0).dtype == trt.int4
    engine = net.build(fp8.get_output(0), fp4.get_output(0), int4.get_output(0), dq4.get_output(0))
    a, b, c, d = infer(engine, {"x": x})
    assert a.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(a.float(), (x / s8).clamp(-448, 448).to(torch.float8_e4m3fn).float(), **EXACT)
    block = s4.repeat_interleave(4, dim=1)
    torch.testing.assert_close(b, torch.from_numpy(_fp4_grid_round((x / block).numpy())), **EXACT)
    want4 = torch.from_numpy(np.clip(np.rint((x / block).numpy()), -8, 7))
    torch.testing.assert_close(c, want4, **EXACT)
    torch.testing.assert_close(d, want4 * block, **F32)


def test_int4_type_survives_data_movement() -> None:
    # INT4 values travel in float32 tensors; shuffles and slices must keep the declared INT4 type.
    x = rand(4, 6) * 4
    net = Net()
    one = net.const(np.array([1.0], np.float32))
    q = net.network.add_quantize(net.input("x", x.shape), one, trt.int4)
    tr = net.network.add_shuffle(q.get_output(0))
    tr.first_transpose = (1, 0)
    sl = net.network.add_slice(tr.get_output(0), (0, 1), (6, 2), (1, 2))
    cat = net.network.add_concatenation([sl.get_output(0), sl.get_output(0)])
    assert tr.get_output(0).dtype == trt.int4 and sl.get_output(0).dtype == trt.int4
    assert cat.get_output(0).dtype == trt.int4
    dq = net.network.add_dequantize(cat.get_output(0), one, trt.float32)
    engine = net.build(dq.get_output(0))
    q_ref = torch.from_numpy(np.clip(np.rint(x.numpy()), -8, 7)).t()[:, 1:4:2]
    torch.testing.assert_close(infer(engine, {"x": x})[0], torch.cat([q_ref, q_ref], 0), **EXACT)


def test_fp4_rounding_ties() -> None:
    v = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.25, -2.5, -5.0, -100.0, 0.3, 2.9])

    def build(net: Net, t: Any) -> Any:
        return net.network.add_quantize(t, net.const(np.ones((1,), np.float32)), trt.fp4).get_output(0)

    torch.testing.assert_close(run1(build, v), torch.from_numpy(_fp4_grid_round(v.numpy())), **EXACT)


def test_quantize_refusals() -> None:
    net = Net()
    x = net.input("x", (2, 3))
    per_channel = net.network.add_quantize(x, net.const(np.ones(3, np.float32)), trt.int8)  # axis not set
    with pytest.raises(NetworkDefinitionError, match="axis"):
        per_channel.get_output(0).shape  # noqa: B018
    zp = net.network.add_quantize(x, net.const(np.ones((), np.float32)), trt.int8)
    zp.set_input(2, net.const(np.array(3, np.int8)))
    with pytest.raises(NetworkDefinitionError, match="zero point"):
        zp.get_output(0).shape  # noqa: B018
    ints = net.network.add_quantize(net.input("i", (3,), trt.int32), net.const(np.ones((), np.float32)))
    with pytest.raises(NetworkDefinitionError, match="FLOAT, HALF or BF16"):
        ints.get_output(0).shape  # noqa: B018
    bad_dq = net.network.add_dequantize(x, net.const(np.ones((), np.float32)), trt.float32)
    with pytest.raises(NetworkDefinitionError, match="INT8, FP8"):
        bad_dq.get_output(0).shape  # noqa: B018


def _block_amax(x: torch.Tensor, blocks: Sequence[int]) -> torch.Tensor:
    out = torch.empty([n // b for n, b in zip(x.shape, blocks, strict=True)])
    for i in np.ndindex(*out.shape):
        sl = tuple(slice(k * b, (k + 1) * b) for k, b in zip(i, blocks, strict=True))
        out[i] = x[sl].abs().max()
    return out


def test_dynamic_quantize_fp8_with_float_scales() -> None:
    x = rand(3, 32)
    net = Net()
    layer = net.network.add_dynamic_quantize(net.input("x", x.shape), 1, 16, trt.fp8, trt.float32)
    assert layer.num_outputs == 2
    assert tuple(layer.get_output(1).shape) == (3, 2)
    engine = net.build(layer.get_output(0), layer.get_output(1))
    data, scales = infer(engine, {"x": x})
    want_s = _block_amax(x, (1, 16)) / 448
    torch.testing.assert_close(scales, want_s, **F32)
    want = (x / want_s.repeat_interleave(16, 1)).clamp(-448, 448).to(torch.float8_e4m3fn)
    assert data.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(data.float(), want.float(), **EXACT)


def test_dynamic_quantize_fp4_with_fp8_scales_and_double_quantization() -> None:
    x = rand(2, 3, 32, seed=4)
    g = 0.5
    net = Net()
    layer = net.network.add_dynamic_quantize(net.input("x", x.shape), 2, 16, trt.fp4, trt.fp8)
    layer.set_input(1, net.network.add_constant([], np.array([g], np.float32)).get_output(0))
    engine = net.build(layer.get_output(0), layer.get_output(1))
    data, scales = infer(engine, {"x": x})
    want_s = (_block_amax(x, (1, 1, 16)) / 6 / g).to(torch.float8_e4m3fn)
    assert scales.dtype == torch.float8_e4m3fn
    torch.testing.assert_close(scales.float(), want_s.float(), **EXACT)
    eff = want_s.float().repeat_interleave(16, 2) * g
    torch.testing.assert_close(data, torch.from_numpy(_fp4_grid_round((x / eff).numpy())), **EXACT)


def test_dynamic_quantize_v2_block_shape_and_version() -> None:
    x = rand(8, 8, seed=5)
    net = Net()
    layer = net.network.add_dynamic_quantize_v2(net.input("x", x.shape), (4, -1), trt.fp8, trt.float32)
    assert tuple(layer.get_output(1).shape) == (2, 1)
    engine = net.build(layer.get_output(0), layer.get_output(1))
    _, scales = infer(engine, {"x": x})
    torch.testing.assert_close(scales, _block_amax(x, (4, 8)) / 448, **F32)
    assert not hasattr(api("10.13").INetworkDefinition, "add_dynamic_quantize_v2")
    with pytest.raises(AttributeError):
        api("10.13").IQuantizeLayer.block_shape  # noqa: B018 - block_shape arrived in 10.16


def test_dynamic_quantize_refusals() -> None:
    net = Net()
    x = net.input("x", (3, 20))
    with pytest.raises(NetworkDefinitionError, match="divisible"):
        net.network.add_dynamic_quantize(x, 1, 16, trt.fp4, trt.fp8)
    with pytest.raises(NetworkDefinitionError, match="scale_type"):
        net.network.add_dynamic_quantize(net.input("y", (2, 16)), 1, 16, trt.fp4, trt.float32)


# ---------------------------------------------------------------------- plan round trip
def test_plan_round_trip_of_every_tensor_layer() -> None:
    net = Net()
    x = net.input("x", (2, 3, 4))
    sh = net.network.add_shuffle(x)
    sh.first_transpose = (2, 0, 1)
    sh.reshape_dims = (4, 6)
    sl = net.network.add_slice(sh.get_output(0), (0, 5), (4, 3), (1, -2))
    sl.mode = trt.SampleMode.REFLECT
    cat = net.network.add_concatenation([sl.get_output(0), sl.get_output(0)])
    cat.axis = 1
    g = net.network.add_gather(cat.get_output(0), net.ints([1, -1]), 1)
    fill = net.network.add_fill((4,), trt.FillOperation.LINSPACE)
    fill.alpha, fill.beta = 1.0, 0.25
    nz = net.network.add_non_zero(net.input("m", (2, 2), trt.bool))
    engine = net.build(g.get_output(0), fill.get_output(0), nz.get_output(0))
    data, mask = arange(2, 3, 4), torch.tensor([[True, False], [True, True]])
    first = infer(engine, {"x": data, "m": mask})
    again = trt.Runtime(trt.Logger(trt.Logger.INTERNAL_ERROR)).deserialize_cuda_engine(engine.serialize())
    second = infer(again, {"x": data, "m": mask})
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, **EXACT)
    s = data.permute(2, 0, 1).reshape(4, 6)
    sliced = torch.from_numpy(_slice_ref(s.numpy(), (0, 5), (4, 3), (1, -2), "REFLECT"))
    want = torch.cat([sliced, sliced], 1)[:, [1, 5]]
    torch.testing.assert_close(first[0], want, **EXACT)
    torch.testing.assert_close(first[1], 1.0 + 0.25 * torch.arange(4, dtype=torch.float32), **F32)
    torch.testing.assert_close(first[2], torch.nonzero(mask).t().int(), **EXACT)


# --------------------------------------------------------------- layer output dtype (core)
def test_setting_dtype_on_a_layer_output_sets_its_type() -> None:
    x = torch.tensor([-300.0, -1.0, 0.0, 2.0, 260.0, 1.00390625])  # 1 + 2^-8: exact in fp16, not in bf16
    net = Net()
    xt = net.input("x", x.shape)
    to_bf16 = net.network.add_cast(xt, trt.bfloat16).get_output(0)
    to_bf16.dtype = trt.float16  # TensorRT takes it as the output type
    to_u8 = net.network.add_cast(xt, trt.uint8).get_output(0)
    assert to_bf16.dtype == trt.float16
    engine = net.build(to_bf16, to_u8)
    a, b = infer(engine, {"x": x})
    assert a.dtype == torch.float16
    torch.testing.assert_close(a, x.half(), **EXACT)  # straight to fp16, not through bf16
    # TensorRT 10.16 converts float to uint8 with negative values clamped to 0 and large ones wrapped
    want_u8 = torch.round(x).clamp(min=0).long().remainder(256).to(torch.uint8)
    torch.testing.assert_close(b, want_u8, **EXACT)
    strict = Net(flags=1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    out = strict.network.add_cast(strict.input("x", (2,)), trt.float16).get_output(0)
    with pytest.raises(NetworkDefinitionError, match="strongly typed"):
        out.dtype = trt.float32


def test_int8_cast_uses_the_output_dynamic_range() -> None:
    x = torch.tensor([-400.0, -150.0, -10.0, 0.0, 10.0, 150.0, 299.0])
    net = Net()
    out = net.network.add_cast(net.input("x", x.shape), trt.int8).get_output(0)
    out.dynamic_range = (-300, 300)
    assert out.dynamic_range == (-300.0, 300.0)
    engine = net.build(out)
    inv = 1 / torch.tensor(300.0 / 127)  # scale = amax / 127 in float32, applied as its reciprocal
    want = torch.round(x * inv).clamp(-128, 127).to(torch.int8)
    torch.testing.assert_close(infer(engine, {"x": x})[0], want, **EXACT)


# ------------------------------------------------- dynamic dims that probe sizes cannot fit
def test_static_parameters_on_dynamic_dims_are_checked_at_run_time() -> None:
    # Build-time shape inference must not refuse what only the run-time shape decides.
    net = Net()
    x = net.input("x", (-1,))
    net.dynamic("x", (1,), (30,), (40,))
    sl = net.network.add_slice(x, (20,), (4,), (1,))  # needs >= 24 elements
    sh = net.network.add_shuffle(x)
    sh.reshape_dims = (5, 6)  # needs exactly 30 elements
    y = net.input("y", (2, -1))
    net.dynamic("y", (2, 1), (2, 1), (2, 3))
    sq = net.network.add_squeeze(y, net.ints([1]))  # needs a 1
    assert tuple(sl.get_output(0).shape) == (4,) and tuple(sh.get_output(0).shape) == (5, 6)
    assert tuple(sq.get_output(0).shape) == (2,)
    engine = net.build(sl.get_output(0), sh.get_output(0), sq.get_output(0))
    data, other = arange(30), torch.tensor([[1.0], [2.0]])
    a, b, c = infer(engine, {"x": data, "y": other})
    torch.testing.assert_close(a, data[20:24], **EXACT)
    torch.testing.assert_close(b, data.reshape(5, 6), **EXACT)
    torch.testing.assert_close(c, other.reshape(2), **EXACT)
    for size, ok in ((30, True), (10, False)):  # 10 elements: the slice and the reshape cannot run
        ctx = engine.create_execution_context()
        ctx.set_input_shape("x", (size,))
        ctx.set_input_shape("y", (2, 1))
        ctx.set_tensor_address("x", arange(size))
        ctx.set_tensor_address("y", other)
        for k in range(1, 4):
            name = engine.get_tensor_name(k + 1)
            ctx.set_tensor_address(name, torch.empty(64))
        assert ctx.execute_async_v3(0) is ok, size


def test_input_shapes_outside_the_optimization_profile_are_refused() -> None:
    net = Net()
    x = net.input("x", (-1, 3))
    net.dynamic("x", (1, 3), (2, 3), (4, 3))
    engine = net.build(net.network.add_identity(x).get_output(0))
    ctx = engine.create_execution_context()
    assert ctx.set_input_shape("x", (1, 3)) and ctx.set_input_shape("x", (4, 3))  # the bounds are inside
    assert not ctx.set_input_shape("x", (5, 3))
    assert not ctx.set_input_shape("x", (0, 3))
    assert not ctx.set_input_shape("x", (2, 4))  # a static dimension must match
    assert tuple(ctx.get_tensor_shape("x")) == (4, 3)  # a refused shape leaves the last good one


def test_gather_out_of_range_indices_read_zero() -> None:
    """NvInfer.h (IGatherLayer): "Zero will be stored for OOB access"; negative indices in range count
    from the back."""
    x = arange(3, 4) + 1  # no zeros in the data: a zero in the result can only come from OOB
    cases = {
        "default": (trt.GatherMode.DEFAULT, 1, torch.tensor([[0, 4, -1], [-5, 3, 9]], dtype=torch.int32)),
        "element": (trt.GatherMode.ELEMENT, 1, torch.tensor([[0, 4, -1, 2], [-5, 3, 9, 1], [2, 2, -4, 7]],
                                                             dtype=torch.int32)),
        "nd": (trt.GatherMode.ND, 0, torch.tensor([[0, 1], [3, 0], [-1, -1], [2, 4], [-4, 0]], dtype=torch.int32)),
    }
    for name, (mode, axis, idx) in cases.items():
        net = Net()
        layer = net.network.add_gather_v2(net.input("x", x.shape), net.input("i", idx.shape, trt.int32), mode)
        if mode != trt.GatherMode.ND:
            layer.axis = axis
        (got,) = infer(net.build(layer.get_output(0)), {"x": x, "i": idx})
        xs = x.tolist()
        if mode == trt.GatherMode.DEFAULT:
            want = [[[xs[r][i % 4] if -4 <= i < 4 else 0.0 for i in row] for row in idx.tolist()] for r in range(3)]
        elif mode == trt.GatherMode.ELEMENT:
            want = [[xs[r][i % 4] if -4 <= i < 4 else 0.0 for i in row] for r, row in enumerate(idx.tolist())]
        else:
            want = [xs[a % 3][b % 4] if -3 <= a < 3 and -4 <= b < 4 else 0.0 for a, b in idx.tolist()]
        assert got.tolist() == want, name


def test_quantize_refuses_scalar_inputs_and_non_positive_scales() -> None:
    for quantize in (True, False):
        in_type = trt.float32 if quantize else trt.int8
        for shape, scale in (((), 0.5), ((4,), 0.0), ((4,), -0.5)):
            net = Net()
            x = net.input("x", shape, in_type)
            s = net.const(np.array(scale, np.float32))
            add = net.network.add_quantize if quantize else net.network.add_dequantize
            out_type = trt.int8 if quantize else trt.float32
            with pytest.raises(NetworkDefinitionError, match="scalar|positive"):
                add(x, s, out_type).get_output(0).shape  # noqa: B018
    net = Net()  # the same layer with a positive scale on a 1-D input builds
    ok = net.network.add_quantize(net.input("x", (4,)), net.const(np.array(0.5, np.float32)), trt.int8)
    assert net.build(ok.get_output(0)) is not None


def test_fill_alpha_and_beta_tensors_must_share_a_type() -> None:
    net = Net()
    fill = net.network.add_fill((4,), trt.FillOperation.LINSPACE, trt.float32)
    fill.set_input(1, net.const(np.array(1.0, np.float32)))
    fill.set_input(2, net.const(np.array([2], np.int32)))
    with pytest.raises(NetworkDefinitionError, match="same type"):
        fill.get_output(0).shape  # noqa: B018
