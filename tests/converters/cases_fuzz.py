"""Regressions found by differential fuzzing against eager PyTorch (2026-11-30): each case failed before
its fix (wrong values, shapes or overflows), with inputs that reach the fixed path."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.converters.harness import Case, randn

_DEAD_ROW = torch.tensor([[True, True, False], [False, False, False], [True, False, True]])


def _big_ints() -> list[torch.Tensor]:
    return [torch.tensor([[9, -7, 100001, 3], [2, 11, -46341, 5]])]


def _with_nans() -> list[torch.Tensor]:
    x = randn(3, 5)
    x[0, 1] = x[0, 3] = x[2, 4] = float("nan")
    return [x]


def _shift_pairs() -> list[torch.Tensor]:
    a = torch.tensor([[5, -3, 5, -3, 1, -1, 7, -7, 12]], dtype=torch.int32)
    return [a, torch.tensor([[-1, -1, 40, 40, 31, 31, 2, 2, 0]], dtype=torch.int32)]


def _near_integer_quotients() -> list[torch.Tensor]:
    a = torch.tensor([[7.0, 1.0, -7.0, 100.3, 5.5, -2.25, 1048577.0], [0.3, -0.7, 2.0, 9.9, -1e-3, 4.0, 33.0]])
    b = torch.tensor([[0.1, 0.1, 0.1, 0.9, -2.0, 0.75, 3.0], [0.1, 0.2, -0.3, 3.3, 7.0, -1.5, 0.7]])
    return [a, b]


CASES = [
    Case("fuzz_sign_of_bool", lambda x: (torch.sign(x > 0), torch.sgn(x < 0)), lambda: [randn(3, 4)]),
    Case("pdist", lambda x: F.pdist(x) + torch.pdist(x, 1), lambda: [randn(5, 3)], targets=["torch.pdist"]),
    # TensorRT's activations take floats: relu(int) stays int, sigmoid/tanh(int) are float like torch
    Case("fuzz_activations_of_ints", lambda x: (torch.relu(x), torch.sigmoid(x), x.tanh()),
         lambda: [torch.tensor([[-3, 0, 2], [5, -1, 7]], dtype=torch.int32)]),
    # float //, % and fmod where the rounded quotient is one off (7 % 0.1 is 0.0999..), and fp16 quotients
    # that overflow half (70 / 0.001): exact like torch's fmod-based kernels
    Case("fuzz_float_divmod_near_integer", lambda a, b: (a // b, a % b, torch.fmod(a, b)), _near_integer_quotients),
    Case("fuzz_half_divmod_overflow", lambda a, b: ((a * 10).half() % (b / 100).half(), torch.fmod((a * 10).half(),
         (b / 100).half())), _near_integer_quotients, rtol=1e-3, atol=1e-3),
    # shift amounts < 0 or >= 32: 0 for <<, the sign for >>; << 31 wraps (torch's rules)
    Case("fuzz_shifts_out_of_range", lambda a, b: (a << b, a >> b, a << 31, a >> 40), _shift_pairs),
    # NaN propagates through max/min(dim) and argmax/argmin: value NaN, index of the first NaN
    Case("fuzz_min_max_nan", lambda x: (*torch.min(x, 1), *torch.max(x, 0), x.argmin(1), x.argmax()), _with_nans),
    Case("channel_shuffle_fn", lambda x: F.channel_shuffle(x, 3), lambda: [randn(2, 6, 3, 4)],
         targets=["torch.channel_shuffle"]),
    Case("channel_shuffle_module", lambda: nn.ChannelShuffle(2), lambda: [randn(1, 4, 3)], is_module=True,
         targets=["torch.nn.modules.channelshuffle.ChannelShuffle"]),
    Case("channel_shuffle_torch", lambda x: torch.channel_shuffle(x, 2) + torch.native_channel_shuffle(x, 2),
         lambda: [randn(1, 4, 3)], targets=["torch.channel_shuffle", "torch.native_channel_shuffle"]),
    Case("fuzz_group_norm_rank2", lambda x: F.group_norm(x, 3, torch.linspace(0.5, 1.5, 6), torch.linspace(-1, 1, 6)),
         lambda: [randn(3, 6)]),
    Case("fuzz_sdpa_half_large_scores", lambda q: F.scaled_dot_product_attention(
        (q * 200).half(), (q * 200).half(), (q * 200).half()).float(), lambda: [randn(1, 3, 4)], rtol=1e-2, atol=1e-1),
    Case("fuzz_softmax_float64_refused", lambda x: F.softmax(x, 0, dtype=torch.float64), lambda: [randn(3)],
         xfail="dtype=torch.float64 is refused: TensorRT has no float64"),
    # a window larger than the input: rounding up still gives one output (torch's ceil_mode)
    Case("fuzz_max_pool_ceil_tiny", lambda x: F.max_pool2d(x, 2, ceil_mode=True), lambda: [randn(1, 2, 1, 3)]),
    Case("fuzz_avg_pool_ceil_tiny", lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), lambda: [randn(1, 2, 1, 3)]),
    # integer products past 2^24: exact, not through float32
    Case("fuzz_int_pow", lambda x: x ** 2 + x ** 3, _big_ints),
    Case("fuzz_int_cumprod", lambda x: torch.cumprod(x, 1), _big_ints),
    Case("fuzz_cumprod_bf16", lambda x: torch.cumprod((x.abs() + 2).bfloat16(), 1).float(), lambda: [randn(2, 6)],
         rtol=1e-2, atol=1e-2),
    Case("fuzz_bilinear_unbatched", lambda: nn.Bilinear(2, 3, 4), lambda: [randn(2), randn(3, seed=1)],
         is_module=True),
    Case("fuzz_cosine_similarity_broadcast_dim", lambda a, b: F.cosine_similarity(a, b, dim=0),
         lambda: [randn(3, 2), randn(1, 2, seed=1)]),
    Case("fuzz_sdpa_fully_masked_row", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=_DEAD_ROW),
         lambda: [randn(1, 3, 4), randn(1, 3, 4, seed=1), randn(1, 3, 4, seed=2)]),
    Case("fuzz_rms_norm_half_default_eps", lambda x: F.rms_norm(x.half() * 0.02, (4,)).float(), lambda: [randn(3, 4)],
         rtol=2e-3, atol=2e-3),
    Case("fuzz_normalize_half_large", lambda x: F.normalize((x * 300).half(), dim=1).float(), lambda: [randn(3, 4)],
         rtol=2e-3, atol=2e-3),
    Case("fuzz_pairwise_distance_half_large", lambda a, b: F.pairwise_distance((a * 300).half(), (b * 300).half()),
         lambda: [randn(3, 4), randn(3, 4, seed=1)], rtol=1e-2, atol=1e-1),
]
