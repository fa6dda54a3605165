"""The sim's control flow (torch2trt_lite/sim/layers/control.py): loops, if-conditionals, assertions.

Every network is built with ``build_serialized_network``, deserialized with
``Runtime.deserialize_cuda_engine`` and run through an execution context, so each test also
round-trips the structure through a plan. References are plain Python loops / branches over torch
tensors that follow TensorRT's documented semantics: a recurrence's LAST_VALUE is its value after
the last iteration, CONCATENATE stacks the per-iteration values along a new axis (REVERSE in
reverse order; slots beyond the trip count are zero), an iterator yields slice ``i`` (``M-1-i`` when
reversed), a WHILE limit is tested before each iteration, a conditional runs only one branch.

Tolerances: the references do the same float32 operations in the same order, so results are
compared with rtol=1e-6, atol=1e-6.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

import tests.sim.netbuilder as netbuilder
import torch2trt_lite.sim as sim
from tests.sim.netbuilder import infer
from torch2trt_lite.errors import NetworkDefinitionError
from torch2trt_lite.sim import api
from torch2trt_lite.sim.layers.basic import IUnaryLayer

TOL = {"rtol": 1e-6, "atol": 1e-6}
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")),
]


@pytest.fixture(autouse=True)
def _seeded() -> None:
    torch.manual_seed(0)  # the random inputs below are reproducible


# ------------------------------------------------------------------------------ helpers
class Net(netbuilder.Net):
    """The shared ``netbuilder.Net``, over the unversioned ``torch2trt_lite.sim`` API by default."""

    def __init__(self, ns: Any = sim) -> None:
        super().__init__(ns)


def doubling_loop(n: Net, x: Any, count: Any) -> tuple[Any, Any, Any]:
    """r = x; repeat count times: y = r + r; r = y. Returns (loop, recurrence, y)."""
    loop = n.network.add_loop()
    loop.add_trip_limit(count, sim.TripLimit.COUNT)
    rec = loop.add_recurrence(x)
    y = n.ew(rec.get_output(0), rec.get_output(0), "SUM")
    rec.set_input(1, y)
    return loop, rec, y


# --------------------------------------------------------------------------------- loops
@pytest.mark.parametrize("device", DEVICES)
def test_for_loop_last_value_and_concatenate(device: str) -> None:
    n = Net()
    x = n.input("x", (2, 3))
    loop, rec, y = doubling_loop(n, x, n.scalar(5))
    last = loop.add_loop_output(rec.get_output(0), sim.LoopOutput.LAST_VALUE)
    cat = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE, 1)
    cat.set_input(1, n.scalar(5))
    engine = n.build(last.get_output(0), cat.get_output(0))

    xv = torch.randn(2, 3)
    got_last, got_cat = infer(engine, {"x": xv}, device)
    r, values = xv.clone(), []
    for _ in range(5):
        r = r + r
        values.append(r)
    torch.testing.assert_close(got_last, r, **TOL)
    torch.testing.assert_close(got_cat, torch.stack(values, dim=1), **TOL)


def test_loop_output_shapes_are_inferred_at_build_time() -> None:
    n = Net()
    x = n.input("x", (2, 3))
    loop, rec, y = doubling_loop(n, x, n.scalar(4))
    last = loop.add_loop_output(rec.get_output(0), sim.LoopOutput.LAST_VALUE)
    cat = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE, 2)
    cat.set_input(1, n.scalar(7))
    assert tuple(last.get_output(0).shape) == (2, 3)
    assert tuple(cat.get_output(0).shape) == (2, 3, 7)
    assert cat.get_output(0).dtype == sim.float32
    assert cat.kind == sim.LoopOutput.CONCATENATE and cat.axis == 2
    assert last.loop is loop and rec.loop is loop
    assert rec.type == sim.LayerType.RECURRENCE and cat.type == sim.LayerType.LOOP_OUTPUT


def test_concatenate_longer_than_trip_count_is_zero_padded() -> None:
    n = Net()
    x = n.input("x", (3,))
    loop, rec, y = doubling_loop(n, x, n.scalar(2))
    cat = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE, 0)
    cat.set_input(1, n.scalar(4))
    engine = n.build(cat.get_output(0))
    xv = torch.tensor([1.0, -2.0, 0.5])
    (got,) = infer(engine, {"x": xv})
    want = torch.stack([2 * xv, 4 * xv, torch.zeros(3), torch.zeros(3)])
    torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("device", DEVICES)
def test_while_loop(device: str) -> None:
    """i = 0, acc = x; while i < limit: acc = acc * 0.5 + x; i += 1."""
    n = Net()
    x = n.input("x", (4,))
    limit = n.input("limit", (), sim.int32)
    loop = n.network.add_loop()
    i = loop.add_recurrence(n.scalar(0))
    acc = loop.add_recurrence(x)
    cond = n.ew(i.get_output(0), limit, "LESS")
    loop.add_trip_limit(cond, sim.TripLimit.WHILE)
    half = n.const(np.array([0.5], dtype=np.float32))
    acc_next = n.ew(n.ew(acc.get_output(0), half, "PROD"), x, "SUM")
    acc.set_input(1, acc_next)
    i.set_input(1, n.ew(i.get_output(0), n.scalar(1), "SUM"))
    out_acc = loop.add_loop_output(acc.get_output(0), sim.LoopOutput.LAST_VALUE)
    out_i = loop.add_loop_output(i.get_output(0), sim.LoopOutput.LAST_VALUE)
    seen = loop.add_loop_output(acc.get_output(0), sim.LoopOutput.CONCATENATE, 0)
    seen.set_input(1, n.scalar(6))
    engine = n.build(out_acc.get_output(0), out_i.get_output(0), seen.get_output(0))

    xv = torch.randn(4)
    for lim in (0, 1, 4, 6):
        feeds = {"x": xv, "limit": torch.tensor(lim, dtype=torch.int32)}
        got_acc, got_i, got_seen = infer(engine, feeds, device)
        a, k, values = xv.clone(), 0, []
        while k < lim:
            values.append(a)
            a = a * 0.5 + xv
            k += 1
        torch.testing.assert_close(got_acc, a, **TOL)
        assert int(got_i) == k
        want_seen = torch.zeros(6, 4)
        if values:
            want_seen[: len(values)] = torch.stack(values)
        torch.testing.assert_close(got_seen, want_seen, **TOL)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reverse", [False, True])
def test_iterator_cumulative_sum(device: str, reverse: bool) -> None:
    """s = 0; for each column c of x (axis 1): s = s + c; CONCATENATE and REVERSE the sums."""
    n = Net()
    x = n.input("x", (3, 5))
    loop = n.network.add_loop()
    it = loop.add_iterator(x, 1, reverse)
    five = n.scalar(5)
    loop.add_trip_limit(five, sim.TripLimit.COUNT)
    s = loop.add_recurrence(n.const(np.zeros(3, dtype=np.float32)))
    s_next = n.ew(s.get_output(0), it.get_output(0), "SUM")
    s.set_input(1, s_next)
    cat = loop.add_loop_output(s_next, sim.LoopOutput.CONCATENATE, 1)
    cat.set_input(1, five)
    rev = loop.add_loop_output(s_next, sim.LoopOutput.REVERSE, 0)
    rev.set_input(1, five)
    last = loop.add_loop_output(s.get_output(0), sim.LoopOutput.LAST_VALUE)
    assert tuple(it.get_output(0).shape) == (3,)
    assert it.axis == 1 and it.reverse == reverse
    engine = n.build(cat.get_output(0), rev.get_output(0), last.get_output(0))

    xv = torch.randn(3, 5)
    got_cat, got_rev, got_last = infer(engine, {"x": xv}, device)
    cols = [xv[:, 4 - k] if reverse else xv[:, k] for k in range(5)]
    sums, total = [], torch.zeros(3)
    for c in cols:
        total = total + c
        sums.append(total)
    torch.testing.assert_close(got_cat, torch.stack(sums, dim=1), **TOL)
    torch.testing.assert_close(got_rev, torch.stack(sums[::-1], dim=0), **TOL)
    torch.testing.assert_close(got_last, total, **TOL)


def test_nested_loops() -> None:
    """acc = x; repeat 3: b = acc; repeat 4: b = b + x; acc = b * 0.5."""
    n = Net()
    x = n.input("x", (2, 2))
    outer = n.network.add_loop()
    outer.add_trip_limit(n.scalar(3), sim.TripLimit.COUNT)
    acc = outer.add_recurrence(x)
    inner = n.network.add_loop()
    inner.add_trip_limit(n.scalar(4), sim.TripLimit.COUNT)
    b = inner.add_recurrence(acc.get_output(0))
    b.set_input(1, n.ew(b.get_output(0), x, "SUM"))
    b_last = inner.add_loop_output(b.get_output(0), sim.LoopOutput.LAST_VALUE).get_output(0)
    acc.set_input(1, n.ew(b_last, n.const(np.full((1, 1), 0.5, dtype=np.float32)), "PROD"))
    out = outer.add_loop_output(acc.get_output(0), sim.LoopOutput.LAST_VALUE)
    engine = n.build(out.get_output(0))

    xv = torch.randn(2, 2)
    (got,) = infer(engine, {"x": xv})
    a = xv.clone()
    for _ in range(3):
        bb = a
        for _ in range(4):
            bb = bb + xv
        a = bb * 0.5
    torch.testing.assert_close(got, a, **TOL)


def test_loop_with_dynamic_input_shape_and_shape_input_count() -> None:
    """The trip count and concatenation length are a shape input; the batch dim is dynamic."""
    n = Net()
    x = n.input("x", (-1, 3))
    count = n.input("count", (), sim.int32)
    n.profile = n.builder.create_optimization_profile()
    n.profile.set_shape("x", (1, 3), (2, 3), (8, 3))
    n.profile.set_shape_input("count", (0,), (3,), (6,))
    loop, rec, y = doubling_loop(n, x, count)
    cat = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE, 0)
    cat.set_input(1, count)
    last = loop.add_loop_output(rec.get_output(0), sim.LoopOutput.LAST_VALUE)
    assert tuple(cat.get_output(0).shape) == (-1, -1, 3)
    assert tuple(last.get_output(0).shape) == (-1, 3)
    assert count.is_shape_tensor
    engine = n.build(cat.get_output(0), last.get_output(0))
    assert engine.is_shape_inference_io("count")

    for batch, k in ((2, 3), (5, 1), (1, 0)):
        xv = torch.randn(batch, 3)
        got_cat, got_last = infer(engine, {"x": xv, "count": torch.tensor(k, dtype=torch.int32)})
        want = [xv * 2 ** (j + 1) for j in range(k)]
        torch.testing.assert_close(got_cat, torch.stack(want) if want else torch.zeros(0, batch, 3), **TOL)
        torch.testing.assert_close(got_last, xv * 2**k, **TOL)


def test_loop_with_conditional_inside() -> None:
    """acc = 0; for i in 0..4: acc = acc + x if i is even else acc - x."""
    n = Net()
    x = n.input("x", (3,))
    loop = n.network.add_loop()
    loop.add_trip_limit(n.scalar(5), sim.TripLimit.COUNT)
    i = loop.add_recurrence(n.scalar(0))
    i.set_input(1, n.ew(i.get_output(0), n.scalar(1), "SUM"))
    acc = loop.add_recurrence(n.const(np.zeros(3, dtype=np.float32)))
    two = n.scalar(2)
    parity = n.ew(i.get_output(0), n.ew(n.ew(i.get_output(0), two, "FLOOR_DIV"), two, "PROD"), "SUB")
    even = n.ew(parity, n.scalar(0), "EQUAL")
    cond = n.network.add_if_conditional()
    cond.set_condition(even)
    a_in = cond.add_input(acc.get_output(0)).get_output(0)
    x_in = cond.add_input(x).get_output(0)
    chosen = cond.add_output(n.ew(a_in, x_in, "SUM"), n.ew(a_in, x_in, "SUB")).get_output(0)
    acc.set_input(1, chosen)
    out = loop.add_loop_output(acc.get_output(0), sim.LoopOutput.LAST_VALUE)
    engine = n.build(out.get_output(0))

    xv = torch.randn(3)
    (got,) = infer(engine, {"x": xv})
    a = torch.zeros(3)
    for k in range(5):
        a = a + xv if k % 2 == 0 else a - xv
    torch.testing.assert_close(got, a, **TOL)


def test_network_order_differs_from_dataflow() -> None:
    """set_input may wire a layer to a tensor made later; the schedule follows the dataflow."""
    n = Net()
    x = n.input("x", (2,))
    first = n.network.add_unary(x, sim.UnaryOperation.NEG)
    later = n.network.add_unary(x, sim.UnaryOperation.ABS).get_output(0)
    first.set_input(0, later)  # first now reads a tensor of a later layer
    engine = n.build(first.get_output(0))
    xv = torch.tensor([1.5, -2.0])
    (got,) = infer(engine, {"x": xv})
    torch.testing.assert_close(got, -xv.abs(), **TOL)  # -|x|: neither -x nor |x|


# ------------------------------------------------------------------------- plan round trip
def test_plan_round_trip() -> None:
    ns = api("10.16")
    n = Net(ns)
    x = n.input("x", (2, 3))
    loop = n.network.add_loop()
    loop.name = "doubler"
    loop.add_trip_limit(n.scalar(3), ns.TripLimit.COUNT)
    rec = loop.add_recurrence(x)
    rec.set_input(1, n.ew(rec.get_output(0), rec.get_output(0), "SUM"))
    out = loop.add_loop_output(rec.get_output(0), ns.LoopOutput.LAST_VALUE)
    plan = n.plan(out.get_output(0))
    assert plan is not None
    data = bytes(plan)
    xv = torch.randn(2, 3)
    engine = ns.Runtime(ns.Logger()).deserialize_cuda_engine(data)
    (got,) = infer(engine, {"x": xv})
    torch.testing.assert_close(got, xv * 8, **TOL)
    again = ns.Runtime(ns.Logger()).deserialize_cuda_engine(engine.serialize())
    (got2,) = infer(again, {"x": xv})
    torch.testing.assert_close(got2, xv * 8, **TOL)
    assert engine.num_layers == len(n.network)


# ---------------------------------------------------------------------------- conditionals
def _conditional(n: Net, cond: Any, x: Any) -> tuple[Any, Any]:
    """if cond: x + x else: |x|."""
    c = n.network.add_if_conditional()
    c.name = "choose"
    condition = c.set_condition(cond)
    xi = c.add_input(x).get_output(0)
    true_out = n.ew(xi, xi, "SUM")
    false_out = n.network.add_unary(xi, sim.UnaryOperation.ABS).get_output(0)
    out = c.add_output(true_out, false_out)
    assert condition.conditional is c and out.conditional is c and c.name == "choose"
    return c, out


@pytest.mark.parametrize("device", DEVICES)
def test_if_conditional_runs_only_the_taken_branch(device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    n = Net()
    x = n.input("x", (2, 3))
    flag = n.input("flag", (), sim.bool)
    _, out = _conditional(n, flag, x)
    assert tuple(out.get_output(0).shape) == (2, 3)
    engine = n.build(out.get_output(0))

    calls = []
    original = IUnaryLayer._run

    def spy(self: Any, inputs: list[Any], rt: Any) -> Any:
        if not rt.probe:  # shape inference (probes on meta tensors) may visit both branches
            calls.append(self.name)
        return original(self, inputs, rt)

    monkeypatch.setattr(IUnaryLayer, "_run", spy)
    xv = torch.randn(2, 3)
    (got,) = infer(engine, {"x": xv, "flag": torch.tensor(True)}, device)
    torch.testing.assert_close(got, xv + xv, **TOL)
    assert calls == [], "the false branch ran although the condition was true"
    (got,) = infer(engine, {"x": xv, "flag": torch.tensor(False)}, device)
    torch.testing.assert_close(got, xv.abs(), **TOL)
    assert len(calls) == 1


def test_if_conditional_with_build_time_condition_and_different_shapes() -> None:
    n = Net()
    a = n.input("a", (2, 3))
    b = n.input("b", (4, 3))
    c = n.network.add_if_conditional()
    c.set_condition(n.scalar(False))
    out = c.add_output(c.add_input(a).get_output(0), c.add_input(b).get_output(0))
    assert tuple(out.get_output(0).shape) == (4, 3)
    engine = n.build(out.get_output(0))
    av, bv = torch.randn(2, 3), torch.randn(4, 3)
    (got,) = infer(engine, {"a": av, "b": bv})
    torch.testing.assert_close(got, bv, **TOL)


def test_if_conditional_output_shape_depends_on_data() -> None:
    """Branches of different shapes under a run-time condition: the output needs an allocator."""
    n = Net()
    a = n.input("a", (2, 3))
    b = n.input("b", (4, 3))
    flag = n.input("flag", (), sim.bool)
    c = n.network.add_if_conditional()
    c.set_condition(flag)
    out = c.add_output(c.add_input(a).get_output(0), c.add_input(b).get_output(0))
    assert tuple(out.get_output(0).shape) == (-1, 3)
    engine = n.build(out.get_output(0))
    name = out.get_output(0).name

    class Alloc(sim.IOutputAllocator):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.buf: torch.Tensor | None = None
            self.shape: tuple[int, ...] = ()

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            self.buf = torch.empty(max(size, 1), dtype=torch.uint8)
            return int(self.buf.data_ptr())

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shape = tuple(shape)

    av, bv = torch.randn(2, 3), torch.randn(4, 3)
    for flag_v, want in ((True, av), (False, bv)):
        ctx = engine.create_execution_context()
        feeds = {"a": av, "b": bv, "flag": torch.tensor(flag_v)}
        for k, v in feeds.items():
            ctx.set_tensor_address(k, v)
        assert tuple(ctx.get_tensor_shape(name)) == (-1, 3)
        alloc = Alloc()
        ctx.set_output_allocator(name, alloc)
        assert ctx.execute_async_v3(0)
        assert alloc.shape == tuple(want.shape) and alloc.buf is not None
        got = alloc.buf.view(torch.float32)[: want.numel()].view(want.shape)
        torch.testing.assert_close(got, want, **TOL)


# ------------------------------------------------------------------------------ assertions
def test_assertion_at_run_time() -> None:
    """A condition on a dynamic size is checked when the engine runs."""
    n = Net()
    x = n.input("x", (-1,))
    n.dynamic("x", (1,), (3,), (8,))
    size = n.network.add_shape(x).get_output(0)
    big = n.ew(size, n.ints([1], np.int64), "GREATER")
    layer = n.network.add_assertion(big, "x needs at least 2 elements")
    assert layer.message == "x needs at least 2 elements"
    engine = n.build(n.network.add_identity(x).get_output(0))
    ctx = engine.create_execution_context()
    for length, ok in ((3, True), (1, False)):
        out = torch.empty(length)
        ctx.set_input_shape("x", (length,))
        ctx.set_tensor_address(engine.get_tensor_name(1), out)
        ctx.set_tensor_address("x", torch.ones(length))
        assert ctx.execute_async_v3(0) is ok


def test_assertion_on_values_is_refused_like_tensorrt() -> None:
    """An assertion's condition is a shape tensor: one computed from a float input's values makes that
    input a shape input, which TensorRT refuses (TensorRT-RTX 1.7: "Input shape tensor x has type Float
    but input shape tensors must have type INT32 or INT64")."""
    from torch2trt_lite.errors import BuildError
    from torch2trt_lite.sim._plan import _validate

    n = Net()
    x = n.input("x", (3,))
    positive = n.ew(x, n.const(np.zeros(1, dtype=np.float32)), "GREATER")
    n.network.add_assertion(positive, "x must be positive")
    out = n.network.add_identity(x).get_output(0)
    n.network.mark_output(out)
    with pytest.raises(BuildError, match="Input shape tensor x has type Float but input shape tensors must"):
        _validate(n.network, n.config)
    assert n.builder.build_serialized_network(n.network, n.config) is None
    # an int input read by the condition is a shape input: without a profile giving its values, refused
    m = Net()
    k = m.input("k", (1,), m.ns.int64)
    m.network.add_assertion(m.ew(k, m.ints([0], np.int64), "GREATER"), "k must be positive")
    assert m.plan(m.network.add_identity(k).get_output(0)) is None


def test_assertion_known_at_build_time_fails_the_build() -> None:
    n = Net()
    x = n.input("x", (3,))
    n.network.add_assertion(n.scalar(False), "never")
    assert n.plan(n.network.add_identity(x).get_output(0)) is None
    ok = Net()
    y = ok.input("y", (3,))
    ok.network.add_assertion(ok.scalar(True), "always")
    assert ok.plan(ok.network.add_identity(y).get_output(0)) is not None


# ----------------------------------------------------------------------------------- errors
def _expect_error(fn: Callable[[], Any]) -> None:
    with pytest.raises(NetworkDefinitionError):
        fn()


def test_definition_errors() -> None:
    n = Net()
    x = n.input("x", (2,))
    loop = n.network.add_loop()
    loop.add_trip_limit(n.scalar(2), sim.TripLimit.COUNT)
    _expect_error(lambda: loop.add_trip_limit(n.scalar(3), sim.TripLimit.COUNT))  # second COUNT limit
    _expect_error(lambda: loop.add_trip_limit(x, sim.TripLimit.WHILE))  # not a 0-D BOOL
    _expect_error(lambda: loop.add_iterator(x, 1))  # axis out of range
    c = n.network.add_if_conditional()
    _expect_error(lambda: c.set_condition(n.scalar(1)))  # not BOOL
    c.set_condition(n.scalar(True))
    _expect_error(lambda: c.set_condition(n.scalar(True)))  # exactly one condition
    _expect_error(lambda: c.add_output(x, n.scalar(1)))  # branch types differ
    _expect_error(lambda: n.network.add_assertion(x, "not bool"))


def test_last_value_needs_a_recurrence() -> None:
    n = Net()
    x = n.input("x", (2,))
    loop, _, y = doubling_loop(n, x, n.scalar(2))
    out = loop.add_loop_output(y, sim.LoopOutput.LAST_VALUE)
    assert n.plan(out.get_output(0)) is None


def test_recurrence_needs_a_next_value() -> None:
    n = Net()
    x = n.input("x", (2,))
    loop = n.network.add_loop()
    loop.add_trip_limit(n.scalar(2), sim.TripLimit.COUNT)
    rec = loop.add_recurrence(x)
    out = loop.add_loop_output(rec.get_output(0), sim.LoopOutput.LAST_VALUE)
    assert n.plan(out.get_output(0)) is None


def test_concatenate_needs_a_length() -> None:
    n = Net()
    x = n.input("x", (2,))
    loop, _, y = doubling_loop(n, x, n.scalar(2))
    out = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE)
    assert n.plan(out.get_output(0)) is None


def test_values_leave_a_loop_only_through_loop_outputs() -> None:
    n = Net()
    x = n.input("x", (2,))
    _, _, y = doubling_loop(n, x, n.scalar(2))
    assert n.plan(y) is None


def test_trip_count_longer_than_the_concatenation_fails_at_run_time() -> None:
    n = Net()
    x = n.input("x", (2,))
    count = n.input("count", (), sim.int32)
    n.profile = n.builder.create_optimization_profile()
    n.profile.set_shape_input("count", (0,), (2,), (5,))
    loop, _, y = doubling_loop(n, x, count)
    cat = loop.add_loop_output(y, sim.LoopOutput.CONCATENATE)
    cat.set_input(1, n.scalar(3))
    engine = n.build(cat.get_output(0))
    for trips, ok in ((3, True), (4, False)):  # the same raw client run succeeds at 3 trips
        ctx = engine.create_execution_context()
        ctx.set_tensor_address("x", torch.ones(2))
        ctx.set_tensor_address("count", torch.tensor(trips, dtype=torch.int32))
        out = torch.empty(3, 2)
        ctx.set_tensor_address(cat.get_output(0).name, out)
        assert ctx.execute_async_v3(0) is ok, trips
        if ok:
            torch.testing.assert_close(out, torch.tensor([[2.0, 2.0], [4.0, 4.0], [8.0, 8.0]]), **TOL)


def test_recurrence_next_value_must_keep_type_and_shape() -> None:
    for make_next in ("cast", "reshape"):
        n = Net()
        x = n.input("x", (2, 3))
        loop = n.network.add_loop()
        loop.add_trip_limit(n.scalar(2), sim.TripLimit.COUNT)
        rec = loop.add_recurrence(x)
        if make_next == "cast":
            nxt = n.network.add_cast(rec.get_output(0), sim.int32).get_output(0)
        else:
            nxt = n.input("z", (4, 3))  # a next value of another shape than the initial (2, 3)
        rec.set_input(1, nxt)
        out = loop.add_loop_output(rec.get_output(0), sim.LoopOutput.LAST_VALUE)
        assert n.plan(out.get_output(0)) is None, make_next
