"""Explicit INT8 / FP8 post-training quantization: calibrate in PyTorch, convert to Q/DQ layers.

TensorRT 11 and TensorRT-RTX build strongly typed networks only: there is no INT8 builder flag and
no calibrator. A quantized network holds explicit ``IQuantizeLayer`` / ``IDequantizeLayer`` pairs
("explicit quantization"): one on the input activation of each quantized convolution / linear layer
(per-tensor scale) and one on its weights (per-output-channel scale, ``constant -> Q -> DQ ->
kernel``), which TensorRT fuses into INT8 / FP8 kernels.

    qmodel = torch2trt_lite.quantize(model, batches, dtype="int8", method="entropy")
    qmodel(x)                                  # eager PyTorch with fake quantization: the quantized accuracy
    trt_model = torch2trt_lite.convert(qmodel, [x])
    qmodel.save_calibration("scales.json")     # or .safetensors; reuse without data:
    again = torch2trt_lite.quantize(model, None, calibration="scales.json")

Scales are symmetric (zero point 0): INT8 ``scale = amax / 127`` (values rounded half to even and
clamped to [-128, 127]); FP8 E4M3 ``scale = amax / 448``. Activation ``amax`` comes from the
calibration method: ``"max"`` (largest |x| seen), ``"percentile"`` (that percentile of the |x|
histogram), ``"entropy"`` (TensorRT's KL-divergence calibration over the histogram) or ``"mse"``
(the amax of least quantization mean squared error over the histogram). Weight ``amax`` is the
largest |w| of each output channel (axis 0; axis 1 for transposed convolutions).

The eager forward of a :class:`QuantizedModel` calls ``torch.fake_quantize_per_tensor_affine`` /
``torch.fake_quantize_per_channel_affine`` (INT8) or :func:`fake_quantize_fp8` (FP8); the tracer
converts those calls into Q/DQ layers. A model fake-quantized by hand with the two torch functions
converts the same way.
"""

from __future__ import annotations

import copy
import json
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .errors import Torch2TRTError

FORMAT = "torch2trt-lite-calibration"
FORMAT_VERSION = 1
DTYPES = ("int8", "fp8")
METHODS = ("max", "percentile", "entropy", "mse")
QMAX = {"int8": 127.0, "fp8": 448.0}
INT8_MIN, INT8_MAX = -128, 127
FP8_MAX = 448.0

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_DECONV = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
QUANTIZABLE: tuple[type[nn.Module], ...] = (*_CONV, *_DECONV, nn.Linear)


class CalibrationError(Torch2TRTError):
    """Calibration could not run, or a calibration file does not fit the model."""


# ------------------------------------------------------------------------ fake quantization
def _scale_view(scale: torch.Tensor, ndim: int, axis: int | None) -> torch.Tensor:
    if axis is None or scale.numel() == 1:
        return scale.reshape(())
    view = [1] * ndim
    view[axis] = scale.numel()
    return scale.reshape(view)


def fake_quantize_fp8(x: torch.Tensor, scale: torch.Tensor, axis: int | None = None) -> torch.Tensor:
    """FP8 (E4M3) fake quantization: ``x / scale`` rounded to FP8 (to nearest even, saturating at
    +-448), times ``scale``; per-tensor (``axis=None``, one scale) or per-channel along ``axis``.

    Computed in float32 with the scale in ``x``'s dtype, as TensorRT's Q/DQ pair does (the
    converter turns this call into IQuantizeLayer(FP8) + IDequantizeLayer)."""
    if axis is not None and axis < 0:
        axis += x.dim()
    s = _scale_view(scale.detach().to(x.dtype).float(), x.dim(), axis)
    q = (x.float() / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
    return (q.float() * s).to(x.dtype)


def fake_quantize_weight(weight: torch.Tensor, scale: torch.Tensor, axis: int, dtype: str) -> torch.Tensor:
    """Per-channel fake quantization of a layer's weight (INT8 through
    ``torch.fake_quantize_per_channel_affine``, FP8 through :func:`fake_quantize_fp8`).

    While tracing, this call converts (``constant_inputs``: though a weight is not computed from the
    inputs) into ``constant -> IQuantizeLayer -> IDequantizeLayer``, the weight form TensorRT's
    INT8 / FP8 kernels need."""
    if dtype == "int8":
        zp = torch.zeros(scale.numel(), dtype=torch.int32, device=weight.device)
        return torch.fake_quantize_per_channel_affine(
            weight, scale.detach().float().reshape(-1), zp, axis, INT8_MIN, INT8_MAX
        )
    return fake_quantize_fp8(weight, scale, axis)


class FakeQuantizer(nn.Module):
    """Fake quantization of one tensor: ``scale`` is a per-tensor scale (``axis`` None, input
    activations) or per-channel along ``axis`` (weights)."""

    scale: torch.Tensor
    zero_point: torch.Tensor

    def __init__(self, scale: torch.Tensor, dtype: str, axis: int | None = None) -> None:
        super().__init__()
        self.dtype = dtype
        self.axis = axis
        self.register_buffer("scale", scale.detach().float().reshape(-1 if axis is not None else 1).clone())
        self.register_buffer("zero_point", torch.zeros(self.scale.numel(), dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.axis is not None:
            return fake_quantize_weight(x, self.scale, self.axis, self.dtype)
        if self.dtype == "int8":
            return torch.fake_quantize_per_tensor_affine(x, self.scale, self.zero_point, INT8_MIN, INT8_MAX)
        return fake_quantize_fp8(x, self.scale)

    def extra_repr(self) -> str:
        kind = "per-tensor" if self.axis is None else f"per-channel axis={self.axis}"
        return f"{self.dtype}, {kind}, {self.scale.numel()} scale(s)"


# ------------------------------------------------------------------ quantized layer classes
class _QuantMixin:
    """Forward of a quantized layer: fake-quantize the input, then the weight, then the layer."""

    input_quantizer: FakeQuantizer
    weight_quantizer: FakeQuantizer
    weight: Any
    bias: Any

    def _weights(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        xq = self.input_quantizer(x)
        return xq, self.weight_quantizer(self.weight)


class QuantLinear(_QuantMixin, nn.Linear):
    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 (torch's name)
        x, w = self._weights(input)
        return F.linear(x, w, self.bias)


class _QuantConv(_QuantMixin):
    _conv_forward: Callable[..., torch.Tensor]

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002
        x, w = self._weights(input)
        return self._conv_forward(x, w, self.bias)


class QuantConv1d(_QuantConv, nn.Conv1d):
    pass


class QuantConv2d(_QuantConv, nn.Conv2d):
    pass


class QuantConv3d(_QuantConv, nn.Conv3d):
    pass


_DECONV_FN = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}


class _QuantConvTranspose(_QuantMixin):
    _output_padding: Callable[..., Any]
    stride: Any
    padding: Any
    kernel_size: Any
    dilation: Any
    groups: Any
    padding_mode: Any

    def forward(self, input: torch.Tensor, output_size: list[int] | None = None) -> torch.Tensor:  # noqa: A002
        if self.padding_mode != "zeros":
            raise ValueError(f"Only 'zeros' padding mode is supported for {type(self).__name__}")
        n = len(self.kernel_size)
        output_padding = self._output_padding(
            input, output_size, self.stride, self.padding, self.kernel_size, n, self.dilation
        )
        x, w = self._weights(input)
        return _DECONV_FN[n](x, w, self.bias, self.stride, self.padding, output_padding, self.groups, self.dilation)


class QuantConvTranspose1d(_QuantConvTranspose, nn.ConvTranspose1d):
    pass


class QuantConvTranspose2d(_QuantConvTranspose, nn.ConvTranspose2d):
    pass


class QuantConvTranspose3d(_QuantConvTranspose, nn.ConvTranspose3d):
    pass


_QUANT_CLASS: dict[type[nn.Module], type[nn.Module]] = {
    nn.Linear: QuantLinear,
    nn.Conv1d: QuantConv1d, nn.Conv2d: QuantConv2d, nn.Conv3d: QuantConv3d,
    nn.ConvTranspose1d: QuantConvTranspose1d, nn.ConvTranspose2d: QuantConvTranspose2d,
    nn.ConvTranspose3d: QuantConvTranspose3d,
}


def _stock_base(m: nn.Module) -> type[nn.Module] | None:
    """The quantizable torch class ``m`` is (or subclasses without its own forward), else None."""
    for base in _QUANT_CLASS:
        if isinstance(m, base) and type(m).forward is base.forward:
            return base
    return None


def weight_axis(m: nn.Module) -> int:
    """The output-channel axis of a layer's weight: 1 for transposed convolutions, else 0."""
    return 1 if isinstance(m, _DECONV) else 0


# ------------------------------------------------------------------------- observers
class _Observer:
    """Collects |x| statistics of one layer's input: running max and (for histogram methods) a
    histogram of fixed bin count whose bin width doubles (adjacent bins merged) when a batch holds
    a larger value than the histogram covers."""

    def __init__(self, num_bins: int, histogram: bool) -> None:
        self.num_bins = num_bins
        self.histogram = histogram
        self.amax = 0.0
        self.width = 0.0
        self.hist: torch.Tensor | None = None
        self.zeros = 0.0  # values seen while every value so far was 0 (bin 0 once a width exists)
        self.calls = 0

    def observe(self, x: torch.Tensor) -> None:
        a = x.detach().abs().float().reshape(-1)
        if not a.numel():
            return
        self.calls += 1
        m = float(a.max())
        if not math.isfinite(m):
            raise CalibrationError("a calibration batch gave a layer input with inf or NaN values")
        self.amax = max(self.amax, m)
        if not self.histogram:
            return
        if m == 0.0 and self.hist is None:
            self.zeros += a.numel()
            return
        if self.hist is None:
            self.width = m / self.num_bins
            self.hist = torch.zeros(self.num_bins, dtype=torch.float64)
            self.hist[0] += self.zeros
        while m > self.width * self.num_bins:
            self._double()
        top = self.width * self.num_bins
        counts = torch.histc(a, bins=self.num_bins, min=0.0, max=top)
        self.hist += counts.double().cpu()

    def _double(self) -> None:
        assert self.hist is not None
        h = self.hist
        if h.numel() % 2:
            h = torch.cat([h, h.new_zeros(1)])
        merged = h.view(-1, 2).sum(1)
        out = torch.zeros(self.num_bins, dtype=torch.float64)
        out[: merged.numel()] = merged[: self.num_bins]
        self.hist = out
        self.width *= 2


# ---------------------------------------------------------------------- amax methods
def _fp8_round(v: np.ndarray) -> np.ndarray:
    t = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32))
    return t.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).float().numpy().astype(np.float64)


def _quantized(c: np.ndarray, amax: np.ndarray, dtype: str) -> np.ndarray:
    """Fake quantization of positive values ``c`` with (broadcast) ``amax``, in float64."""
    scale = amax / QMAX[dtype]
    if dtype == "int8":
        return np.clip(np.round(c / scale), INT8_MIN, INT8_MAX) * scale
    return _fp8_round(c / scale) * scale


def amax_percentile(hist: np.ndarray, width: float, percentile: float) -> float:
    """The upper edge of the bin where the |x| histogram's cumulative share reaches ``percentile``."""
    total = hist.sum()
    cdf = np.cumsum(hist) / total
    idx = int(np.searchsorted(cdf, percentile / 100.0))
    return (min(idx, len(hist) - 1) + 1) * width


def amax_mse(hist: np.ndarray, width: float, dtype: str, start_bin: int = 128) -> float:
    """The bin edge whose amax gives the least mean squared quantization error of the histogram's
    bin centers (weighted by their counts)."""
    n = len(hist)
    centers = (np.arange(n) + 0.5) * width
    nz = hist > 0
    c, h = centers[nz], hist[nz]
    cands = np.arange(min(start_bin, n), n + 1) * width
    best, best_err = cands[-1], math.inf
    for chunk in np.array_split(cands, max(1, len(cands) // 256)):
        q = _quantized(c[None, :], chunk[:, None], dtype)
        err = ((q - c[None, :]) ** 2 * h[None, :]).sum(1)
        i = int(np.argmin(err))
        if err[i] < best_err:
            best, best_err = float(chunk[i]), float(err[i])
    return float(best)


def _kl(p: np.ndarray, q: np.ndarray) -> float:
    p = p / p.sum()
    qs = q.sum()
    if qs <= 0:
        return math.inf
    q = q / qs
    m = p > 0
    if np.any(q[m] == 0):
        return math.inf
    return float(np.sum(p[m] * np.log(p[m] / q[m])))


def amax_entropy(hist: np.ndarray, width: float, start_bin: int = 128) -> float:
    """TensorRT's entropy (KL-divergence) calibration: for each candidate threshold bin ``i``, the
    reference distribution is the histogram up to ``i`` with the outliers added to its last bin;
    the candidate is the histogram up to ``i`` quantized to 128 uniform levels and expanded back
    over its nonzero bins. The threshold of least KL divergence (the last one among equals) is
    the amax. FP8 uses the same 8-bit threshold search (as for INT8; KL calibration is defined on
    uniform levels)."""
    bins = hist.astype(np.float64).copy()
    n = len(bins)
    if n > 1:
        bins[0] = bins[1]  # NOTE: as TensorRT / pytorch-quantization: ignore the spike of zeros (ReLU)
    nlevels = 128
    start = min(start_bin, n)
    best_i, best_kl = n, math.inf
    for i in range(start, n + 1):
        ref = bins[:i].copy()
        ref[-1] += bins[i:].sum()
        level = np.digitize(np.arange(i), np.linspace(0, i, num=nlevels + 1)) - 1
        nzmask = bins[:i] != 0
        lv = level[nzmask]
        if not lv.size:
            continue
        sums = np.bincount(lv, weights=bins[:i][nzmask], minlength=nlevels + 1).astype(np.float64)
        cnts = np.bincount(lv, minlength=nlevels + 1).astype(np.float64)
        avg = np.divide(sums, cnts, out=np.zeros_like(sums), where=cnts > 0)
        cand = np.zeros(i)
        cand[nzmask] = avg[lv]
        kl = _kl(ref, cand)
        if kl <= best_kl:
            best_i, best_kl = i, kl
    return best_i * width


def compute_amax(obs: _Observer, method: str, dtype: str, percentile: float) -> float:
    if method == "max" or obs.hist is None:
        return obs.amax
    hist = obs.hist.numpy()
    if method == "percentile":
        amax = amax_percentile(hist, obs.width, percentile)
    elif method == "entropy":
        amax = amax_entropy(hist, obs.width)
    else:
        amax = amax_mse(hist, obs.width, dtype)
    return min(amax, obs.amax)


def _scale_from_amax(amax: torch.Tensor, dtype: str) -> torch.Tensor:
    """amax / qmax in float32; an amax of 0 (a channel or input that is all zeros) gets scale 1."""
    a = amax.detach().double()
    a = torch.where((a > 0) & torch.isfinite(a), a, torch.ones_like(a) * QMAX[dtype])
    return (a / QMAX[dtype]).float()


def weight_amax(w: torch.Tensor, axis: int) -> torch.Tensor:
    dims = [d for d in range(w.dim()) if d != axis]
    return w.detach().abs().float().amax(dim=dims)


# ------------------------------------------------------------------------- the model
@dataclass
class LayerScales:
    """The scales of one quantized layer."""

    kind: str  # the torch class name (Conv2d, Linear, ...)
    input_scale: float
    weight_scale: torch.Tensor  # [channels] float32
    weight_axis: int
    weight_shape: tuple[int, ...]
    input_amax: float = 0.0


@dataclass
class Settings:
    dtype: str
    method: str
    percentile: float = 99.99
    num_bins: int = 2048
    skipped: dict[str, str] = field(default_factory=dict)


class QuantizedModel(nn.Module):
    """A copy of a model whose quantized layers fake-quantize their input and weights (see
    :func:`quantize`). ``model``: the quantized copy; ``scales``: the scales per layer path."""

    def __init__(self, model: nn.Module, scales: dict[str, LayerScales], settings: Settings) -> None:
        super().__init__()
        self.model = model
        self.scales = scales
        self.settings = settings
        self.train(model.training)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        return self.model(*args, **kwargs)

    @property
    def dtype(self) -> str:
        return self.settings.dtype

    @property
    def method(self) -> str:
        return self.settings.method

    @property
    def layers(self) -> list[str]:
        return list(self.scales)

    def extra_repr(self) -> str:
        return f"dtype={self.dtype}, method={self.method}, layers={len(self.scales)}"

    def save_calibration(self, path: str | os.PathLike[str]) -> None:
        """Write the scales and settings to ``path``: JSON (``.json``) or safetensors
        (``.safetensors``). :func:`quantize` ``(model, None, calibration=path)`` reuses them."""
        p = os.fspath(path)
        header = _header(self.settings)
        if p.endswith(".json"):
            doc = dict(header)
            doc["layers"] = {
                name: {
                    "kind": s.kind, "input_amax": s.input_amax, "input_scale": s.input_scale,
                    "weight_axis": s.weight_axis, "weight_shape": list(s.weight_shape),
                    "weight_scale": [float(v) for v in s.weight_scale.tolist()],
                }
                for name, s in self.scales.items()
            }
            _atomic_write(p, json.dumps(doc, indent=1).encode())
        elif p.endswith(".safetensors"):
            try:
                from safetensors.torch import save
            except ImportError as e:
                raise CalibrationError("saving .safetensors needs the safetensors package (pip install safetensors)") from e
            tensors: dict[str, torch.Tensor] = {}
            layers: dict[str, Any] = {}
            for name, s in self.scales.items():
                tensors[f"{name}.input_scale"] = torch.tensor([s.input_scale], dtype=torch.float32)
                tensors[f"{name}.weight_scale"] = s.weight_scale.detach().float().contiguous().clone()
                layers[name] = {"kind": s.kind, "input_amax": s.input_amax, "weight_axis": s.weight_axis,
                                "weight_shape": list(s.weight_shape)}
            meta = {"torch2trt_lite": json.dumps({**header, "layers": layers})}
            _atomic_write(p, save(tensors, metadata=meta))
        else:
            raise CalibrationError(f"calibration files are .json or .safetensors; got {p!r}")


def _header(s: Settings) -> dict[str, Any]:
    return {
        "format": FORMAT, "version": FORMAT_VERSION, "dtype": s.dtype, "method": s.method,
        "percentile": s.percentile, "num_bins": s.num_bins, "skipped": dict(s.skipped),
    }


def _atomic_write(path: str, data: bytes) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def quantization_info(model: Any) -> dict[str, Any] | None:
    """The quantization settings of a :class:`QuantizedModel` (for an engine file's metadata):
    dtype, method, number and names of the quantized layers; None for any other model."""
    if not isinstance(model, QuantizedModel):
        return None
    s = model.settings
    return {
        "dtype": s.dtype, "method": s.method, "num_layers": len(model.scales), "layers": list(model.scales),
        "format_version": FORMAT_VERSION, "skipped": dict(s.skipped),
        **({"percentile": s.percentile} if s.method == "percentile" else {}),
        **({"num_bins": s.num_bins} if s.method in ("percentile", "entropy", "mse") else {}),
    }


# -------------------------------------------------------------------------- selection
def _matches(name: str, m: nn.Module, specs: Sequence[Any]) -> bool:
    for spec in specs:
        if isinstance(spec, str):
            if spec == "" or name == spec or name.startswith(spec + "."):
                return True
        elif isinstance(spec, type):
            if isinstance(m, spec):
                return True
        else:
            raise CalibrationError(
                f"layers= and exclude= take module-path prefixes (str) or module classes; got {spec!r}"
            )
    return False


def _select(model: nn.Module, layers: Sequence[Any] | None, exclude: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    """(paths of the layers to quantize, {path: why not} of the candidates left out)."""
    if isinstance(layers, (str, type)):
        layers = [layers]
    if isinstance(exclude, (str, type)):
        exclude = [exclude]
    specs = list(layers) if layers is not None else None
    for spec in specs or []:
        if isinstance(spec, type) and not issubclass(spec, QUANTIZABLE):
            raise CalibrationError(
                f"layers=[{spec.__name__}]: only convolutions (nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d) and "
                "nn.Linear layers can be quantized"
            )
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    named = dict(model.named_modules())
    for spec in specs or []:
        if isinstance(spec, str) and spec and spec not in named and not any(n.startswith(spec + ".") for n in named):
            raise CalibrationError(f"layers=[{spec!r}]: the model has no module at that path")
    for name, m in named.items():
        if not isinstance(m, QUANTIZABLE) or isinstance(m, _QuantMixin):
            continue
        if specs is not None and not _matches(name, m, specs):
            continue
        if _matches(name, m, list(exclude)):
            continue
        if _stock_base(m) is None:
            skipped[name] = f"{type(m).__name__} overrides forward(); only torch's own layer forward is quantized"
            continue
        chosen.append(name)
    if not chosen:
        raise CalibrationError(
            "no layer to quantize: the model has no nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d or nn.Linear "
            f"layer selected by layers={layers!r}, exclude={list(exclude)!r}"
            + (f" (left out: {skipped})" if skipped else "")
        )
    return chosen, skipped


# ---------------------------------------------------------------------------- running
def _show(progress: Any) -> bool:
    if progress is None:
        return sys.stderr is not None and sys.stderr.isatty()
    if isinstance(progress, bool):
        return progress
    raise CalibrationError(
        f"progress= must be True, False or None (a display when stderr is a terminal); got {type(progress).__name__}"
    )


def _batches(batches: Iterable[Any], progress: Any) -> Iterator[Any]:
    if not _show(progress):
        yield from batches
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    total = len(batches) if hasattr(batches, "__len__") else None  # type: ignore[arg-type]
    console = Console(stderr=True)
    # NOTE: on a terminal the bar goes when done; elsewhere (a log) its final state is printed once
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=console.is_terminal) as bar:
        task = bar.add_task("calibrating", total=total)
        for b in batches:
            yield b
            bar.advance(task)


def _call(model: nn.Module, batch: Any) -> None:
    if isinstance(batch, torch.Tensor):
        model(batch)
    elif isinstance(batch, (tuple, list)):
        model(*batch)
    elif isinstance(batch, dict):
        model(**batch)
    else:
        raise CalibrationError(
            f"a calibration batch must be a tensor, a tuple/list of arguments or a dict of keyword arguments; "
            f"got {type(batch).__name__}"
        )


def _calibrate(
    model: nn.Module, names: list[str], batches: Iterable[Any], method: str, dtype: str, percentile: float,
    num_bins: int, progress: Any,
) -> tuple[dict[str, float], dict[str, str]]:
    observers = {n: _Observer(num_bins, method != "max") for n in names}
    modules = dict(model.named_modules())
    handles = []

    def hook(name: str) -> Callable[..., None]:
        obs = observers[name]

        def pre(m: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            x = args[0] if args else kwargs.get("input")
            if isinstance(x, torch.Tensor) and x.is_floating_point():
                obs.observe(x)

        return pre

    for n in names:
        handles.append(modules[n].register_forward_pre_hook(hook(n), with_kwargs=True))
    seen = 0
    try:
        with torch.no_grad():
            for batch in _batches(batches, progress):
                _call(model, batch)
                seen += 1
    finally:
        for h in handles:
            h.remove()
    if not seen:
        raise CalibrationError("the calibration data held no batch")
    amax: dict[str, float] = {}
    skipped: dict[str, str] = {}
    for n, obs in observers.items():
        if not obs.calls:
            skipped[n] = "not called with a floating-point input during calibration"
            continue
        amax[n] = compute_amax(obs, method, dtype, percentile)
    if not amax:
        raise CalibrationError(f"none of the layers to quantize was called during calibration: {names}")
    return amax, skipped


def _install(model: nn.Module, scales: dict[str, LayerScales], dtype: str) -> None:
    """Turn each listed layer of ``model`` into its Quant* class with its two quantizers."""
    modules = dict(model.named_modules())
    for name, s in scales.items():
        m = modules[name]
        base = _stock_base(m)
        assert base is not None
        dev = m.weight.device
        m.__class__ = _QUANT_CLASS[base]
        m.input_quantizer = FakeQuantizer(torch.tensor([s.input_scale]), dtype).to(dev)
        m.weight_quantizer = FakeQuantizer(s.weight_scale, dtype, axis=s.weight_axis).to(dev)


def quantize(
    model: nn.Module,
    calibration_batches: Iterable[Any] | None,
    dtype: str | None = None,
    method: str | None = None,
    *,
    percentile: float = 99.99,
    num_bins: int = 2048,
    layers: Sequence[Any] | None = None,
    exclude: Sequence[Any] = (),
    progress: Any = None,
    calibration: str | os.PathLike[str] | None = None,
) -> QuantizedModel:
    """Calibrate ``model`` on ``calibration_batches`` and return a :class:`QuantizedModel` (a copy:
    ``model`` is not changed) whose convolutions and linear layers fake-quantize their input
    activations (per-tensor) and weights (per output channel).

    ``calibration_batches``: an iterable of batches, each a tensor (``model(batch)``), a tuple/list
    of arguments or a dict of keyword arguments; run once, in eval mode without gradients.
    ``dtype``: ``"int8"`` (default) or ``"fp8"`` (E4M3). ``method`` (activations): ``"max"``
    (default), ``"percentile"`` (``percentile`` of the |x| histogram, default 99.99),
    ``"entropy"`` (TensorRT's KL-divergence calibration) or ``"mse"``; histograms have
    ``num_bins`` bins. ``layers``: module-path prefixes or module classes to quantize (default:
    every nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d and nn.Linear); ``exclude``: the same forms,
    left out. ``progress``: a progress bar on stderr (None: when stderr is a terminal; True
    always; False never). ``calibration``: a file written by
    :meth:`QuantizedModel.save_calibration`: its scales are used and no data is run
    (``calibration_batches`` must then be None; ``dtype`` / ``method``, when given, must match it).
    """
    if not isinstance(model, nn.Module):
        raise CalibrationError(f"quantize() takes an nn.Module, got {type(model).__name__}")
    if isinstance(model, QuantizedModel):
        raise CalibrationError("the model is already a QuantizedModel; quantize the original model")
    if dtype is not None and dtype not in DTYPES:
        raise CalibrationError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if method is not None and method not in METHODS:
        raise CalibrationError(f"method must be one of {METHODS}, got {method!r}")
    if calibration is not None:
        if calibration_batches is not None:
            raise CalibrationError("pass either calibration_batches or calibration= (a saved file), not both")
        if layers is not None or tuple(exclude):
            raise CalibrationError("layers= / exclude= come from the calibration file; do not pass them with calibration=")
        return load_calibration(model, calibration, dtype=dtype, method=method)
    if calibration_batches is None:
        raise CalibrationError("quantize() needs calibration_batches (an iterable of inputs) or calibration= (a file)")
    if not 0 < percentile <= 100:
        raise CalibrationError(f"percentile must be in (0, 100], got {percentile}")
    if int(num_bins) < 128:
        raise CalibrationError(f"num_bins must be at least 128, got {num_bins}")
    dtype = dtype or "int8"
    method = method or "max"
    work = copy.deepcopy(model).eval()
    names, skipped = _select(work, layers, exclude)
    amax, not_called = _calibrate(work, names, calibration_batches, method, dtype, percentile, int(num_bins), progress)
    skipped.update(not_called)
    modules = dict(work.named_modules())
    scales: dict[str, LayerScales] = {}
    for n, a in amax.items():
        m = modules[n]
        axis = weight_axis(m)
        w = m.weight
        scales[n] = LayerScales(
            kind=_kind(m), input_scale=float(_scale_from_amax(torch.tensor(a), dtype)),
            weight_scale=_scale_from_amax(weight_amax(w, axis), dtype), weight_axis=axis,
            weight_shape=tuple(w.shape), input_amax=float(a),
        )
    _install(work, scales, dtype)
    return QuantizedModel(work, scales, Settings(dtype, method, float(percentile), int(num_bins), skipped))


def _kind(m: nn.Module) -> str:
    base = _stock_base(m)
    return base.__name__ if base is not None else type(m).__name__


# ---------------------------------------------------------------------------- loading
def _read(path: str) -> tuple[dict[str, Any], dict[str, tuple[float, torch.Tensor]]]:
    """(header with "layers" metadata, {layer: (input scale, weight scales)}) of a calibration file."""
    if not os.path.exists(path):
        raise CalibrationError(f"calibration file {path!r} does not exist")
    if path.endswith(".json"):
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise CalibrationError(f"calibration file {path!r} is not valid JSON: {e}") from e
        if not isinstance(doc, dict) or not isinstance(doc.get("layers"), dict):
            raise CalibrationError(f"calibration file {path!r} is not a torch2trt-lite calibration (no 'layers' table)")
        values: dict[str, tuple[float, torch.Tensor]] = {}
        for name, entry in doc["layers"].items():
            try:
                values[name] = (float(entry["input_scale"]), torch.tensor([float(v) for v in entry["weight_scale"]]))
            except (KeyError, TypeError, ValueError) as e:
                raise CalibrationError(f"calibration file {path!r}: layer {name!r} has a bad entry ({e!r})") from e
        return doc, values
    if path.endswith(".safetensors"):
        try:
            from safetensors import SafetensorError, safe_open
        except ImportError as e:
            raise CalibrationError("reading .safetensors needs the safetensors package (pip install safetensors)") from e
        try:
            with safe_open(path, framework="pt") as f:
                meta = f.metadata() or {}
                tensors = {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open has no __iter__)
        except (SafetensorError, OSError, ValueError) as e:
            raise CalibrationError(f"calibration file {path!r} is not a valid safetensors file: {e}") from e
        try:
            doc = json.loads(meta["torch2trt_lite"])
        except (KeyError, json.JSONDecodeError) as e:
            raise CalibrationError(
                f"calibration file {path!r} has no torch2trt-lite metadata (not written by save_calibration)"
            ) from e
        if not isinstance(doc, dict) or not isinstance(doc.get("layers"), dict):
            raise CalibrationError(f"calibration file {path!r}: its metadata has no 'layers' table")
        values = {}
        for name in doc["layers"]:
            si, sw = tensors.get(f"{name}.input_scale"), tensors.get(f"{name}.weight_scale")
            if si is None or sw is None or si.numel() != 1:
                raise CalibrationError(f"calibration file {path!r}: the scales of layer {name!r} are missing")
            values[name] = (float(si.float().reshape(())), sw.float().reshape(-1))
        return doc, values
    raise CalibrationError(f"calibration files are .json or .safetensors; got {path!r}")


def load_calibration(
    model: nn.Module, path: str | os.PathLike[str], *, dtype: str | None = None, method: str | None = None
) -> QuantizedModel:
    """A :class:`QuantizedModel` of ``model`` with the scales of a file written by
    :meth:`QuantizedModel.save_calibration` (no calibration data is run). The file must fit the
    model: every layer it names must exist with that class and weight shape."""
    p = os.fspath(path)
    doc, values = _read(p)
    if doc.get("format") != FORMAT:
        raise CalibrationError(f"calibration file {p!r} is not a torch2trt-lite calibration (format {doc.get('format')!r})")
    if doc.get("version") != FORMAT_VERSION:
        raise CalibrationError(
            f"calibration file {p!r} has format version {doc.get('version')!r}; this torch2trt-lite reads version "
            f"{FORMAT_VERSION}"
        )
    fdtype, fmethod = doc.get("dtype"), doc.get("method")
    if fdtype not in DTYPES:
        raise CalibrationError(f"calibration file {p!r} has dtype {fdtype!r}; expected one of {DTYPES}")
    if fmethod not in METHODS:
        raise CalibrationError(f"calibration file {p!r} has method {fmethod!r}; expected one of {METHODS}")
    if dtype is not None and dtype != fdtype:
        raise CalibrationError(f"calibration file {p!r} holds {fdtype} scales, but dtype={dtype!r} was asked for")
    if method is not None and method != fmethod:
        raise CalibrationError(f"calibration file {p!r} was calibrated with method {fmethod!r}, not {method!r}")
    work = copy.deepcopy(model).eval()
    modules = dict(work.named_modules())
    scales: dict[str, LayerScales] = {}
    for name, entry in doc["layers"].items():
        m = modules.get(name)
        if m is None:
            raise CalibrationError(f"calibration file {p!r} names layer {name!r}, which the model does not have")
        base = _stock_base(m)
        kind = entry.get("kind") if isinstance(entry, dict) else None
        if base is None or base.__name__ != kind:
            raise CalibrationError(
                f"calibration file {p!r}: layer {name!r} is a {kind} there but a {type(m).__name__} in the model"
            )
        w = m.weight
        axis = weight_axis(m)
        shape = tuple(int(d) for d in entry.get("weight_shape", ()))
        if shape != tuple(w.shape):
            raise CalibrationError(
                f"calibration file {p!r}: layer {name!r} has weight shape {list(shape)} there but {list(w.shape)} in "
                "the model"
            )
        si, sw = values[name]
        if sw.numel() != w.shape[axis]:
            raise CalibrationError(
                f"calibration file {p!r}: layer {name!r} has {sw.numel()} weight scales; its weight has "
                f"{w.shape[axis]} output channels"
            )
        if not (math.isfinite(si) and si > 0) or not bool(torch.isfinite(sw).all() and (sw > 0).all()):
            raise CalibrationError(f"calibration file {p!r}: layer {name!r} has a scale that is not a positive number")
        scales[name] = LayerScales(
            kind=str(kind), input_scale=si, weight_scale=sw.float(), weight_axis=axis, weight_shape=shape,
            input_amax=float(entry.get("input_amax", 0.0)),
        )
    if not scales:
        raise CalibrationError(f"calibration file {p!r} lists no layer")
    _install(work, scales, fdtype)
    skipped = doc.get("skipped") if isinstance(doc.get("skipped"), dict) else {}
    settings = Settings(fdtype, fmethod, float(doc.get("percentile", 99.99)), int(doc.get("num_bins", 2048)),
                        {str(k): str(v) for k, v in (skipped or {}).items()})
    return QuantizedModel(work, scales, settings)


__all__ = [
    "CalibrationError",
    "FakeQuantizer",
    "LayerScales",
    "QuantizedModel",
    "fake_quantize_fp8",
    "fake_quantize_weight",
    "load_calibration",
    "quantization_info",
    "quantize",
]
