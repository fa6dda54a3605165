"""The sim's linalg / reduction / attention layers (torch2trt_lite/sim/layers/linalg.py).

Every network is built with ``build_serialized_network``, deserialized with
``Runtime.deserialize_cuda_engine`` and run through an execution context, so every test also
round-trips its layers through a plan. References are computed here from the documented
semantics: numpy in float64, torch functions (torch.einsum, torch.softmax, torch.topk,
F.scaled_dot_product_attention) or explicit loops where TensorRT's formula has no torch twin.

Tolerances: float32 results use rtol=1e-5, atol=1e-5 against float64 references (the sim and
the reference may sum in a different order); float16 results are compared with the fp32/fp64
reference at rtol=atol=1e-2 (fp16 keeps ~3 decimal digits).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tests.sim.netbuilder import Net, infer
from torch2trt_lite.errors import NetworkDefinitionError
from torch2trt_lite.sim import api

trt = api("10.16")
trt11 = api("11.1")
trt13 = api("10.13")
F32 = {"rtol": 1e-5, "atol": 1e-5}
F16 = {"rtol": 1e-3, "atol": 1e-3}  # fp16 rounding of the result (~5e-4 relative), with a margin
MO = trt.MatrixOperation
RO = trt.ReduceOperation


# ------------------------------------------------------------------------------ helpers
def rand(*shape: int, seed: int = 0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def f64(t: torch.Tensor) -> np.ndarray:
    return t.double().numpy()


def close(got: torch.Tensor, want: np.ndarray | torch.Tensor, tol: dict[str, float] = F32) -> None:
    w = torch.as_tensor(want).to(torch.float64)
    torch.testing.assert_close(got.to(torch.float64), w, **tol)


def refuses(fn: Any, *args: Any) -> None:
    """TensorRT refuses the add_* call (the sim raises where TensorRT logs and returns None)."""
    with pytest.raises(NetworkDefinitionError):
        fn(*args)


def invalid(tensor: Any) -> None:
    """The layer was added but fails validation when its shapes are needed (shape query / build)."""
    with pytest.raises(NetworkDefinitionError):
        tensor.shape  # noqa: B018


# ------------------------------------------------------------------------ matrix multiply
def _mm_ref(a: np.ndarray, op0: Any, b: np.ndarray, op1: Any) -> np.ndarray:
    """TensorRT's MatrixOperation rules written out: VECTOR input0 [.., K] is [.., 1, K],
    VECTOR input1 [.., K] is [.., K, 1]; the vector dimensions are dropped again afterwards."""
    if op0 == MO.TRANSPOSE:
        a = np.swapaxes(a, -1, -2)
    elif op0 == MO.VECTOR:
        a = a[..., None, :]
    if op1 == MO.TRANSPOSE:
        b = np.swapaxes(b, -1, -2)
    elif op1 == MO.VECTOR:
        b = b[..., :, None]
    y = a @ b
    if op1 == MO.VECTOR:
        y = y[..., 0]
    if op0 == MO.VECTOR:
        y = y[..., 0] if op1 == MO.VECTOR else y[..., 0, :]
    return y


MM_CASES = [
    ((3, 4), MO.NONE, (4, 5), MO.NONE, (3, 5)),
    ((2, 3, 4), MO.NONE, (2, 4, 5), MO.NONE, (2, 3, 5)),
    ((2, 1, 3, 4), MO.NONE, (1, 5, 4, 6), MO.NONE, (2, 5, 3, 6)),
    ((2, 4, 3), MO.TRANSPOSE, (2, 4, 5), MO.NONE, (2, 3, 5)),
    ((2, 3, 4), MO.NONE, (2, 5, 4), MO.TRANSPOSE, (2, 3, 5)),
    ((2, 4, 3), MO.TRANSPOSE, (1, 5, 4), MO.TRANSPOSE, (2, 3, 5)),
    ((2, 3, 4), MO.NONE, (2, 4), MO.VECTOR, (2, 3)),
    ((2, 4), MO.VECTOR, (2, 4, 5), MO.NONE, (2, 5)),
    ((2, 4), MO.VECTOR, (2, 5, 4), MO.TRANSPOSE, (2, 5)),
    ((2, 4), MO.VECTOR, (2, 4), MO.VECTOR, (2,)),
    ((4,), MO.VECTOR, (4,), MO.VECTOR, ()),
]


@pytest.mark.parametrize(("sa", "op0", "sb", "op1", "out"), MM_CASES)
def test_matrix_multiply_against_reference(sa: tuple[int, ...], op0: Any, sb: tuple[int, ...], op1: Any,
                                           out: tuple[int, ...]) -> None:
    a, b = rand(*sa, seed=1), rand(*sb, seed=2)
    net = Net()
    layer = net.network.add_matrix_multiply(net.input("a", sa), op0, net.input("b", sb), op1)
    assert layer.type == trt.LayerType.MATRIX_MULTIPLY and (layer.op0, layer.op1) == (op0, op1)
    assert tuple(layer.get_output(0).shape) == out
    (y,) = infer(net.build(layer.get_output(0)), {"a": a, "b": b})
    close(y, _mm_ref(f64(a), op0, f64(b), op1))


def test_matrix_multiply_matches_torch_matmul_and_names_like_tensorrt() -> None:
    a, b = rand(2, 3, 4, seed=3), rand(2, 4, 6, seed=4)
    net = Net()
    layer = net.network.add_matrix_multiply(net.input("a", a.shape), MO.NONE, net.input("b", b.shape), MO.NONE)
    assert layer.name == "(Unnamed Layer* 0) [Matrix Multiply]"
    (y,) = infer(net.build(layer.get_output(0)), {"a": a, "b": b})
    torch.testing.assert_close(y, torch.matmul(a, b), **F32)


def test_matrix_multiply_half_accumulates_in_fp32() -> None:
    # 2048 + 4095 ones: exactly 6143, which fp16 rounds to 6144. An fp16 accumulator stalls at 2048
    # (2048 + 1 rounds back to 2048, fp16 spacing there is 2); an fp32 one keeps every unit.
    a = torch.ones(1, 4096, dtype=torch.float16)
    a[0, 0] = 2048
    b = torch.ones(4096, 1, dtype=torch.float16)
    net = Net()
    layer = net.network.add_matrix_multiply(net.input("a", a.shape, trt.float16), MO.NONE,
                                            net.input("b", b.shape, trt.float16), MO.NONE)
    (y,) = infer(net.build(layer.get_output(0)), {"a": a, "b": b})
    assert y.dtype == torch.float16
    assert float(y) == float(torch.tensor(6143.0).half()) == 6144.0


def test_matrix_multiply_dynamic_batch() -> None:
    net = Net()
    x = net.input("x", (-1, 3, 4))
    w = net.const(f64(rand(4, 5, seed=7)).astype(np.float32)[None])
    net.dynamic("x", (1, 3, 4), (2, 3, 4), (8, 3, 4))
    layer = net.network.add_matrix_multiply(x, MO.NONE, w, MO.NONE)
    assert tuple(layer.get_output(0).shape) == (-1, 3, 5)
    engine = net.build(layer.get_output(0))
    for n in (1, 5):
        xv = rand(n, 3, 4, seed=n)
        (y,) = infer(engine, {"x": xv})
        close(y, f64(xv) @ f64(rand(4, 5, seed=7))[None])


@pytest.mark.parametrize(("sa", "op0", "sb", "op1", "dta", "dtb"), [
    ((2, 3, 4), MO.NONE, (4, 5), MO.NONE, "float32", "float32"),  # batch ranks differ
    ((3, 4), MO.NONE, (5, 6), MO.NONE, "float32", "float32"),  # K differs
    ((2, 3, 4), MO.NONE, (3, 4, 5), MO.NONE, "float32", "float32"),  # batch 2 vs 3
    ((4,), MO.NONE, (4, 5), MO.NONE, "float32", "float32"),  # NONE needs rank >= 2
    ((3, 4), MO.NONE, (4, 5), MO.NONE, "float32", "float16"),  # mixed types
    ((3, 4), MO.NONE, (4, 5), MO.NONE, "int32", "int32"),  # INT32 not valid
])
def test_matrix_multiply_refusals(sa: Any, op0: Any, sb: Any, op1: Any, dta: str, dtb: str) -> None:
    net = Net()
    a = net.input("a", sa, getattr(trt, dta))
    b = net.input("b", sb, getattr(trt, dtb))
    refuses(net.network.add_matrix_multiply, a, op0, b, op1)


# ---------------------------------------------------------------------------------- einsum
EINSUM_CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),  # implicit mode
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("iij->ij", [(3, 3, 2)]),
    ("ij->", [(3, 4)]),
    ("i,i->", [(5,), (5,)]),
    ("...ij->...ji", [(2, 3, 4, 5)]),
    ("b...i,bi->b...", [(2, 3, 4), (2, 4)]),
    ("abc,dcb,de->ae", [(1, 2, 3), (4, 3, 2), (4, 5)]),
    ("ij,ij->ij", [(3, 1), (3, 4)]),  # size-1 label broadcast
]


@pytest.mark.parametrize(("eq", "shapes"), EINSUM_CASES)
def test_einsum_against_torch(eq: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [rand(*s, seed=10 + i) for i, s in enumerate(shapes)]
    net = Net()
    ins = [net.input(f"x{i}", s) for i, s in enumerate(shapes)]
    layer = net.network.add_einsum(ins, eq)
    assert layer.equation == eq
    (y,) = infer(net.build(layer.get_output(0)), {f"x{i}": x for i, x in enumerate(xs)})
    want = torch.einsum(eq, *[x.double() for x in xs])
    assert tuple(layer.get_output(0).shape) == tuple(want.shape) == tuple(y.shape)
    close(y, want)


def test_einsum_half_and_equation_setter() -> None:
    a, b = rand(3, 4, seed=20).half(), rand(4, 2, seed=21).half()
    net = Net()
    layer = net.network.add_einsum([net.input("a", a.shape, trt.float16), net.input("b", b.shape, trt.float16)],
                                   "ij,jk->ik")
    layer.equation = "ij,jk->ki"
    assert tuple(layer.get_output(0).shape) == (2, 3)
    (y,) = infer(net.build(layer.get_output(0)), {"a": a, "b": b})
    assert y.dtype == torch.float16
    close(y, (f64(a) @ f64(b)).T, F16)


@pytest.mark.parametrize(("eq", "shapes"), [
    ("IJ,JK->IK", [(2, 3), (3, 4)]),  # upper-case labels
    ("ij,jk->ik", [(2, 3)]),  # one term too many for one input
    ("ijk->ij", [(2, 3)]),  # term longer than the rank
    ("ij->ik", [(2, 3)]),  # output label not in any input
    ("ij->ii", [(2, 3)]),  # repeated output label
    ("ij->j->i", [(2, 3)]),  # two arrows
    ("ij,jk->ik", [(2, 3), (4, 5)]),  # contracted sizes differ
    ("i1->i", [(2, 3)]),  # digits
])
def test_einsum_refusals(eq: str, shapes: list[tuple[int, ...]]) -> None:
    net = Net()
    ins = [net.input(f"x{i}", s) for i, s in enumerate(shapes)]
    refuses(net.network.add_einsum, ins, eq)


def test_einsum_refuses_int_inputs() -> None:
    net = Net()
    refuses(net.network.add_einsum, [net.input("x", (2, 3), trt.int32)], "ij->ji")


# --------------------------------------------------------------------------------- softmax
@pytest.mark.parametrize(("shape", "default_axis"), [((5,), 0), ((3, 4), 0), ((2, 3, 4), 0),
                                                     ((2, 3, 4, 5), 1), ((2, 2, 3, 4, 5), 2)])
def test_softmax_default_axis_is_rank_minus_three(shape: tuple[int, ...], default_axis: int) -> None:
    x = rand(*shape, seed=30)
    net = Net()
    layer = net.network.add_softmax(net.input("x", shape))
    assert layer.axes == 1 << default_axis
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    close(y, torch.softmax(x.double(), default_axis))


@pytest.mark.parametrize("axis", [0, 1, 2, 3])
def test_softmax_each_axis(axis: int) -> None:
    x = rand(2, 3, 4, 5, seed=31) * 3
    net = Net()
    layer = net.network.add_softmax(net.input("x", x.shape))
    layer.axes = 1 << axis
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    e = np.exp(f64(x) - f64(x).max(axis, keepdims=True))
    close(y, e / e.sum(axis, keepdims=True))


def test_softmax_half_and_dynamic_shape() -> None:
    net = Net()
    layer = net.network.add_softmax(net.input("x", (-1, 7), trt.float16))
    layer.axes = 2
    net.dynamic("x", (1, 7), (4, 7), (16, 7))
    engine = net.build(layer.get_output(0))
    for n in (1, 9):
        x = rand(n, 7, seed=n).half()
        (y,) = infer(engine, {"x": x})
        assert y.dtype == torch.float16 and y.shape == (n, 7)
        close(y, torch.softmax(x.double(), 1), F16)


@pytest.mark.parametrize(("axes", "dtype"), [(0b11, "float32"), (1 << 3, "float32"), (0, "float32"),
                                             (1, "int32")])
def test_softmax_refusals(axes: int, dtype: str) -> None:
    net = Net()
    x = net.input("x", (2, 3, 4), getattr(trt, dtype))
    if dtype == "int32":
        refuses(net.network.add_softmax, x)
        return
    layer = net.network.add_softmax(x)
    layer.axes = axes
    with pytest.raises(NetworkDefinitionError):
        layer.get_output(0).shape  # noqa: B018 - shape inference validates the layer


# -------------------------------------------------------------------------- ragged softmax
def _ragged_ref(x: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Softmax over the first bounds[i] elements of each row; the rest of the row is 0."""
    out = np.zeros_like(x)
    rows, length = x.reshape(-1, x.shape[-1]), x.shape[-1]
    flat_out = out.reshape(-1, length)
    for r, b in enumerate(bounds.reshape(-1)):
        if b > 0:
            e = np.exp(rows[r, :b] - rows[r, :b].max())
            flat_out[r, :b] = e / e.sum()
    return out


def test_ragged_softmax_against_loop() -> None:
    x = rand(2, 3, 6, seed=40)
    bounds = torch.tensor([[1, 6, 3], [0, 2, 5]], dtype=torch.int32).reshape(2, 3, 1)
    net = Net()
    layer = net.network.add_ragged_softmax(net.input("x", x.shape), net.input("b", bounds.shape, trt.int32))
    assert layer.name.endswith("[Ragged SoftMax]")
    (y,) = infer(net.build(layer.get_output(0)), {"x": x, "b": bounds})
    close(y, _ragged_ref(f64(x), bounds.numpy()))


def test_ragged_softmax_input_must_be_float() -> None:
    for dt in (trt.float16, trt.bfloat16):  # the operator's T1 is float32 only
        net = Net()
        refuses(net.network.add_ragged_softmax, net.input("x", (1, 2, 5), dt), net.input("b", (1, 2, 1), trt.int32))


def test_ragged_softmax_bound_past_the_row_reads_the_next_elements() -> None:
    # What TensorRT 10.16 does (RaggedSoftMax/case_simple): a bound larger than the row length
    # makes the softmax run over the following elements of the flattened input as well.
    x = rand(1, 2, 3, seed=41)
    bounds = torch.tensor([[5], [2]], dtype=torch.int32).reshape(1, 2, 1)
    net = Net()
    layer = net.network.add_ragged_softmax(net.input("x", x.shape), net.input("b", bounds.shape, trt.int32))
    (y,) = infer(net.build(layer.get_output(0)), {"x": x, "b": bounds})
    flat = f64(x).reshape(-1)
    window = flat[0:5]
    e = np.exp(window - window.max())
    want0 = (e / e.sum())[:3]
    second = _ragged_ref(f64(x)[:, 1:2], bounds[:, 1:2].numpy()).reshape(-1)
    close(y.reshape(-1), np.concatenate([want0, second]))


@pytest.mark.parametrize(("xs", "bs", "bdt"), [
    ((3, 6), (3, 1), "int32"),  # 2D
    ((2, 3, 6), (2, 3, 1), "int64"),  # bounds type
    ((2, 3, 6), (2, 3, 2), "int32"),  # last bounds dim != 1
    ((2, 3, 6), (2, 4, 1), "int32"),  # leading dims differ
])
def test_ragged_softmax_refusals(xs: Any, bs: Any, bdt: str) -> None:
    net = Net()
    refuses(net.network.add_ragged_softmax, net.input("x", xs), net.input("b", bs, getattr(trt, bdt)))


# ---------------------------------------------------------------------------------- reduce
_NP_REDUCE = {"SUM": np.sum, "PROD": np.prod, "MAX": np.max, "MIN": np.min, "AVG": np.mean}


@pytest.mark.parametrize("op", ["SUM", "PROD", "MAX", "MIN", "AVG"])
@pytest.mark.parametrize("axes", [0b001, 0b010, 0b101, 0b111])
@pytest.mark.parametrize("keep", [False, True])
def test_reduce_float_against_numpy(op: str, axes: int, keep: bool) -> None:
    x = rand(2, 3, 4, seed=50) / 2 + 1
    net = Net()
    layer = net.network.add_reduce(net.input("x", x.shape), getattr(RO, op), axes, keep)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    dims = tuple(i for i in range(3) if axes >> i & 1)
    close(y, _NP_REDUCE[op](f64(x), axis=dims, keepdims=keep))


@pytest.mark.parametrize("op", ["SUM", "PROD", "MAX", "MIN", "AVG"])
def test_reduce_int32(op: str) -> None:
    x = torch.tensor([[-7, 2, 3], [4, -5, 9]], dtype=torch.int32)
    net = Net()
    layer = net.network.add_reduce(net.input("x", x.shape, trt.int32), getattr(RO, op), 0b10, False)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    assert y.dtype == torch.int32
    xs = x.numpy().astype(np.int64)
    if op == "AVG":  # integer average truncates toward zero
        want = np.trunc(xs.sum(1) / 3).astype(np.int64)
    else:
        want = _NP_REDUCE[op](xs, axis=1)
    assert y.tolist() == want.tolist()


def test_reduce_half_sum_accumulates_in_fp32() -> None:
    x = torch.full((1, 4096), 1.0).half()
    x[0, 0] = 2048
    net = Net()
    layer = net.network.add_reduce(net.input("x", x.shape, trt.float16), RO.SUM, 0b10, True)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    # fp16 accumulation would stall at 2048 (2048 + 1 rounds to 2048); 2048 + 4095 = 6143 -> 6144 in fp16
    assert y.dtype == torch.float16 and float(y) == 6144.0


def test_reduce_empty_volume_gives_identity_values() -> None:
    net = Net()
    x = net.input("x", (2, 0))
    ops = {"SUM": 0.0, "PROD": 1.0, "MAX": float("-inf"), "MIN": float("inf"), "AVG": float("nan")}
    outs = [net.network.add_reduce(x, getattr(RO, op), 0b10, False).get_output(0) for op in ops]
    got = infer(net.build(*outs), {"x": torch.empty(2, 0)})
    for y, want in zip(got, ops.values(), strict=True):
        torch.testing.assert_close(y, torch.full((2,), want), equal_nan=True)


def test_reduce_dynamic_shape() -> None:
    net = Net()
    layer = net.network.add_reduce(net.input("x", (-1, 5)), RO.MAX, 0b01, False)
    net.dynamic("x", (1, 5), (3, 5), (9, 5))
    assert tuple(layer.get_output(0).shape) == (5,)
    engine = net.build(layer.get_output(0))
    for n in (1, 7):
        x = rand(n, 5, seed=n)
        (y,) = infer(engine, {"x": x})
        close(y, f64(x).max(0))


def test_reduce_refusals() -> None:
    net = Net()
    refuses(net.network.add_reduce, net.input("b", (2, 3), trt.bool), RO.SUM, 1, False)
    x = net.input("x", (2, 3))
    refuses(net.network.add_reduce, x, RO.SUM, 0b100, False)
    refuses(trt11.Builder(trt11.Logger()).create_network(0).add_reduce,
            x, RO.SUM, 1, False)  # tensor of another network
    net11 = Net(trt11)
    refuses(net11.network.add_reduce, net11.input("x", (2, 3)), trt11.ReduceOperation.NONE, 1, False)


# ----------------------------------------------------------------------------------- top-k
@pytest.mark.parametrize(("shape", "axis", "k", "op"), [
    ((1, 6), 1, 3, "MAX"),
    ((4, 7), 1, 2, "MIN"),
    ((3, 5, 4), 1, 5, "MAX"),
    ((2, 3, 4, 6), 0, 1, "MIN"),
])
def test_topk_against_torch(shape: tuple[int, ...], axis: int, k: int, op: str) -> None:
    x = rand(*shape, seed=60)
    net = Net()
    layer = net.network.add_topk(net.input("x", shape), getattr(trt.TopKOperation, op), k, 1 << axis)
    assert layer.k == k and layer.indices_type == trt.int32
    vals, idx = infer(net.build(layer.get_output(0), layer.get_output(1)), {"x": x})
    want_v, want_i = torch.topk(x, k, dim=axis, largest=op == "MAX", sorted=True)
    assert idx.dtype == torch.int32
    torch.testing.assert_close(vals, want_v, rtol=0, atol=0)
    assert torch.equal(idx.long(), want_i)
    torch.testing.assert_close(torch.gather(x, axis, idx.long()), vals, rtol=0, atol=0)


def test_topk_int64_indices_and_dynamic_k() -> None:
    x = rand(3, 10, seed=61)
    net = Net()
    layer = net.network.add_topk(net.input("x", x.shape), trt.TopKOperation.MAX, 2, 2, indices_type=trt.int64)
    kt = net.const(np.array(4, dtype=np.int32))
    layer.set_input(1, kt)
    assert layer.k == -1  # a k input overrides the static k
    assert tuple(layer.get_output(0).shape) == (3, 4)
    vals, idx = infer(net.build(layer.get_output(0), layer.get_output(1)), {"x": x})
    assert idx.dtype == torch.int64
    want_v, want_i = torch.topk(x, 4, dim=1)
    torch.testing.assert_close(vals, want_v, rtol=0, atol=0)
    assert torch.equal(idx, want_i)
    layer.k = 3  # setting k drops the k input again
    assert layer.k == 3 and layer.num_inputs == 1 and tuple(layer.get_output(0).shape) == (3, 3)


def test_topk_k_from_a_shape_input_is_dynamic() -> None:
    net = Net()
    x = net.input("x", (2, 9))
    k = net.input("k", (), trt.int32)
    layer = net.network.add_topk(x, trt.TopKOperation.MIN, 1, 2)
    layer.set_input(1, k)
    assert tuple(layer.get_output(0).shape) == (2, -1)
    net.profile = net.builder.create_optimization_profile()
    net.profile.set_shape_input("k", [1], [3], [9])
    engine = net.build(layer.get_output(0))
    xv = rand(2, 9, seed=62)
    (vals,) = infer(engine, {"x": xv, "k": torch.tensor(5, dtype=torch.int32)})
    torch.testing.assert_close(vals, torch.topk(xv, 5, 1, largest=False).values, rtol=0, atol=0)


def test_topk_refusals() -> None:
    net = Net()
    x = net.input("x", (2, 3, 4, 5, 6))
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 0, 1 << 4)  # k must be positive
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 3841, 1 << 4)  # k <= 3840
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 7, 1 << 4)  # k > dim
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 1, 0b11000)  # two axes
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 1, 1 << 0)  # not one of the last four
    refuses(net.network.add_topk, x, trt.TopKOperation.MAX, 1, 1 << 4, trt.float32)  # indices type
    refuses(net.network.add_topk, net.input("b", (1, 3), trt.bool), trt.TopKOperation.MAX, 1, 2)
    # TensorRT: "at least 2 dimensions are required for input" (a 1D input runs as [1, N])
    refuses(net.network.add_topk, net.input("v", (6,)), trt.TopKOperation.MAX, 1, 1)
    layer = net.network.add_topk(x, trt.TopKOperation.MAX, 1, 1 << 4)
    with pytest.raises(NetworkDefinitionError):
        layer.indices_type = trt.float32
    net13 = Net(trt13)
    with pytest.raises(TypeError):  # TensorRT 10.13 has no indices_type overload
        net13.network.add_topk(net13.input("x", (1, 4)), trt13.TopKOperation.MAX, 1, 2, trt13.int32)
    assert not hasattr(net13.network.add_topk(net13.input("y", (1, 4)), trt13.TopKOperation.MAX, 1, 2),
                       "indices_type")


# ------------------------------------------------------------------------------ cumulative
def _cum_ref(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """y[j] = sum of x over 0..j / 0..j-1 / j..n-1 / j+1..n-1 (the table of ICumulativeLayer)."""
    xs = np.moveaxis(x, axis, -1)
    n = xs.shape[-1]
    out = np.zeros_like(xs)
    for j in range(n):
        lo, hi = (j, n) if reverse else (0, j + 1)
        if exclusive:
            lo, hi = (j + 1, n) if reverse else (0, j)
        out[..., j] = xs[..., lo:hi].sum(-1)
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("axis", [0, 2, -1])
def test_cumulative_against_table(exclusive: bool, reverse: bool, axis: int) -> None:
    x = rand(3, 4, 5, seed=70)
    net = Net()
    ax = net.const(np.array(axis, dtype=np.int32))
    layer = net.network.add_cumulative(net.input("x", x.shape), ax, trt.CumulativeOperation.SUM, exclusive, reverse)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    close(y, _cum_ref(f64(x), axis, exclusive, reverse))


def test_cumulative_int32_and_int64_axis() -> None:
    x = torch.arange(12, dtype=torch.int32).reshape(3, 4)
    net = Net()
    layer = net.network.add_cumulative(net.input("x", x.shape, trt.int32), net.const(np.array(0, dtype=np.int64)),
                                       trt.CumulativeOperation.SUM, False, False)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x})
    assert y.dtype == torch.int32 and y.tolist() == np.cumsum(x.numpy(), 0).tolist()


def test_cumulative_refusals() -> None:
    net = Net()
    x = net.input("x", (3, 4))
    op = trt.CumulativeOperation.SUM
    refuses(net.network.add_cumulative, x, net.input("a", (), trt.int32), op, False, False)  # not constant
    refuses(net.network.add_cumulative, x, net.const(np.array(2, dtype=np.int32)), op, False, False)  # range
    refuses(net.network.add_cumulative, x, net.const(np.array(-3, dtype=np.int32)), op, False, False)
    refuses(net.network.add_cumulative, x, net.const(np.array(0.0, dtype=np.float32)), op, False, False)
    refuses(net.network.add_cumulative, net.input("b", (3,), trt.bool), net.const(np.array(0, dtype=np.int32)),
            op, False, False)


# ------------------------------------------------------------------------------- attention
def _attn_ref(q: np.ndarray, k: np.ndarray, v: np.ndarray, allowed: np.ndarray | None = None,
              add: np.ndarray | None = None, softmax: bool = True) -> np.ndarray:
    """softmax(Q K^T + add, masked where not allowed) V, no scaling, kv heads shared by groups."""
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ np.swapaxes(k, -1, -2)
    if add is not None:
        s = s + add
    if softmax:
        if allowed is not None:
            s = np.where(allowed, s, -np.inf)
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
    else:
        p = np.where(allowed, s, 0.0) if allowed is not None else s
    return p @ v


def _qkv(b: int = 2, hq: int = 4, hkv: int = 4, sq: int = 5, skv: int = 5, d: int = 8,
         seed: int = 80) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return rand(b, hq, sq, d, seed=seed), rand(b, hkv, skv, d, seed=seed + 1), rand(b, hkv, skv, d, seed=seed + 2)


def _attention_net(ns: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   dtype: Any = None) -> tuple[Net, Any]:
    net = Net(ns)
    dt = dtype if dtype is not None else ns.float32
    att = net.network.add_attention(net.input("q", q.shape, dt), net.input("k", k.shape, dt),
                                    net.input("v", v.shape, dt), ns.AttentionNormalizationOp.SOFTMAX, causal)
    return net, att


def test_attention_plain_matches_reference_and_sdpa() -> None:
    q, k, v = _qkv()
    net, att = _attention_net(trt, q, k, v)
    (y,) = infer(net.build(att.get_output(0)), {"q": q, "k": k, "v": v})
    close(y, _attn_ref(f64(q), f64(k), f64(v)))
    torch.testing.assert_close(y, F.scaled_dot_product_attention(q, k, v, scale=1.0), **F32)


def test_attention_object_and_boundary_layers() -> None:
    q, k, v = _qkv()
    net, att = _attention_net(trt, q, k, v)
    assert type(att).__name__ == "IAttention" and isinstance(att, trt.IAttention)
    assert att.num_inputs == 3 and att.num_outputs == 1
    assert att.norm_op == trt.AttentionNormalizationOp.SOFTMAX and not att.causal and not att.decomposable
    assert att.mask is None and att.get_input(3) is None and att.get_output(1) is None
    assert [att.get_input(i).name for i in range(3)] == ["q", "k", "v"]
    types = [net.network.get_layer(i).type for i in range(net.network.num_layers)]
    assert types == [trt.LayerType.ATTENTION_INPUT, trt.LayerType.ATTENTION_OUTPUT]
    boundary = [net.network.get_layer(i) for i in range(2)]
    assert all(type(b) is trt.ILayer for b in boundary)  # TensorRT: get_layer gives the base class
    boundary[0].__class__, boundary[1].__class__ = trt.IAttentionInputLayer, trt.IAttentionOutputLayer
    assert boundary[0].attention is att and boundary[1].attention is att
    assert net.network.get_layer(1).get_output(0) is att.get_output(0)
    att.name, att.metadata, att.decomposable = "attn", "meta", True
    assert (att.name, att.metadata, att.decomposable) == ("attn", "meta", True)
    with pytest.raises(AttributeError):  # TensorRT 10.16 has no causal_kind
        att.causal_kind  # noqa: B018
    with pytest.raises(NetworkDefinitionError):
        att.set_input(3, att.get_input(0))


def test_attention_bool_and_add_masks() -> None:
    q, k, v = _qkv(sq=3, skv=6, seed=90)
    g = torch.Generator().manual_seed(91)
    allowed = torch.rand(2, 1, 3, 6, generator=g) > 0.3
    allowed[..., 0] = True  # no fully masked row
    add = rand(1, 4, 3, 6, seed=92)
    for mask, kw in ((allowed, {"allowed": allowed.numpy()}), (add, {"add": f64(add)})):
        net, att = _attention_net(trt, q, k, v)
        dt = trt.bool if mask.dtype == torch.bool else trt.float32
        att.mask = net.input("m", mask.shape, dt)
        assert att.mask.name == "m"
        (y,) = infer(net.build(att.get_output(0)), {"q": q, "k": k, "v": v, "m": mask})
        close(y, _attn_ref(f64(q), f64(k), f64(v), **kw))


def test_attention_causal_gqa_and_half() -> None:
    q, k, v = _qkv(hq=6, hkv=2, sq=4, skv=7, seed=100)
    upper_left = np.tril(np.ones((4, 7), dtype=bool))
    net, att = _attention_net(trt, q.half(), k.half(), v.half(), causal=True, dtype=trt.float16)
    assert att.causal
    (y,) = infer(net.build(att.get_output(0)), {"q": q.half(), "k": k.half(), "v": v.half()})
    assert y.dtype == torch.float16
    close(y, _attn_ref(f64(q.half()), f64(k.half()), f64(v.half()), allowed=upper_left), F16)


def test_attention_v2_lower_right_causal_and_norm_none() -> None:
    q, k, v = _qkv(sq=3, skv=5, seed=110)
    lower_right = np.tril(np.ones((3, 5), dtype=bool), k=5 - 3)
    net = Net(trt11)
    ins = [net.input(n, t.shape) for n, t in (("q", q), ("k", k), ("v", v))]
    att = net.network.add_attention_v2(*ins, trt11.AttentionNormalizationOp.SOFTMAX,
                                       trt11.CausalMaskKind.LOWER_RIGHT)
    assert att.causal and att.causal_kind == trt11.CausalMaskKind.LOWER_RIGHT
    att2 = net.network.add_attention(*ins, trt11.AttentionNormalizationOp.NONE, False)
    att2.decomposable = True
    y, y2 = infer(net.build(att.get_output(0), att2.get_output(0)), {"q": q, "k": k, "v": v}, ns=trt11)
    close(y, _attn_ref(f64(q), f64(k), f64(v), allowed=lower_right))
    close(y2, _attn_ref(f64(q), f64(k), f64(v), softmax=False), {"rtol": 1e-5, "atol": 1e-4})


def test_attention_packed_forms_and_kv_lengths() -> None:
    # 11.1: PACKED_NHD query/key/value with cumulative lengths, against a per-sequence reference
    lens_q, lens_kv = [2, 3], [4, 1]
    q = rand(sum(lens_q), 4, 8, seed=120)
    k, v = rand(sum(lens_kv), 2, 8, seed=121), rand(sum(lens_kv), 2, 8, seed=122)
    net = Net(trt11)
    att = net.network.add_attention(net.input("q", q.shape), net.input("k", k.shape), net.input("v", v.shape),
                                    trt11.AttentionNormalizationOp.SOFTMAX, False)
    att.query_form = trt11.AttentionIOForm.PACKED_NHD
    att.key_value_form = trt11.AttentionIOForm.PACKED_NHD
    att.query_lengths = net.input("ql", (3,), trt11.int32)
    att.key_value_lengths = net.input("kl", (3,), trt11.int32)
    feeds = {"q": q, "k": k, "v": v, "ql": torch.tensor([0, 2, 5], dtype=torch.int32),
             "kl": torch.tensor([0, 4, 5], dtype=torch.int32)}
    (y,) = infer(net.build(att.get_output(0)), feeds, ns=trt11)
    oq, ok = np.cumsum([0, *lens_q]), np.cumsum([0, *lens_kv])
    for b in range(2):
        qb = np.swapaxes(f64(q)[oq[b]:oq[b + 1]], 0, 1)[None]
        kb = np.swapaxes(f64(k)[ok[b]:ok[b + 1]], 0, 1)[None]
        vb = np.swapaxes(f64(v)[ok[b]:ok[b + 1]], 0, 1)[None]
        close(y[oq[b]:oq[b + 1]], np.swapaxes(_attn_ref(qb, kb, vb)[0], 0, 1))
    # padded key/value with per-batch lengths
    q2, k2, v2 = _qkv(sq=2, skv=6, seed=123)
    net2 = Net(trt11)
    att2 = net2.network.add_attention(net2.input("q", q2.shape), net2.input("k", k2.shape),
                                      net2.input("v", v2.shape), trt11.AttentionNormalizationOp.SOFTMAX, False)
    att2.key_value_lengths = net2.input("kl", (2,), trt11.int32)
    (y2,) = infer(net2.build(att2.get_output(0)),
                  {"q": q2, "k": k2, "v": v2, "kl": torch.tensor([6, 3], dtype=torch.int32)}, ns=trt11)
    allowed = (np.arange(6)[None, :] < np.array([6, 3])[:, None])[:, None, None, :]
    close(y2, _attn_ref(f64(q2), f64(k2), f64(v2), allowed=allowed))


def test_attention_int8_quantized_normalization() -> None:
    q, k, v = _qkv(seed=130)
    net, att = _attention_net(trt, q, k, v)
    att.normalization_quantize_to_type = trt.int8
    att.normalization_quantize_scale = net.const(np.array(1 / 127, dtype=np.float32))
    (y,) = infer(net.build(att.get_output(0)), {"q": q, "k": k, "v": v})
    s = f64(q) @ np.swapaxes(f64(k), -1, -2)
    p = np.exp(s - s.max(-1, keepdims=True))
    p = p / p.sum(-1, keepdims=True)
    scale = float(np.float32(1 / 127))
    pq = np.clip(np.round(p / scale), -128, 127) * scale
    close(y, pq @ f64(v), {"rtol": 1e-4, "atol": 1e-4})


def test_attention_dynamic_sequence_length() -> None:
    net = Net()
    q, k = net.input("q", (1, 2, -1, 8)), net.input("k", (1, 2, -1, 8))
    net.dynamic("q", (1, 2, 1, 8), (1, 2, 4, 8), (1, 2, 16, 8))
    net.dynamic("k", (1, 2, 1, 8), (1, 2, 4, 8), (1, 2, 16, 8))
    att = net.network.add_attention(q, k, k, trt.AttentionNormalizationOp.SOFTMAX, False)
    assert tuple(att.get_output(0).shape) == (1, 2, -1, 8)
    engine = net.build(att.get_output(0))
    for sq, skv in ((1, 9), (5, 3)):
        qv, kv = rand(1, 2, sq, 8, seed=sq), rand(1, 2, skv, 8, seed=skv + 50)
        (y,) = infer(engine, {"q": qv, "k": kv})
        close(y, _attn_ref(f64(qv), f64(kv), f64(kv)))


def test_attention_refusals() -> None:
    q, k, v = _qkv()
    net, att = _attention_net(trt, q, k, v, causal=True)
    att.mask = net.input("m", (1, 1, 5, 5), trt.bool)
    assert net.plan(att.get_output(0)) is None  # a mask and causal attention do not combine
    net = Net()
    f32, f16 = trt.float32, trt.float16
    norm = trt.AttentionNormalizationOp.SOFTMAX
    add = net.network.add_attention
    q4, k4 = net.input("q", (2, 4, 5, 8)), net.input("k", (2, 4, 5, 8))
    invalid(add(net.input("q3", (4, 5, 8)), k4, k4, norm, False).get_output(0))  # rank 3 (PADDED_BHND)
    invalid(add(q4, k4, net.input("vh", (2, 4, 5, 8), f16), norm, False).get_output(0))  # types
    invalid(add(q4, net.input("k3", (2, 3, 5, 8)), net.input("v3", (2, 3, 5, 8)), norm,
                False).get_output(0))  # 4 query heads, 3 kv heads
    invalid(add(q4, k4, net.input("v9", (2, 4, 6, 8)), norm, False).get_output(0))  # k/v shapes
    invalid(add(net.input("qi", (2, 4, 5, 8), trt.int32), net.input("ki", (2, 4, 5, 8), trt.int32),
                net.input("vi", (2, 4, 5, 8), trt.int32), norm, False).get_output(0))
    ok = add(q4, k4, k4, norm, False)
    assert tuple(ok.get_output(0).shape) == (2, 4, 5, 8)
    ok.mask = net.input("mi", (2, 4, 5, 5), trt.int32)
    invalid(ok.get_output(0))  # INT32 mask
    ok.mask = None
    assert ok.mask is None and tuple(ok.get_output(0).shape) == (2, 4, 5, 8)
    ok.mask = net.input("m3", (2, 4, 4, 5), trt.bool)
    invalid(ok.get_output(0))  # mask s_q 4 != 5
    ok.mask = None
    ok.normalization_quantize_to_type = trt.int8
    ok.normalization_quantize_scale = net.const(np.array(1 / 127, dtype=np.float16))
    invalid(ok.get_output(0))  # the scale's type is the query's (T1): FLOAT here, not HALF
    with pytest.raises(NetworkDefinitionError):
        ok.normalization_quantize_to_type = f32
    net11 = Net(trt11)
    packed = net11.network.add_attention(net11.input("q", (5, 4, 8)), net11.input("k", (5, 4, 8)),
                                         net11.input("v", (5, 4, 8)), trt11.AttentionNormalizationOp.SOFTMAX, False)
    packed.query_form = trt11.AttentionIOForm.PACKED_NHD
    packed.key_value_form = trt11.AttentionIOForm.PACKED_NHD
    invalid(packed.get_output(0))  # PACKED_NHD needs query_lengths / key_value_lengths


# ------------------------------------------------------------------------ rotary embedding
def _rope_ref(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, interleaved: bool, rdim: int) -> np.ndarray:
    """Rotate 2-vectors by the angle whose cos/sin are given, as complex products.

    cos/sin: [b, s, rdim/2]. Pairs are (x[2i], x[2i+1]) when interleaved, else (x[i], x[i + rdim/2])."""
    out = x.copy()
    rot = cos[:, None] + 1j * sin[:, None]
    if interleaved:
        z = x[..., 0:rdim:2] + 1j * x[..., 1:rdim:2]
        z = z * rot
        out[..., 0:rdim:2], out[..., 1:rdim:2] = z.real, z.imag
    else:
        half = rdim // 2
        z = (x[..., :half] + 1j * x[..., half:rdim]) * rot
        out[..., :half], out[..., half:rdim] = z.real, z.imag
    return out


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("rdim", [0, 4])
def test_rotary_embedding_with_position_ids(interleaved: bool, rdim: int) -> None:
    b, n, s, h = 2, 3, 4, 8
    r = rdim or h
    x = rand(b, n, s, h, seed=140)
    theta = torch.arange(16)[:, None].double() * 0.3 ** (torch.arange(r // 2)[None].double())
    cos, sin = torch.cos(theta).float(), torch.sin(theta).float()
    pos = torch.tensor([[0, 1, 2, 3], [5, 9, 2, 15]], dtype=torch.int64)
    net = Net()
    layer = net.network.add_rotary_embedding(net.input("x", x.shape), net.input("c", cos.shape),
                                             net.input("s", sin.shape), interleaved, rdim)
    layer.set_input(3, net.input("p", pos.shape, trt.int64))
    assert (layer.interleaved, layer.rotary_embedding_dim) == (interleaved, rdim)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x, "c": cos, "s": sin, "p": pos})
    close(y, _rope_ref(f64(x), f64(cos)[pos.numpy()], f64(sin)[pos.numpy()], interleaved, r))


def test_rotary_embedding_per_token_caches_half() -> None:
    b, n, s, h = 2, 2, 3, 6
    x = rand(b, n, s, h, seed=150).half()
    ang = rand(b, s, h // 2, seed=151)
    cos, sin = torch.cos(ang).half(), torch.sin(ang).half()
    net = Net()
    layer = net.network.add_rotary_embedding(net.input("x", x.shape, trt.float16), net.input("c", cos.shape, trt.float16),
                                             net.input("s", sin.shape, trt.float16), False, 0)
    (y,) = infer(net.build(layer.get_output(0)), {"x": x, "c": cos, "s": sin})
    assert y.dtype == torch.float16
    close(y, _rope_ref(f64(x), f64(cos), f64(sin), False, h), F16)


def test_rotary_embedding_refusals() -> None:
    net = Net()
    x = net.input("x", (1, 2, 4, 8))
    c, s = net.input("c", (16, 4)), net.input("s", (16, 4))
    pos = net.input("p", (1, 4), trt.int64)
    rope = net.network.add_rotary_embedding

    def with_pos(layer: Any) -> Any:
        layer.set_input(3, pos)
        return layer.get_output(0)

    invalid(with_pos(rope(x, c, s, False, 3)))  # odd
    invalid(with_pos(rope(x, c, s, False, 10)))  # > head size
    invalid(with_pos(rope(x, net.input("ch", (16, 4), trt.float16), s, False, 0)))  # cache type
    invalid(with_pos(rope(net.input("x3", (2, 4, 8)), c, s, False, 0)))  # rank 3
    invalid(with_pos(rope(x, net.input("c5", (16, 5)), net.input("s5", (16, 5)), False, 0)))  # h/2 != 5
    invalid(rope(x, c, s, False, 0).get_output(0))  # a [max_pos + 1, h/2] cache needs position ids
    layer = rope(x, c, s, False, 0)
    layer.set_input(3, net.input("p32", (1, 4), trt.int32))
    invalid(layer.get_output(0))  # position ids must be INT64
    layer.set_input(3, pos)
    assert tuple(layer.get_output(0).shape) == (1, 2, 4, 8)


# -------------------------------------------------------------------------- KV-cache update
def test_kv_cache_update_in_place_and_aliasing() -> None:
    cache = torch.zeros(2, 3, 6, 4)
    update = rand(2, 3, 2, 4, seed=160)
    idx = torch.tensor([1, 4], dtype=torch.int32)
    net = Net()
    layer = net.network.add_kv_cache_update(net.input("cache", cache.shape), net.input("u", update.shape),
                                            net.input("i", (2,), trt.int32), trt.KVCacheMode.LINEAR)
    assert layer.cache_mode == trt.KVCacheMode.LINEAR
    layer.get_output(0).name = "cache_out"
    engine = net.build(layer.get_output(0))
    assert engine.get_aliased_input_tensor("cache_out") == "cache"
    assert engine.get_aliased_input_tensor("u") is None
    want = cache.clone()
    for b in range(2):
        want[b, :, idx[b]:idx[b] + 2] = update[b]
    ctx = engine.create_execution_context()
    for name, t in (("cache", cache), ("u", update), ("i", idx)):
        ctx.set_input_shape(name, list(t.shape))
        ctx.set_tensor_address(name, t)
    ctx.set_tensor_address("cache_out", cache)  # the output shares the cache buffer, as in TensorRT
    assert ctx.execute_async_v3(0)
    assert torch.equal(cache, want)


def test_kv_cache_update_output_must_be_a_network_output() -> None:
    """The output shares the cache input's buffer (an in-place update): TensorRT requires it to be a
    network output, not a tensor that other layers consume inside the network."""
    net = Net()
    layer = net.network.add_kv_cache_update(net.input("cache", (1, 1, 4, 2)), net.input("u", (1, 1, 1, 2)),
                                            net.input("i", (1,), trt.int32), trt.KVCacheMode.LINEAR)
    assert net.build_fails(net.network.add_identity(layer.get_output(0)).get_output(0))


def test_kv_cache_update_drops_out_of_bound_positions() -> None:
    cache = torch.zeros(1, 1, 4, 2, dtype=torch.float16)
    update = torch.arange(6, dtype=torch.float16).reshape(1, 1, 3, 2) + 1
    net = Net()
    layer = net.network.add_kv_cache_update(net.input("cache", cache.shape, trt.float16),
                                            net.input("u", update.shape, trt.float16),
                                            net.input("i", (1,), trt.int64), trt.KVCacheMode.LINEAR)
    (y,) = infer(net.build(layer.get_output(0)), {"cache": cache, "u": update, "i": torch.tensor([2])})
    assert y.tolist() == [[[[0, 0], [0, 0], [1, 2], [3, 4]]]]


def test_kv_cache_update_packed_update_form() -> None:
    cache = torch.zeros(2, 1, 5, 2)
    update = torch.arange(8, dtype=torch.float32).reshape(4, 1, 2)  # 3 tokens of seq 0, 1 of seq 1
    net = Net(trt11)
    layer = net.network.add_kv_cache_update(net.input("cache", cache.shape), net.input("u", update.shape),
                                            net.input("i", (2,), trt11.int32), trt11.KVCacheMode.LINEAR)
    layer.update_form = trt11.AttentionIOForm.PACKED_NHD
    layer.update_lengths = net.input("l", (3,), trt11.int32)
    feeds = {"cache": cache, "u": update, "i": torch.tensor([1, 0], dtype=torch.int32),
             "l": torch.tensor([0, 3, 4], dtype=torch.int32)}
    (y,) = infer(net.build(layer.get_output(0)), feeds, ns=trt11)
    want = torch.zeros(2, 1, 5, 2)
    want[0, 0, 1:4] = update[0:3, 0]
    want[1, 0, 0:1] = update[3:4, 0]
    assert torch.equal(y, want)


def test_kv_cache_update_refusals() -> None:
    net = Net()
    mode = trt.KVCacheMode.LINEAR
    cache, upd, idx = net.input("cache", (1, 2, 8, 4)), net.input("u", (1, 2, 2, 4)), net.input("i", (1,), trt.int32)
    kv = net.network.add_kv_cache_update
    const_cache = net.const(np.zeros((1, 2, 8, 4), dtype=np.float32))
    invalid(kv(const_cache, upd, idx, mode).get_output(0))  # not a network input
    invalid(kv(cache, net.input("uh", (1, 2, 2, 4), trt.float16), idx, mode).get_output(0))  # types
    invalid(kv(cache, upd, net.input("if", (1,)), mode).get_output(0))  # index type
    invalid(kv(cache, net.input("u9", (1, 2, 9, 4)), idx, mode).get_output(0))  # longer than s_max
    invalid(kv(cache, net.input("u3", (1, 3, 2, 4)), idx, mode).get_output(0))  # heads
    invalid(kv(net.input("dyn", (1, 2, -1, 4)), upd, idx, mode).get_output(0))  # dynamic s_max
    assert net.plan(kv(cache, upd, idx, mode).get_output(0)) is None  # the invalid layers fail the build
    net11 = Net(trt11)
    layer = net11.network.add_kv_cache_update(net11.input("cache", (2, 1, 5, 2)), net11.input("u", (4, 1, 2)),
                                              net11.input("i", (2,), trt11.int32), trt11.KVCacheMode.LINEAR)
    invalid(layer.get_output(0))  # a 3D update needs the PACKED_NHD form
    layer.update_form = trt11.AttentionIOForm.PACKED_NHD
    invalid(layer.get_output(0))  # ... and update_lengths
    layer.update_lengths = net11.input("l", (3,), trt11.int32)
    assert tuple(layer.get_output(0).shape) == (2, 1, 5, 2)


# ------------------------------------------------------------------------------------- NMS
def _nms_ref(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou_thr: float,
             score_thr: float, topk: int | None = None) -> list[list[int]]:
    """Per batch: (box, class) candidates above the score threshold by decreasing score (the first
    ``topk`` of them); per class, a candidate is kept if its IoU with every kept box of its class is
    <= the threshold. 4D boxes [batch, boxes, classes, 4] give each class its own box."""
    rows: list[list[int]] = []
    for b in range(scores.shape[0]):
        cands = [(-scores[b, n, c], n, c) for n in range(scores.shape[1]) for c in range(scores.shape[2])
                 if scores[b, n, c] > score_thr]
        kept: dict[int, list[np.ndarray]] = {}
        for _, n, c in sorted(cands)[:topk]:
            box = boxes[b, n, c] if boxes.ndim == 4 else boxes[b, n]
            lo, hi = np.minimum(box[:2], box[2:]), np.maximum(box[:2], box[2:])
            ok = len(kept.get(c, [])) < max_out
            for other in kept.get(c, []):
                olo, ohi = other
                inter = np.prod(np.clip(np.minimum(hi, ohi) - np.maximum(lo, olo), 0, None))
                union = np.prod(hi - lo) + np.prod(ohi - olo) - inter
                ok = ok and (inter / union if union > 0 else 0.0) <= iou_thr
            if ok:
                kept.setdefault(c, []).append((lo, hi))
                rows.append([b, c, n])
    return rows


def test_nms_against_reference_with_data_dependent_output() -> None:
    g = torch.Generator().manual_seed(170)
    xy = torch.rand(2, 12, 2, generator=g) * 10
    boxes = torch.cat([xy, xy + 2 + torch.rand(2, 12, 2, generator=g) * 3], -1)
    scores = torch.rand(2, 12, 3, generator=g)
    net = Net()
    layer = net.network.add_nms(net.input("boxes", boxes.shape), net.input("scores", scores.shape),
                                net.const(np.array(3, dtype=np.int32)), trt.int64)
    layer.set_input(3, net.const(np.array(0.3, dtype=np.float32)))
    layer.set_input(4, net.const(np.array(0.2, dtype=np.float32)))
    assert tuple(layer.get_output(0).shape) == (-1, 3) and tuple(layer.get_output(1).shape) == ()
    assert layer.bounding_box_format == trt.BoundingBoxFormat.CORNER_PAIRS
    sel, count = infer(net.build(layer.get_output(0), layer.get_output(1)), {"boxes": boxes, "scores": scores})
    want = _nms_ref(boxes.double().numpy(), scores.double().numpy(), 3, 0.3, 0.2)
    assert sel.dtype == torch.int64 and count.dtype == torch.int32
    assert sel.tolist() == want and int(count) == len(want) > 0


def test_nms_per_class_boxes_and_topk_limit() -> None:
    g = torch.Generator().manual_seed(171)
    xy = torch.rand(1, 10, 3, 2, generator=g) * 6
    boxes = torch.cat([xy, xy + 2 + torch.rand(1, 10, 3, 2, generator=g) * 3], -1)  # a box per class
    scores = torch.rand(1, 10, 3, generator=g)
    for topk in (5000, 7):
        net = Net()
        layer = net.network.add_nms(net.input("boxes", boxes.shape), net.input("scores", scores.shape),
                                    net.const(np.array(4, dtype=np.int32)))
        layer.set_input(3, net.const(np.array(0.25, dtype=np.float32)))
        layer.topk_box_limit = topk
        sel, count = infer(net.build(layer.get_output(0), layer.get_output(1)), {"boxes": boxes, "scores": scores})
        want = _nms_ref(boxes.double().numpy(), scores.double().numpy(), 4, 0.25, 0.0, topk)
        assert sel.tolist() == want and int(count) == len(want), topk
    assert len(want) < len(_nms_ref(boxes.double().numpy(), scores.double().numpy(), 4, 0.25, 0.0))  # k cut
    shared = _nms_ref(boxes[:, :, 0].double().numpy(), scores.double().numpy(), 4, 0.25, 0.0)
    assert shared != _nms_ref(boxes.double().numpy(), scores.double().numpy(), 4, 0.25, 0.0)  # boxes matter


def test_nms_center_sizes_format_and_refusals() -> None:
    boxes = torch.tensor([[[5.0, 5, 4, 4], [5.5, 5, 4, 4], [20, 20, 2, 2]]])  # centers and sizes
    scores = torch.tensor([[[0.9], [0.8], [0.7]]])
    net = Net()
    layer = net.network.add_nms(net.input("boxes", boxes.shape), net.input("scores", scores.shape),
                                net.const(np.array(10, dtype=np.int32)))
    layer.bounding_box_format = trt.BoundingBoxFormat.CENTER_SIZES
    layer.set_input(3, net.const(np.array(0.5, dtype=np.float32)))
    sel, count = infer(net.build(layer.get_output(0), layer.get_output(1)), {"boxes": boxes, "scores": scores})
    # box 1 overlaps box 0 with IoU 3.5*4 / (2*16 - 14) = 0.78 > 0.5: suppressed
    assert sel.dtype == torch.int32 and sel.tolist() == [[0, 0, 0], [0, 0, 2]] and int(count) == 2
    net = Net()
    b, s = net.input("b", (1, 3, 4)), net.input("s", (1, 3, 2))
    m = net.const(np.array(1, dtype=np.int32))
    refuses(net.network.add_nms, b, net.input("s16", (1, 3, 2), trt.float16), m)
    refuses(net.network.add_nms, b, s, net.const(np.array([1], dtype=np.int32)))  # not 0D
    refuses(net.network.add_nms, net.input("b5", (1, 3, 5)), s, m)
    refuses(net.network.add_nms, b, s, m, trt.float32)
    net13 = Net(trt13)
    with pytest.raises(TypeError):  # TensorRT 10.13 has no indices_type overload
        net13.network.add_nms(net13.input("b", (1, 3, 4)), net13.input("s", (1, 3, 2)),
                              net13.const(np.array(1, dtype=np.int32)), trt13.int32)


# ----------------------------------------------------------------------- plan / engine round trip
def test_serialized_engine_round_trip_keeps_attention_topk_and_cumulative_settings() -> None:
    q, k, v = _qkv(sq=4, skv=4, seed=180)
    x = rand(3, 6, seed=181)
    net = Net(trt11)
    att = net.network.add_attention_v2(*(net.input(n, t.shape) for n, t in (("q", q), ("k", k), ("v", v))),
                                       trt11.AttentionNormalizationOp.SOFTMAX, trt11.CausalMaskKind.UPPER_LEFT)
    xt = net.input("x", x.shape)
    top = net.network.add_topk(xt, trt11.TopKOperation.MIN, 2, 2, trt11.int64)
    cum = net.network.add_cumulative(xt, net.const(np.array(1, dtype=np.int32)), trt11.CumulativeOperation.SUM,
                                     True, True)
    engine = net.build(att.get_output(0), top.get_output(1), cum.get_output(0))
    again = trt11.Runtime(trt11.Logger()).deserialize_cuda_engine(engine.serialize())
    feeds = {"q": q, "k": k, "v": v, "x": x}
    y, idx, c = infer(again, feeds, ns=trt11)
    close(y, _attn_ref(f64(q), f64(k), f64(v), allowed=np.tril(np.ones((4, 4), dtype=bool))))
    assert idx.dtype == torch.int64 and torch.equal(idx, torch.topk(x, 2, 1, largest=False).indices)
    close(c, _cum_ref(f64(x), 1, True, True))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_layers_run_on_cuda_tensors() -> None:
    dev = torch.device("cuda")
    q, k, v = (t.to(dev) for t in _qkv(seed=190))
    net, att = _attention_net(trt, q, k, v, causal=True)
    red = net.network.add_reduce(att.get_output(0), RO.SUM, 0b1000, False)
    engine = net.build(red.get_output(0))
    ctx = engine.create_execution_context()
    for name, t in (("q", q), ("k", k), ("v", v)):
        ctx.set_input_shape(name, list(t.shape))
        ctx.set_tensor_address(name, t)
    out = torch.empty(2, 4, 5, device=dev)
    ctx.set_tensor_address(red.get_output(0).name, out)
    assert ctx.execute_async_v3(0)
    want = _attn_ref(f64(q.cpu()), f64(k.cpu()), f64(v.cpu()), allowed=np.tril(np.ones((5, 5), dtype=bool))).sum(-1)
    close(out.cpu(), want, {"rtol": 1e-4, "atol": 1e-4})
