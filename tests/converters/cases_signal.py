"""Harness cases: sliding windows (Tensor.unfold) and the short-time Fourier transform (torch.stft).

stft's tolerance: the engine computes each bin as one convolution of ``n_fft`` fp32 products (torch
runs an FFT); the error is a few fp32 ulps of ``sum |window * x|`` over a frame, measured at most
1.5e-5 absolute on these inputs (|X| up to ~40), so 1e-4 absolute / 1e-5 relative is stated. No
fp16 stft case: PyTorch on CPU has no fp16 FFT to compare with.
"""

from __future__ import annotations

import warnings

import torch

from tests.converters.harness import Case, randn

_STFT_TOL = {"rtol": 1e-5, "atol": 1e-4}


def _stft(**kw):  # type: ignore[no-untyped-def]
    """``torch.stft(x, **kw, return_complex=False)`` (its deprecation warning silenced)."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.stft(x, **kw, return_complex=False)

    return fn


def _audio(*shape: int) -> list[torch.Tensor]:
    return [randn(*shape, seed=4)]


CASES = [
    # Tensor.unfold
    Case("tensor_unfold_last", lambda x: x.unfold(-1, 4, 2), lambda: [randn(2, 3, 11)], targets=["torch.Tensor.unfold"]),
    Case("tensor_unfold_middle_step_gt_size", lambda x: x.unfold(1, 2, 3), lambda: [randn(2, 9, 4)]),
    Case("tensor_unfold_patching", lambda x: x.unfold(-1, 8, 8).flatten(-2) * 2, lambda: [randn(2, 5, 32)]),
    Case("tensor_unfold_twice", lambda x: x.unfold(2, 3, 1).unfold(3, 3, 2), lambda: [randn(1, 2, 6, 7)]),
    Case("tensor_unfold_1d", lambda x: x.unfold(0, 3, 1), lambda: [randn(6)]),
    # dim 0 unfolded: with a dynamic batch the window count is computed in the network
    Case("tensor_unfold_dim0_then_reshape", lambda x: x.unfold(0, 4, 3).flatten(1).reshape(-1, 2, 10).mean(1),
         lambda: [randn(11, 5)]),
    Case("tensor_unfold_int", lambda x: x.unfold(1, 2, 1), lambda: [torch.arange(24).reshape(2, 12) % 5]),
    Case("tensor_unfold_half", lambda x: x.unfold(-1, 5, 2), lambda: [randn(2, 3, 12, dtype=torch.float16)]),
    Case("tensor_unfold_0d", lambda x: (x.sum()).unfold(0, 1, 1) * x, lambda: [randn(3)]),
    # torch.stft, return_complex=False: [..., freq, frames, 2] (real, imaginary)
    Case("stft_defaults_rect", _stft(n_fft=64), lambda: _audio(2, 400), targets=["torch.functional.stft"],
         **_STFT_TOL),
    Case("stft_hann_hop_win_length", _stft(n_fft=64, hop_length=16, win_length=48, window=torch.hann_window(48)),
         lambda: _audio(2, 400), **_STFT_TOL),
    Case("stft_normalized_two_sided", _stft(n_fft=32, hop_length=8, window=torch.hamming_window(32), normalized=True,
                                            onesided=False), lambda: _audio(3, 200), **_STFT_TOL),
    Case("stft_no_center", _stft(n_fft=50, hop_length=20, center=False), lambda: _audio(2, 333), **_STFT_TOL),
    Case("stft_pad_constant", _stft(n_fft=32, pad_mode="constant", window=torch.hann_window(32)),
         lambda: _audio(2, 100), **_STFT_TOL),
    Case("stft_pad_replicate", _stft(n_fft=32, hop_length=10, pad_mode="replicate"), lambda: _audio(1, 90),
         **_STFT_TOL),
    Case("stft_pad_circular", _stft(n_fft=16, hop_length=5, pad_mode="circular"), lambda: _audio(2, 40),
         **_STFT_TOL),
    Case("stft_unbatched_odd_n_fft", _stft(n_fft=25, hop_length=7, window=torch.hann_window(25)),
         lambda: _audio(120), **_STFT_TOL),
    Case("stft_method", lambda x: x.stft(40, 10, return_complex=False), lambda: _audio(2, 160),
         targets=["torch.Tensor.stft"], **_STFT_TOL),
    Case("stft_power_spectrum", lambda x: _stft(n_fft=64, hop_length=32)(x).pow(2).sum(-1), lambda: _audio(2, 256),
         rtol=1e-4, atol=1e-3),
    # return_complex=True: held as (real, imaginary) pairs (converters/complex.py; tests/converters/test_complex.py)
    Case("stft_complex_abs", lambda x: torch.stft(x, 16, return_complex=True).abs(), lambda: _audio(2, 64),
         **_STFT_TOL),
]


def _z(x: torch.Tensor) -> torch.Tensor:
    return torch.view_as_complex(x)


def _pairs() -> list[torch.Tensor]:
    return [randn(3, 5, 2, seed=4)]


# Complex values from view_as_complex / torch.complex (converters/complex.py): each op's complex form.
CASES += [
    Case("complex_view_roundtrip", lambda x: torch.view_as_real(_z(x) * 2), _pairs,
         targets=["torch.view_as_complex", "torch.view_as_real"]),
    Case("complex_real_imag", lambda x: _z(x).real * 2 + _z(x).imag - torch.real(_z(x)) * torch.imag(_z(x)), _pairs,
         targets=["torch.Tensor.real", "torch.Tensor.imag", "torch.real", "torch.imag"]),
    Case("complex_angle", lambda x: torch.angle(_z(x)) + _z(x).angle() * 0.5, _pairs, rtol=1e-5, atol=1e-5,
         targets=["torch.angle", "torch.Tensor.angle"]),
    Case("complex_conj", lambda x: torch.view_as_real(_z(x) * _z(x).conj() + torch.conj(_z(x))), _pairs,
         targets=["torch.conj", "torch.Tensor.conj"]),
    Case("complex_resolve", lambda x: torch.view_as_real(
        torch.resolve_neg(torch.resolve_conj(torch.conj_physical(_z(x)))).conj_physical().resolve_conj().resolve_neg()),
        _pairs, targets=["torch.conj_physical", "torch.Tensor.conj_physical", "torch.resolve_conj",
                         "torch.Tensor.resolve_conj", "torch.resolve_neg", "torch.Tensor.resolve_neg"]),
    Case("istft_roundtrip", lambda x: torch.istft(
        torch.stft(x, 16, hop_length=4, window=torch.ones(16), return_complex=True), 16, hop_length=4,
        window=torch.ones(16)) + torch.stft(x, 16, hop_length=4, window=torch.ones(16), return_complex=True).istft(
        16, hop_length=4, window=torch.ones(16)), lambda: _audio(2, 64), rtol=1e-4, atol=1e-5,
        targets=["torch.istft", "torch.Tensor.istft"]),
    Case("complex_make", lambda a, b: torch.complex(a, b).abs(), lambda: [randn(3, 5, seed=5), randn(3, 5, seed=6)],
         targets=["torch.complex"]),
]
