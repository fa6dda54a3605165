"""The quantized model: :func:`quantize` (select the layers, calibrate, install the quantizers),
:func:`load_calibration` (the same from a calibration file) and :func:`quantization_info`."""

from __future__ import annotations

import copy
import math
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import torch
from torch import nn

from .fake import DTYPES, QUANT_CLASS, QUANTIZABLE, FakeQuantizer, QuantMixin, stock_base, weight_axis
from .files import FORMAT, FORMAT_VERSION, LayerScales, Settings, read_calibration, write_calibration
from .methods import METHODS, CalibrationError, Observer, compute_amax, scale_from_amax, weight_amax


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
        write_calibration(os.fspath(path), self.scales, self.settings)


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
    named = dict(model.named_modules())
    for spec in specs or []:
        if isinstance(spec, str) and spec and spec not in named and not any(n.startswith(spec + ".") for n in named):
            raise CalibrationError(f"layers=[{spec!r}]: the model has no module at that path")
    chosen, skipped = _candidates(model, specs, exclude)
    if not chosen:
        raise CalibrationError(
            "no layer to quantize: the model has no nn.Conv1d/2d/3d, nn.ConvTranspose1d/2d/3d or nn.Linear "
            f"layer selected by layers={layers!r}, exclude={list(exclude)!r}"
            + (f" (left out: {skipped})" if skipped else "")
        )
    return chosen, skipped


def quantizable_layers(model: nn.Module) -> tuple[list[str], dict[str, str]]:
    """(the paths of the layers :func:`quantize` quantizes by default, {path: why not} of the
    convolutions and linear layers it leaves out); no paths: the model has nothing to quantize."""
    return _candidates(model, None, ())


def _candidates(model: nn.Module, specs: list[Any] | None, exclude: Sequence[Any]) -> tuple[list[str], dict[str, str]]:
    chosen: list[str] = []
    skipped: dict[str, str] = {}
    for name, m in model.named_modules():
        if not isinstance(m, QUANTIZABLE) or isinstance(m, QuantMixin):
            continue
        if specs is not None and not _matches(name, m, specs):
            continue
        if _matches(name, m, list(exclude)):
            continue
        if stock_base(m) is None:
            skipped[name] = f"{type(m).__name__} overrides forward(); only torch's own layer forward is quantized"
            continue
        chosen.append(name)
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
    observers = {n: Observer(num_bins, method != "max") for n in names}
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
        base = stock_base(m)
        assert base is not None
        dev = m.weight.device
        m.__class__ = QUANT_CLASS[base]
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
            kind=_kind(m), input_scale=float(scale_from_amax(torch.tensor(a), dtype)),
            weight_scale=scale_from_amax(weight_amax(w, axis), dtype), weight_axis=axis,
            weight_shape=tuple(w.shape), input_amax=float(a),
        )
    _install(work, scales, dtype)
    return QuantizedModel(work, scales, Settings(dtype, method, float(percentile), int(num_bins), skipped))


def _kind(m: nn.Module) -> str:
    base = stock_base(m)
    return base.__name__ if base is not None else type(m).__name__


def load_calibration(
    model: nn.Module, path: str | os.PathLike[str], *, dtype: str | None = None, method: str | None = None
) -> QuantizedModel:
    """A :class:`QuantizedModel` of ``model`` with the scales of a file written by
    :meth:`QuantizedModel.save_calibration` (no calibration data is run). The file must fit the
    model: every layer it names must exist with that class and weight shape."""
    p = os.fspath(path)
    doc, values = read_calibration(p)
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
        base = stock_base(m)
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


__all__ = ["QuantizedModel", "load_calibration", "quantizable_layers", "quantization_info", "quantize"]
