"""Small models of the long tail (issue 23) for the zoo: a log-mel / MFCC speech front end (torch.stft),
an EmbeddingBag recommender (bags with offsets from the batch, torch.isin), a GRUCell / LSTMCell
loop (Python loops over cells), and a patching time-series transformer (Tensor.unfold, cummax).

torchaudio is not a test dependency: the mel front end is built from torch ops as torchaudio's
MelSpectrogram / MFCC compute it (HTK mel scale, triangular filters, orthonormal DCT-II), with
``torch.stft(..., return_complex=False)``, the layout TensorRT can hold (it has no complex type).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _mel(f: torch.Tensor) -> torch.Tensor:
    return 2595.0 * torch.log10(1.0 + f / 700.0)


def mel_filters(n_freqs: int, n_mels: int, sample_rate: int) -> torch.Tensor:
    """[n_freqs, n_mels] triangular filters on the HTK mel scale (torchaudio's melscale_fbanks, norm=None)."""
    all_freqs = torch.linspace(0, sample_rate // 2, n_freqs, dtype=torch.float64)
    m_pts = torch.linspace(float(_mel(torch.tensor(0.0))), float(_mel(torch.tensor(sample_rate / 2.0))), n_mels + 2,
                           dtype=torch.float64)
    f_pts = 700.0 * (10 ** (m_pts / 2595.0) - 1.0)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.clamp(torch.min(down, up), min=0.0).float()


def dct_matrix(n_mfcc: int, n_mels: int) -> torch.Tensor:
    """[n_mels, n_mfcc] orthonormal DCT-II (torchaudio's create_dct, norm='ortho')."""
    n = torch.arange(n_mels, dtype=torch.float64)
    k = torch.arange(n_mfcc, dtype=torch.float64)[:, None]
    dct = torch.cos(math.pi / n_mels * (n + 0.5) * k)
    dct[0] *= 1.0 / math.sqrt(2.0)
    return (dct * math.sqrt(2.0 / n_mels)).t().float()


class MelFrontEnd(nn.Module):
    """Waveform [N, L] -> power spectrogram (Hann window, center reflect padding) -> mel -> log ->
    MFCC, then a small conv classifier: (log-mel [N, mels, frames], mfcc [N, n_mfcc, frames], logits)."""

    window: torch.Tensor
    fb: torch.Tensor
    dct: torch.Tensor

    def __init__(self, n_fft: int = 128, hop: int = 32, n_mels: int = 20, n_mfcc: int = 13, rate: int = 8000) -> None:
        super().__init__()
        self.n_fft, self.hop = n_fft, hop
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("fb", mel_filters(n_fft // 2 + 1, n_mels, rate))
        self.register_buffer("dct", dct_matrix(n_mfcc, n_mels))
        self.conv = nn.Conv1d(n_mels, 16, 3, padding=1)
        self.head = nn.Linear(16, 5)

    def forward(self, wav: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        spec = torch.stft(wav, self.n_fft, self.hop, window=self.window, return_complex=False)
        power = spec.pow(2).sum(-1)  # |X|^2: [N, freq, frames]
        mel = torch.matmul(power.transpose(-1, -2), self.fb).transpose(-1, -2)
        log_mel = torch.log(mel.clamp(min=1e-5))
        mfcc = torch.matmul(log_mel.transpose(-1, -2), self.dct).transpose(-1, -2)
        logits = self.head(F.gelu(self.conv(log_mel)).mean(-1))
        return log_mel, mfcc, logits


def waveform() -> list[torch.Tensor]:
    return [torch.randn(2, 1000, generator=torch.Generator().manual_seed(11))]


class Recommender(nn.Module):
    """DLRM-style: dense features through an MLP; three sparse features as EmbeddingBags (2D bags
    with per-sample weights, 1D ids with offsets from the batch in mean mode, max bags with padding);
    ids on a blocklist dropped with torch.isin; pairwise dot-product interactions; a top MLP."""

    blocked: torch.Tensor

    def __init__(self, vocab: int = 50, dim: int = 8) -> None:
        super().__init__()
        self.bottom = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, dim))
        self.user = nn.EmbeddingBag(vocab, dim, mode="sum")
        self.items = nn.EmbeddingBag(vocab, dim, mode="mean")
        self.tags = nn.EmbeddingBag(vocab, dim, mode="max", padding_idx=0)
        self.register_buffer("blocked", torch.tensor([3, 7, 11]))
        self.top = nn.Sequential(nn.Linear(dim + 6, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, dense: torch.Tensor, user_ids: torch.Tensor, user_w: torch.Tensor, item_ids: torch.Tensor,
                item_offsets: torch.Tensor, tag_ids: torch.Tensor) -> torch.Tensor:
        x = self.bottom(dense)
        keep = (~torch.isin(user_ids, self.blocked)).to(user_w.dtype)
        feats = [x, self.user(user_ids, per_sample_weights=user_w * keep), self.items(item_ids, item_offsets),
                 self.tags(tag_ids)]
        z = torch.stack(feats, 1)  # [N, 4, dim]
        inter = torch.bmm(z, z.transpose(1, 2))
        i, j = torch.triu_indices(4, 4, offset=1)
        return torch.sigmoid(self.top(torch.cat([x, inter[:, i, j]], 1)))


def recommender_inputs(seed: int = 12) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(3, 6, generator=g), torch.randint(0, 50, (3, 5), generator=g), torch.rand(3, 5, generator=g),
            torch.randint(0, 50, (10,), generator=g), torch.tensor([0, 4, 4]),
            torch.randint(0, 4, (3, 4), generator=g)]


def recommender_more() -> list[torch.Tensor]:
    xs = recommender_inputs(seed=13)
    xs[1][0, :2] = torch.tensor([3, 7])  # blocked ids
    xs[4] = torch.tensor([0, 1, 6])  # other bag bounds
    return xs


class CellLoop(nn.Module):
    """An encoder GRUCell over the steps of x [N, T, F] in a Python loop, then an LSTMCell decoder
    that feeds its own prediction back for 3 steps: (encoder states [N, T, H], predictions [N, 3, F])."""

    def __init__(self, features: int = 6, hidden: int = 16) -> None:
        super().__init__()
        self.enc = nn.GRUCell(features, hidden)
        self.dec = nn.LSTMCell(features, hidden)
        self.out = nn.Linear(hidden, features)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.zeros(x.shape[0], self.enc.hidden_size)
        states = []
        for t in range(x.shape[1]):
            h = self.enc(x[:, t], h)
            states.append(h)
        c = torch.zeros_like(h)
        y = x[:, -1]
        preds = []
        for _ in range(3):
            h, c = self.dec(y, (h, c))
            y = self.out(h)
            preds.append(y)
        return torch.stack(states, 1), torch.stack(preds, 1)


def sequence() -> list[torch.Tensor]:
    return [torch.randn(2, 7, 6, generator=torch.Generator().manual_seed(14))]


class PatchTimeSeries(nn.Module):
    """PatchTST-style forecaster: instance normalization over time, patches of x [N, C, L] by
    Tensor.unfold, a linear patch embedding with learned positions, a transformer encoder over the
    patches of each channel, a flatten head, de-normalization; plus the running maximum (cummax) of
    each channel's forecast and where it was reached."""

    def __init__(self, length: int = 48, patch: int = 8, stride: int = 4, horizon: int = 12, d: int = 16) -> None:
        super().__init__()
        self.patch, self.stride = patch, stride
        n = (length - patch) // stride + 1
        self.embed = nn.Linear(patch, d)
        self.pos = nn.Parameter(torch.randn(n, d) * 0.1)
        self.encoder = nn.TransformerEncoderLayer(d, 2, 32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(n * d, horizon)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, c, _ = x.shape
        mean = x.mean(-1, keepdim=True)
        std = (x.var(-1, keepdim=True, unbiased=False) + 1e-5).sqrt()
        z = (x - mean) / std
        patches = z.unfold(-1, self.patch, self.stride)  # [N, C, patches, patch]
        h = self.embed(patches) + self.pos
        h = self.encoder(h.reshape(n * c, h.shape[2], h.shape[3]))
        y = self.head(h.reshape(n, c, -1)) * std + mean
        peak = torch.cummax(y, -1)
        return y, peak.values, peak.indices


def series() -> list[torch.Tensor]:
    t = torch.linspace(0, 6 * math.pi, 48)
    g = torch.Generator().manual_seed(15)
    return [(torch.sin(t)[None, None] * torch.rand(2, 3, 1, generator=g) * 3 + torch.randn(2, 3, 48, generator=g))]
