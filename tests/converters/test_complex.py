"""Complex values from ``torch.stft(..., return_complex=True)`` (converters/complex.py): speech front
ends as torchaudio and whisper write them, against eager PyTorch; and the refusal of every other op
on a complex value, in ``convert`` and ``check`` alike.

The front ends are faithful copies of torchaudio's code paths (torchaudio is not a dependency):
``torchaudio.functional.spectrogram`` (``Spectrogram``), ``melscale_fbanks`` (HTK scale, no norm),
``amplitude_to_DB``, ``create_dct`` (``MFCC``), and whisper's ``log_mel_spectrogram``.

Tolerances: the engine computes each bin as one convolution of ``n_fft`` fp32 products where torch
runs an FFT. Measured (fp32, sim, three inputs each): |X|, |X|^2 and view_as_real within 1.4e-6 of
the largest |value| (stated: 4e-6), complex products, quotients and sums within 5.1e-7 (stated: 4e-6
and 1e-5), dB and log-mel within 7.6e-6 absolute (stated: 1e-4), MFCC within 3.1e-5 (stated: 2e-4).
``angle`` is compared modulo 2 pi (measured 2.4e-6, stated 1e-4): in the DC bin the exact imaginary
part is 0, and the sign of torch's FFT rounding residue there picks +pi or -pi for a negative real part.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import torch

import torch2trt_lite
from torch2trt_lite.errors import Torch2TRTError, UnsupportedOperatorError


# ----------------------------------------------------------------- torchaudio's code paths (copies)
def _spec_norms(normalized: bool | str) -> tuple[bool, bool]:
    frame_length_norm, window_norm = False, False
    if torch.jit.isinstance(normalized, str):
        if normalized not in ["frame_length", "window"]:
            raise ValueError(f"Invalid normalized parameter: {normalized}")
        frame_length_norm = normalized == "frame_length"
        window_norm = normalized == "window"
    elif torch.jit.isinstance(normalized, bool):
        window_norm = bool(normalized)
    return frame_length_norm, window_norm


def spectrogram(waveform: torch.Tensor, pad: int, window: torch.Tensor, n_fft: int, hop_length: int,
                win_length: int, power: float | None, normalized: bool | str, center: bool = True,
                pad_mode: str = "reflect", onesided: bool = True) -> torch.Tensor:
    """torchaudio.functional.spectrogram."""
    if pad > 0:
        waveform = torch.nn.functional.pad(waveform, (pad, pad), "constant")
    frame_length_norm, window_norm = _spec_norms(normalized)
    shape = waveform.size()
    waveform = waveform.reshape(-1, shape[-1])
    spec_f = torch.stft(input=waveform, n_fft=n_fft, hop_length=hop_length, win_length=win_length, window=window,
                        center=center, pad_mode=pad_mode, normalized=frame_length_norm, onesided=onesided,
                        return_complex=True)
    spec_f = spec_f.reshape(shape[:-1] + spec_f.shape[-2:])
    if window_norm:
        spec_f /= window.pow(2.0).sum().sqrt()
    if power is not None:
        if power == 1.0:
            return spec_f.abs()
        return spec_f.abs().pow(power)
    return spec_f


class Spectrogram(torch.nn.Module):
    window: torch.Tensor

    def __init__(self, n_fft: int = 400, hop_length: int = 160, power: float | None = 2.0,
                 normalized: bool | str = False) -> None:
        super().__init__()
        self.n_fft, self.hop_length, self.power, self.normalized = n_fft, hop_length, power, normalized
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        return spectrogram(waveform, 0, self.window, self.n_fft, self.hop_length, self.n_fft, self.power,
                           self.normalized)


def _hz_to_mel(freq: float) -> float:
    return 2595.0 * math.log10(1.0 + (freq / 700.0))


def _mel_to_hz(mels: torch.Tensor) -> torch.Tensor:
    return 700.0 * (10.0 ** (mels / 2595.0) - 1.0)


def melscale_fbanks(n_freqs: int, f_min: float, f_max: float, n_mels: int, sample_rate: int) -> torch.Tensor:
    """torchaudio.functional.melscale_fbanks (mel_scale="htk", norm=None)."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs)
    m_pts = torch.linspace(_hz_to_mel(f_min), _hz_to_mel(f_max), n_mels + 2)
    f_pts = _mel_to_hz(m_pts)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts.unsqueeze(0) - all_freqs.unsqueeze(1)
    down_slopes = (-1.0 * slopes[:, :-2]) / f_diff[:-1]
    up_slopes = slopes[:, 2:] / f_diff[1:]
    return torch.max(torch.zeros(1), torch.min(down_slopes, up_slopes))


def amplitude_to_db(x: torch.Tensor, multiplier: float, amin: float, db_multiplier: float,
                    top_db: float | None = None) -> torch.Tensor:
    """torchaudio.functional.amplitude_to_DB."""
    x_db = multiplier * torch.log10(torch.clamp(x, min=amin))
    x_db -= multiplier * db_multiplier
    if top_db is not None:
        shape = x_db.size()
        packed_channels = shape[-3] if x_db.dim() > 2 else 1
        x_db = x_db.reshape(-1, packed_channels, shape[-2], shape[-1])
        x_db = torch.max(x_db, (x_db.amax(dim=(-3, -2, -1)) - top_db).view(-1, 1, 1, 1))
        x_db = x_db.reshape(shape)
    return x_db


def create_dct(n_mfcc: int, n_mels: int) -> torch.Tensor:
    """torchaudio.functional.create_dct (norm="ortho")."""
    n = torch.arange(float(n_mels))
    k = torch.arange(float(n_mfcc)).unsqueeze(1)
    dct = torch.cos(math.pi / float(n_mels) * (n + 0.5) * k)
    dct[0] *= 1.0 / math.sqrt(2.0)
    dct *= math.sqrt(2.0 / float(n_mels))
    return dct.t()


class MelSpectrogram(torch.nn.Module):
    """torchaudio.transforms.MelSpectrogram (then MelScale's matmul), with a log (amplitude_to_DB)."""

    fb: torch.Tensor

    def __init__(self, sample_rate: int = 16000, n_fft: int = 400, hop_length: int = 160, n_mels: int = 40,
                 log: bool = True) -> None:
        super().__init__()
        self.spectrogram = Spectrogram(n_fft, hop_length, power=2.0)
        self.register_buffer("fb", melscale_fbanks(n_fft // 2 + 1, 0.0, sample_rate / 2, n_mels, sample_rate))
        self.log = log

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        specgram = self.spectrogram(waveform)
        mel = torch.matmul(specgram.transpose(-1, -2), self.fb).transpose(-1, -2)
        return amplitude_to_db(mel, 10.0, 1e-10, 0.0) if self.log else mel


class MFCC(torch.nn.Module):
    """torchaudio.transforms.MFCC (log_mels=False, top_db=80)."""

    dct_mat: torch.Tensor

    def __init__(self, n_mfcc: int = 13, n_mels: int = 40) -> None:
        super().__init__()
        self.mel = MelSpectrogram(n_mels=n_mels, log=False)
        self.register_buffer("dct_mat", create_dct(n_mfcc, n_mels))

    def forward(self, waveform: torch.Tensor) -> torch.Tensor:
        mel = amplitude_to_db(self.mel(waveform), 10.0, 1e-10, 0.0, top_db=80.0)
        return torch.matmul(mel.transpose(-1, -2), self.dct_mat).transpose(-1, -2)


class WhisperLogMel(torch.nn.Module):
    """whisper.audio.log_mel_spectrogram (its mel filters replaced by melscale_fbanks')."""

    window: torch.Tensor
    filters: torch.Tensor

    def __init__(self, n_fft: int = 400, hop_length: int = 160, n_mels: int = 80) -> None:
        super().__init__()
        self.n_fft, self.hop_length = n_fft, hop_length
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", melscale_fbanks(n_fft // 2 + 1, 0.0, 8000.0, n_mels, 16000).T.contiguous())

    def forward(self, audio: torch.Tensor) -> torch.Tensor:
        stft = torch.stft(audio, self.n_fft, self.hop_length, window=self.window, return_complex=True)
        magnitudes = stft[..., :-1].abs() ** 2
        mel_spec = self.filters @ magnitudes
        log_spec = torch.clamp(mel_spec, min=1e-10).log10()
        log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
        return (log_spec + 4.0) / 4.0


class Fn(torch.nn.Module):
    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> Any:
        return self.fn(x)


_W = torch.hann_window(64)


def _stft(x: torch.Tensor) -> torch.Tensor:
    return torch.stft(x, 64, 16, window=_W, return_complex=True)


def _audio(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def _convert(model: torch.nn.Module, x: torch.Tensor, **options: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch2trt_lite.convert(model.eval(), [x], backend="sim", progress=False, **options)


def _rel(tol: float) -> Callable[[torch.Tensor], dict[str, Any]]:
    """A tolerance relative to the largest |value| of torch's result."""
    return lambda ref: {"rtol": 0.0, "atol": tol * float(ref.abs().max())}


# name -> (model, waveform shape, tolerance from torch's result)
Tolerance = Callable[[torch.Tensor], dict[str, Any]]
MODELS: dict[str, tuple[Callable[[], torch.nn.Module], tuple[int, ...], Tolerance]] = {
    "spectrogram power 2": (lambda: Spectrogram(power=2.0), (2, 4000), _rel(4e-6)),
    "spectrogram power 1, normalized window (in-place /=)": (lambda: Spectrogram(power=1.0, normalized=True),
                                                              (2, 4000), _rel(4e-6)),
    "spectrogram power None -> view_as_real": (lambda: Fn(lambda x: torch.view_as_real(Spectrogram(power=None)(x))),
                                               (2, 4000), _rel(4e-6)),
    "spectrogram frame_length norm, 3-D batch": (lambda: Spectrogram(power=2.0, normalized="frame_length"),
                                                 (2, 2, 1600), _rel(4e-6)),
    "mel spectrogram + dB": (MelSpectrogram, (2, 4000), lambda _: {"rtol": 0.0, "atol": 1e-4}),
    "mfcc": (MFCC, (2, 4000), lambda _: {"rtol": 0.0, "atol": 2e-4}),
    "whisper log-mel": (WhisperLogMel, (2, 4000), lambda _: {"rtol": 0.0, "atol": 1e-4}),
    "real, imag, conj product": (
        lambda: Fn(lambda x: torch.stack([(_stft(x) * _stft(0.5 * x.flip(-1)).conj()).real, _stft(x).imag], -1)),
        (2, 500), _rel(4e-6)),
    "complex division, add, sub, neg, indexing, permute, sum": (
        lambda: Fn(lambda x: torch.view_as_real(
            (-(_stft(x) - 1.5) / (_stft(x.flip(-1)).abs() + 1.0 + _stft(x) * 0.0) + 2 * _stft(x))[:, 1:9:2]
            .permute(0, 2, 1).sum(1))),
        (2, 500), _rel(1e-5)),
    "cat and stack of complex and real tensors": (
        lambda: Fn(lambda x: torch.view_as_real(torch.stack([
            torch.cat([_stft(x), 2 * _stft(x.flip(-1)), _stft(x).abs()], dim=-1),  # the real one joins as (r, 0)
            torch.concat([_stft(x)[..., -3:], _stft(x)[..., :-3], _stft(x), 0.5 * _stft(x)], 2).conj(),
        ], dim=1))),
        (2, 500), _rel(4e-6)),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_speech_front_end_matches_eager(name: str) -> None:
    make, shape, tol = MODELS[name]
    model = make().eval()
    x = _audio(*shape)
    engine = _convert(model, x)
    for seed in (1, 2):
        xx = _audio(*shape, seed=seed)
        want = model(xx)
        torch.testing.assert_close(engine(xx), want, **tol(want))
    assert torch2trt_lite.check(model, [x]).ok


def _wrapped(d: torch.Tensor) -> torch.Tensor:
    return torch.remainder(d + math.pi, 2 * math.pi) - math.pi


def test_angle_matches_eager_modulo_two_pi() -> None:
    model = Fn(lambda x: torch.angle(_stft(x))).eval()
    x = _audio(2, 500)
    engine = _convert(model, x)
    got, want = engine(x), model(x)
    assert got.abs().max() <= math.pi + 1e-6
    torch.testing.assert_close(_wrapped(got - want), torch.zeros_like(want), rtol=0.0, atol=1e-4)


@pytest.mark.parametrize("name", ["spectrogram power 2", "mel spectrogram + dB", "mfcc", "whisper log-mel"])
def test_dynamic_batch(name: str) -> None:
    make, shape, tol = MODELS[name]
    model = make().eval()
    spec = torch2trt_lite.Input((1, 4000), (2, 4000), (4, 4000))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = torch2trt_lite.convert(model, [spec], backend="sim", progress=False)
    for b in (1, 3, 4):
        xx = _audio(b, 4000, seed=b)
        want = model(xx)
        torch.testing.assert_close(engine(xx), want, **tol(want))


def test_dynamic_batch_and_length() -> None:
    """Frames computed in the network from a dynamic length (n_fft 64: the sim's probe sizes see the
    frame count change with the length; n_fft 400 needs a range the sim's probes cover)."""
    model = Fn(lambda x: torch.view_as_real(_stft(x)[:, :-1] * _stft(x).conj()[:, 1:]) + _stft(x).abs()[:, 1:, :, None]
               + torch.view_as_real(torch.cat([_stft(x)[:, 1:, 1:], 2 * _stft(x)[:, :-1, :1]], -1)))  # frames joined
    spec = torch2trt_lite.Input((1, 300), (2, 500), (4, 800))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = torch2trt_lite.convert(model.eval(), [spec], backend="sim", progress=False)
    for b, n in ((1, 300), (3, 517), (4, 800)):
        xx = _audio(b, n, seed=b)
        want = model(xx)
        torch.testing.assert_close(engine(xx), want, **_rel(5e-6)(want))


class MetaRotary(torch.nn.Module):
    """Meta's LLaMA rotary embedding: pairs viewed as complex, times constant unit phasors."""

    freqs_cis: torch.Tensor

    def __init__(self, seq: int = 8, dim: int = 16) -> None:
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
        angles = torch.outer(torch.arange(seq).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, xq: torch.Tensor) -> torch.Tensor:
        xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
        freqs_cis = self.freqs_cis.view(1, xq_.shape[1], 1, xq_.shape[-1])
        return torch.view_as_real(xq_ * freqs_cis).flatten(3).type_as(xq)


def test_rotary_embedding_through_view_as_complex() -> None:
    model = MetaRotary().eval()
    engine = _convert(model, _audio(2, 8, 4, 16), max_batch_size=4)
    for b in (1, 3):
        xx = _audio(b, 8, 4, 16, seed=b)
        torch.testing.assert_close(engine(xx), model(xx), rtol=1e-6, atol=1e-6)


_W48 = torch.hann_window(48)
ISTFT: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "round trip": lambda x: torch.istft(_stft(x), 64, 16, window=_W),
    "scaled, longer length (zeros past the last frame), rectangular window": lambda x: torch.istft(
        torch.stft(x, 64, 16, window=torch.ones(64), return_complex=True) * 0.5, 64, 16, window=torch.ones(64),
        length=530),
    "shorter length": lambda x: torch.istft(_stft(x), 64, 16, window=_W, length=300),
    "no center, normalized, rectangular window": lambda x: torch.istft(
        torch.stft(x, 64, 16, window=torch.ones(64), center=False, normalized=True, return_complex=True), 64, 16,
        window=torch.ones(64), center=False, normalized=True),
    "odd n_fft, win_length, conj": lambda x: torch.istft(
        torch.stft(x, 63, 12, win_length=48, window=_W48, return_complex=True).conj() * 1j, 63, 12, win_length=48,
        window=_W48),
    "unbatched": lambda x: torch.istft(_stft(x[0]), 64, 16, window=_W),
}


@pytest.mark.parametrize("name", sorted(ISTFT))
def test_istft_matches_eager(name: str) -> None:
    """Measured within 1.7e-6 absolute (|x| up to ~4; fp32), stated 1e-5; static and dynamic batch. (Where
    the overlap-added squared window is small, at the last samples of a hann-windowed signal past the
    centre's trim, both torch and the engine divide rounding by it: not tested there.)"""
    model = Fn(ISTFT[name]).eval()
    for options, batch in (({}, 2), ({"max_batch_size": 4}, 3)):
        engine = _convert(model, _audio(2, 500), **options)
        xx = _audio(batch, 500, seed=batch)
        torch.testing.assert_close(engine(xx), model(xx), rtol=0.0, atol=1e-5)


def test_istft_of_a_dynamic_frame_count_is_refused() -> None:
    model = Fn(ISTFT["round trip"]).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(Torch2TRTError, match="istft of a dynamic frame count"):
            torch2trt_lite.convert(model, [torch2trt_lite.Input((1, 300), (2, 500), (4, 800))], backend="sim",
                                   progress=False)


# ----------------------------------------------------------------------------------- refusals
REFUSED: dict[str, tuple[Callable[[torch.Tensor], Any], str]] = {
    "exp of a complex value": (lambda x: torch.exp(_stft(x)).abs(), "torch.exp has a complex argument"),
    "sigmoid of a complex value": (lambda x: _stft(x).sigmoid().abs(), "torch.Tensor.sigmoid has a complex argument"),
    "complex power": (lambda x: _stft(x).pow(2).abs(), "torch.Tensor.pow has a complex argument"),
    "a cast to complex": (lambda x: (x.to(torch.complex64) * 2).abs(), "torch.Tensor.to makes a complex tensor"),
    "a complex output": (lambda x: _stft(x) * 2, "are complex, and TensorRT engine outputs cannot be"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_other_ops_on_complex_values_are_refused_in_convert_and_check(name: str) -> None:
    fn, words = REFUSED[name]
    model = Fn(fn).eval()
    x = _audio(2, 300)
    with pytest.raises(UnsupportedOperatorError) as info:
        _convert(model, x)
    said = str(info.value)
    assert words in said
    report = torch2trt_lite.check(model, [x])
    assert not report.ok
    first = report.unsupported[0]
    assert words in first.reason and first.reason in said
    if not first.location.startswith("<"):
        assert __file__ in said and first.location in said  # the user's line


def test_stft_of_a_complex_signal_is_refused() -> None:
    model = Fn(lambda x: torch.stft(_stft(x)[0, 0], 8, return_complex=True).abs()).eval()
    with pytest.raises(Torch2TRTError, match="real floating-point"):
        _convert(model, _audio(2, 300))


@pytest.mark.rtx
def test_mel_front_end_builds_on_tensorrt_rtx() -> None:
    """The whisper log-mel network (stft with return_complex=True, |X|^2, mel, log), built by the real
    TensorRT-RTX builder (no GPU here: built, not run), with a dynamic batch."""
    model = WhisperLogMel(n_mels=40).eval()
    spec = torch2trt_lite.Input((1, 1600), (2, 1600), (4, 1600))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        engine = torch2trt_lite.convert(model, [spec], backend="tensorrt-rtx", verify=False, progress=False)
    assert len(engine.plan) > 0
