"""Symbolic sizes while tracing (issue 10, item 2): ``x.size(0)``, ``x.shape[i]``, ``x.numel()`` of
dynamic dims stay symbolic (torch2trt_lite.trace.symbolic), converters that take sizes build them as
shape tensors, and branches on a dynamic size are refused naming the line. Every engine is
compared with eager PyTorch at several sizes within its range."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import torch2trt_lite
from torch2trt_lite import ConversionError, Input, UnsupportedOperatorError
from torch2trt_lite.errors import DynamicSizeGuardError
from torch2trt_lite.trace import symbolic as Y

TOL: dict[str, Any] = {"atol": 1e-5, "rtol": 1e-5}


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., torch.Tensor]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> torch.Tensor:
        return self.fn(*xs)


def _check(fn: Callable[..., torch.Tensor], rest: tuple[int, ...], batches: tuple[int, ...] = (1, 3, 8),
           traced: int = 4) -> torch2trt_lite.TRTModule:
    m = Fn(fn).eval()
    e = torch2trt_lite.convert(m, [torch.randn(traced, *rest)], backend="sim", max_batch_size=8)
    for b in batches:
        x = torch.randn(b, *rest)
        with torch.no_grad():
            want = m(x)
        got = e(x)
        assert got.shape == want.shape, (b, got.shape, want.shape)
        torch.testing.assert_close(got, want, **TOL)
    return e


# ------------------------------------------------------------------------ the size objects
def test_sizes_are_symbolic_only_for_dynamic_dims() -> None:
    seen: dict[str, object] = {}

    def fn(x: torch.Tensor) -> torch.Tensor:
        if not seen:  # the traced call (the later ones are eager runs)
            seen.update(b=x.size(0), c=x.shape[1], s=x.size(), n=x.numel(), d=x.dim(), t=x.size()[0])
        return x + 1

    _check(fn, (6,))
    b = seen["b"]
    assert isinstance(b, Y.SymSize) and int(b) == 4 and b.describe() == "input_0.size(0)"
    assert type(seen["c"]) is int and type(seen["d"]) is int
    assert isinstance(seen["s"], torch.Size) and seen["s"][0] is b
    assert seen["t"] is b
    assert isinstance(seen["n"], Y.SymSize) and int(seen["n"]) == 24  # type: ignore[call-overload]


def test_static_conversion_gives_plain_ints() -> None:
    seen: list[object] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        if not seen:
            seen.append(x.size(0))
        return x.view(x.size(0), -1)

    torch2trt_lite.convert(Fn(fn).eval(), [torch.randn(2, 3, 2)], backend="sim")
    assert type(seen[0]) is int


def test_arithmetic_is_recorded() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        b, c = x.shape[0], x.shape[1]
        n = (b * c + 2 - 2) // 1
        return x.reshape(n).view(b, c // 2, -1) * 1.0

    _check(fn, (6,))


# -------------------------------------------------------------------------------- converters
@pytest.mark.parametrize("name", [
    "view", "reshape_mixed", "view_as", "flatten_unflatten", "expand", "expand_as", "permute", "new_zeros",
    "zeros", "ones_full", "arange", "arange_start_step", "slice_to_n", "slice_static_on_dynamic", "select_last",
    "narrow", "split_sizes", "split_static_dim", "size_as_value", "sym_max", "zeros_like", "gather_rows", "repeat",
    "roll_flip", "pad", "size_slices", "var_std", "take",
])
def test_converter_takes_dynamic_sizes(name: str) -> None:
    fns: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = {
        "view": (lambda x: x.view(x.size(0), -1), (3, 2)),
        "reshape_mixed": (lambda x: x.reshape(x.shape[0], 2, -1).reshape(x.shape[0] * 2, x.shape[1]), (4, 2)),
        "view_as": (lambda x: torch.relu(x.flatten(1)).view_as(x), (3, 2)),
        "flatten_unflatten": (lambda x: x.flatten(0, 1).unflatten(0, (x.size(0), 3)), (3, 2)),
        "expand": (lambda x: x[:, :1].expand(x.size(0), 5, -1) + x.new_ones(1), (5, 2)),
        "expand_as": (lambda x: x.sum(1, keepdim=True).expand_as(x), (5, 2)),
        "permute": (lambda x: x.permute(2, 0, 1).reshape(x.size(2), -1), (3, 2)),
        "new_zeros": (lambda x: x + x.new_zeros(x.size(0), x.size(1)), (3,)),
        "zeros": (lambda x: torch.cat([x, torch.zeros(x.shape[0], 2)], 1), (3,)),
        "ones_full": (lambda x: x * torch.ones(x.size(0), 1) + torch.full((x.size(0), 3), 2.5), (3,)),
        "arange": (lambda x: x + torch.arange(x.size(0)).unsqueeze(1), (3,)),
        "arange_start_step": (lambda x: x * torch.arange(1, 2 * x.size(0) + 1, 2, dtype=torch.float32)[:, None], (3,)),
        "slice_to_n": (lambda x: x.permute(1, 0)[:, : x.size(0) - 1 + 1], (3,)),
        "slice_static_on_dynamic": (lambda x: x[1:] - x[:-1], (3,)),
        "select_last": (lambda x: x[-1] + x[:, 0].sum(), (3,)),
        "narrow": (lambda x: torch.narrow(x.t(), 1, 0, x.size(0)), (3,)),
        "split_sizes": (lambda x: torch.cat(x.t().split([1, x.size(0) - 1], 1)[::-1], 1), (3,)),
        "split_static_dim": (lambda x: torch.stack(x.split(2, 1), 0).sum(0), (4,)),
        "size_as_value": (lambda x: x.sum(0) / x.size(0), (3,)),
        "sym_max": (lambda x: x.t()[:, : Y.sym_max(x.size(0) - 2, 1)], (3,)),
        "zeros_like": (lambda x: torch.zeros_like(x) + torch.ones_like(x).cumsum(0), (3,)),
        "gather_rows": (lambda x: x[torch.arange(x.size(0)), x.argmax(1)], (3,)),
        "repeat": (lambda x: x.repeat(x.size(0) // 2 + 1, 2), (3,)),
        "roll_flip": (lambda x: torch.roll(x, 1, 0).flip(0) + x.roll(-1, 1), (3,)),
        "pad": (lambda x: F.pad(x, (1, 2, 0, 1)), (3,)),
        "size_slices": (lambda x: x.view(*x.shape[:2], -1) + x.new_zeros(x.shape[:-1] + (1,)), (3, 2)),
        "var_std": (lambda x: x.var((0, 1), keepdim=True) + x.std(0, correction=0) + x, (3,)),
        "take": (lambda x: torch.take(x, torch.tensor([0, 2, 1])), (3,)),
    }
    fn, rest = fns[name]
    _check(fn, rest, batches=(1, 3, 8) if name not in ("slice_static_on_dynamic", "split_sizes") else (2, 3, 8),
           traced=4)


def test_interpolate_to_a_symbolic_size() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=(x.size(2) * 2, 5), mode="bilinear", align_corners=False)

    m = Fn(fn).eval()
    rng = Input((1, 2, 3, 4), (2, 2, 4, 4), (4, 2, 7, 4))
    e = torch2trt_lite.convert(m, [rng], backend="sim")
    for shape in ((1, 2, 3, 4), (4, 2, 7, 4), (3, 2, 5, 4)):
        x = torch.randn(*shape)
        torch.testing.assert_close(e(x), m(x), **TOL)


def test_hf_style_batch_and_sequence() -> None:
    """The reshapes of multi-head attention written with sizes read from the input."""
    torch.manual_seed(0)
    qkv = torch.nn.Linear(8, 24)

    def fn(x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = qkv(x).view(b, t, 3, 2, c // 2).permute(2, 0, 3, 1, 4).unbind(0)
        y = F.scaled_dot_product_attention(q, k, v)
        return y.transpose(1, 2).reshape(b, t, c)

    m = Fn(fn).eval()
    e = torch2trt_lite.convert(m, [Input((1, 1, 8), (2, 5, 8), (4, 16, 8))], backend="sim")
    for shape in ((1, 1, 8), (3, 5, 8), (4, 16, 8)):
        x = torch.randn(*shape)
        with torch.no_grad():
            torch.testing.assert_close(e(x), m(x), **TOL)


# ---------------------------------------------------------------------------------- guards
def test_branch_on_dynamic_size_names_line_and_dim() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        if x.size(0) > 4:
            return x * 2
        return x

    with pytest.raises(ConversionError, match=r"input_0\.size\(0\).*test_symbolic\.py:\d+.*> 4"):
        torch2trt_lite.convert(Fn(fn).eval(), [torch.randn(4, 3)], backend="sim", max_batch_size=8)


def test_bool_of_equality_is_refused_and_static_assert_works() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        assert x.size(1) == 3  # static dim: a plain int
        assert x.size(0) == x.size(0)  # the same size
        assert x.size(0) >= 1 and x.size(0) <= 8  # true over the whole range [1, 8]
        if bool(x.size(0) == 3):
            return x
        return x + 1

    with pytest.raises(ConversionError, match=r"input_0\.size\(0\)"):
        torch2trt_lite.convert(Fn(fn).eval(), [torch.randn(4, 3)], backend="sim", max_batch_size=8)


def test_len_of_dynamic_dim_is_refused() -> None:
    with pytest.raises(ConversionError, match=r"len\(\).*x\.size\(0\)"):
        torch2trt_lite.convert(Fn(lambda x: x.view(len(x), -1)).eval(), [torch.randn(4, 3)], backend="sim",
                               max_batch_size=8)


def test_converter_that_needs_the_value_refuses() -> None:
    with pytest.raises(UnsupportedOperatorError, match=r"chunk cannot take a dynamic size \(input_0\.size\(0\)\)"):
        torch2trt_lite.convert(Fn(lambda x: torch.cat(x.chunk(2, 0)[::-1])).eval(), [torch.randn(4, 3)],
                               backend="sim", max_batch_size=8)


def test_user_int_of_size_is_baked_and_caught_by_verify() -> None:
    with pytest.raises(ConversionError, match="baked"):
        torch2trt_lite.convert(Fn(lambda x: x.view(int(x.size(0)) * 3)).eval(), [torch.randn(4, 3)],
                               backend="sim", max_batch_size=8)


@pytest.mark.rtx
def test_symbolic_network_builds_on_tensorrt_rtx() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        b = x.size(0)
        y = x.view(b, 2, -1) + torch.arange(b, dtype=torch.float32).view(b, 1, 1)
        return y[:, :, : x.size(1) // 2].reshape(b * 2, -1)

    e = torch2trt_lite.convert(Fn(fn).eval(), [torch.randn(4, 6)], backend="tensorrt-rtx", max_batch_size=8,
                               progress=False)
    assert len(e.plan) > 0 and not e.runnable


# ------------------------------------------------------------------- floats of dynamic sizes
# A Python float of a dynamic size (true division, a float operand, float(), math.*) would be the traced
# value for every size: refused naming the line, the dim and its range, unless it is the same over the range.
@pytest.mark.parametrize("make", [
    pytest.param(lambda n: n / 2, id="truediv"),
    pytest.param(lambda n: 2 / n, id="rtruediv"),
    pytest.param(lambda n: float(n), id="float"),
    pytest.param(lambda n: math.sqrt(n), id="math.sqrt"),
    pytest.param(lambda n: n * 0.5, id="float-operand"),
    pytest.param(lambda n: 2 - n * 0.5, id="float-operand-in-expression"),
    pytest.param(lambda n: n ** 0.5, id="pow-float"),
    pytest.param(lambda n: n ** -1, id="pow-negative"),
])
def test_float_of_dynamic_size_is_refused_naming_line_dim_and_range(make: Callable[[Any], Any]) -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return x * make(x.size(0))

    with pytest.raises(DynamicSizeGuardError,
                       match=r"float of the dynamic size input_0\.size\(0\) \(traced as 4, range \[1, 8\]\) at "
                             r".*test_symbolic\.py:\d+"):
        torch2trt_lite.convert(Fn(fn).eval(), [torch.randn(4, 3)], backend="sim", max_batch_size=8)


def test_float_of_static_dim_and_fixed_results_are_plain_numbers() -> None:
    seen: list[Any] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        n = x.size(0)
        # the same for every size of the range, or integer results that stay symbolic
        values: list[Any] = [x.size(1) / 2, math.sqrt(x.size(1)), n / n, 0 / n, math.ceil(n), math.floor(n), round(n), n ** 2,
                  divmod(n, 3)]
        if not seen:
            seen.extend(values)
        m = values[4] * values[5] // values[6]  # n
        return x.reshape(values[7] // m, -1)[: values[8][0] + 1] * values[0]

    _check(fn, (3,))
    assert seen[:4] == [1.5, math.sqrt(3), 1.0, 0.0] and all(type(v) is float for v in seen[:4])
    assert all(isinstance(v, Y.SymSize) for v in seen[4:8]) and int(seen[7]) == 16
    assert isinstance(seen[8][0], Y.SymSize) and isinstance(seen[8][1], Y.SymSize)


def test_dividing_a_tensor_by_a_dynamic_size_stays_symbolic() -> None:
    # the fix the refusal suggests: a size in a tensor op is a shape-tensor value
    _check(lambda x: x / x.size(0) + x * x.size(0), (3,))


def test_float_of_dynamic_size_inside_a_converter_refuses() -> None:
    from torch2trt_lite import registry

    @torch2trt_lite.converter("tests.trace.test_symbolic._scale_by")
    def _convert(ctx: Any, call: Any) -> Any:  # a converter that would bake the size as a float weight
        scale = ctx.constant(torch.tensor([float(call.arg(1, "n"))]).view(1, 1))
        return ctx.network.add_elementwise(ctx.itensor(call.arg(0, "x")), scale,
                                           ctx.trt.ElementWiseOperation.PROD).get_output(0)

    try:
        with pytest.raises(UnsupportedOperatorError, match=r"needs the value of input_0\.size\(0\).*float"):
            torch2trt_lite.convert(Fn(lambda x: _scale_by(x, x.size(0))).eval(), [torch.randn(4, 3)],
                                   backend="sim", max_batch_size=8)
        e = torch2trt_lite.convert(Fn(lambda x: _scale_by(x, x.size(0))).eval(), [torch.randn(4, 3)], backend="sim")
        x = torch.randn(4, 3)
        torch.testing.assert_close(e(x), x * 4, **TOL)  # a static size is a plain number to the converter
    finally:
        registry.REGISTRY.remove("tests.trace.test_symbolic._scale_by")


def _scale_by(x: torch.Tensor, n: int) -> torch.Tensor:
    return x * n


# ------------------------------------------------- transformers' SDPA branches on the query length
_HF = importlib.util.find_spec("transformers") is not None


class _SdpaBlock(torch.nn.Module):
    """Self-attention through transformers' sdpa_attention_forward (its ``q_length`` branches)."""

    def __init__(self, groups: int, causal: bool, masked: bool) -> None:
        super().__init__()
        self.num_key_value_groups, self.is_causal, self.masked = groups, causal, masked
        self.q = torch.nn.Linear(8, 4 * 4)
        self.kv = torch.nn.Linear(8, 2 * (4 // groups) * 4)

    def forward(self, x: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        b, n = x.size(0), x.size(1)
        q = self.q(x).view(b, n, 4, 4).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, 4 // self.num_key_value_groups, 4).permute(2, 0, 3, 1, 4).unbind(0)
        mask = rest[0] if rest else None
        out, _ = sdpa_attention_forward(self, q, k, v, mask, is_causal=self.is_causal)
        return out.reshape(b, n, 16)


def _sdpa_inputs(n: int, masked: bool) -> list[torch.Tensor]:
    x = torch.randn(1, n, 8, generator=torch.Generator().manual_seed(n))
    if not masked:
        return [x]
    keep = torch.ones(n, n, dtype=torch.bool).tril()  # a causal pattern as an explicit mask
    return [x, torch.zeros(1, 1, n, n).masked_fill(~keep, float("-inf"))]


@pytest.mark.skipif(not _HF, reason="transformers is not installed")
@pytest.mark.parametrize(("groups", "causal", "masked"), [
    pytest.param(1, True, False, id="causal-is_causal"),
    pytest.param(2, True, True, id="gqa-masked"),
    pytest.param(2, False, False, id="gqa-bidirectional"),
])
def test_sdpa_length_branches_take_the_general_path_over_a_range_with_1(groups: int, causal: bool,
                                                                         masked: bool) -> None:
    importlib.import_module("transformers.integrations.sdpa_attention")  # a model using it has imported it
    torch.manual_seed(0)
    m = _SdpaBlock(groups, causal, masked).eval()
    spec = [Input((1, 1, 8), (1, 6, 8), (1, 16, 8))] + (
        [Input((1, 1, 1, 1), (1, 1, 6, 6), (1, 1, 16, 16))] if masked else [])
    e = torch2trt_lite.convert(m, spec, backend="sim")
    for n in (1, 2, 7, 16):
        xs = _sdpa_inputs(n, masked)
        with torch.no_grad():
            want = m(*xs)
        torch.testing.assert_close(e(*xs), want, atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not _HF, reason="transformers is not installed")
def test_sdpa_length_branch_is_refused_when_traced_at_length_1() -> None:
    # traced at 1, `q_length > 1` is False (no causal mask): wrong for longer queries, so the guard refuses
    importlib.import_module("transformers.integrations.sdpa_attention")
    m = _SdpaBlock(1, True, False).eval()
    with pytest.raises(DynamicSizeGuardError, match=r"sdpa_attention\.py:\d+: `.*input_0\.size\(1\)\)? > 1` is False"):
        torch2trt_lite.convert(m, [Input((1, 1, 8), (1, 1, 8), (1, 16, 8))], backend="sim")


# --------------------------------------- a mask the network proves to be all ones (DETR's pixel mask)
def _ones_mask(x: torch.Tensor) -> torch.Tensor:  # DETR: torch.ones of the batch, indexed, cast, interpolated
    b = x.size(0)
    ones = torch.ones((b, x.size(2), x.size(3)))
    return F.interpolate(ones[None].float(), size=(4, 4)).to(torch.bool)[0].flatten(1)


@pytest.mark.parametrize(("fn", "want"), [
    pytest.param(_ones_mask, True, id="detr-pixel-mask"),
    pytest.param(lambda x: torch.cat([_ones_mask(x), _ones_mask(x)], 1), True, id="concatenated"),
    pytest.param(lambda x: F.interpolate(torch.ones_like(x), size=(4, 4), mode="bilinear"), None,
                 id="bilinear-not-followed"),
    pytest.param(lambda x: x > -1e30, None, id="values-of-the-input"),
    pytest.param(lambda x: torch.ones_like(x) + x * 0, None, id="elementwise-not-followed"),
    pytest.param(lambda x: F.pad(torch.ones_like(x), (1, 1), value=0.0), None, id="padded-with-zeros"),
])
def test_network_proves_a_mask_of_ones(fn: Callable[[torch.Tensor], torch.Tensor], want: Any) -> None:
    from torch2trt_lite.converters import zoo_transformers as Z

    m = Fn(fn).eval()
    d = torch2trt_lite.define_network(m, [Input((1, 3, 8, 8), (2, 3, 8, 8), (4, 3, 16, 16))], backend="sim")
    assert Z._uniform_value(d.context, d.network.get_output(0)) == want
