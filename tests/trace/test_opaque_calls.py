"""Issue 22, item 1: calls the tracer cannot see into are converted or refused, never frozen.

A call that runs outside the tracer's view (TorchScript, a torch.ops operator without a converter, a
C++ extension function) used to hand back a tensor the tracer did not make, and the network froze it
as a constant: the engine then answered every input with the traced input's values. Every engine
here is compared with eager at inputs other than the traced one.
"""

from __future__ import annotations

import io
import threading
import warnings
from typing import Any

import numpy as np
import pytest
import torch

import torch2trt_lite
from torch2trt_lite import registry
from torch2trt_lite.errors import UnsupportedOperatorError

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Please switch to:FutureWarning")
warnings.filterwarnings("ignore", message=".*is deprecated. Please switch to", category=FutureWarning)  # at import


def _line(fn: Any, text: str) -> int:
    """The line of ``fn``'s source that holds ``text``."""
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def _assert_matches_eager(model: torch.nn.Module, trt: Any, shape: tuple[int, ...], runs: int = 3) -> None:
    for seed in range(runs):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(100 + seed))
        with torch.no_grad():
            want = model(x)
        got = trt(x)
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------ TorchScript functions
@torch.jit.script
def _affine(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


@torch.jit.script
def _postprocess(x: torch.Tensor, scale: torch.Tensor, k: int) -> torch.Tensor:
    y = _affine(x) * scale  # a scripted function calling another
    return torch.sigmoid(y[:, :k]) + y[:, k:].sum(dim=1, keepdim=True)


class UsesScript(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(_affine(x))


class Head(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _postprocess(x, self.scale, 4)


class Detector(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(6, 6)
        self.head = Head()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


def test_scripted_function_is_traced_through_and_matches_eager_at_other_inputs() -> None:
    assert _affine._torchdynamo_inline is not None  # what the tracer runs in its place
    model = UsesScript().eval()
    trt = torch2trt_lite.convert(model, [torch.randn(2, 5)], backend="sim")
    _assert_matches_eager(model, trt, (2, 5))


def test_scripted_function_in_a_submodule_is_traced_through() -> None:
    model = Detector().eval()
    trt = torch2trt_lite.convert(model, [torch.randn(3, 6)], backend="sim")
    _assert_matches_eager(model, trt, (3, 6))
    assert any(name.startswith("head/") for name, *_ in torch2trt_lite.define_network(model, [torch.randn(3, 6)],
                                                                                       backend="sim").layers())


def test_scripted_function_on_untraced_tensors_runs_as_torchscript_and_is_a_constant() -> None:
    @torch.jit.script
    def ramp(n: int) -> torch.Tensor:
        return torch.arange(n, dtype=torch.float32) * 0.5

    class Ramp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + ramp(x.shape[-1])

    model = Ramp().eval()
    calls = _count_eager_runs()
    trt = torch2trt_lite.convert(model, [torch.randn(2, 7)], backend="sim")
    _assert_matches_eager(model, trt, (2, 7))
    assert calls == [], "a constant a call the tracer saw made needs no eager check"


# ------------------------------------------------------------------------ TorchScript modules
class Sub(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * 3


def _scripted() -> torch.nn.Module:
    return torch.jit.script(Sub().eval())


def _traced() -> torch.nn.Module:
    return torch.jit.trace(Sub().eval(), torch.randn(2, 4))


def _loaded() -> torch.nn.Module:
    buf = io.BytesIO()
    torch.jit.save(_scripted(), buf)
    buf.seek(0)
    return torch.jit.load(buf)


class WithScriptModule(torch.nn.Module):
    def __init__(self, sub: torch.nn.Module) -> None:
        super().__init__()
        self.pre = torch.nn.Linear(4, 4)
        self.sub = sub

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sub(self.pre(x)) + 1


@pytest.mark.parametrize("make", [_scripted, _traced, _loaded], ids=["script", "trace", "load"])
def test_script_module_is_refused_naming_module_and_line(make: Any) -> None:
    model = WithScriptModule(make()).eval()
    with pytest.raises(UnsupportedOperatorError, match="TorchScript module") as info:
        torch2trt_lite.convert(model, [torch.randn(2, 4)], backend="sim")
    e = info.value
    assert e.op == "torch.jit.ScriptModule Sub.forward"
    assert e.module_path == "sub"
    assert e.location.endswith(f"test_opaque_calls.py:{_line(WithScriptModule.forward, 'self.sub(')}")
    assert "remove torch.jit.script" in str(e)
    report = torch2trt_lite.check(model, [torch.randn(2, 4)])
    assert [u.op for u in report.unsupported] == ["torch.jit.ScriptModule Sub.forward"]


def test_script_module_as_the_whole_model_is_refused() -> None:
    with pytest.raises(UnsupportedOperatorError, match="TorchScript module") as info:
        torch2trt_lite.convert(_scripted(), [torch.randn(2, 4)], backend="sim")
    assert info.value.module_path == ""


# ------------------------------------------------------------------------ torch.ops operators
_LIB = torch.library.Library("t2tl_opaque", "DEF")  # noqa: F841 - kept alive with the module
_LIB.define("twice(Tensor x) -> Tensor")
_LIB.impl("twice", lambda x: x * 2, "CompositeExplicitAutograd")


@torch.library.custom_op("t2tl_opaque::shifted", mutates_args=())
def _shifted(x: torch.Tensor) -> torch.Tensor:
    return x + 3


class UsesOps(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.t2tl_opaque.twice(x).relu()


class UsesCustomOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _shifted(x) * x


def _convert_scale(ctx: Any, call: Any) -> Any:
    x = ctx.itensor(call.arg(0, "x"))
    two = ctx.constant(torch.full((1,) * len(x.shape), 2.0))
    return ctx.network.add_elementwise(x, two, ctx.trt.ElementWiseOperation.PROD).get_output(0)


def test_torch_ops_operator_without_converter_is_refused_by_the_name_to_register() -> None:
    model = UsesOps().eval()
    with pytest.raises(UnsupportedOperatorError) as info:
        torch2trt_lite.convert(model, [torch.randn(2, 3)], backend="sim")
    e = info.value
    assert e.op == "torch.ops.t2tl_opaque.twice"
    assert e.location.endswith(f"test_opaque_calls.py:{_line(UsesOps.forward, 'twice')}")
    assert "@torch2trt_lite.converter('torch.ops.t2tl_opaque.twice')" in str(e)
    # the advice works: a converter registered under that name converts the call
    torch2trt_lite.converter(e.op)(_convert_scale)
    try:
        trt = torch2trt_lite.convert(model, [torch.randn(2, 3)], backend="sim")
    finally:
        registry.REGISTRY.remove(e.op)
    _assert_matches_eager(model, trt, (2, 3))


def test_custom_op_without_converter_is_refused() -> None:
    with pytest.raises(UnsupportedOperatorError) as info:
        torch2trt_lite.convert(UsesCustomOp().eval(), [torch.randn(2, 3)], backend="sim")
    assert info.value.op == "torch.ops.t2tl_opaque.shifted.default"
    assert info.value.location.endswith(f"test_opaque_calls.py:{_line(UsesCustomOp.forward, '_shifted(')}")


# ------------------------------------------------------------------ calls nothing sees (C++ code)
def _extension_tanh(x: torch.Tensor) -> torch.Tensor:
    """Stands in for a pybind11 function of a C++ extension: it computes with ATen where neither the
    tracer's patched functions nor a torch function mode see it."""
    with torch._C.DisableTorchFunction():
        return torch._C._VariableFunctions.tanh(x) * 0.5


def _extension_ones_like(x: torch.Tensor) -> torch.Tensor:
    """A C++-like call that reads only the shape of its argument: its result is a true constant."""
    with torch._C.DisableTorchFunction():
        return torch._C._VariableFunctions.ones(tuple(x.shape))


class OpaqueOutput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.relu(), _extension_tanh(x)


class OpaqueMixed(torch.nn.Module):
    def __init__(self, through_torch: bool = False) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.through_torch = through_torch

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate = _extension_tanh(x)
        if self.through_torch:  # torch calls the tracer sees, on the invisible call's result only
            gate = torch.sigmoid(gate.clamp(min=-0.5)) * 2
        return self.lin(x) * gate


def test_output_made_by_an_invisible_call_is_refused_naming_the_output() -> None:
    with pytest.raises(UnsupportedOperatorError, match="depends on no engine input") as info:
        torch2trt_lite.convert(OpaqueOutput().eval(), [torch.randn(2, 4)], backend="sim",
                               output_names=["features", "scores"])
    assert "'scores'" in str(info.value) and "'features'" not in str(info.value)
    assert info.value.op == "scores"


@pytest.mark.parametrize("through_torch", [False, True], ids=["direct", "through_torch_calls"])
def test_tensor_made_by_an_invisible_call_and_used_with_traced_ones_is_refused(through_torch: bool) -> None:
    with pytest.raises(UnsupportedOperatorError, match="cannot see into") as info:
        torch2trt_lite.convert(OpaqueMixed(through_torch).eval(), [torch.randn(2, 4)], backend="sim")
    e = info.value
    assert e.op == "torch.Tensor.__mul__" and "tensor argument #2" in str(e)
    assert e.location.endswith(f"test_opaque_calls.py:{_line(OpaqueMixed.forward, '* gate')}")


# ------------------------------------------------------------- constants that stay constants
MEAN = torch.tensor([0.25, -0.5, 1.0, 2.0])


def _closure_model() -> torch.nn.Module:
    shift = torch.tensor([1.0, 2.0, 3.0, 4.0])

    class Closure(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * shift

    return Closure()


class Constants(torch.nn.Module):
    """Constants from everywhere the tracer does not make them: a global, a cache an invisible call
    fills on first use, a numpy array, an invisible call that reads only a shape."""

    def __init__(self) -> None:
        super().__init__()
        self.cache: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if self.cache is None:
            self.cache = _extension_ones_like(x) * 3
        grid = torch.from_numpy(np.linspace(0, 1, 4, dtype=np.float32))
        y = (x - MEAN) * self.cache + grid + _extension_ones_like(x)
        return y, torch.zeros_like(x), _extension_ones_like(x)  # the last two: constant outputs


@pytest.mark.parametrize("make", [Constants, _closure_model], ids=["constants", "closure"])
def test_constants_the_tracer_did_not_make_still_convert(make: Any) -> None:
    model = make().eval()
    trt = torch2trt_lite.convert(model, [torch.randn(2, 4)], backend="sim")
    for seed in range(3):
        x = torch.randn((2, 4), generator=torch.Generator().manual_seed(seed))
        got, want = trt(x), model(x)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,),
                        strict=True):
            torch.testing.assert_close(g, w)


def _count_eager_runs() -> list[int]:
    """A list that grows by one for every check run of build/dependence (monkeypatched for a test)."""
    from torch2trt_lite.build import dependence

    calls: list[int] = []
    original = dependence._eager

    def counted(*args: Any) -> Any:
        calls.append(1)
        return original(*args)

    dependence._eager = counted  # type: ignore[assignment]
    _RESTORE.append(lambda: setattr(dependence, "_eager", original))
    return calls


_RESTORE: list[Any] = []


@pytest.fixture(autouse=True)
def _restore() -> Any:
    yield
    while _RESTORE:
        _RESTORE.pop()()


def test_models_with_usual_constants_pay_no_eager_check() -> None:
    class Usual(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.bn = torch.nn.BatchNorm2d(4)
            self.register_buffer("offset", torch.ones(4, 1, 1))
            self.anchors = torch.arange(4.0)  # a plain attribute

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.bn(self.conv(x)) + self.offset - MEAN.view(4, 1, 1)
            return y * self.anchors.view(4, 1, 1) + torch.arange(y.shape[-1], dtype=torch.float32)

    calls = _count_eager_runs()
    torch2trt_lite.convert(Usual().eval(), [torch.randn(1, 3, 8, 8)], backend="sim")
    assert calls == []


# ------------------------------------------------------------------------ patches and threads
def test_torchscript_patches_are_restored_and_other_threads_run_torchscript() -> None:
    """While a conversion traces, another thread's scripted call runs in TorchScript (which answers
    ``torch.jit.is_scripting()`` with True); afterwards ``__call__`` is torch's own again."""

    @torch.jit.script
    def where(x: torch.Tensor) -> torch.Tensor:
        if torch.jit.is_scripting():
            return x + 1
        return x - 1

    before = (vars(torch._C.ScriptFunction)["__call__"], vars(torch._C.ScriptMethod)["__call__"])
    inside, done = threading.Event(), threading.Event()
    seen: list[torch.Tensor] = []

    class Waits(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            inside.set()
            assert done.wait(30)
            return x.relu()

    def other() -> None:
        assert inside.wait(30)
        seen.append(where(torch.zeros(1)))
        done.set()

    t = threading.Thread(target=other)
    t.start()
    torch2trt_lite.convert(Waits().eval(), [torch.randn(2)], backend="sim")
    t.join(30)
    assert seen and seen[0].item() == 1.0
    assert (vars(torch._C.ScriptFunction)["__call__"], vars(torch._C.ScriptMethod)["__call__"]) == before
    with pytest.raises(UnsupportedOperatorError):
        torch2trt_lite.convert(WithScriptModule(_scripted()).eval(), [torch.randn(2, 4)], backend="sim")
    assert (vars(torch._C.ScriptFunction)["__call__"], vars(torch._C.ScriptMethod)["__call__"]) == before
