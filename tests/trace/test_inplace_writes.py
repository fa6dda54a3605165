"""In-place writes into views of tensors the model creates or computes (issue 15 item 3).

``buf[i, :h, :w].copy_(img)``, ``buf[i].copy_(y)``, ``view += y``, ``view.fill_(v)``, ``narrow(...).mul_()``
into a fresh (``torch.zeros``, ``x.new_full``) or computed tensor convert as slice-update layers that
the base tensor's network tensor follows (``ConversionContext.begin_view_write``/``end_view_write``).
Every case is compared with PyTorch eager on the sim, at the traced inputs and at other ones; writes
that cannot be followed keep a clear error. A write into one of the model's own inputs is refused naming
the op and the line (eager changes the caller's tensor; an engine cannot), in every form: ``add_``,
``+=``, ``x[i] = v``, ``copy_``, ``out=``, ``relu_`` / ``inplace=True``, through a view or ``detach()``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite import Input
from torch2trt_lite.errors import ConversionError, Torch2TRTError, UnsupportedOperatorError

# NOTE: slice updates move values without arithmetic; the few cases that add or multiply are exact in fp32
_TOL = {"atol": 1e-6, "rtol": 1e-6}


class _Fn(nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *xs: torch.Tensor) -> Any:
        return self.fn(*xs)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _check(fn: Callable[..., Any], make: Callable[[int], list[torch.Tensor]]) -> torch2trt_lite.TRTModule:
    """Convert ``fn`` on the sim at ``make(0)`` and compare with eager at ``make(0)`` and ``make(1)``."""
    model = _Fn(fn).eval()
    engine = torch2trt_lite.convert(model, make(0), backend="sim")
    for seed in (0, 1):
        xs = make(seed)
        expected = fn(*[x.clone() for x in xs])
        torch.testing.assert_close(engine(*[x.clone() for x in xs]), expected, **_TOL)
    return engine


# ------------------------------------------------------------------------ torchvision's batch_images
def _batch_images(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """GeneralizedRCNNTransform.batch_images, as torchvision writes it (size_divisible=32)."""
    images = [a, b]
    max_size = [max(s) for s in zip(*[img.shape for img in images], strict=True)]
    stride = 32.0
    max_size[1] = int(-(-max_size[1] // stride) * stride)
    max_size[2] = int(-(-max_size[2] // stride) * stride)
    batch_shape = [len(images), *max_size]
    batched_imgs = images[0].new_full(batch_shape, 0)
    for i in range(batched_imgs.shape[0]):
        img = images[i]
        batched_imgs[i, : img.shape[0], : img.shape[1], : img.shape[2]].copy_(img)
    return batched_imgs


def test_batch_images_two_sizes_matches_eager() -> None:
    _check(_batch_images, lambda s: [_randn(3, 40, 27, seed=s), _randn(3, 33, 45, seed=s + 7)])


def test_torchvision_transform_batch_images_matches_eager() -> None:
    torchvision = pytest.importorskip("torchvision")
    from torchvision.models.detection.transform import GeneralizedRCNNTransform

    transform = GeneralizedRCNNTransform(64, 64, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]).eval()
    assert torchvision is not None

    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return transform.batch_images([a * 1, b * 1], size_divisible=32) * 2

    _check(fn, lambda s: [_randn(3, 40, 50, seed=s), _randn(3, 64, 30, seed=s + 3)])


# ------------------------------------------------------------------------------- the patterns
def _zeros_box_copy(x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(2, 3, 8, 8)
    buf[1, ..., :5, :6].copy_(x)
    return buf + 1


def _new_zeros_select_copy(x: torch.Tensor) -> torch.Tensor:
    buf = x.new_zeros(3, 5, 6)
    buf[1].copy_(x)
    buf[2].copy_(x * 2)
    return buf


def _mask_into_fresh(x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(5, 6)
    mask = torch.arange(30).reshape(5, 6) % 3 == 0
    buf[mask] = 2.0
    buf[1][mask[1]] = x[1][mask[1]]  # a mask assignment into a select view
    return buf + x


def _traced_mask_into_fresh(x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(2, 5, 6)
    buf[0][x > 0] = 1.0  # a traced mask into a select view of a fresh buffer: a where
    buf[(x < -0.5).expand(2, 5, 6)] = -2.0  # a full-rank traced mask on the buffer itself
    return buf


def _index_add_fresh(x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(4, 6)
    buf.index_add_(0, torch.tensor([0, 2, 2, 1, 3]), x)
    return buf


def _index_add_into_view(x: torch.Tensor) -> torch.Tensor:
    buf = torch.ones(2, 4, 6)
    buf[1].index_add_(0, torch.tensor([3, 0, 0, 1, 2]), x)
    return buf


def _fill_view(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, 2:4].fill_(3.0)
    y[0].zero_()
    return y


def _iadd_mul_view(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    v = y[1:, :3]
    v += x[:-1, 3:]
    v.mul_(2)
    return y


def _narrow_add_untraced(x: torch.Tensor) -> torch.Tensor:
    y = torch.ones(5, 6)
    y.narrow(1, 2, 3).add_(x[:, :3])
    return y


def _view_of_view(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    rows = y[1:]
    rows[:, 1:3].add_(10)
    rows[0, ::2].mul_(-1)  # a strided view
    return y


def _reshaped_view(x: torch.Tensor) -> torch.Tensor:
    buf = torch.zeros(4, 6)
    buf.view(2, 2, 6)[1, :, 2:5].copy_(x[:2, :3])  # a view of a view(): rows 2-3, columns 2-4 of buf
    return buf


def _column_of_transpose(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y.t()[1].mul_(2)  # column 1 of y, through a transposed view: y[:, 1]
    return y + 1


def _masked_fill_index_put_view(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[1:4].masked_fill_(x[1:4] > 0.5, -3.0)
    y[4].index_put_((torch.tensor([0, 5]),), torch.tensor(7.0))
    y[:, 1].clamp_(min=0.0)
    return y


def _stale_alias(x: torch.Tensor) -> torch.Tensor:
    buf = x.new_zeros(3, 5, 6)
    first = buf[0]  # made before the writes below: re-read from buf when used
    buf[0].copy_(x)
    buf[2].copy_(-x)
    return first + buf.sum(0)


_PATTERNS: dict[str, tuple[Callable[..., Any], Callable[[int], list[torch.Tensor]]]] = {
    "zeros_box_copy": (_zeros_box_copy, lambda s: [_randn(3, 5, 6, seed=s)]),
    "new_zeros_select_copy": (_new_zeros_select_copy, lambda s: [_randn(5, 6, seed=s)]),
    "mask_into_fresh": (_mask_into_fresh, lambda s: [_randn(5, 6, seed=s)]),
    "traced_mask_into_fresh": (_traced_mask_into_fresh, lambda s: [_randn(5, 6, seed=s)]),
    "index_add_fresh": (_index_add_fresh, lambda s: [_randn(5, 6, seed=s)]),
    "index_add_into_view": (_index_add_into_view, lambda s: [_randn(5, 6, seed=s)]),
    "fill_view": (_fill_view, lambda s: [_randn(5, 6, seed=s)]),
    "iadd_mul_view": (_iadd_mul_view, lambda s: [_randn(5, 6, seed=s)]),
    "narrow_add_untraced": (_narrow_add_untraced, lambda s: [_randn(5, 6, seed=s)]),
    "view_of_view": (_view_of_view, lambda s: [_randn(5, 6, seed=s)]),
    "reshaped_view": (_reshaped_view, lambda s: [_randn(5, 6, seed=s)]),
    "column_of_transpose": (_column_of_transpose, lambda s: [_randn(5, 6, seed=s)]),
    "masked_fill_index_put_view": (_masked_fill_index_put_view, lambda s: [_randn(5, 6, seed=s)]),
    "stale_alias": (_stale_alias, lambda s: [_randn(5, 6, seed=s)]),
}


@pytest.mark.parametrize("name", list(_PATTERNS))
def test_write_through_view_matches_eager(name: str) -> None:
    fn, make = _PATTERNS[name]
    _check(fn, make)


def test_write_through_view_layers_are_slice_updates() -> None:
    """``buf[1].copy_(x)`` into a fresh buffer is a slice update (slices and a concatenation), not a
    constant holding the traced values."""
    net = torch2trt_lite.define_network(_Fn(_new_zeros_select_copy).eval(), [_randn(5, 6)], backend="sim")
    kinds = [kind for _, kind, _ in net.layers()]
    assert "CONCATENATION" in kinds
    assert all(shape == ((3, 5, 6), "FLOAT") for _, kind, outs in net.layers() if kind == "CONCATENATION"
               for shape in outs)


def test_static_conversion_without_view_writes_skips_the_bookkeeping(monkeypatch: pytest.MonkeyPatch) -> None:
    """Views that are only read, and in-place ops on tensors that are not views, never reach the
    view-write bookkeeping (it costs nothing for models without writes into views)."""
    from torch2trt_lite.trace.context import ConversionContext

    def refuse(self: Any, view: torch.Tensor) -> None:
        raise AssertionError("begin_view_write called")

    monkeypatch.setattr(ConversionContext, "begin_view_write", refuse)

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x[1:, :3] * 2 + x[:-1, 3:]
        y.relu_()
        y += 1
        return y.view(-1)

    _check(fn, lambda s: [_randn(5, 6, seed=s)])


# ------------------------------------------------------------------------------- dynamic shapes
def _pad_copy(x: torch.Tensor) -> torch.Tensor:
    buf = x.new_zeros(x.size(0), 8)
    buf[:, :6].copy_(x)
    return buf * 2


def _iadd_rows(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[1:, :3] += 1  # a box along the dynamic dim
    v = y[:, 2:]
    v.mul_(2)
    return y


def _half_fill(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[: x.size(0) // 2].fill_(0)  # a symbolic bound
    return y


def _narrow_dynamic(x: torch.Tensor) -> torch.Tensor:
    y = x + 0
    y.narrow(0, 1, x.size(0) - 1).mul_(3)
    return y


def _shift_right(x: torch.Tensor) -> torch.Tensor:
    """transformers' shift_tokens_right: a box along the dynamic dim, with a __setitem__."""
    shifted = x.new_zeros(x.shape)
    shifted[1:, :] = x[:-1, :].clone()
    shifted[0, :] = -1.0
    return shifted


def _setitem_index_list(x: torch.Tensor) -> torch.Tensor:
    y = x * 1
    y[:, [0, 4]] = y[:, [1, 2]]
    return y


_DYNAMIC: dict[str, Callable[..., Any]] = {
    "pad_copy": _pad_copy, "iadd_rows": _iadd_rows, "half_fill": _half_fill, "narrow_dynamic": _narrow_dynamic,
    "shift_right": _shift_right, "setitem_index_list": _setitem_index_list,
}


@pytest.mark.parametrize("name", list(_DYNAMIC))
def test_dynamic_batch_write_matches_eager(name: str) -> None:
    fn = _DYNAMIC[name]
    engine = torch2trt_lite.convert(_Fn(fn).eval(), [Input((1, 6), (4, 6), (9, 6), example=_randn(4, 6))],
                                    backend="sim", verify=False)
    for b in (1, 2, 4, 7, 9):
        x = _randn(b, 6, seed=b)
        torch.testing.assert_close(engine(x.clone()), fn(x.clone()), **_TOL)


def test_setitem_box_along_dynamic_sequence_dim_matches_eager() -> None:
    """``shifted[:, 1:] = ids[:, :-1]`` with a dynamic dim 1 (BART's shift_tokens_right)."""
    def fn(ids: torch.Tensor) -> torch.Tensor:
        shifted = ids.new_zeros(ids.shape)
        shifted[:, 1:] = ids[:, :-1].clone()
        shifted[:, 0] = 2
        return shifted

    ids = torch.randint(0, 50, (2, 7), generator=torch.Generator().manual_seed(0))
    engine = torch2trt_lite.convert(_Fn(fn).eval(), [Input((2, 1), (2, 7), (2, 16), dtype=torch.int64, example=ids)],
                                    backend="sim", verify=False)
    for n in (1, 2, 7, 16):
        x = torch.randint(0, 50, (2, n), generator=torch.Generator().manual_seed(n))
        torch.testing.assert_close(engine(x), fn(x), atol=0, rtol=0)


def test_strided_assignment_along_dynamic_dim_is_refused() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        y[::2] = 0.0
        return y

    with pytest.raises(UnsupportedOperatorError, match=r"__setitem__ cannot take a dynamic size .*step 2"):
        torch2trt_lite.convert(_Fn(fn).eval(), [Input((1, 6), (4, 6), (9, 6), example=_randn(4, 6))],
                               backend="sim", verify=False)


# ------------------------------------------------------------------------------------ refusals
# Writes into the model's own inputs: eager changes the caller's tensor, an engine cannot (it only reads
# its inputs), so each form is refused naming the op and the line, and the user's tensors stay unchanged.
def _input_add_(x: torch.Tensor) -> torch.Tensor:
    return x.add_(1) * 2


def _input_iadd(x: torch.Tensor) -> torch.Tensor:
    x += 1
    return x * 2


def _input_setitem(x: torch.Tensor) -> torch.Tensor:
    x[0] = 0
    return x * 2


def _input_copy_(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    x.copy_(y * 3)
    return x + y


def _input_out_arg(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    torch.add(y, 1, out=x)
    return x + y


def _input_relu_(x: torch.Tensor) -> torch.Tensor:
    return torch.relu_(x) + 1


def _input_functional_inplace(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.relu(x, inplace=True) + 1


def _input_module_inplace(x: torch.Tensor) -> torch.Tensor:
    return nn.ReLU(inplace=True)(x) + 1


def _input_through_view(x: torch.Tensor) -> torch.Tensor:
    x[:, 0].mul_(5)
    return x + 1


def _input_through_detach(x: torch.Tensor) -> torch.Tensor:
    x.detach().clamp_(min=0)
    return x + 1


def _input_unsqueeze_(x: torch.Tensor) -> torch.Tensor:
    return x.unsqueeze_(0) + 1  # a caller-visible change of shape


_INPUT_WRITES: dict[str, tuple[Callable[..., Any], str]] = {
    "add_": (_input_add_, "torch.Tensor.add_"), "iadd": (_input_iadd, "torch.Tensor.__iadd__"),
    "setitem": (_input_setitem, "torch.Tensor.__setitem__"), "copy_": (_input_copy_, "torch.Tensor.copy_"),
    "out_arg": (_input_out_arg, "torch.add"), "relu_": (_input_relu_, "torch.relu_"),
    "functional_inplace": (_input_functional_inplace, "torch.nn.functional.relu"),
    "module_inplace": (_input_module_inplace, "torch.nn.functional.relu"),
    "through_view": (_input_through_view, "torch.Tensor.mul_"),
    "through_detach": (_input_through_detach, "torch.Tensor.clamp_"),
    "unsqueeze_": (_input_unsqueeze_, "torch.Tensor.unsqueeze_"),
}


@pytest.mark.parametrize("name", list(_INPUT_WRITES))
def test_write_into_model_input_is_refused_naming_op_and_line(name: str) -> None:
    fn, op = _INPUT_WRITES[name]
    xs = [_randn(5, 6, seed=k) for k in range(fn.__code__.co_argcount)]
    before = [x.clone() for x in xs]
    eager_inputs = [x.clone() for x in xs]
    fn(*eager_inputs)
    assert any(not torch.equal(a, b) for a, b in zip(eager_inputs, before, strict=True)), "eager must write its input"
    pattern = rf"writes in place into its input 'input_0' by {re.escape(op)} at module '<model>' \(.*test_inplace_writes.py:\d+\)"
    with pytest.raises(ConversionError, match=pattern):
        torch2trt_lite.convert(_Fn(fn).eval(), xs, backend="sim")
    for x, b in zip(xs, before, strict=True):  # the traced run wrote into its own copies only
        assert torch.equal(x, b)


def test_write_into_dynamic_or_named_input_is_refused() -> None:
    spec = [Input((1, 6), (4, 6), (9, 6), example=_randn(4, 6), name="pixels")]
    with pytest.raises(ConversionError, match=r"its input 'pixels' by torch.Tensor.__setitem__"):
        torch2trt_lite.convert(_Fn(_input_setitem).eval(), spec, backend="sim", verify=False)


def test_check_reports_write_into_input() -> None:
    report = torch2trt_lite.check(_Fn(_input_add_).eval(), [_randn(5, 6)])
    assert [u.op for u in report.unsupported] == ["torch.Tensor.add_"]
    assert "writes in place into its input 'input_0'" in report.unsupported[0].reason


def test_write_into_a_clone_of_the_input_converts() -> None:
    """The fix the error suggests: a copy first; the input's own values are read, never written."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        x = x.clone()
        x[0] = 0
        x.add_(1)
        return torch.relu_(x) * 2

    _check(fn, lambda s: [_randn(5, 6, seed=s)])


def test_permuted_view_of_fresh_buffer_is_refused_clearly() -> None:
    """A write through a transposed view of a fresh buffer cannot be mapped back onto the buffer: reading
    the buffer is refused (before, its old values went into the engine silently)."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        buf = torch.zeros(6, 5)
        buf.t().copy_(x)
        return buf + 1

    with pytest.raises(ConversionError, match="cannot map that view back onto the tensor it views"):
        torch2trt_lite.convert(_Fn(fn).eval(), [_randn(5, 6)], backend="sim")


def test_permuted_view_of_fresh_buffer_unused_converts() -> None:
    """The same write is fine when only the view is read afterwards."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        buf = torch.zeros(6, 5)
        view = buf.t()
        view.add_(x)
        return view * 2

    _check(fn, lambda s: [_randn(5, 6, seed=s)])


def test_view_across_rows_of_fresh_buffer_is_refused_clearly() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        buf = torch.zeros(4, 6)
        buf.view(2, 12)[1, 3:9].copy_(x[0])  # the end of row 2 and the start of row 3: not a box of buf
        return buf * 2

    with pytest.raises(ConversionError, match="cannot map that view back onto the tensor it views"):
        torch2trt_lite.convert(_Fn(fn).eval(), [_randn(5, 6)], backend="sim")


def test_permuted_view_of_traced_tensor_is_refused_clearly() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        y.t()[1:].mul_(2)  # columns 1.. of y through a transposed view: its dims in the other order
        return y + 1

    with pytest.raises(Torch2TRTError, match="modified in place through a view"):
        torch2trt_lite.convert(_Fn(fn).eval(), [_randn(5, 6)], backend="sim")


def test_check_sees_values_written_into_fresh_buffer() -> None:
    """check(): a fresh buffer written through a view holds traced values, so an unsupported call on it
    is reported (before, the buffer passed for a constant)."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        buf = torch.zeros(2, 5, 6)
        buf[1].copy_(x)
        return torch.linalg.svdvals(buf)

    report = torch2trt_lite.check(_Fn(fn).eval(), [_randn(5, 6)])
    assert [u.op for u in report.unsupported] == ["torch.linalg.svdvals"]


# ------------------------------------------------------------------------- the real builder
_RTX_CASES = [pytest.param(fn, make(0), id=name) for name, (fn, make) in _PATTERNS.items()] + [
    pytest.param(_batch_images, [_randn(3, 40, 27), _randn(3, 33, 45)], id="batch_images"),
] + [pytest.param(fn, [Input((1, 6), (4, 6), (9, 6), example=_randn(4, 6))], id=f"dynamic_{name}")
     for name, fn in _DYNAMIC.items()]


@pytest.mark.parametrize(("fn", "xs"), _RTX_CASES)
def test_write_through_view_builds_on_tensorrt_rtx(fn: Callable[..., Any], xs: list[Any]) -> None:
    """TensorRT-RTX's real builder defines the same layers (types, output shapes and dtypes) as the
    sim and builds the engine (with its optimization profile for the dynamic cases)."""
    pytest.importorskip("tensorrt_rtx", reason="the real-builder tier needs TensorRT-RTX: pip install -e '.[rtx]'")
    from torch2trt_lite.errors import BackendUnavailableError

    model = _Fn(fn).eval()

    def fresh() -> list[Any]:
        return [x.clone() if isinstance(x, torch.Tensor) else x for x in xs]

    sim = torch2trt_lite.define_network(model, fresh(), backend="sim").layers()
    real = torch2trt_lite.define_network(model, fresh(), backend="tensorrt-rtx").layers()
    assert [(t, o) for _, t, o in real] == [(t, o) for _, t, o in sim]
    engine = torch2trt_lite.convert(model, fresh(), backend="tensorrt-rtx", verify=False)
    assert engine.metadata["backend"] == "tensorrt-rtx" and len(bytes(engine.plan)) > 0
    examples = [x.example if isinstance(x, Input) else x for x in fresh()]
    if not engine.runnable:  # a real engine runs only on a supported GPU; the sim cases above ran these models
        with pytest.raises(BackendUnavailableError):
            engine(*examples)
        return
    device = [x.cuda() for x in examples]
    torch.testing.assert_close(engine(*device), fn(*[x.clone() for x in device]), **_TOL)


def test_write_back_refused_along_dynamic_dim_is_reported_when_the_base_is_read() -> None:
    """A strided view along a dynamic dim converts, and so does a write into it; only reading the
    tensor it views needs the (refused) write-back, and that read names why."""
    spec = [Input((1, 6), (4, 6), (9, 6), example=_randn(4, 6))]

    def view_only(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        v = y[::2]
        v.mul_(2)
        return v + 1

    engine = torch2trt_lite.convert(_Fn(view_only).eval(), spec, backend="sim", verify=False)
    for b in (1, 4, 9):
        x = _randn(b, 6, seed=b)
        torch.testing.assert_close(engine(x.clone()), view_only(x.clone()), **_TOL)

    def base_read(x: torch.Tensor) -> torch.Tensor:
        y = x * 1
        y[::2].mul_(2)
        return y + 1

    with pytest.raises(ConversionError, match=r"writing that back into the tensor it views failed: .*step 2"):
        torch2trt_lite.convert(_Fn(base_read).eval(), spec, backend="sim", verify=False)


# ----------------------------------------------- writes into results eager returns as views of its own memory
# F.linear of a 3-D input returns a view of its 2-D result (as einsum, bilinear, avg_pool1d and others do of
# theirs): a write into the result or into a view of it is followed like a write into any traced tensor.
_W = _randn(6, 8, seed=7)
_B = _randn(6, seed=8)
_FRESH_VIEW_OPS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "linear_3d": lambda x: nn.functional.linear(x, _W, _B),
    "linear_4d": lambda x: nn.functional.linear(x[None], _W, _B),
    "einsum": lambda x: torch.einsum("bij,kj->bik", x, _W),
    "bilinear": lambda x: nn.functional.bilinear(x, x, _randn(3, 8, 8, seed=9)),
    "avg_pool1d": lambda x: nn.functional.avg_pool1d(x, 2),
    "adaptive_avg_pool1d": lambda x: nn.functional.adaptive_avg_pool1d(x, 4),
    "instance_norm": lambda x: nn.functional.instance_norm(x),
    "sdpa": lambda x: nn.functional.scaled_dot_product_attention(x, x, x),
}


def _iadd_all(y: torch.Tensor) -> torch.Tensor:
    y += y.new_ones(y.shape[-1]) * 0.5  # the box-head pattern: y = fc(x); y += b
    return y


def _iadd_row(y: torch.Tensor) -> torch.Tensor:
    y[0] += 1.0
    return y


def _mul_columns(y: torch.Tensor) -> torch.Tensor:
    y[..., :2].mul_(2.0)
    return y * 1.0


_WRITES = {"iadd": _iadd_all, "iadd_row": _iadd_row, "mul_columns": _mul_columns}


@pytest.mark.parametrize(("op", "write"), [("linear_3d", w) for w in _WRITES] + [
    (op, "iadd_row") for op in _FRESH_VIEW_OPS if op != "linear_3d"])
def test_write_into_a_view_of_the_ops_own_result_matches_eager(op: str, write: str) -> None:
    f = _FRESH_VIEW_OPS[op]
    with torch.no_grad():
        assert f(_randn(2, 5, 8))._base is not None, "eager no longer returns a view: the case tests nothing"
    model = _Fn(lambda x: _WRITES[write](f(x))).eval()
    engine = torch2trt_lite.convert(model, [_randn(2, 5, 8)], backend="sim")
    for seed in (0, 1):
        x = _randn(2, 5, 8, seed=seed)
        torch.testing.assert_close(engine(x), model(x), rtol=1e-5, atol=1e-5)  # fp32 matmul order


def test_write_into_a_linear_result_with_a_dynamic_batch_matches_eager() -> None:
    lin = nn.Linear(8, 6).eval()

    def fn(x: torch.Tensor) -> torch.Tensor:
        y = lin(x)
        y[:, 0] += 1.0
        y += lin.bias
        return y

    engine = torch2trt_lite.convert(_Fn(fn).eval(), [Input((1, 5, 8), (2, 5, 8), (4, 5, 8), example=_randn(2, 5, 8))],
                                    backend="sim")
    with torch.no_grad():
        for b in (1, 3, 4):
            x = _randn(b, 5, 8, seed=b)
            torch.testing.assert_close(engine(x), fn(x), rtol=1e-5, atol=1e-5)
