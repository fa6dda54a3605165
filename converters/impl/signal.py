"""Signal builders: sliding windows (``Tensor.unfold``) and the short-time Fourier transform.

``frames``: windows of ``size`` elements every ``step`` elements along one dim, one gather with a
``[windows, size]`` index (a constant; for a dynamic dim, computed from its size), the window dim
moved last (as torch lays it out).

``stft``: every frame of ``n_fft`` samples (``hop`` apart) times the window, then a DFT. Both are
one 1D convolution of the (padded) signal ``[N, 1, L]`` with ``2 F`` constant kernels of ``n_fft``
taps and stride ``hop``: the window times ``cos(2 pi f n / n_fft)`` (the real parts) and times
``-sin(2 pi f n / n_fft)`` (the imaginary parts), computed in float64 and stored in the output's
dtype. The real and imaginary parts then become the last dim of ``[N, F, frames, 2]``, the layout of
``torch.stft(..., return_complex=False)`` (and of ``torch.view_as_real`` of the complex result).
The convolution accumulates ``n_fft`` products of fp32 values: its error against torch (which runs
an FFT) is a few fp32 ulps of ``sum |window * x|`` over a frame: measured at most 1e-6 of the largest
|X| (n_fft 400 and 512, fp32; tests/converters/cases_signal.py states its tolerance).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from . import shape as S
from . import sizes as Y
from .conv import convolution
from .nn_common import const, ew, gather, rank, slice_axis, unsqueeze
from .resize import pad

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext


def frames(ctx: ConversionContext, it: Any, dim: int, size: int, step: int) -> Any:
    """``it.unfold(dim, size, step)``; a dynamic ``it.shape[dim]`` gives a window count computed in
    the network (the start indices from an IFillLayer LINSPACE)."""
    n = rank(it)
    length = Y.network_sizes(ctx, it)[dim]
    count = (length - size) // step + 1
    if Y.is_sym(count):
        starts = ew(ctx, Y.arange(ctx, count, 2, 0, torch.int64), const(ctx, torch.tensor(step), torch.int64, 2), "PROD")
        idx = ew(ctx, starts, const(ctx, torch.arange(size)[None, :], torch.int64), "SUM")
        y = gather(ctx, it, ctx.cast(idx, torch.int32), dim)
    else:
        idx = torch.arange(int(count))[:, None] * step + torch.arange(size)[None, :]
        y = gather(ctx, it, idx.to(torch.int32), dim)  # [..., count, size, ...]
    perm = [i for i in range(n + 1) if i != dim + 1] + [dim + 1]
    return S.permute(ctx, y, perm)


def dft_kernels(n_fft: int, window: torch.Tensor, onesided: bool, normalized: bool) -> torch.Tensor:
    """``[2 F, 1, n_fft]`` float64 kernels: F rows of ``window * cos``, then F rows of ``-window * sin``."""
    bins = n_fft // 2 + 1 if onesided else n_fft
    f = torch.arange(bins, dtype=torch.float64)[:, None]
    t = torch.arange(n_fft, dtype=torch.float64)[None, :]
    # NOTE: f * t mod n_fft keeps the angle's argument small (exact integers), so cos/sin are exact to
    # float64 rounding for any n_fft
    turns = torch.remainder(f * t, n_fft)
    angle = 2.0 * math.pi * turns / n_fft
    # NOTE: exact zeros where the sine is 0 (angle 0 or pi: the DC and Nyquist bins' imaginary parts), as
    # an FFT gives them: a 1e-16 residue would give the phase (torch.angle) a random sign there
    sin = torch.where(torch.remainder(2 * turns, n_fft) == 0, 0.0, torch.sin(angle))
    w = window.detach().to(torch.float64)[None, :]
    k = torch.cat([w * torch.cos(angle), -w * sin])
    if normalized:
        k = k / math.sqrt(n_fft)
    return k[:, None, :]


def stft(ctx: ConversionContext, x: Any, n_fft: int, hop: int, window: torch.Tensor, center: bool, pad_mode: str,
         normalized: bool, onesided: bool, dtype: torch.dtype) -> Any:
    """``torch.stft(x, ..., return_complex=False)`` of ``x`` [N, L] or [L]: [N, F, frames, 2] (or [F, frames, 2])."""
    unbatched = rank(x) == 1
    if unbatched:
        x = unsqueeze(ctx, x, [0])
    x = unsqueeze(ctx, x, [1])  # [N, 1, L]
    if center:
        x = pad(ctx, x, [n_fft // 2, n_fft // 2], pad_mode, 0.0, dtype)
    kernels = dft_kernels(n_fft, window, onesided, normalized)
    y = convolution(ctx, x, kernels, None, stride=hop, dtype=dtype)  # [N, 2F, frames]
    bins = kernels.shape[0] // 2
    re, im = (unsqueeze(ctx, slice_axis(ctx, y, 1, i * bins, bins), [-1]) for i in range(2))
    out = S.concat(ctx, [re, im], -1)  # [N, F, frames, 2]
    if unbatched:
        out = S.squeeze(ctx, out, [0])
    return out


def idft_kernels(n_fft: int, bins: int, window: torch.Tensor, normalized: bool) -> torch.Tensor:
    """``[2 F, 1, n_fft]`` float64 kernels of a onesided inverse DFT times the window: ``c_f cos`` rows
    (real parts), then ``-c_f sin`` rows (imaginary parts), ``c_f`` 1 for the DC and Nyquist bins
    (whose imaginary parts an inverse real FFT ignores: their sine is exactly 0) and 2 otherwise."""
    f = torch.arange(bins, dtype=torch.float64)[:, None]
    t = torch.arange(n_fft, dtype=torch.float64)[None, :]
    turns = torch.remainder(f * t, n_fft)
    angle = 2.0 * math.pi * turns / n_fft
    sin = torch.where(torch.remainder(2 * turns, n_fft) == 0, 0.0, torch.sin(angle))
    c = torch.full((bins, 1), 2.0, dtype=torch.float64)
    c[0] = 1.0
    if n_fft % 2 == 0:
        c[n_fft // 2] = 1.0
    w = window.detach().to(torch.float64)[None, :]
    k = torch.cat([c * torch.cos(angle) * w, -c * sin * w]) / (math.sqrt(n_fft) if normalized else n_fft)
    return k[:, None, :]


def istft(ctx: ConversionContext, z: Any, n_fft: int, hop: int, window: torch.Tensor, center: bool,
          normalized: bool, length: int | None, dtype: torch.dtype) -> Any:
    """``torch.istft`` (onesided, real result) of complex ``z`` held as ``[N, F, T, 2]`` (or ``[F, T, 2]``)
    with a static frame count T: one transposed convolution (inverse DFT of every frame times the
    window, overlap-added ``hop`` apart), divided by the overlap-added squared window (a constant),
    trimmed to torch's span (``center``, ``length``; zeros past the last frame)."""
    unbatched = rank(z) == 3
    if unbatched:
        z = unsqueeze(ctx, z, [0])
    bins, frames = int(z.shape[1]), int(z.shape[2])
    parts = [gather(ctx, z, torch.tensor(i, dtype=torch.int32), 3) for i in (0, 1)]  # [N, F, T] each
    y = convolution(ctx, S.concat(ctx, parts, 1), idft_kernels(n_fft, bins, window, normalized), None, stride=hop,
                    transposed=True, dtype=dtype)  # [N, 1, (T - 1) hop + n_fft]
    full = (frames - 1) * hop + n_fft
    w = window.detach().to(torch.float64)
    where = (torch.arange(frames)[:, None] * hop + torch.arange(n_fft)[None, :]).flatten()
    envelope = torch.zeros(full, dtype=torch.float64).index_add_(0, where, (w * w).repeat(frames))
    start = n_fft // 2 if center else 0
    end = start + length if length is not None else full - n_fft // 2 if center else full
    stop = min(end, full)
    y = ew(ctx, slice_axis(ctx, y, 2, start, stop - start), const(ctx, envelope[start:stop], dtype, 3), "DIV")
    if end > full:
        y = pad(ctx, y, [0, end - full], "constant", 0.0, dtype)
    y = S.squeeze(ctx, y, [1])
    return S.squeeze(ctx, y, [0]) if unbatched else y

