"""Calibration methods: the |x| statistics of a layer's input (:class:`Observer`) and the amax each
method takes from them: ``"max"`` (largest |x| seen), ``"percentile"``, ``"entropy"`` (TensorRT's
KL-divergence calibration) or ``"mse"`` (least quantization mean squared error); scales from amax."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import Torch2TRTError
from .fake import FP8_MAX, INT8_MAX, INT8_MIN, QMAX

METHODS = ("max", "percentile", "entropy", "mse")


class CalibrationError(Torch2TRTError):
    """Calibration could not run, or a calibration file does not fit the model."""


# ------------------------------------------------------------------------- observers
class Observer:
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


def compute_amax(obs: Observer, method: str, dtype: str, percentile: float) -> float:
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


def scale_from_amax(amax: torch.Tensor, dtype: str) -> torch.Tensor:
    """amax / qmax in float32; an amax of 0 (a channel or input that is all zeros) gets scale 1."""
    a = amax.detach().double()
    a = torch.where((a > 0) & torch.isfinite(a), a, torch.ones_like(a) * QMAX[dtype])
    return (a / QMAX[dtype]).float()


def weight_amax(w: torch.Tensor, axis: int) -> torch.Tensor:
    dims = [d for d in range(w.dim()) if d != axis]
    return w.detach().abs().float().amax(dim=dims)



__all__ = [
    "METHODS", "CalibrationError", "Observer", "amax_entropy", "amax_mse", "amax_percentile", "compute_amax",
    "scale_from_amax", "weight_amax",
]
