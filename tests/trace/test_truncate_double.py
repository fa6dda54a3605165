"""float64 in a model: ``convert(..., truncate_double=...)`` and ``check()`` (torch2trt_lite/trace/double.py).

The reference is eager PyTorch computing in float64; the engine computes the same ops in float32. The
tolerances are float32's rounding of the rotary phases: ``cos(p * w)`` at position ``p`` < 64 is off by
about ``p * 2**-24`` (< 4e-6) plus float32 rounding of the products after it.
"""

from __future__ import annotations

import logging
import pathlib

import pytest
import torch
from torch import nn

import torch2trt_lite
from torch2trt_lite.build import cache as _cache
from torch2trt_lite.build.options import ConvertOptions
from torch2trt_lite.cli import main as cli_main
from torch2trt_lite.errors import ConversionError, Torch2TRTError, UnsupportedOperatorError

TOL = {"rtol": 1e-4, "atol": 1e-4}  # float32 vs float64 rotary phases (see the module docstring)


def get_1d_rotary_pos_embed(dim: int, pos: torch.Tensor, theta: float = 10000.0,
                            freqs_dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """A copy of diffusers' ``embeddings.get_1d_rotary_pos_embed`` (use_real=True,
    repeat_interleave_real=True; diffusers is not installed here): float64 frequencies by default."""
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=freqs_dtype, device=pos.device)[: (dim // 2)] / dim))
    freqs = torch.outer(pos, freqs)  # [S, D/2], float64
    freqs_cos = freqs.cos().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    freqs_sin = freqs.sin().repeat_interleave(2, dim=1, output_size=freqs.shape[1] * 2).float()
    return freqs_cos, freqs_sin


class FluxRope(nn.Module):
    """diffusers' ``FluxPosEmbed`` (float64 frequencies, as off MPS/NPU) applied to a query, as its
    attention processor does (``apply_rotary_emb`` with use_real_unbind_dim=-1)."""

    def __init__(self, axes_dim: tuple[int, ...] = (4, 6, 6), theta: int = 10000) -> None:
        super().__init__()
        self.axes_dim, self.theta = axes_dim, theta

    def forward(self, ids: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        pos = ids.float()
        cos_out, sin_out = [], []
        for i in range(ids.shape[-1]):
            cos, sin = get_1d_rotary_pos_embed(self.axes_dim[i], pos[:, i], theta=self.theta)
            cos_out.append(cos)
            sin_out.append(sin)
        cos, sin = torch.cat(cos_out, dim=-1), torch.cat(sin_out, dim=-1)
        x_real, x_imag = q.reshape(*q.shape[:-1], -1, 2).unbind(-1)
        x_rotated = torch.stack([-x_imag, x_real], dim=-1).flatten(3)
        return (q.float() * cos + x_rotated.float() * sin).to(q.dtype)


def _ids(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    return torch.randint(0, 64, (n, 3), generator=g).float()


def test_flux_rope_float64_converts_and_matches_eager(caplog: pytest.LogCaptureFixture) -> None:
    m = FluxRope().eval()
    q = torch.randn(1, 2, 10, 16)
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        trt = torch2trt_lite.convert(m, [_ids(10), q], backend="sim")
    warned = [r.getMessage() for r in caplog.records if "float64" in r.getMessage()]
    assert len(warned) == 1 and "torch.outer" in warned[0] and "torch.Tensor.cos" in warned[0]
    torch.testing.assert_close(trt(_ids(10), q), m(_ids(10), q), **TOL)
    x, ids = torch.randn(1, 2, 10, 16), _ids(11)[:10] * 0.5  # other positions: nothing traced is frozen
    torch.testing.assert_close(trt(ids, x), m(ids, x), **TOL)


def test_flux_rope_dynamic_sequence() -> None:
    """The token count a dynamic range: ``torch.arange`` and ``outer`` in float64 of a symbolic length."""
    m = FluxRope().eval()
    ids = torch2trt_lite.Input(min_shape=(2, 3), opt_shape=(10, 3), max_shape=(32, 3), low=0, high=64)
    q = torch2trt_lite.Input(min_shape=(1, 2, 2, 16), opt_shape=(1, 2, 10, 16), max_shape=(1, 2, 32, 16))
    trt = torch2trt_lite.convert(m, [ids, q], backend="sim", truncate_double=True)
    for n in (2, 17, 32):
        x = torch.randn(1, 2, n, 16)
        torch.testing.assert_close(trt(_ids(n), x), m(_ids(n), x), **TOL)


class Freqs(nn.Module):
    """Returns the float64 phases themselves."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.outer(x.double(), torch.arange(1, 5, dtype=torch.float64))


def test_float64_output_refused_by_default_then_float32_with_truncate_double() -> None:
    m, x = Freqs().eval(), torch.randn(6)
    with pytest.raises(ConversionError, match=r"output_0 .*float64.*truncate_double=True"):
        torch2trt_lite.convert(m, [x], backend="sim")
    trt = torch2trt_lite.convert(m, [x], backend="sim", truncate_double=True)
    y = trt(x)
    assert y.dtype == torch.float32  # the engine's output: TensorRT computes and returns float32
    torch.testing.assert_close(y, m(x).float(), rtol=1e-6, atol=1e-6)


def test_truncate_double_false_refuses_the_first_float64_op() -> None:
    with pytest.raises(UnsupportedOperatorError, match=r"torch.outer .*truncate_double=False"):
        torch2trt_lite.convert(FluxRope().eval(), [_ids(4), torch.randn(1, 2, 4, 16)], backend="sim",
                               truncate_double=False)
    with pytest.raises(Torch2TRTError, match="truncate_double must be"):
        torch2trt_lite.convert(Freqs().eval(), [torch.randn(3)], backend="sim", truncate_double="yes")


def test_check_lists_truncated_ops_and_float64_outputs() -> None:
    report = torch2trt_lite.check(FluxRope().eval(), [_ids(5), torch.randn(1, 2, 5, 16)])
    assert report.ok and "torch.outer" in report.truncated and "torch.Tensor.float" not in report.truncated
    assert "float64 computed in float32" in str(report)
    bad = torch2trt_lite.check(Freqs().eval(), [torch.randn(3)])
    assert not bad.ok and "truncate_double=True" in bad.unsupported[0].reason
    assert torch2trt_lite.check(Freqs().eval(), [torch.randn(3)], truncate_double=True).ok
    strict = torch2trt_lite.check(Freqs().eval(), [torch.randn(3)], truncate_double=False)
    assert [u.op for u in strict.unsupported][:1] == ["torch.Tensor.double"]


def test_truncate_double_is_in_the_cache_key() -> None:
    given, bad = _cache.option_items(ConvertOptions(truncate_double=True))
    assert bad is None and given == {"option truncate_double": True}
    assert _cache.option_items(ConvertOptions())[0] == {}


@pytest.mark.rtx
def test_flux_rope_builds_on_tensorrt_rtx(caplog: pytest.LogCaptureFixture) -> None:
    """TensorRT-RTX's builder accepts the truncated network (float64 casts became float32 ones); its
    dynamic verify run on the sim (a second conversion) checks the output shapes against eager float64,
    and the conversion warns once."""
    ids = torch2trt_lite.Input(min_shape=(2, 3), opt_shape=(10, 3), max_shape=(32, 3), low=0, high=64)
    q = torch2trt_lite.Input(min_shape=(1, 2, 2, 16), opt_shape=(1, 2, 10, 16), max_shape=(1, 2, 32, 16))
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        trt = torch2trt_lite.convert(FluxRope().eval(), [ids, q], backend="tensorrt-rtx", progress=False)
    assert len(trt.plan) > 0 and [o["dtype"] for o in trt.metadata["outputs"]] == ["float32"]
    assert sum("float64" in r.getMessage() for r in caplog.records) == 1


def test_cli_truncate_double(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``torch2trt-lite convert --truncate-double`` passes the option; without it the float64 output is
    refused with the advice."""
    src = tmp_path / "freqs.py"
    src.write_text("import torch\n\n\nclass Freqs(torch.nn.Module):\n    def forward(self, x):\n"
                   "        return torch.outer(x.double(), torch.arange(1, 5, dtype=torch.float64))\n\n\n"
                   "def factory():\n    return Freqs()\n")
    argv = ["convert", f"{src}:factory", "--shape", "6", "--backend", "sim", "--json"]
    assert cli_main([*argv, "--truncate-double"]) == 0
    assert "max_rel_err" in capsys.readouterr().out
    assert cli_main(argv) != 0
    assert "truncate_double=True" in capsys.readouterr().err
