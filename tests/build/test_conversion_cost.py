"""What makes conversion cheap keeps every guarantee: the sim plan container (format 2: aligned blob
area, CRC-32; format 1 still loads), zero-copy loading of a fresh plan, the shape inference memo, the
strict guard's stack handling and the argument scan that replaces pytree on plain containers."""

from __future__ import annotations

import collections
import ctypes
import hashlib
import struct
import zlib

import pytest
import torch
import torch.nn.functional as F
from torch.utils._pytree import tree_flatten

import torch2trt_lite
import torch2trt_lite.sim as trt
from torch2trt_lite.errors import EngineFileError, UnsupportedOperatorError
from torch2trt_lite.sim import _crc, _plan
from torch2trt_lite.sim._core import Weights
from torch2trt_lite.trace import tracer
from torch2trt_lite.trace.context import arg_tensors


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.flatten(1))


@pytest.fixture(scope="module")
def converted() -> tuple[torch.nn.Module, torch.Tensor, torch2trt_lite.TRTModule]:
    m = Net().eval()
    x = torch.randn(2, 3, 6, 6)
    return m, x, torch2trt_lite.convert(m, [x], backend="sim")


def _blob_area(plan: bytes | bytearray) -> memoryview:
    return _plan.parse(plan)[1]


def test_fresh_plan_is_aligned_and_loads_in_place(converted: tuple) -> None:
    m, x, t = converted
    plan = t.plan
    magic, version, _ = _plan._HEAD.unpack_from(plan, 0)
    assert magic == _plan.MAGIC and version == 2
    raw = _blob_area(plan)
    assert _plan._address(raw) % 64 == 0
    # the engine's weights are views of the plan buffer, not copies
    start, end = _plan._address(raw), _plan._address(raw) + len(raw)
    weights = [w for layer in t._engine._layers for w in layer._a.values() if isinstance(w, Weights) and len(w)]
    assert weights and all(start <= w._tensor().data_ptr() < end for w in weights)
    torch.testing.assert_close(t(x), m(x), rtol=1e-4, atol=1e-5)


def test_copied_plan_loads_bit_identical(converted: tuple) -> None:
    _, x, t = converted
    again = torch2trt_lite.TRTModule(bytes(t.plan), t.metadata)  # not trusted: checked, copied aligned
    assert torch.equal(again(x), t(x))
    layer_w = [w for layer in again._engine._layers for w in layer._a.values() if isinstance(w, Weights) and len(w)]
    assert all(w._tensor().data_ptr() % 64 == 0 for w in layer_w)


@pytest.mark.parametrize("where", ["header", "blob", "checksum"])
def test_corrupt_plan_is_refused(converted: tuple, where: str) -> None:
    _, _, t = converted
    plan = bytearray(t.plan)
    n = _plan._HEAD.unpack_from(plan, 0)[2]
    pos = {"header": _plan._HEAD.size + 3, "blob": _plan._HEAD.size + n + 70, "checksum": len(plan) - 2}[where]
    plan[pos] ^= 0x10
    with pytest.raises(EngineFileError, match="checksum"):
        torch2trt_lite.TRTModule(bytes(plan), t.metadata)


def test_truncated_plan_is_refused(converted: tuple) -> None:
    _, _, t = converted
    for cut in (len(t.plan) // 2, len(t.plan) - 1, 10):
        with pytest.raises(EngineFileError):
            torch2trt_lite.TRTModule(bytes(t.plan[:cut]), t.metadata)


def test_format_1_plan_still_loads(converted: tuple) -> None:
    _, x, t = converted
    body = bytearray(t.plan[:-4])
    struct.pack_into("<I", body, 8, 1)  # version 1: a SHA-256 trailer instead of the CRC-32
    v1 = bytes(body) + hashlib.sha256(body).digest()
    old = torch2trt_lite.TRTModule(v1, t.metadata)
    assert torch.equal(old(x), t(x))
    bad = bytearray(v1)
    bad[-40] ^= 1
    with pytest.raises(EngineFileError, match="checksum"):
        torch2trt_lite.TRTModule(bytes(bad), t.metadata)
    unknown = bytearray(t.plan)
    struct.pack_into("<I", unknown, 8, 7)
    with pytest.raises(EngineFileError, match="format version 7"):
        torch2trt_lite.TRTModule(bytes(unknown), t.metadata)



def test_plan_trailer_is_zlib_crc32(converted: tuple) -> None:
    _, _, t = converted
    plan = bytes(t.plan)
    assert struct.unpack_from("<I", plan, len(plan) - 4)[0] == zlib.crc32(plan[:-4])


@pytest.mark.parametrize("n", [0, 1, 7, 4096, 100_003])
def test_crc32_combine_matches_zlib(n: int) -> None:
    g = torch.Generator().manual_seed(n)
    data = torch.randint(0, 256, (2 * n + 5,), dtype=torch.uint8, generator=g).numpy().tobytes()
    for cut in {0, n, len(data)}:
        a, b = data[:cut], data[cut:]
        assert _crc.combine(zlib.crc32(a), zlib.crc32(b), len(b)) == zlib.crc32(data)


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_parallel_crc32_matches_zlib(monkeypatch: pytest.MonkeyPatch, threads: int) -> None:
    monkeypatch.setattr(_crc, "_PIECE", 1000)  # pieces of a small buffer, so every split is taken
    g = torch.Generator().manual_seed(threads)
    data = torch.randint(0, 256, (10_007,), dtype=torch.uint8, generator=g).numpy().tobytes()
    for n in (0, 999, 1000, 2500, len(data)):
        assert _crc.crc32(memoryview(data[:n]), threads) == zlib.crc32(data[:n]), (threads, n)


def test_saved_engine_round_trip(converted: tuple, tmp_path: object) -> None:
    _, x, t = converted
    path = f"{tmp_path}/n.engine"
    t.save(path)
    assert torch.equal(torch2trt_lite.load(path)(x), t(x))
    raw = f"{tmp_path}/n.plan"
    t.save_plan(raw)
    with open(raw, "rb") as f:
        data = f.read()
    assert data == bytes(t.plan)


# --------------------------------------------------------------------------- shape inference memo
def _network() -> tuple[object, object]:
    builder = trt.Builder(trt.Logger())
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    return builder, net


def test_probe_memo_repeats_give_the_same_infos() -> None:
    _, net = _network()
    x = net.add_input("x", trt.DataType.FLOAT, (2, 4, 8))
    y = x
    for _ in range(5):
        y = net.add_activation(y, trt.ActivationType.RELU).get_output(0)
        y = net.add_elementwise(y, x, trt.ElementWiseOperation.SUM).get_output(0)
    assert len(net._probe_memo) == 2  # one activation and one elementwise configuration
    shapes = [tuple(net.get_layer(i).get_output(0).shape) for i in range(net.num_layers)]
    # the same network without the memo infers the same shapes and dtypes
    for i in range(net.num_layers):
        net.get_layer(i)._cache = None
    net._probe_memo = None
    assert [tuple(net.get_layer(i).get_output(0).shape) for i in range(net.num_layers)] == shapes
    assert all(net.get_layer(i).get_output(0).dtype == trt.DataType.FLOAT for i in range(net.num_layers))


def test_probe_memo_skips_known_values_and_dynamic_shapes() -> None:
    _, net = _network()
    x = net.add_input("x", trt.DataType.FLOAT, (-1, 6))
    shape = net.add_shape(x).get_output(0)  # a shape tensor: real values in probes
    net.add_elementwise(shape, shape, trt.ElementWiseOperation.SUM)
    assert not net._probe_memo
    r1 = net.add_activation(x, trt.ActivationType.RELU).get_output(0)
    r2 = net.add_activation(x, trt.ActivationType.RELU).get_output(0)
    assert tuple(r1.shape) == tuple(r2.shape) == (-1, 6)
    assert len(net._probe_memo) == 1  # both probes (two sizes of the dynamic dim) are memoized together


def test_probe_memo_keys_settings() -> None:
    _, net = _network()
    x = net.add_input("x", trt.DataType.FLOAT, (1, 3, 8, 8))
    p = net.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2))
    p.stride_nd = (2, 2)
    q = net.add_pooling_nd(x, trt.PoolingType.MAX, (2, 2))
    q.stride_nd = (1, 1)
    assert tuple(p.get_output(0).shape) == (1, 3, 4, 4)
    assert tuple(q.get_output(0).shape) == (1, 3, 7, 7)


# ------------------------------------------------------------------------------ guard and args
class _Probe(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) + 1


def test_guard_off_the_stack_only_while_a_converted_call_runs() -> None:
    seen = []
    orig = tracer.Tracer.convert_call

    def spy(self: tracer.Tracer, *a: object) -> None:
        seen.append(self.guard is not None and any(m is self.guard for m in _stack()))
        orig(self, *a)

    tracer.Tracer.convert_call = spy  # type: ignore[method-assign]
    try:
        torch2trt_lite.convert(_Probe().eval(), [torch.randn(3)], backend="sim")
    finally:
        tracer.Tracer.convert_call = orig  # type: ignore[method-assign]
    assert seen and not any(seen)
    assert not _stack()


def _stack() -> list[object]:
    from torch.overrides import _get_current_function_mode_stack

    return list(_get_current_function_mode_stack())


def test_guard_still_refuses_after_converted_calls() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(x)
            return torch.special.erfcx(y)  # no converter: the guard must see it

    with pytest.raises(UnsupportedOperatorError, match="erfcx"):
        torch2trt_lite.convert(M().eval(), [torch.randn(3)], backend="sim")
    assert not _stack()


def test_arg_tensors_matches_pytree() -> None:
    a, b, c = torch.ones(1), torch.ones(2), torch.ones(3)
    Pair = collections.namedtuple("Pair", "x y")
    cases = [
        ((a, 1, (2, 3)), {}),
        ((a, [b, {"k": c}]), {"z": (a,)}),
        ((torch.Size([2, 3]), a), {"s": torch.Size([1])}),
        ((), {"w": [[[b]]]}),
    ]
    for args, kwargs in cases:
        want = [t for t in tree_flatten((args, kwargs))[0] if isinstance(t, torch.Tensor)]
        got = arg_tensors(args, kwargs)
        assert got is not None
        assert sorted(map(id, got)) == sorted(map(id, want))
    assert arg_tensors((Pair(a, b),), {}) is None  # namedtuples and registered types: pytree decides
    assert arg_tensors((collections.OrderedDict(k=a),), {}) is None


def test_conv_padding_tuple_args_are_traced() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return F.conv2d(x, torch.ones(2, 1, 3, 3), None, (1, 1), (1, 1))

    m = M().eval()
    x = torch.randn(1, 1, 5, 5)
    t = torch2trt_lite.convert(m, [x], backend="sim")
    torch.testing.assert_close(t(x), m(x))


def test_deferred_weights_are_computed_into_the_plan_once() -> None:
    """BN-folded kernels are DeferredWeights on the sim: the plan build writes them in place."""
    from tests.sim.netbuilder import Net, infer
    from torch2trt_lite.sim._core import DeferredWeights

    filled: list[int] = []

    def fill(out: torch.Tensor) -> None:
        filled.append(out.data_ptr())
        torch.mul(torch.arange(6.0).view(2, 3, 1, 1), 0.5, out=out)

    w = DeferredWeights((2, 3, 1, 1), torch.float32, fill)
    assert (len(w), w.size, w.nbytes) == (6, 6, 24) and not filled  # NOTE: sizes without computing
    net = Net()
    x = net.input("x", (1, 3, 2, 2))
    conv = net.network.add_convolution_nd(x, 2, (1, 1), w, trt.Weights())
    net.network.mark_output(conv.get_output(0))
    plan = net.builder.build_serialized_network(net.network, net.config)
    assert len(filled) == 1, "shape inference must not compute the weights"
    base = memoryview(plan).cast("B")
    start = ctypes.addressof(ctypes.c_char.from_buffer(base))
    assert start <= filled[0] < start + len(base), "computed outside the plan buffer"
    del base
    engine = net.ns.Runtime(net.ns.Logger()).deserialize_cuda_engine(plan)
    xv = torch.randn(1, 3, 2, 2)
    (out,) = infer(engine, {"x": xv})
    torch.testing.assert_close(out, F.conv2d(xv, torch.arange(6.0).view(2, 3, 1, 1) * 0.5), rtol=1e-6, atol=1e-6)
    assert torch.equal(torch.from_numpy(w.numpy()), torch.arange(6.0).view(2, 3, 1, 1) * 0.5) and len(filled) == 2


def test_folded_convolution_kernel_is_deferred_on_the_sim(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch2trt_lite.sim._core import DeferredWeights
    from torch2trt_lite.trace.context import ConversionContext

    made: list[object] = []
    original = ConversionContext.deferred_weights

    def spy(self: ConversionContext, *args: object, **kwargs: object) -> object:
        made.append(original(self, *args, **kwargs))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(ConversionContext, "deferred_weights", spy)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).eval()
    with torch.no_grad():
        model[1].running_var.uniform_(0.5, 2.0)
        model[1].running_mean.uniform_(-0.5, 0.5)
    x = torch.randn(1, 3, 8, 8)
    trt = torch2trt_lite.convert(model, [x], backend="sim")
    assert trt.num_layers == 1
    assert len(made) == 1 and isinstance(made[0], DeferredWeights) and made[0]._cached is None  # never copied
    with torch.no_grad():
        torch.testing.assert_close(trt(x), model(x), rtol=1e-5, atol=1e-5)
