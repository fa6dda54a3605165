"""The tracing core: restoring patches, thread isolation, the strict guard, check(), the registry."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite import registry
from torch2trt_lite.errors import ConversionError, Torch2TRTError, UnsupportedOperatorError
from torch2trt_lite.trace import tracer


def _snapshot() -> list[tuple[object, str, object]]:
    return [(owner, attr, value) for owner, attr, value in tracer.patched_originals()]


class Chain(torch.nn.Module):
    """relu/sigmoid/tanh in a loop; can fail at a chosen step."""

    def __init__(self, steps: int = 6) -> None:
        super().__init__()
        self.steps = steps
        self.fail_at: int | None = None
        self.exc: BaseException | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.steps):
            if i == self.fail_at and self.exc is not None:
                raise self.exc
            x = (torch.relu, torch.sigmoid, torch.tanh)[i % 3](x)
        return x


def test_patches_restored_after_1000_failing_conversions() -> None:
    before = _snapshot()
    rng = random.Random(0)
    model = Chain().eval()
    x = torch.randn(3, 4)
    kinds = [KeyboardInterrupt(), RuntimeError("boom"), ValueError("bad")]
    seen = set()
    for _ in range(1000):
        model.fail_at = rng.randrange(model.steps)
        model.exc = rng.choice(kinds)
        with pytest.raises(type(model.exc)):
            torch2trt_lite.convert(model, [x], backend="sim")
        seen.add(type(model.exc))
    assert seen == {KeyboardInterrupt, RuntimeError, ValueError}
    after = _snapshot()
    assert len(before) == len(after) > 0
    for (o1, a1, v1), (o2, a2, v2) in zip(before, after, strict=True):
        assert o1 is o2 and a1 == a2 and v1 is v2, f"{a1} not restored"
    assert tracer._ACTIVE.get() is None
    assert not tracer._PATCHES and tracer._PATCH_DEPTH == 0
    # the patched callables are the originals again: nothing of ours is left installed
    assert not hasattr(torch.relu, "__torch2trt_lite_original__")
    assert not hasattr(torch.Tensor.relu, "__torch2trt_lite_original__")


def test_converter_failure_restores_patches() -> None:
    before = _snapshot()

    @torch2trt_lite.converter("torch.special.expit")
    def broken(ctx: object, call: object) -> object:
        raise ConversionError("converter refused")

    try:
        with pytest.raises(ConversionError, match="converter refused"):
            torch2trt_lite.convert(torch2trt_lite_fn(torch.special.expit).eval(), [torch.randn(2)], backend="sim")
    finally:
        registry.REGISTRY.remove("torch.special.expit")
    assert [v for *_, v in _snapshot()] == [v for *_, v in before]


class torch2trt_lite_fn(torch.nn.Module):  # noqa: N801 - reads as a helper
    def __init__(self, fn: object) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> object:
        return self.fn(*xs)  # type: ignore[operator]


def test_other_threads_unaffected_while_converting() -> None:
    torch.manual_seed(0)
    model = Chain(steps=30).eval()
    xs = [torch.randn(64, 64) for _ in range(4)]
    with torch.no_grad():
        reference = [model(x) for x in xs]
    inside = threading.Event()
    eager_done = threading.Event()
    results: list[list[torch.Tensor]] = []
    converting = {}

    class Slow(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.inner(x)
            if threading.current_thread() is converting.get("thread"):
                inside.set()
                assert eager_done.wait(30), "eager thread did not finish"
            return y.relu()

    def convert() -> None:
        converting["result"] = torch2trt_lite.convert(Slow().eval(), [xs[0]], backend="sim")

    def eager() -> None:
        assert inside.wait(30)
        with torch.no_grad():
            for _ in range(20):
                results.append([model(x) for x in xs])
        eager_done.set()

    t1 = threading.Thread(target=convert)
    converting["thread"] = t1
    t2 = threading.Thread(target=eager)
    t1.start()
    t2.start()
    t1.join(60)
    t2.join(60)
    assert results and "result" in converting
    for run in results:
        for got, ref in zip(run, reference, strict=True):
            assert torch.equal(got, ref)
    torch.testing.assert_close(converting["result"](xs[0]), model(xs[0]).relu(), rtol=1e-5, atol=1e-6)


class Body(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x)  # no converter for this one


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(torch.nn.ReLU(), Body())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x).sigmoid()


def test_unsupported_op_names_op_module_and_line(tmp_path: object) -> None:
    with pytest.raises(UnsupportedOperatorError) as info:
        torch2trt_lite.convert(Net().eval(), [torch.randn(2, 3)], backend="sim")
    e = info.value
    assert "bessel_j0" in e.op
    assert e.module_path == "body.1"
    assert e.location.endswith(f"test_tracer.py:{Body.forward.__code__.co_firstlineno + 1}")
    assert "bessel_j0" in str(e) and "body.1" in str(e)


def test_value_reads_are_refused() -> None:
    class Item(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * float(x.sum())

    class Outer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.head = Item()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(x) + x.sum().item()

    with pytest.raises(UnsupportedOperatorError, match="frozen|freeze") as info:
        torch2trt_lite.convert(Outer().eval(), [torch.randn(3)], backend="sim")
    e = info.value
    assert e.op == "torch.Tensor.__float__" and e.module_path == "head"
    assert e.location.endswith(f"test_tracer.py:{Item.forward.__code__.co_firstlineno + 1}")
    report = torch2trt_lite.check(Outer().eval(), [torch.randn(3)])
    assert [u.op for u in report.unsupported] == ["torch.Tensor.__float__", "torch.Tensor.item"]


def test_check_lists_every_unsupported_call() -> None:
    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.special.bessel_j0(torch.relu(x))
            return torch.special.bessel_j1(y)

    report = torch2trt_lite.check(Two().eval(), [torch.randn(3)])
    assert not report.ok
    ops = [u.op for u in report.unsupported]
    assert any("bessel_j0" in o for o in ops) and any("bessel_j1" in o for o in ops)
    assert all("test_tracer.py" in u.location for u in report.unsupported)
    assert torch2trt_lite.check(Chain().eval(), [torch.randn(3)]).ok


def test_untraced_computation_becomes_constant() -> None:
    class WithBuffer(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("b", torch.linspace(-1, 1, 5))

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            c = torch.special.bessel_j0(self.b)  # not derived from the input: a constant, on purpose
            return torch.relu(x), torch.sigmoid(c)

    m = WithBuffer().eval()
    x = torch.randn(5)
    out = torch2trt_lite.convert(m, [x], backend="sim")(x)
    torch.testing.assert_close(out, m(x), rtol=1e-6, atol=1e-6)


def test_captured_reference_is_converted() -> None:
    class Captured(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.act = F.relu  # taken before patching

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(x)

    x = torch.randn(4)
    assert torch.equal(torch2trt_lite.convert(Captured().eval(), [x], backend="sim")(x), F.relu(x))


def test_training_mode_and_bad_inputs_are_refused() -> None:
    with pytest.raises(Torch2TRTError, match="eval"):
        torch2trt_lite.convert(torch.nn.ReLU().train(), [torch.randn(2)], backend="sim")
    with pytest.raises(Torch2TRTError, match="list of tensors"):
        torch2trt_lite.convert(torch.nn.ReLU().eval(), "x", backend="sim")  # type: ignore[arg-type]
    with pytest.raises(Torch2TRTError, match="float64"):
        torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2, dtype=torch.float64)], backend="sim")


def test_registry_duplicate_override_and_target_kinds() -> None:
    reg = registry.Registry()

    def conv(ctx: object, call: object) -> None:
        return None

    registry.converter(torch.Tensor.add_, torch.Tensor.__radd__, registry=reg)(conv)
    assert "torch.Tensor.add_" in reg and "torch.Tensor.__radd__" in reg
    with pytest.raises(Torch2TRTError, match="already registered"):
        registry.converter(torch.Tensor.add_, registry=reg)(conv)
    registry.converter(torch.Tensor.add_, registry=reg, override=True)(conv)

    class MyFn(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return x

    registry.converter(torch.nn.Hardswish, MyFn, "torch.nn.functional.hardswish", registry=reg)(conv)
    assert reg.get(f"{MyFn.__module__}.{MyFn.__qualname__}").kind == "autograd"  # type: ignore[union-attr]
    assert reg.get("torch.nn.modules.activation.Hardswish").kind == "module"  # type: ignore[union-attr]
    with pytest.raises(Torch2TRTError, match="cannot resolve"):
        registry.converter("torch.no_such_function", registry=reg)(conv)
    registry.register_table({torch.special.expit: 1, (torch.special.erf, torch.erf): 2}, lambda v: conv, registry=reg)
    assert {"torch.special.expit", "torch.special.erf", "torch.erf"} <= set(reg._records)


def test_module_and_autograd_converters() -> None:
    class Doubler(torch.autograd.Function):
        @staticmethod
        def forward(ctx: object, x: torch.Tensor) -> torch.Tensor:
            return torch.special.bessel_j0(x) * 0 + x * 2

    class Half(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.special.bessel_j1(x)  # never reached while tracing: the module is converted whole

    def scale(k: float) -> object:
        def conv(ctx: torch2trt_lite.ConversionContext, call: torch2trt_lite.Call) -> object:
            layer = ctx.network.add_activation(ctx.itensor(call.args[-1]), ctx.trt.ActivationType.SCALED_TANH)
            layer.alpha, layer.beta = k, 1.0
            return layer.get_output(0)

        return conv

    torch2trt_lite.converter(Doubler)(scale(2.0))
    torch2trt_lite.converter(Half)(scale(0.5))
    try:
        class M(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.halver = Half()

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.halver(Doubler.apply(x))

        x = torch.randn(6)
        got = torch2trt_lite.convert(M().eval(), [x], backend="sim")(x)
        torch.testing.assert_close(got, 0.5 * torch.tanh(2.0 * torch.tanh(x)), rtol=1e-5, atol=1e-6)
    finally:
        registry.REGISTRY.remove(f"{Doubler.__module__}.{Doubler.__qualname__}")
        registry.REGISTRY.remove(f"{Half.__module__}.{Half.__qualname__}")
    assert "apply" not in Doubler.__dict__ and "forward" in Half.__dict__


def test_layers_are_named_from_module_path() -> None:
    model = torch.nn.Sequential(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh())).eval()
    trt_model = torch2trt_lite.convert(model, [torch.randn(3)], backend="sim")
    names = [layer.name for layer in trt_model._engine._layers]
    assert "0.0/relu" in names and "0.1/tanh" in names, names


@pytest.mark.parametrize(
    "fn, args",
    [
        (lambda x, s: x.narrow(0, s, 2), (torch.arange(6.0), torch.tensor(1))),  # int(start)
        (lambda x, s: x[s : s + 2], (torch.arange(6.0), torch.tensor(1))),  # slice.indices
        (lambda x, v: torch.full_like(x, v), (torch.arange(6.0), torch.tensor(1.5))),  # .item()
        (lambda x, v: torch.nn.functional.pad(x, (1, 1), value=v), (torch.arange(6.0), torch.tensor(1.5))),
        (lambda x, i: torch.index_put(x, (i,), torch.tensor(1.0), accumulate=True),  # repeats unknown
         (torch.zeros(3), torch.tensor([0, 1]))),
    ],
    ids=["narrow_start", "slice_bound", "full_like_value", "pad_value", "index_put_accumulate"],
)
def test_converters_refuse_values_they_would_freeze(fn: Any, args: tuple[torch.Tensor, ...]) -> None:
    """A converter needing a Python number (or a constant) where the model passes a tensor computed
    from the inputs used to freeze the traced value; it is refused, naming the op and the line."""
    with pytest.raises(UnsupportedOperatorError) as info:
        torch2trt_lite.convert(fn, list(args), backend="sim")
    assert "test_tracer.py:" in info.value.location and info.value.op
