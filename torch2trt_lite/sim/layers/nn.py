"""Neural-network layers: convolution, deconvolution, pooling, scale, LRN, normalization, resize,
padding, parametric ReLU and grid sample.

Conventions shared by the convolution-like layers (TensorRT's ``PaddingMode`` documentation):
the last ``len(kernel_size_nd)`` dimensions of the input are spatial, the one before them is the
channel dimension and every dimension before that is a batch dimension.

Several of these layers accept attribute changes after ``add_*`` (kernel weights set later, the
number of groups changed, a kernel given as a tensor through ``set_input``), so like TensorRT they
check only the input ranks and types when they are added and validate the rest when the network
is built or an output shape is queried.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from ...errors import NetworkDefinitionError
from .. import _dtypes
from .._core import ILayer, RunContext, TensorInfo, Weights, _log, as_dims, volume
from .._enums import (
    DataType,
    InterpolationMode,
    PaddingMode,
    PoolingType,
    ResizeCoordinateTransformation,
    ResizeRoundMode,
    ResizeSelector,
    SampleMode,
    ScaleMode,
    Severity,
)

_FLOATS = _dtypes.FLOATS
_HALVES = (torch.float16, torch.bfloat16)
# Configurations that torch's own conv/pool/interpolate compute exactly as TensorRT documents them
# are handed to those (faster); the tests switch this off to check the general code path as well.
_TORCH_FAST_PATHS = True


def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """fp16/bf16 are computed in fp32 on the CPU (TensorRT accumulates them in fp32)."""
    if x.dtype in _HALVES and x.device.type == "cpu":
        return torch.float32
    return x.dtype


@contextlib.contextmanager
def _override(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.name = value`` for the duration of the block (a torch backend flag)."""
    prev = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, prev)


def _ieee_fp32(x: torch.Tensor) -> contextlib.AbstractContextManager[None]:
    """cuDNN runs fp32 convolutions in TF32 by default; compute them in full fp32 like the CPU."""
    if x.device.type != "cuda" or x.dtype != torch.float32:
        return contextlib.nullcontext()
    conv = getattr(torch.backends.cudnn, "conv", None)
    if conv is not None and hasattr(conv, "fp32_precision"):
        return _override(conv, "fp32_precision", "ieee")
    return _override(torch.backends.cudnn, "allow_tf32", False)


def _no_cudnn(active: bool) -> contextlib.AbstractContextManager[None]:
    """Run without cuDNN: its transposed-convolution algorithms sum in an order that loses exact
    cancellations TensorRT and the CPU keep (Deconvolution/case_3d on an H200: 2e-3 where both give 0)."""
    return _override(torch.backends.cudnn, "enabled", False) if active else contextlib.nullcontext()


def _cached(rt: RunContext, key: Any, make: Any) -> Any:
    hit = rt.cache.get(key)
    if hit is None:
        hit = rt.cache[key] = make()
    return hit


def _weight(layer: ILayer, rt: RunContext, attr: str, dtype: torch.dtype, shape: Sequence[int]) -> torch.Tensor:
    """A Weights attribute reshaped and cast for the run device (cached per engine)."""
    key = (id(layer), attr, dtype, tuple(shape))
    hit = rt.cache.get(key)
    if hit is None:
        w: Weights = layer._a[attr]
        hit = rt.cache[key] = w._tensor().to(device=rt.device, dtype=dtype).reshape(tuple(shape))
    return hit  # type: ignore[no-any-return]


def _wlen(w: Weights | None) -> int:
    return 0 if w is None else len(w)


def _spatial_prop(name: str, fill: int) -> property:
    """A per-spatial-dimension Dims attribute; unset (``()``) reads as ``fill`` per kernel dimension."""

    def fget(self: ILayer) -> tuple[int, ...]:
        v = self._a[name]
        return v if v else (fill,) * len(self._a[self._kernel_attr])  # type: ignore[attr-defined]

    def fset(self: ILayer, value: Any) -> None:
        self._set_attr(name, value)

    return property(fget, fset)


def _padding_nd_prop() -> property:
    """``padding_nd``: reads pre_padding, sets pre- and post-padding to the same dims."""

    def fget(self: ILayer) -> tuple[int, ...]:
        return self.pre_padding  # type: ignore[attr-defined,no-any-return]

    def fset(self: ILayer, value: Any) -> None:
        dims = as_dims(value, f"{type(self).__name__}.padding_nd")
        self._a["pre_padding"] = dims
        self._a["post_padding"] = dims
        self._touch()

    return property(fget, fset)


def _dims_resolved(layer: ILayer, name: str, fill: int, n: int) -> tuple[int, ...]:
    v = layer._a[name]
    return tuple(v) if v else (fill,) * n


# ---------------------------------------------------------------------------- geometry
def _forward_geometry(
    size: int, window: int, stride: int, pre: int, post: int, mode: Any
) -> tuple[int, int, int, int]:
    """(pre padding, post padding, extra post overhang, output size) of a convolution/pooling axis.

    ``window`` is the dilated window 1 + D * (F - 1). The overhang is the part of the last window
    that lies past the padded input (EXPLICIT_ROUND_UP only).
    """
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        out = -(-size // stride)
        total = ((size - 1) // stride) * stride + window - size
        small, big = total // 2, total - total // 2
        pre, post = (small, big) if mode == PaddingMode.SAME_UPPER else (big, small)
        return pre, post, 0, out
    span = size + pre + post - window
    # O = ceil((M - DK) / S) + 1 rounding up, floor(..) + 1 down: a window larger than the padded
    # input still gives one output rounding up when it overhangs by less than a stride
    out = max(0, (-(-span // stride) if mode == PaddingMode.EXPLICIT_ROUND_UP else span // stride) + 1)
    if out == 0:
        return pre, post, 0, 0
    extra = max(0, (out - 1) * stride + window - (size + pre + post))
    return pre, post, extra, out


def _deconv_geometry(size: int, window: int, stride: int, pre: int, post: int, mode: Any) -> tuple[int, int, int]:
    """(trim at start, trim at end, output size) of a deconvolution axis."""
    full = (size - 1) * stride + window
    if mode in (PaddingMode.SAME_UPPER, PaddingMode.SAME_LOWER):
        total = max(window - stride, 0)
        small, big = total // 2, total - total // 2
        pre, post = (small, big) if mode == PaddingMode.SAME_UPPER else (big, small)
    return pre, post, full - pre - post


def _torch_pad(pre: Sequence[int], post: Sequence[int]) -> list[int]:
    pads: list[int] = []
    for p, q in zip(reversed(pre), reversed(post), strict=True):
        pads += [int(p), int(q)]
    return pads


# ------------------------------------------------------------------- convolution family
class _ConvBase(ILayer):
    _kernel_attr = "kernel_size_nd"
    _attrs = {
        "num_output_maps": 1,
        "kernel_size_nd": (),
        "kernel": None,
        "bias": None,
        "stride_nd": (),
        "dilation_nd": (),
        "pre_padding": (),
        "post_padding": (),
        "padding_mode": PaddingMode.EXPLICIT_ROUND_DOWN,
        "num_groups": 1,
    }
    _max_inputs = 3
    _deconv = False

    stride_nd = _spatial_prop("stride_nd", 1)
    dilation_nd = _spatial_prop("dilation_nd", 1)
    pre_padding = _spatial_prop("pre_padding", 0)
    post_padding = _spatial_prop("post_padding", 0)

    padding_nd = _padding_nd_prop()

    # -- validation
    def _check_eager(self, infos: list[TensorInfo | None]) -> None:
        x = infos[0]
        assert x is not None
        k = self._a["kernel_size_nd"]
        if len(k) not in (2, 3):
            raise self._fail(f"kernel_size_nd must have 2 or 3 dimensions (2D or 3D), got {tuple(k)}")
        if any(d <= 0 for d in k):
            raise self._fail(f"kernel_size_nd must be positive, got {tuple(k)}")
        if x.rank < len(k) + 2:
            raise self._fail(
                f"a {len(k)}D kernel needs an input of rank >= {len(k) + 2} ([N, C, spatial...]), got shape {x.shape}"
            )
        if x.dtype not in _FLOATS:
            raise self._fail(f"input must be FLOAT, HALF or BF16 (quantized inputs go through Q/DQ), got {x.dtype.name}")
        if self._a["num_output_maps"] <= 0:
            raise self._fail(f"num_output_maps must be positive, got {self._a['num_output_maps']}")

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        self._check_eager(infos)
        x = infos[0]
        assert x is not None
        a = self._a
        k = tuple(a["kernel_size_nd"])
        n = len(k)
        c = x.shape[-(n + 1)]
        if c < 0:
            raise self._fail(f"the channel dimension must be static (it is fixed by the weights), got shape {x.shape}")
        g, kout = a["num_groups"], a["num_output_maps"]
        if g <= 0 or c % g or kout % g:
            raise self._fail(
                f"num_groups {g} must divide the input channels {c} and num_output_maps {kout}"
            )
        for name, fill, positive in (("stride_nd", 1, True), ("dilation_nd", 1, True),
                                     ("pre_padding", 0, False), ("post_padding", 0, False)):
            v = _dims_resolved(self, name, fill, n)
            if len(v) != n:
                raise self._fail(f"{name} {v} must have {n} dimensions like kernel_size_nd {k}")
            if positive and any(d <= 0 for d in v):
                raise self._fail(f"{name} must be positive, got {v}")
            if not positive and any(d < 0 for d in v):
                raise self._fail(f"{name} must not be negative, got {v}")
        expect = (c * (kout // g) if self._deconv else kout * (c // g)) * volume(k)
        kin = infos[1] if len(infos) > 1 else None
        if kin is not None:
            if _wlen(a["kernel"]):
                raise self._fail("the kernel is given as input 1, so the kernel weights must be empty")
            if kin.dtype not in _FLOATS:
                raise self._fail(f"kernel input must be a floating-point tensor, got {kin.dtype.name}")
            if any(d < 0 for d in kin.shape) or volume(kin.shape) != expect:
                raise self._fail(f"kernel input has shape {kin.shape}; expected {expect} values")
        elif _wlen(a["kernel"]) != expect:
            if not _wlen(a["kernel"]):
                raise self._fail("kernel weights are empty and no kernel tensor was set with set_input(1, ...)")
            raise self._fail(
                f"kernel weights have {_wlen(a['kernel'])} values; {expect} expected for input channels {c}, "
                f"num_output_maps {kout}, num_groups {g} and kernel {k}"
            )
        bin_ = infos[2] if len(infos) > 2 else None
        if bin_ is not None:
            if _wlen(a["bias"]):
                raise self._fail("the bias is given as input 2, so the bias weights must be empty")
            if any(d < 0 for d in bin_.shape) or volume(bin_.shape) != kout:
                raise self._fail(f"bias input has shape {bin_.shape}; expected {kout} values")
        elif _wlen(a["bias"]) not in (0, kout):
            raise self._fail(f"bias weights have {_wlen(a['bias'])} values; expected 0 or {kout}")
        out = self._geometry(tuple(x.shape[-n:]))[-1]
        if any(o <= 0 for o, s in zip(out, x.shape[-n:], strict=True) if s >= 0):
            raise self._fail(f"the output would be empty: spatial input {x.shape[-n:]}, kernel {k}")

    def _required_inputs(self) -> int:
        return 1

    def _geometry(self, spatial: tuple[int, ...]) -> tuple[list[int], list[int], list[int], list[int]]:
        raise NotImplementedError

    def _resolved(self, n: int) -> tuple[tuple[int, ...], ...]:
        """(kernel, stride, dilation, pre-padding, post-padding) for ``n`` spatial dims, defaults filled in."""
        return (
            tuple(self._a["kernel_size_nd"]),
            _dims_resolved(self, "stride_nd", 1, n),
            _dims_resolved(self, "dilation_nd", 1, n),
            _dims_resolved(self, "pre_padding", 0, n),
            _dims_resolved(self, "post_padding", 0, n),
        )

    def _kernel(self, inputs: list[Any], rt: RunContext, dt: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
        if len(inputs) > 1 and inputs[1] is not None:
            return inputs[1].to(dt).reshape(shape)  # type: ignore[no-any-return]
        return _weight(self, rt, "kernel", dt, shape)

    def _bias(self, inputs: list[Any], rt: RunContext, dt: torch.dtype) -> torch.Tensor | None:
        if len(inputs) > 2 and inputs[2] is not None:
            return inputs[2].to(dt).reshape(-1)  # type: ignore[no-any-return]
        if not _wlen(self._a["bias"]):
            return None
        return _weight(self, rt, "bias", dt, (self._a["num_output_maps"],))


class IConvolutionLayer(_ConvBase):
    _layer_type = "CONVOLUTION"

    def _geometry(self, spatial: tuple[int, ...]) -> tuple[list[int], list[int], list[int], list[int]]:
        a = self._a
        k, s, d, pre, post = self._resolved(len(spatial))
        res = [
            _forward_geometry(i, 1 + di * (ki - 1), si, p, q, a["padding_mode"]) if i >= 0 else (0, 0, 0, -1)
            for i, ki, si, di, p, q in zip(spatial, k, s, d, pre, post, strict=True)
        ]
        return [r[0] for r in res], [r[1] + r[2] for r in res], [r[2] for r in res], [r[3] for r in res]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        a = self._a
        k = tuple(a["kernel_size_nd"])
        n = len(k)
        shape = tuple(x.shape)
        lead, c, spatial = shape[: -(n + 1)], shape[-(n + 1)], shape[-n:]
        plan = _cached(rt, (id(self), "geom", spatial), lambda: self._geometry(spatial))
        pre, post, _, out = plan
        kout, g = a["num_output_maps"], a["num_groups"]
        if rt.probe:
            return [torch.empty((*lead, kout, *out), dtype=x.dtype, device="meta")]
        dt = _compute_dtype(x)
        w = self._kernel(inputs, rt, dt, (kout, c // g, *k))
        b = self._bias(inputs, rt, dt)
        xb = x.reshape(-1, c, *spatial).to(dt)
        padding: Sequence[int] = pre
        if not _TORCH_FAST_PATHS or list(pre) != list(post) or min(pre, default=0) < 0:
            xb = F.pad(xb, _torch_pad(pre, post))
            padding = (0,) * n
        conv = F.conv2d if n == 2 else F.conv3d
        stride = _dims_resolved(self, "stride_nd", 1, n)
        dilation = _dims_resolved(self, "dilation_nd", 1, n)
        with _ieee_fp32(xb):
            y = conv(xb, w, b, stride, tuple(padding), dilation, g)
        return [y.reshape(*lead, kout, *out).to(x.dtype)]


class IDeconvolutionLayer(_ConvBase):
    _layer_type = "DECONVOLUTION"
    _deconv = True

    def _geometry(self, spatial: tuple[int, ...]) -> tuple[list[int], list[int], list[int], list[int]]:
        a = self._a
        k, s, d, pre, post = self._resolved(len(spatial))
        res = [
            _deconv_geometry(i, 1 + di * (ki - 1), si, p, q, a["padding_mode"]) if i >= 0 else (0, 0, -1)
            for i, ki, si, di, p, q in zip(spatial, k, s, d, pre, post, strict=True)
        ]
        return [r[0] for r in res], [r[1] for r in res], [0] * len(spatial), [r[2] for r in res]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        a = self._a
        k = tuple(a["kernel_size_nd"])
        n = len(k)
        shape = tuple(x.shape)
        lead, c, spatial = shape[: -(n + 1)], shape[-(n + 1)], shape[-n:]
        pre, post, _, out = _cached(rt, (id(self), "geom", spatial), lambda: self._geometry(spatial))
        kout, g = a["num_output_maps"], a["num_groups"]
        if rt.probe:
            return [torch.empty((*lead, kout, *out), dtype=x.dtype, device="meta")]
        dt = _compute_dtype(x)
        w = self._kernel(inputs, rt, dt, (c, kout // g, *k))
        b = self._bias(inputs, rt, dt)
        xb = x.reshape(-1, c, *spatial).to(dt)
        deconv = F.conv_transpose2d if n == 2 else F.conv_transpose3d
        stride = _dims_resolved(self, "stride_nd", 1, n)
        dilation = _dims_resolved(self, "dilation_nd", 1, n)
        with _ieee_fp32(xb), _no_cudnn(xb.is_cuda):
            y = deconv(xb, w, b, stride, 0, 0, g, dilation)
        if any(pre) or any(post):
            for axis, (p, o) in enumerate(zip(pre, out, strict=True)):
                y = y.narrow(2 + axis, p, o)
        return [y.reshape(*lead, kout, *out).to(x.dtype)]


# ------------------------------------------------------------------------------ pooling
class IPoolingLayer(ILayer):
    _layer_type = "POOLING"
    _kernel_attr = "window_size_nd"
    _attrs = {
        "type": PoolingType.MAX,
        "window_size_nd": (),
        "stride_nd": (),
        "pre_padding": (),
        "post_padding": (),
        "padding_mode": PaddingMode.EXPLICIT_ROUND_DOWN,
        "blend_factor": 0.0,
        "average_count_excludes_padding": True,
    }

    stride_nd = _spatial_prop("stride_nd", 1)
    pre_padding = _spatial_prop("pre_padding", 0)
    post_padding = _spatial_prop("post_padding", 0)

    padding_nd = _padding_nd_prop()

    def _check_eager(self, infos: list[TensorInfo | None]) -> None:
        ILayer._check(self, infos)
        x = infos[0]
        assert x is not None
        win = tuple(self._a["window_size_nd"])
        n = len(win)
        if n not in (2, 3):
            raise self._fail(f"window_size_nd must have 2 or 3 dimensions, got {win}")
        if any(d <= 0 for d in win):
            raise self._fail(f"window_size_nd must be positive, got {win}")
        if x.rank < n + 2:
            raise self._fail(f"a {n}D window needs an input of rank >= {n + 2}, got shape {x.shape}")
        if x.dtype not in _FLOATS:
            raise self._fail(f"input must be FLOAT, HALF or BF16, got {x.dtype.name}")

    def _check(self, infos: list[TensorInfo | None]) -> None:
        self._check_eager(infos)
        x = infos[0]
        assert x is not None
        win = tuple(self._a["window_size_nd"])
        n = len(win)
        for name, fill in (("stride_nd", 1), ("pre_padding", 0), ("post_padding", 0)):
            v = _dims_resolved(self, name, fill, n)
            if len(v) != n:
                raise self._fail(f"{name} {v} must have {n} dimensions like window_size_nd {win}")
            if (fill == 1 and any(d <= 0 for d in v)) or (fill == 0 and any(d < 0 for d in v)):
                raise self._fail(f"{name} has an invalid value {v}")
        if self._a["type"] == PoolingType.MAX_AVERAGE_BLEND and not 0.0 <= self._a["blend_factor"] <= 1.0:
            raise self._fail(f"blend_factor must be in [0, 1], got {self._a['blend_factor']}")
        out = self._geometry(tuple(x.shape[-n:]))[3]
        if any(o <= 0 for o, s in zip(out, x.shape[-n:], strict=True) if s >= 0):
            raise self._fail(f"the output would be empty: spatial input {x.shape[-n:]}, window {win}")

    def _geometry(self, spatial: tuple[int, ...]) -> tuple[list[int], list[int], list[int], list[int]]:
        a, n = self._a, len(spatial)
        win = a["window_size_nd"]
        s = _dims_resolved(self, "stride_nd", 1, n)
        pre = _dims_resolved(self, "pre_padding", 0, n)
        post = _dims_resolved(self, "post_padding", 0, n)
        res = [
            _forward_geometry(i, w, si, p, q, a["padding_mode"]) if i >= 0 else (0, 0, 0, -1)
            for i, w, si, p, q in zip(spatial, win, s, pre, post, strict=True)
        ]
        return [r[0] for r in res], [r[1] for r in res], [r[2] for r in res], [r[3] for r in res]

    def _pool_plan(self, spatial: tuple[int, ...], rt: RunContext) -> tuple[Any, ...]:
        """Padding and, when torch's pooling cannot express it, average-pooling denominators."""
        pre, post, extra, _ = self._geometry(spatial)
        n = len(spatial)
        win = tuple(self._a["window_size_nd"])
        stride = _dims_resolved(self, "stride_nd", 1, n)
        full = [p + e for p, e in zip(post, extra, strict=True)]
        # torch's own padding (implicit -inf / zeros, count_include_pad) is the same thing when the
        # padding is symmetric and at most half the window. A window overhanging the padded input
        # (EXPLICIT_ROUND_UP) is not padding: an average that counts padding must not count it.
        counts_padding = self._a["type"] != PoolingType.MAX and not self._a["average_count_excludes_padding"]
        if (_TORCH_FAST_PATHS and all(p == q and 0 <= p <= w // 2 for p, q, w in zip(pre, full, win, strict=True))
                and not (counts_padding and any(extra))):
            return True, None, None, tuple(pre), full, win, stride
        pool = F.avg_pool2d if n == 2 else F.avg_pool3d
        ones = torch.ones((1, 1, *spatial), device=rt.device)
        valid = F.pad(ones, _torch_pad(pre, full))
        padded = F.pad(F.pad(ones, _torch_pad(pre, post), value=1.0), _torch_pad([0] * n, extra))
        cnt_ex = pool(valid, win, stride, 0, divisor_override=1)[0, 0]
        cnt_in = pool(padded, win, stride, 0, divisor_override=1)[0, 0]
        return False, cnt_ex, cnt_in, pre, full, win, stride

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        a = self._a
        n = len(a["window_size_nd"])
        shape = tuple(x.shape)
        lead, spatial = shape[:-n], shape[-n:]
        if rt.probe:
            out = self._geometry(spatial)[3]
            return [torch.empty((*lead, *out), dtype=x.dtype, device="meta")]
        fast, cnt_ex, cnt_in, pre, post, win, stride = _cached(
            rt, (id(self), "plan", spatial), lambda: self._pool_plan(spatial, rt)
        )
        dt = _compute_dtype(x)
        xb = x.reshape(1, -1, *spatial).to(dt)
        kind = a["type"]
        exclude = a["average_count_excludes_padding"]
        max_pool = F.max_pool2d if n == 2 else F.max_pool3d
        avg_pool = F.avg_pool2d if n == 2 else F.avg_pool3d
        pads = _torch_pad(pre, post)
        mx = avg = None
        if kind in (PoolingType.MAX, PoolingType.MAX_AVERAGE_BLEND):
            if fast:
                mx = max_pool(xb, win, stride, pre)
            else:
                mx = max_pool(F.pad(xb, pads, value=-math.inf), win, stride)
        if kind in (PoolingType.AVERAGE, PoolingType.MAX_AVERAGE_BLEND):
            if fast:
                avg = avg_pool(xb, win, stride, pre, count_include_pad=not exclude)
            else:
                total = avg_pool(F.pad(xb, pads), win, stride, 0, divisor_override=1)
                avg = total / (cnt_ex if exclude else cnt_in).to(dt)
        if kind == PoolingType.MAX:
            assert mx is not None
            result = mx
        elif kind == PoolingType.AVERAGE:
            assert avg is not None
            result = avg
        else:
            assert mx is not None and avg is not None
            bf = a["blend_factor"]
            result = (1.0 - bf) * mx + bf * avg
        return [result.reshape(*lead, *result.shape[2:]).to(x.dtype)]


# -------------------------------------------------------------------------------- scale
class IScaleLayer(ILayer):
    _layer_type = "SCALE"
    _attrs = {"mode": ScaleMode.UNIFORM, "shift": None, "scale": None, "power": None, "channel_axis": 1}

    def _check_eager(self, infos: list[TensorInfo | None]) -> None:
        x = infos[0]
        assert x is not None
        if x.rank < 4:
            raise self._fail(f"input must have at least 4 dimensions, got shape {x.shape}")
        if x.dtype not in _FLOATS:
            raise self._fail(f"input must be FLOAT, HALF or BF16, got {x.dtype.name}")

    def _expected(self, shape: Sequence[int]) -> tuple[int, tuple[int, ...]]:
        """(weights count, broadcast shape of the weights) for the current mode and channel axis."""
        mode, axis = self._a["mode"], self._a["channel_axis"]
        rank = len(shape)
        if mode == ScaleMode.UNIFORM:
            return 1, (1,) * rank
        if mode == ScaleMode.CHANNEL:
            return shape[axis], tuple(shape[axis] if i == axis else 1 for i in range(rank))
        tail = tuple(shape[axis:])
        return volume(tail), (1,) * axis + tail

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        self._check_eager(infos)
        x = infos[0]
        assert x is not None
        axis = self._a["channel_axis"]
        if not 0 <= axis < x.rank:
            raise self._fail(f"channel_axis {axis} is out of range for an input of rank {x.rank}")
        mode = self._a["mode"]
        dims = x.shape[axis:] if mode == ScaleMode.ELEMENTWISE else x.shape[axis: axis + 1]
        if mode != ScaleMode.UNIFORM and any(d < 0 for d in dims):
            raise self._fail(f"{mode.name} scaling needs static dimensions from channel_axis {axis}, got {x.shape}")
        count = self._expected(x.shape)[0]
        for name in ("shift", "scale", "power"):
            got = _wlen(self._a[name])
            if got not in (0, count):
                raise self._fail(f"{name} has {got} values; {mode.name} mode with channel_axis {axis} on "
                                 f"input {x.shape} needs {count} (or 0 for the default)")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        if rt.probe:
            return [x]
        dt = torch.float32 if x.dtype in _HALVES else x.dtype
        bshape = self._expected(tuple(x.shape))[1]
        y = x.to(dt)
        if _wlen(self._a["scale"]):
            y = y * _weight(self, rt, "scale", dt, bshape)
        if _wlen(self._a["shift"]):
            y = y + _weight(self, rt, "shift", dt, bshape)
        if _wlen(self._a["power"]):
            y = torch.pow(y, _weight(self, rt, "power", dt, bshape))
        target = self._output_types.get(0)
        if target == DataType.INT8:
            return [torch.round(y).clamp(-128, 127).to(torch.int8)]
        return [y.to(x.dtype)]


# ---------------------------------------------------------------------------------- LRN
class ILRNLayer(ILayer):
    _layer_type = "LRN"
    _attrs = {"window_size": 1, "alpha": 1.0, "beta": 1.0, "k": 1.0}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        a = self._a
        if x.rank < 4:
            raise self._fail(f"at least 4 dimensions are required for input ([N, C, H, W]), got shape {x.shape}")
        if x.dtype not in _FLOATS:
            raise self._fail(f"input must be FLOAT, HALF or BF16, got {x.dtype.name}")
        w = a["window_size"]
        if w % 2 == 0 or not 1 <= w <= 15:
            raise self._fail(f"window_size must be odd and in [1, 15], got {w}")
        if not -1e20 <= a["alpha"] <= 1e20:
            raise self._fail(f"alpha must be in [-1e20, 1e20], got {a['alpha']}")
        if not 0.01 <= a["beta"] <= 1e5:
            raise self._fail(f"beta must be in [0.01, 1e5], got {a['beta']}")
        if not 1e-5 <= a["k"] <= 1e10:
            raise self._fail(f"k must be in [1e-5, 1e10], got {a['k']}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        if rt.probe:
            return [x]
        a = self._a
        w = a["window_size"]
        xf = x.to(_compute_dtype(x))
        c = xf.shape[1]
        sq = (xf * xf).reshape(xf.shape[0], 1, c, -1)
        sq = F.pad(sq, (0, 0, w // 2, w // 2))
        total = F.avg_pool2d(sq, (w, 1), 1, 0, divisor_override=1).reshape(xf.shape)
        y = xf / torch.pow(a["k"] + (a["alpha"] / w) * total, a["beta"])
        return [y.to(x.dtype)]


# ------------------------------------------------------------------------ normalization
class INormalizationLayer(ILayer):
    _layer_type = "NORMALIZATION"
    _attrs = {"epsilon": 1e-5, "axes": 0, "num_groups": 1, "compute_precision": DataType.FLOAT, "is_v2": False}

    @property
    def is_v2(self) -> bool:
        return bool(self._a["is_v2"])

    @property
    def compute_precision(self) -> Any:
        return self._a["compute_precision"]

    @compute_precision.setter
    def compute_precision(self, value: Any) -> None:
        if self._network._strongly_typed:
            raise self._fail("compute_precision cannot be set in a strongly typed network (cast the input instead)")
        dt = DataType(int(value))
        if dt not in (DataType.FLOAT, DataType.HALF):
            raise self._fail(f"compute_precision must be FLOAT or HALF, got {dt.name}")
        self._set_attr("compute_precision", dt)

    def _required_inputs(self) -> int:
        return 3

    def _check_eager(self, infos: list[TensorInfo | None]) -> None:
        ILayer._check(self, infos)
        x, s, b = infos[0], infos[1], infos[2]
        assert x is not None and s is not None and b is not None
        for what, t in (("input", x), ("scale", s), ("bias", b)):
            if t.dtype not in _FLOATS:
                raise self._fail(f"{what} must be FLOAT, HALF or BF16, got {t.dtype.name}")
        if s.dtype != x.dtype or b.dtype != x.dtype:
            raise self._fail(
                f"scale ({s.dtype.name}) and bias ({b.dtype.name}) must have the input's type {x.dtype.name}"
            )
        axes = self._a["axes"]
        if axes <= 0 or axes >> x.rank:
            raise self._fail(f"axes bitmask {axes:#x} must select axes of the rank-{x.rank} input")
        for what, t in (("scale", s), ("bias", b)):
            if t.rank != x.rank:
                raise self._fail(f"{what} must have the input's rank {x.rank}, got shape {t.shape}")

    def _check(self, infos: list[TensorInfo | None]) -> None:
        self._check_eager(infos)
        x, s, b = infos[0], infos[1], infos[2]
        assert x is not None and s is not None and b is not None
        a = self._a
        axes = a["axes"]
        g = a["num_groups"]
        if g < 1:
            raise self._fail(f"num_groups must be >= 1, got {g}")
        if g > 1:
            if x.rank < 3:
                raise self._fail(f"group normalization needs an input of rank >= 3, got shape {x.shape}")
            c = x.shape[1]
            if c < 0 or c % g:
                raise self._fail(f"num_groups {g} must divide the (static) channel dimension {c}")
            want = sum(1 << i for i in range(2, x.rank))
            if axes != want:
                raise self._fail(
                    f"with num_groups != 1 the axes bitmask must select every axis after the channel axis "
                    f"({want:#x}), got {axes:#x}"
                )
        for what, t in (("scale", s), ("bias", b)):
            for i, (dt_, dx) in enumerate(zip(t.shape, x.shape, strict=True)):
                ok = dt_ in (1, dx) or dx < 0 or dt_ < 0
                if g > 1 and i == 1 and not a["is_v2"]:
                    ok = dt_ in (1, g)
                if not ok:
                    if g > 1 and i == 1:
                        per = "per channel ([1, C, 1, ...])" if a["is_v2"] else "per group ([1, G, 1, ...])"
                        raise self._fail(f"{what} shape {t.shape}: group normalization expects it {per}")
                    raise self._fail(f"{what} shape {t.shape} does not broadcast to the input shape {x.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, s, b = inputs[0], inputs[1], inputs[2]
        if rt.probe:
            return [x]
        a = self._a
        rank = x.dim()
        cdt = torch.float16 if a["compute_precision"] == DataType.HALF else torch.float32
        xf = x.to(cdt).float()
        g = a["num_groups"]
        axes = [i for i in range(rank) if a["axes"] >> i & 1]
        if g > 1:
            n, c = xf.shape[0], xf.shape[1]
            xg = xf.reshape(n, g, -1)
            var, mean = torch.var_mean(xg, dim=2, keepdim=True, correction=0)
            y = ((xg - mean) * torch.rsqrt(var + a["epsilon"])).reshape(xf.shape)
            if not a["is_v2"]:
                if s.shape[1] == g and g != c:
                    s = s.repeat_interleave(c // g, dim=1)
                if b.shape[1] == g and g != c:
                    b = b.repeat_interleave(c // g, dim=1)
        else:
            var, mean = torch.var_mean(xf, dim=axes, keepdim=True, correction=0)
            y = (xf - mean) * torch.rsqrt(var + a["epsilon"])
        y = y * s.float() + b.float()
        return [y.to(cdt).to(x.dtype)]


# ------------------------------------------------------------------------------- resize
def _cubic_weights(t: torch.Tensor, coeff: float) -> list[torch.Tensor]:
    """Keys' cubic weights of the neighbours at offsets -1, 0, +1, +2 for fractions ``t``."""

    def w(d: torch.Tensor) -> torch.Tensor:
        d = d.abs()
        near = ((coeff + 2) * d - (coeff + 3)) * d * d + 1
        far = ((coeff * d - 5 * coeff) * d + 8 * coeff) * d - 4 * coeff
        return torch.where(d <= 1, near, torch.where(d < 2, far, torch.zeros_like(d)))

    return [w(1 + t), w(t), w(1 - t), w(2 - t)]


def _exact_nearest_ratio(n_in: int, n_out: int) -> bool:
    """torch's float32 nearest mapping is exact: n_in / n_out an integer, or n_out / n_in a power of two."""
    if n_in % n_out == 0:
        return True
    k, rem = divmod(n_out, n_in)
    return rem == 0 and k & (k - 1) == 0


class IResizeLayer(ILayer):
    _layer_type = "RESIZE"
    _attrs = {
        "shape": (),
        "scales": (),
        "resize_mode": InterpolationMode.NEAREST,
        "coordinate_transformation": ResizeCoordinateTransformation.ASYMMETRIC,
        "selector_for_single_pixel": ResizeSelector.FORMULA,
        "nearest_rounding": ResizeRoundMode.FLOOR,
        "exclude_outside": False,
        "cubic_coeff": -0.75,
    }
    _shape_inputs = (1,)
    _max_inputs = 2

    @property
    def _dds(self) -> bool:  # type: ignore[override]
        """Output dims are unknown (-1) at build time when input 1 holds values known only at run time."""
        inputs = getattr(self, "_inputs", [])
        if len(inputs) > 1 and inputs[1] is not None:
            return inputs[1]._info().value() is None
        return False

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self._a["shape"])

    @shape.setter
    def shape(self, value: Any) -> None:
        if len(self._inputs) > 1 and self._inputs[1] is not None:
            raise self._fail("shape cannot be set on a dynamic resize layer (input 1 gives the output shape)")
        self._a["shape"] = as_dims(value, "IResizeLayer.shape")
        self._a["scales"] = ()
        self._touch()

    @property
    def scales(self) -> list[float]:
        return [float(v) for v in self._a["scales"]]

    @scales.setter
    def scales(self, value: Any) -> None:
        if len(self._inputs) > 1 and self._inputs[1] is not None:
            raise self._fail("scales cannot be set on a dynamic resize layer (input 1 gives the output shape)")
        try:
            vals = tuple(float(v) for v in value)
        except (TypeError, ValueError):
            raise self._fail(f"scales must be a sequence of floats, got {value!r}") from None
        self._a["scales"] = vals
        self._a["shape"] = ()
        self._touch()

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        a = self._a
        mode = a["resize_mode"]
        if mode != InterpolationMode.NEAREST and x.dtype not in _FLOATS:
            raise self._fail(f"{mode.name} resize needs a FLOAT, HALF or BF16 input, got {x.dtype.name}")
        if x.dtype == DataType.BOOL:
            raise self._fail("resize does not accept BOOL input")
        sin = infos[1] if len(infos) > 1 else None
        if sin is not None:
            if sin.rank != 1 or sin.shape[0] != x.rank:
                raise self._fail(f"input 1 must be a 1D tensor of {x.rank} values, got shape {sin.shape}")
            if sin.dtype not in (DataType.INT32, DataType.INT64, DataType.FLOAT):
                raise self._fail(f"input 1 must be INT32/INT64 (output shape) or FLOAT (scales), got {sin.dtype.name}")
        elif a["scales"]:
            if len(a["scales"]) != x.rank:
                raise self._fail(f"scales {list(a['scales'])} must have one value per input dimension ({x.rank})")
            if any(v <= 0 for v in a["scales"]):
                raise self._fail(f"scales must be positive, got {list(a['scales'])}")
        elif a["shape"]:
            if len(a["shape"]) != x.rank:
                raise self._fail(f"shape {tuple(a['shape'])} must have the input's rank {x.rank}")
            if any(d < 0 for d in a["shape"]):
                raise self._fail(f"shape must not contain negative dimensions, got {tuple(a['shape'])}")

    def _target(self, inputs: list[Any], shape: tuple[int, ...],
                rt: RunContext) -> tuple[tuple[int, ...], tuple[float, ...] | None]:
        """(output shape, scales) where scales is None when the output size is given directly."""
        a = self._a
        sin = inputs[1] if len(inputs) > 1 else None
        if sin is not None:
            if sin.device.type == "meta":
                if not rt.probe:
                    raise self._fail("the output shape (input 1) must be a shape tensor whose values are known")
                # values known only at run time: report every output dimension as dynamic (-1)
                return tuple(1 + rt.probe_index for _ in shape), None
            if sin.dtype.is_floating_point:
                sc = tuple(float(v) for v in sin.tolist())
                return tuple(int(math.floor(d * f)) for d, f in zip(shape, sc, strict=True)), sc
            return tuple(int(v) for v in sin.tolist()), None
        if a["scales"]:
            sc = tuple(a["scales"])
            return tuple(int(math.floor(d * f)) for d, f in zip(shape, sc, strict=True)), sc
        if a["shape"]:
            return tuple(a["shape"]), None
        return shape, None

    def _plan(self, shape: tuple[int, ...], out: tuple[int, ...], scales: tuple[float, ...] | None,
              device: torch.device, dtype: torch.dtype) -> list[tuple[int, str, list[torch.Tensor], list[torch.Tensor]]]:
        """Per resized axis: (axis, kind, index tensors, weight tensors)."""
        a = self._a
        mode = a["resize_mode"]
        resized = [i for i in range(len(shape)) if shape[i] != out[i] or (scales is not None and scales[i] != 1.0)]
        limit = {InterpolationMode.NEAREST: 8, InterpolationMode.LINEAR: 3, InterpolationMode.CUBIC: 2}[mode]
        if resized and resized[0] < len(shape) - limit:
            raise self._fail(f"{mode.name} resize can change only the innermost {limit} dimensions; "
                             f"input {shape} -> output {out}")
        if any(o < 0 for o in out):
            raise self._fail(f"output shape {out} has negative dimensions")
        ct = a["coordinate_transformation"]
        plans: list[tuple[int, str, list[torch.Tensor], list[torch.Tensor]]] = []
        for i in resized:
            n_in, n_out = shape[i], out[i]
            if n_out == 0 or n_in == 0:
                plans.append((i, "empty", [], []))
                continue
            pos = torch.arange(n_out, dtype=torch.float64)
            ratio = (1.0 / scales[i]) if scales is not None else n_in / n_out
            if ct == ResizeCoordinateTransformation.ALIGN_CORNERS:
                src = pos * ((n_in - 1) / (n_out - 1)) if n_out > 1 else torch.zeros_like(pos)
            elif ct == ResizeCoordinateTransformation.HALF_PIXEL:
                src = (pos + 0.5) * ratio - 0.5
            else:
                src = pos * ratio
            if n_out == 1 and a["selector_for_single_pixel"] == ResizeSelector.UPPER:
                src = torch.zeros_like(pos)
            if mode == InterpolationMode.NEAREST:
                rm = a["nearest_rounding"]
                if rm == ResizeRoundMode.HALF_UP:
                    idx = torch.floor(src + 0.5)
                elif rm == ResizeRoundMode.HALF_DOWN:
                    idx = torch.ceil(src - 0.5)
                elif rm == ResizeRoundMode.CEIL:
                    idx = torch.ceil(src)
                else:
                    idx = torch.floor(src)
                idx = idx.clamp(0, n_in - 1).long()
                plans.append((i, "nearest", [idx.to(device)], []))
            elif mode == InterpolationMode.LINEAR:
                s = src.clamp(0, n_in - 1)
                i0 = torch.floor(s)
                frac = s - i0
                i0 = i0.long()
                i1 = (i0 + 1).clamp(max=n_in - 1)
                plans.append((i, "mix", [i0.to(device), i1.to(device)], self._mix_weights([1 - frac, frac], i, len(shape), device, dtype)))
            else:
                base = torch.floor(src)
                frac = src - base
                ws = _cubic_weights(frac, a["cubic_coeff"])
                idxs = [base.long() + off for off in (-1, 0, 1, 2)]
                if a["exclude_outside"]:
                    ws = [w * ((j >= 0) & (j < n_in)) for w, j in zip(ws, idxs, strict=True)]
                    total = sum(ws)
                    ws = [w / total for w in ws]
                plans.append((i, "mix", [j.clamp(0, n_in - 1).to(device) for j in idxs],
                              self._mix_weights(ws, i, len(shape), device, dtype)))
        return plans

    def _torch_route(self, shape: tuple[int, ...], out: tuple[int, ...],
                     scales: tuple[float, ...] | None) -> dict[str, Any] | None:
        """F.interpolate arguments when torch computes exactly this resize, else None."""
        a = self._a
        mode, ct = a["resize_mode"], a["coordinate_transformation"]
        C = ResizeCoordinateTransformation
        changed = [i for i in range(len(shape)) if shape[i] != out[i] or (scales is not None and scales[i] != 1.0)]
        if not changed or any(o == 0 for o in out) or any(d == 0 for d in shape):
            return None
        k = len(shape) - changed[0]
        if mode == InterpolationMode.CUBIC:
            if a["cubic_coeff"] != -0.75 or a["exclude_outside"] or len(shape) < 2:
                return None
            k, tmode = 2, "bicubic"
        elif mode == InterpolationMode.LINEAR:
            tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}.get(k, "")
        else:
            rnd = a["nearest_rounding"]
            # NOTE: torch maps output to input coordinates with a float32 scale, which puts exact
            # integers and .5 ties just below (23 * 14 / 46 = 7 becomes 6.99..). The scale is exact
            # for integer down-sampling and power-of-two up-sampling (2x, 4x, ..: the common case);
            # other sizes take the float64 general path.
            if scales is not None or not all(_exact_nearest_ratio(shape[i], out[i]) for i in changed):
                return None
            if ct == C.ASYMMETRIC and rnd == ResizeRoundMode.FLOOR:
                tmode = "nearest"
            elif ct == C.HALF_PIXEL and rnd == ResizeRoundMode.HALF_UP:
                tmode = "nearest-exact"
            else:
                return None
            tmode = tmode if k <= 3 else ""
        if not tmode:
            return None
        kwargs: dict[str, Any] = {"mode": tmode}
        if mode != InterpolationMode.NEAREST:
            if ct == C.ASYMMETRIC:
                return None
            kwargs["align_corners"] = ct == C.ALIGN_CORNERS
        single = any(out[i] == 1 for i in changed)
        if single and a["selector_for_single_pixel"] == ResizeSelector.UPPER and ct == C.HALF_PIXEL:
            return None
        if scales is not None:
            kwargs["scale_factor"] = tuple(scales[-k:])
            kwargs["recompute_scale_factor"] = False
            if tuple(math.floor(d * f) for d, f in zip(shape[-k:], scales[-k:], strict=True)) != out[-k:]:
                return None
        else:
            kwargs["size"] = tuple(out[-k:])
        kwargs["_k"] = k
        return kwargs

    @staticmethod
    def _mix_weights(ws: list[torch.Tensor], axis: int, rank: int, device: torch.device,
                     dtype: torch.dtype) -> list[torch.Tensor]:
        view = [1] * rank
        view[axis] = -1
        return [w.to(device=device, dtype=dtype).reshape(view) for w in ws]

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        shape = tuple(x.shape)
        out, scales = self._target(inputs, shape, rt)
        if len(out) != len(shape):
            raise self._fail(f"output shape {out} must have the input's rank {len(shape)}")
        if rt.probe:
            if not (len(inputs) > 1 and inputs[1] is not None and inputs[1].device.type == "meta"):
                self._plan(shape, out, scales, torch.device("cpu"), torch.float32)  # validates the axes
            return [torch.empty(out, dtype=x.dtype, device="meta")]
        dt = _compute_dtype(x) if x.dtype.is_floating_point else x.dtype
        route = _cached(rt, (id(self), "route", shape, out, scales), lambda: (
            self._torch_route(shape, out, scales) if _TORCH_FAST_PATHS and dt.is_floating_point else None) or {})
        if route:
            k = route["_k"]
            kwargs = {key: v for key, v in route.items() if key != "_k"}
            y = F.interpolate(x.to(dt).reshape(1, -1, *shape[len(shape) - k:]), **kwargs)
            return [y.reshape(out).to(x.dtype)]
        plans = _cached(rt, (id(self), "plan", shape, out, scales, dt),
                        lambda: self._plan(shape, out, scales, rt.device, dt))
        y = x.to(dt)
        for axis, kind, idxs, ws in plans:
            if kind == "empty":
                size = list(y.shape)
                size[axis] = out[axis]
                y = y.new_zeros(size)
            elif kind == "nearest":
                y = y.index_select(axis, idxs[0])
            else:
                acc = None
                for j, w in zip(idxs, ws, strict=True):
                    term = y.index_select(axis, j) * w
                    acc = term if acc is None else acc + term
                assert acc is not None
                y = acc
        return [y.to(x.dtype)]


# ------------------------------------------------------------------------------ padding
class IPaddingLayer(ILayer):
    _layer_type = "PADDING"
    _attrs = {"pre_padding_nd": (), "post_padding_nd": ()}
    _DTYPES = _FLOATS | {DataType.INT8, DataType.INT32}

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x = infos[0]
        assert x is not None
        pre, post = tuple(self._a["pre_padding_nd"]), tuple(self._a["post_padding_nd"])
        if x.rank < 4:
            raise self._fail(f"input must have at least 4 dimensions, got shape {x.shape}")
        if len(pre) != 2 or len(post) != 2:
            raise self._fail(f"only 2D padding (the two innermost dimensions) is supported, got {pre} and {post}")
        if x.dtype not in self._DTYPES:
            raise self._fail(f"input must be FLOAT, HALF, BF16, INT8 or INT32, got {x.dtype.name}")
        for d, p, q in zip(x.shape[-2:], pre, post, strict=True):
            if d >= 0 and d + p + q < 0:
                raise self._fail(f"padding {pre}/{post} crops more than the input extent {x.shape[-2:]}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x = inputs[0]
        pre, post = self._a["pre_padding_nd"], self._a["post_padding_nd"]
        if rt.probe:
            size = (*x.shape[:-2], *(d + p + q for d, p, q in zip(x.shape[-2:], pre, post, strict=True)))
            return [torch.empty(size, dtype=x.dtype, device="meta")]
        return [F.pad(x, _torch_pad(pre, post))]


# ---------------------------------------------------------------------- parametric relu
class IParametricReLULayer(ILayer):
    _layer_type = "PARAMETRIC_RELU"

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, s = infos[0], infos[1]
        assert x is not None and s is not None
        if x.dtype not in _FLOATS | {DataType.INT8}:
            raise self._fail(f"input must be FLOAT, HALF, BF16 or INT8, got {x.dtype.name}")
        if s.dtype != x.dtype:
            raise self._fail(f"slopes ({s.dtype.name}) must have the input's type {x.dtype.name}")
        if s.rank != x.rank:
            raise self._fail(f"slopes must have the input's rank {x.rank} (use a shuffle), got shape {s.shape}")
        for ds, dx in zip(s.shape, x.shape, strict=True):
            if not (ds == 1 or ds == dx or dx < 0):
                raise self._fail(f"slopes shape {s.shape} does not broadcast to the input shape {x.shape}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, s = inputs
        if rt.probe:
            return [x]
        dt = _compute_dtype(x)
        xf = x.to(dt)
        return [torch.where(xf >= 0, xf, xf * s.to(dt)).to(x.dtype)]


# -------------------------------------------------------------------------- grid sample
_GRID_INTERP = {InterpolationMode.NEAREST: "nearest", InterpolationMode.LINEAR: "bilinear",
                InterpolationMode.CUBIC: "bicubic"}
_GRID_PAD = {SampleMode.FILL: "zeros", SampleMode.CLAMP: "border", SampleMode.REFLECT: "reflection"}


class IGridSampleLayer(ILayer):
    _layer_type = "GRID_SAMPLE"
    _attrs = {"interpolation_mode": InterpolationMode.LINEAR, "align_corners": False, "sample_mode": SampleMode.FILL}

    @property
    def sample_mode(self) -> Any:
        return self._a["sample_mode"]

    @sample_mode.setter
    def sample_mode(self, value: Any) -> None:
        mode = SampleMode(int(value))
        if mode not in _GRID_PAD:
            # TensorRT's setSampleMode returns false and keeps the previous mode.
            _log(self._network._logger, Severity.ERROR,
                 f"{self.name}: grid sample supports only CLAMP, FILL and REFLECT, not {mode.name}")
            return
        self._set_attr("sample_mode", mode)

    def _required_inputs(self) -> int:
        return 2

    def _check(self, infos: list[TensorInfo | None]) -> None:
        super()._check(infos)
        x, g = infos[0], infos[1]
        assert x is not None and g is not None
        if x.rank != 4 or g.rank != 4:
            raise self._fail(f"input and grid must have rank 4, got shapes {x.shape} and {g.shape}")
        if x.dtype not in _FLOATS or g.dtype != x.dtype:
            raise self._fail(f"input and grid must be the same floating-point type, got {x.dtype.name}/{g.dtype.name}")
        if g.shape[3] != 2:
            raise self._fail(f"grid must have shape [N, H_out, W_out, 2], got {g.shape}")
        if x.shape[0] >= 0 and g.shape[0] >= 0 and x.shape[0] != g.shape[0]:
            raise self._fail(f"input and grid batch sizes differ: {x.shape[0]} and {g.shape[0]}")

    def _run(self, inputs: list[Any], rt: RunContext) -> list[torch.Tensor]:
        x, g = inputs
        if rt.probe:
            return [torch.empty((x.shape[0], x.shape[1], g.shape[1], g.shape[2]), dtype=x.dtype, device="meta")]
        a = self._a
        dt = _compute_dtype(x)
        y = F.grid_sample(x.to(dt), g.to(dt), mode=_GRID_INTERP[a["interpolation_mode"]],
                          padding_mode=_GRID_PAD[a["sample_mode"]], align_corners=a["align_corners"])
        return [y.to(x.dtype)]


# -------------------------------------------------------------------------------- mixin
def _relabel(layer: ILayer, label: str) -> None:
    """Use TensorRT's default layer label where it differs from the class name."""
    old = layer._name
    prefix = old[: old.rfind("[")]
    layer._name = f"{prefix}[{label}]"
    for t in layer._outputs:
        if t._name.startswith(old):
            t._name = layer._name + t._name[len(old):]


class NNMixin:
    _add: Any
    _remove_layer: Any

    def _add_deferred(self, cls_name: str, inputs: list[Any], **attrs: Any) -> Any:
        """Add a layer whose full validation waits for build (attributes may still change)."""
        layer = self._add(cls_name, inputs, eager=False, **attrs)
        try:
            layer._check_eager(layer._input_infos())
        except NetworkDefinitionError:
            self._remove_layer(layer)
            raise
        return layer

    def add_convolution_nd(self, input: Any, num_output_maps: int, kernel_shape: Any, kernel: Any,
                           bias: Any = None) -> IConvolutionLayer:
        return self._add_deferred(  # type: ignore[no-any-return]
            "IConvolutionLayer", [input], num_output_maps=num_output_maps,
            kernel_size_nd=as_dims(kernel_shape, "kernel_shape"), kernel=kernel, bias=bias,
        )

    def add_deconvolution_nd(self, input: Any, num_output_maps: int, kernel_shape: Any, kernel: Any,
                             bias: Any = None) -> IDeconvolutionLayer:
        return self._add_deferred(  # type: ignore[no-any-return]
            "IDeconvolutionLayer", [input], num_output_maps=num_output_maps,
            kernel_size_nd=as_dims(kernel_shape, "kernel_shape"), kernel=kernel, bias=bias,
        )

    def add_pooling_nd(self, input: Any, type: Any, window_size: Any) -> IPoolingLayer:  # noqa: A002
        return self._add_deferred(  # type: ignore[no-any-return]
            "IPoolingLayer", [input], type=type, window_size_nd=as_dims(window_size, "window_size")
        )

    def add_scale(self, input: Any, mode: Any, shift: Any = None, scale: Any = None,
                  power: Any = None) -> IScaleLayer:
        # NOTE: TensorRT's addScale takes the third to last dimension as the channel axis (nbDims - 3:
        # C of [N, C, H, W], D of [N, C, D, H, W]); addScaleNd names it
        rank = len(tuple(input.shape)) if hasattr(input, "shape") else 4
        return self._add_deferred(  # type: ignore[no-any-return]
            "IScaleLayer", [input], mode=mode, shift=shift, scale=scale, power=power, channel_axis=rank - 3
        )

    def add_scale_nd(self, input: Any, mode: Any, shift: Any = None, scale: Any = None, power: Any = None,
                     channel_axis: int | None = None) -> IScaleLayer:
        if channel_axis is None:
            raise TypeError("add_scale_nd(): missing required argument 'channel_axis'")
        return self._add_deferred(  # type: ignore[no-any-return]
            "IScaleLayer", [input], mode=mode, shift=shift, scale=scale, power=power, channel_axis=channel_axis
        )

    def add_lrn(self, input: Any, window: int, alpha: float, beta: float, k: float) -> ILRNLayer:
        return self._add(  # type: ignore[no-any-return]
            "ILRNLayer", [input], window_size=window, alpha=alpha, beta=beta, k=k
        )

    def add_normalization(self, input: Any, scale: Any, bias: Any, axesMask: int) -> INormalizationLayer:  # noqa: N803
        return self._add_deferred(  # type: ignore[no-any-return]
            "INormalizationLayer", [input, scale, bias], axes=axesMask, is_v2=False
        )

    def add_normalization_v2(self, input: Any, scale: Any, bias: Any, axesMask: int) -> INormalizationLayer:  # noqa: N803
        layer = self._add_deferred("INormalizationLayer", [input, scale, bias], axes=axesMask, is_v2=True)
        _relabel(layer, "NormalizationV2")
        return layer  # type: ignore[no-any-return]

    def add_resize(self, input: Any) -> IResizeLayer:  # noqa: A002
        return self._add("IResizeLayer", [input])  # type: ignore[no-any-return]

    def add_padding_nd(self, input: Any, pre_padding: Any, post_padding: Any) -> IPaddingLayer:
        return self._add(  # type: ignore[no-any-return]
            "IPaddingLayer", [input], pre_padding_nd=as_dims(pre_padding, "pre_padding"),
            post_padding_nd=as_dims(post_padding, "post_padding"),
        )

    def add_parametric_relu(self, input: Any, slopes: Any) -> IParametricReLULayer:
        layer = self._add("IParametricReLULayer", [input, slopes])
        _relabel(layer, "Parametric ReLU")
        return layer  # type: ignore[no-any-return]

    def add_grid_sample(self, input: Any, grid: Any) -> IGridSampleLayer:
        return self._add("IGridSampleLayer", [input, grid])  # type: ignore[no-any-return]
