"""Signal ops: sliding windows (``Tensor.unfold``, time-series patching and framing) and the
short-time Fourier transform (``torch.stft``, speech front ends)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from torch2trt_lite.errors import ConverterRefusal
from torch2trt_lite.registry import Call, converter

from .impl import shape as S
from .impl import signal as sig
from .impl.nn_common import float_dtype, is_traced

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


# --------------------------------------------------------------------------------- unfold
@converter(torch.Tensor.unfold)
def convert_tensor_unfold(ctx: ConversionContext, call: Call) -> Any:
    """Windows of ``size`` every ``step`` along ``dimension``: one gather (any dim may be dynamic).
    A 0-d tensor (size 1, as torch allows) becomes its one window, of shape [1]."""
    x = call.arg(0, "self")
    if x.dim() == 0:
        return S.reshape(ctx, ctx.itensor(x), (1,))
    dim = int(call.arg(1, "dimension")) % x.dim()
    return sig.frames(ctx, ctx.itensor(x), dim, int(call.arg(2, "size")), int(call.arg(3, "step")))


# ----------------------------------------------------------------------------------- stft
_STFT = ("input", "n_fft", "hop_length", "win_length", "window", "center", "pad_mode", "normalized", "onesided",
         "return_complex")
_STFT_DEFAULTS = (None, None, None, None, None, True, "reflect", False, None, None)
_PAD_MODES = ("constant", "reflect", "replicate", "circular")


def _named_args(call: Call, names: tuple[str, ...], defaults: tuple[Any, ...]) -> dict[str, Any]:
    """The arguments by name; ``input`` (``self`` of the method form, always positional) is required."""
    return call.named(names, dict(zip(names[1:], defaults[1:], strict=True)))


def _stft_args(call: Call) -> dict[str, Any]:
    return _named_args(call, _STFT, _STFT_DEFAULTS)


def check_stft(call: Call) -> str | None:
    a = _stft_args(call)
    x, w = a["input"], a["window"]
    if not float_dtype(x.dtype) or x.dim() not in (1, 2):
        return f"input must be a real floating-point [L] or [N, L] tensor, got {x.dim()}-D {x.dtype}"
    if w is not None and (is_traced(w) or w.is_complex()):
        return "the window must be a real constant tensor (a window computed from the network inputs is not supported)"
    if a["pad_mode"] not in _PAD_MODES:
        return f"pad_mode {a['pad_mode']!r} is not supported"
    return None


def _window(a: dict[str, Any], n_fft: int) -> torch.Tensor:
    """The window zero-padded to ``n_fft`` taps, centred (as torch pads it)."""
    win_length = int(a["win_length"] or n_fft)
    w = a["window"]
    w = torch.ones(win_length, dtype=torch.float64) if w is None else w.detach().to(torch.float64)
    left = (n_fft - win_length) // 2
    return torch.nn.functional.pad(w, (left, n_fft - win_length - left))


@converter(torch.stft, torch.Tensor.stft, check=check_stft)
def convert_stft(ctx: ConversionContext, call: Call) -> Any:
    """``torch.stft`` as one convolution with DFT kernels (impl/signal.py): ``center`` with every pad
    mode, ``window`` and ``win_length``, ``normalized``, ``onesided``. ``return_complex=False`` gives
    ``[..., freq, frames, 2]``; ``return_complex=True`` the same network tensor, held as a complex value
    (the tracer sends it here through ``converters/complex.py``, which converts the ops that use it)."""
    a = _stft_args(call)
    x = a["input"]
    n_fft = int(a["n_fft"])
    hop = int(a["hop_length"] or n_fft // 4)
    onesided = True if a["onesided"] is None else bool(a["onesided"])
    dt = call.output.dtype.to_real()  # return_complex=True: held as (real, imaginary) pairs (converters/complex.py)
    return sig.stft(ctx, ctx.itensor(x, dt), n_fft, hop, _window(a, n_fft), bool(a["center"]), a["pad_mode"],
                    bool(a["normalized"]), onesided, dt)


# ---------------------------------------------------------------------------------- istft
_ISTFT = ("input", "n_fft", "hop_length", "win_length", "window", "center", "normalized", "onesided", "length",
          "return_complex")
_ISTFT_DEFAULTS = (None, None, None, None, None, True, False, None, None, False)


def _istft_args(call: Call) -> dict[str, Any]:
    return _named_args(call, _ISTFT, _ISTFT_DEFAULTS)


def check_istft(call: Call) -> str | None:
    a = _istft_args(call)
    x, w = a["input"], a["window"]
    if not isinstance(x, torch.Tensor) or not x.is_complex() or x.dim() not in (2, 3):
        return "input must be a complex [F, T] or [N, F, T] tensor (from torch.stft(..., return_complex=True))"
    if a["return_complex"] or a["onesided"] is False or x.shape[-2] != int(a["n_fft"]) // 2 + 1:
        return "only a onesided istft with a real result converts (return_complex=False, n_fft // 2 + 1 bins)"
    if w is not None and (is_traced(w) or w.is_complex()):
        return "the window must be a real constant tensor (a window computed from the network inputs is not supported)"
    return None


@converter(torch.istft, torch.Tensor.istft, check=check_istft)
def convert_istft(ctx: ConversionContext, call: Call) -> Any:
    """``torch.istft`` of a complex value (onesided, real result) as one transposed convolution
    (impl/signal.py); the frame count must be static (the window envelope is a constant)."""
    a = _istft_args(call)
    z = ctx.itensor(a["input"])  # (real, imaginary) pairs: converters/complex.py
    if int(tuple(z.shape)[-2]) < 0:
        raise ConverterRefusal("istft of a dynamic frame count is not supported (its window envelope is a constant): "
                               "convert with a static signal length")
    n_fft = int(a["n_fft"])
    length = None if a["length"] is None else int(a["length"])
    return sig.istft(ctx, z, n_fft, int(a["hop_length"] or n_fft // 4), _window(a, n_fft), bool(a["center"]),
                     bool(a["normalized"]), length, call.output.dtype)
