"""Explicit INT8 / FP8 quantization (torch2trt_lite.quantization, converters/quantization.py).

What is checked, against PyTorch's own results:

* A CNN trained on scikit-learn's 8x8 digits, quantized for int8 and fp8 with every calibration
  method on the training split: on the held-out split the engine (sim) agrees with the fp32
  model's top-1 on >= 99% of the images and loses <= 1 point of accuracy; its logits equal the
  QuantizedModel's eager (fake-quantized) logits.
* Q/DQ rounding on the sim against ``torch.fake_quantize_per_tensor_affine`` /
  ``..._per_channel_affine`` element by element: identical except where torch's ``x * (1/s)``
  and TensorRT's ``x / s`` round to different integers (values within a float32 ulp of a .5
  boundary), which the test computes from torch's own float32 arithmetic.
* A hand-written fake-quant model converts to QUANTIZE/DEQUANTIZE layers and matches eager;
  torchvision resnet18 quantized end to end matches its QuantizedModel.
* Calibration files (JSON, safetensors) round-trip exactly; files that do not fit are refused.
* What TensorRT cannot express (zero points, other integer ranges) is refused.
* The real TensorRT-RTX builder builds the digits CNN (int8, fp8) and resnet18 (int8).

Tolerances. Engine vs eager fake quantization: the networks hold the same float32 operations
(Q/DQ, convolutions, matmuls), so values agree to float32 reordering (rtol=atol=1e-5), except that
an activation within one float32 ulp of a rounding boundary can land one quantization step apart
(torch multiplies by the reciprocal of the scale, TensorRT divides; values on another scale's
grid, such as a DQ output quantized again, hit exact .5 ties). One such flip moves a logit by one
quantization step times a weight, propagated (measured <= 0.02 on logits of magnitude 1-20): so
outputs must match at rtol=1e-5, atol=0.05, which a wrong scale, rounding mode or axis exceeds by
far (they move every quantized value, not a few).
"""

from __future__ import annotations

import importlib.util
import json
import math
import time
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from torch2trt_lite import quantization as qz
from torch2trt_lite.errors import Torch2TRTError, UnsupportedOperatorError

METHODS = ("max", "percentile", "entropy", "mse")
DTYPES = ("int8", "fp8")
MEASURED: dict[str, Any] = {}  # what the tests measured (printed by test_zz_report with -s)


def _assert_fake_quant_close(actual: torch.Tensor, expected: torch.Tensor, atol: float) -> None:
    """See the module docstring: float32 reordering (rtol 1e-5) plus ``atol`` for rounding flips."""
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=atol)
    MEASURED.setdefault("max_abs_diff_engine_vs_eager", []).append(float((actual - expected).abs().max()))


# ------------------------------------------------------------------------------ digits CNN
class DigitsCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.fc = nn.Linear(16 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(torch.flatten(x, 1))


@pytest.fixture(scope="module")
def digits() -> dict[str, Any]:
    datasets = pytest.importorskip("sklearn.datasets", reason="the digits test needs scikit-learn (dev extra)")
    t0 = time.perf_counter()
    d = datasets.load_digits()
    x = torch.tensor(d.data, dtype=torch.float32).reshape(-1, 1, 8, 8) / 16.0
    y = torch.tensor(d.target)
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(len(x), generator=g)
    tr, te = perm[:1400], perm[1400:]
    torch.manual_seed(0)
    model = DigitsCNN()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(6):
        order = tr[torch.randperm(len(tr), generator=g)]
        for i in range(0, len(order), 100):
            idx = order[i:i + 100]
            loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        ref = model(x[te])
    acc = float((ref.argmax(1) == y[te]).float().mean())
    MEASURED["train_s"] = time.perf_counter() - t0
    MEASURED["fp32_accuracy"] = acc
    assert acc > 0.9, f"the digits CNN trained to only {acc:.3f} accuracy"
    return {"model": model, "x_train": x[tr], "x_test": x[te], "y_test": y[te], "ref": ref,
            "batches": [x[tr][i:i + 200] for i in range(0, len(tr), 200)], "quantized": {}}


def _quantized(digits: dict[str, Any], dtype: str, method: str) -> qz.QuantizedModel:
    key = (dtype, method)
    if key not in digits["quantized"]:
        t0 = time.perf_counter()
        digits["quantized"][key] = torch2trt_lite.quantize(
            digits["model"], digits["batches"], dtype=dtype, method=method, progress=False
        )
        MEASURED.setdefault("calibration_s", {})[f"{dtype}/{method}"] = round(time.perf_counter() - t0, 3)
    return digits["quantized"][key]  # type: ignore[no-any-return]


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_digits_quantized_accuracy(digits: dict[str, Any], dtype: str, method: str) -> None:
    qmodel = _quantized(digits, dtype, method)
    xt, yt, ref = digits["x_test"], digits["y_test"], digits["ref"]
    engine = torch2trt_lite.convert(qmodel, [xt], backend="sim")
    out = engine(xt)
    with torch.no_grad():
        eager = qmodel(xt)
    agree = float((out.argmax(1) == ref.argmax(1)).float().mean())
    acc = float((out.argmax(1) == yt).float().mean())
    MEASURED.setdefault("accuracy", {})[f"{dtype}/{method}"] = round(acc, 4)
    MEASURED.setdefault("agreement", {})[f"{dtype}/{method}"] = round(agree, 4)
    assert agree >= 0.99, f"{dtype}/{method}: top-1 agreement with fp32 {agree:.4f} < 0.99"
    assert acc >= MEASURED["fp32_accuracy"] - 0.01, f"{dtype}/{method}: accuracy {acc:.4f} dropped > 1 point"
    _assert_fake_quant_close(out, eager, atol=0.05)
    layer_types = [t for _, t, _ in torch2trt_lite.define_network(qmodel, [xt[:1]], backend="sim").layers()]
    # one Q/DQ pair on the input and one on the weights of each of the 3 quantized layers
    assert layer_types.count("QUANTIZE") == 6 and layer_types.count("DEQUANTIZE") == 6


def test_calibration_methods_differ(digits: dict[str, Any]) -> None:
    """The histogram methods clip: their amax never exceeds max, and entropy/mse/percentile pick a
    smaller one than max for a ReLU output (long-tailed) feeding conv2 or fc."""
    amax = {m: {n: s.input_amax for n, s in _quantized(digits, "int8", m).scales.items()} for m in METHODS}
    for m in METHODS[1:]:
        for n in amax["max"]:
            assert amax[m][n] <= amax["max"][n] + 1e-6
        assert any(amax[m][n] < amax["max"][n] for n in ("conv2", "fc")), f"{m} clipped no ReLU output: {amax}"
    with torch.no_grad():
        x = torch.cat(digits["batches"])
        assert amax["max"]["conv1"] == pytest.approx(float(x.abs().max()))


def test_histogram_methods_against_direct_computation() -> None:
    """percentile: the order statistic of |x| (within one bin); mse: the amax minimizing the mean squared
    error of torch.fake_quantize_per_tensor_affine on the data itself (within 2% of its error)."""
    g = torch.Generator().manual_seed(0)
    batches = [torch.randn(4096, generator=g) * (1 + i) for i in range(3)]  # growing ranges: bins double
    x = torch.cat(batches)
    obs = qz.Observer(2048, histogram=True)
    for b in batches:
        obs.observe(b)
    assert obs.hist is not None and float(obs.hist.sum()) == x.numel()
    assert obs.amax == float(x.abs().max())
    k = math.ceil(0.999 * x.numel())  # the 99.9th percentile: the k-th smallest |x|, in its bin's upper edge
    q = float(x.abs().sort().values[k - 1])
    assert q - 1e-6 <= qz.compute_amax(obs, "percentile", "int8", 99.9) <= q + obs.width * 1.01

    def err(a: float) -> float:
        return float(((torch.fake_quantize_per_tensor_affine(x, a / 127, 0, -128, 127) - x) ** 2).mean())

    best = min(err(float(a)) for a in torch.linspace(0.5, float(x.abs().max()), 400))
    assert err(qz.compute_amax(obs, "mse", "int8", 99.99)) <= best * 1.02
    ent = qz.compute_amax(obs, "entropy", "int8", 99.99)
    assert 0 < ent <= obs.amax


# ------------------------------------------------------------------------ Q/DQ rounding
def test_qdq_rounds_like_torch_fake_quantize() -> None:
    torch.manual_seed(0)
    x = torch.randn(8, 6, 5, 5) * 3
    x.view(-1)[:50] = torch.arange(-25, 25) * 0.5 * 0.05  # exact ties (k + 0.5) * scale: half to even
    scale = 0.05
    s_ch = torch.rand(6) * 0.05 + 0.01

    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            a = torch.fake_quantize_per_tensor_affine(x, scale, 0, -128, 127)
            b = torch.fake_quantize_per_channel_affine(x, s_ch, torch.zeros(6, dtype=torch.int32), 1, -128, 127)
            return a, b

    engine = torch2trt_lite.convert(M().eval(), [x], backend="sim")
    got = engine(x)
    want = M()(x)
    for g, w, s in ((got[0], want[0], torch.tensor(scale)), (got[1], want[1], s_ch.view(1, 6, 1, 1))):
        # where torch's x * (1 / s) and TensorRT's x / s round apart (float32 ulps at a .5 boundary)
        apart = torch.round(x * (1.0 / s)) != torch.round(x / s)
        torch.testing.assert_close(g[~apart], w[~apart], rtol=0, atol=0)
        assert bool(((g[apart] - w[apart]).abs() <= (s.expand_as(x)[apart] * 1.0001)).all())
        assert float(apart.float().mean()) < 1e-3


def test_fp8_qdq_matches_eager_exactly() -> None:
    torch.manual_seed(0)
    x = torch.randn(4, 6, 7) * 10
    s = torch.tensor([0.01])
    s_ch = torch.rand(6) * 0.02 + 0.005

    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return qz.fake_quantize_fp8(x, s), qz.fake_quantize_fp8(x, s_ch, 1)

    engine = torch2trt_lite.convert(M().eval(), [x], backend="sim")
    for g, w in zip(engine(x), M()(x), strict=True):
        # same float32 division and E4M3 rounding on both sides: exact
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    # E4M3 saturates at +-448 * scale
    x2 = x.clone()
    x2[0, 0, 0], x2[0, 0, 1] = 1e4, -1e4
    out = engine(x2)[0]
    assert float(out[0, 0, 0]) == pytest.approx(448 * 0.01) and float(out[0, 0, 1]) == pytest.approx(-448 * 0.01)


# ---------------------------------------------------------------- hand-written fake quant
class HandQuantNet(nn.Module):
    """Fake quantization the way a user (or a QAT export) writes it with torch's functions."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.fc = nn.Linear(8 * 6 * 6, 5)
        self.register_buffer("s_in", torch.tensor([0.03]))
        self.register_buffer("zp_in", torch.tensor([0], dtype=torch.int32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.fake_quantize_per_tensor_affine(x, self.s_in, self.zp_in, -128, 127)  # tensor form
        wsc = self.conv.weight.detach().abs().amax(dim=(1, 2, 3)) / 127
        w = torch.fake_quantize_per_channel_affine(self.conv.weight, wsc, torch.zeros(8, dtype=torch.int32), 0,
                                                   -128, 127)
        y = F.relu(F.conv2d(x, w, self.conv.bias, padding=1))
        # per-channel on an activation, narrow range [-127, 127]
        y = torch.fake_quantize_per_channel_affine(y, torch.linspace(0.01, 0.02, 8), torch.zeros(8, dtype=torch.int32),
                                                   1, -127, 127)
        y = torch.fake_quantize_per_tensor_affine(torch.flatten(y, 1), 0.0213, 0, -128, 127)  # float form
        return self.fc(y)


def test_hand_written_fake_quant_model() -> None:
    torch.manual_seed(0)
    model = HandQuantNet().eval()
    x = torch.randn(2, 3, 6, 6) * 2
    d = torch2trt_lite.define_network(model, [x], backend="sim")
    types = [t for _, t, _ in d.layers()]
    # the input, the weight (a parameter: converted all the same, constant -> Q -> DQ -> kernel) and two activations
    assert types.count("QUANTIZE") == 4 and types.count("DEQUANTIZE") == 4, types
    engine = torch2trt_lite.convert(model, [x], backend="sim")
    with torch.no_grad():
        want = model(x)
    _assert_fake_quant_close(engine(x), want, atol=0.05)


def test_narrow_range_is_exact() -> None:
    """[-127, 127]: a clamp before Q keeps -128 out (a value below -127.5 * s saturates at -127)."""
    x = torch.linspace(-10, 10, 401).reshape(1, -1)

    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.fake_quantize_per_tensor_affine(x, 0.05, 0, -127, 127)

    engine = torch2trt_lite.convert(M().eval(), [x], backend="sim")
    got = engine(x)
    want = M()(x)
    apart = torch.round(x * (1.0 / torch.tensor(0.05))) != torch.round(x / 0.05)
    torch.testing.assert_close(got[~apart], want[~apart], rtol=0, atol=0)
    assert float(got.min()) == pytest.approx(-127 * 0.05)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 3, -128, 127), "zero point"),
        (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 0, 0, 255), "quant range [0, 255]"),
        (lambda x: torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -8, 7), "quant range [-8, 7]"),
        (lambda x: torch.fake_quantize_per_channel_affine(
            x, torch.full((4,), 0.1), torch.tensor([0, 1, 0, 0], dtype=torch.int32), 1, -128, 127), "zero point"),
        (lambda x: torch.fake_quantize_per_tensor_affine(
            x, x.abs().amax().reshape(1) / 127, torch.zeros(1, dtype=torch.int32), -128, 127), "build-time constants"),
    ],
    ids=["zero_point", "uint8_range", "int4_range", "per_channel_zero_point", "traced_scale"],
)
def test_refusals(call: Any, needle: str) -> None:
    class M(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return call(x) + 1  # type: ignore[no-any-return]

    with pytest.raises(UnsupportedOperatorError, match="fake_quantize") as e:
        torch2trt_lite.convert(M().eval(), [torch.randn(2, 4, 3)], backend="sim")
    assert needle in str(e.value)


# -------------------------------------------------------------------- resnet18 end to end
def test_resnet18_int8_end_to_end() -> None:
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    from tests.weights import nontrivial

    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    nontrivial(model)
    g = torch.Generator().manual_seed(1)
    batches = [torch.randn(2, 3, 64, 64, generator=g) for _ in range(3)]
    x = torch.randn(1, 3, 64, 64, generator=g)
    qmodel = torch2trt_lite.quantize(model, batches, dtype="int8", progress=False)
    assert len(qmodel.scales) == 21  # 20 convolutions + fc
    engine = torch2trt_lite.convert(qmodel, [x], backend="sim")
    with torch.no_grad():
        want = qmodel(x)
    # logits ~3: a one-step flip of one activation moves them by < 0.05 (see the module docstring)
    _assert_fake_quant_close(engine(x), want, atol=0.05)


# ----------------------------------------------------------------------- calibration files
@pytest.mark.parametrize("ext", [".json", ".safetensors"])
def test_calibration_round_trip(digits: dict[str, Any], tmp_path: Any, ext: str) -> None:
    if ext == ".safetensors":
        pytest.importorskip("safetensors", reason="safetensors files need the safetensors package")
    qmodel = _quantized(digits, "fp8", "entropy")
    path = tmp_path / f"scales{ext}"
    qmodel.save_calibration(path)
    again = torch2trt_lite.quantize(digits["model"], None, calibration=path)
    assert again.dtype == "fp8" and again.method == "entropy" and again.layers == qmodel.layers
    for name, s in qmodel.scales.items():
        t = again.scales[name]
        assert t.input_scale == s.input_scale
        torch.testing.assert_close(t.weight_scale, s.weight_scale, rtol=0, atol=0)
    x = digits["x_test"][:16]
    with torch.no_grad():
        torch.testing.assert_close(again(x), qmodel(x), rtol=0, atol=0)
    assert qz.load_calibration(digits["model"], path).layers == qmodel.layers


def test_bad_calibration_files_are_refused(digits: dict[str, Any], tmp_path: Any) -> None:
    qmodel = _quantized(digits, "int8", "max")
    good = tmp_path / "good.json"
    qmodel.save_calibration(good)
    doc = json.loads(good.read_text())

    def write(name: str, d: Any) -> Any:
        p = tmp_path / name
        p.write_text(d if isinstance(d, str) else json.dumps(d))
        return p

    model = digits["model"]
    with pytest.raises(Torch2TRTError, match="not valid JSON"):
        torch2trt_lite.quantize(model, None, calibration=write("bad.json", "{not json"))
    missing = json.loads(json.dumps(doc))
    missing["layers"]["conv9"] = missing["layers"]["conv1"]
    with pytest.raises(Torch2TRTError, match="names layer 'conv9', which the model does not have"):
        torch2trt_lite.quantize(model, None, calibration=write("missing.json", missing))
    shape = json.loads(json.dumps(doc))
    shape["layers"]["conv2"]["weight_shape"] = [32, 8, 3, 3]
    with pytest.raises(Torch2TRTError, match=r"weight shape \[32, 8, 3, 3\] there but \[16, 8, 3, 3\]"):
        torch2trt_lite.quantize(model, None, calibration=write("shape.json", shape))
    count = json.loads(json.dumps(doc))
    count["layers"]["conv2"]["weight_scale"] = count["layers"]["conv2"]["weight_scale"][:3]
    with pytest.raises(Torch2TRTError, match="3 weight scales; its weight has 16 output channels"):
        torch2trt_lite.quantize(model, None, calibration=write("count.json", count))
    with pytest.raises(Torch2TRTError, match="holds int8 scales, but dtype='fp8'"):
        torch2trt_lite.quantize(model, None, dtype="fp8", calibration=good)
    wrong = json.loads(json.dumps(doc))
    wrong["dtype"] = "int4"
    with pytest.raises(Torch2TRTError, match="dtype 'int4'"):
        torch2trt_lite.quantize(model, None, calibration=write("dtype.json", wrong))
    neg = json.loads(json.dumps(doc))
    neg["layers"]["fc"]["input_scale"] = -1.0
    with pytest.raises(Torch2TRTError, match="not a positive number"):
        torch2trt_lite.quantize(model, None, calibration=write("neg.json", neg))
    version = dict(doc, version=99)
    with pytest.raises(Torch2TRTError, match="format version 99"):
        torch2trt_lite.quantize(model, None, calibration=write("version.json", version))
    kind = json.loads(json.dumps(doc))
    kind["layers"]["fc"]["kind"] = "Conv2d"
    with pytest.raises(Torch2TRTError, match="layer 'fc' is a Conv2d there but a Linear"):
        torch2trt_lite.quantize(model, None, calibration=write("kind.json", kind))
    with pytest.raises(Torch2TRTError, match=r"\.json or \.safetensors"):
        torch2trt_lite.quantize(model, None, calibration=write("scales.txt", "{}"))
    with pytest.raises(Torch2TRTError, match="does not exist"):
        torch2trt_lite.quantize(model, None, calibration=tmp_path / "nope.json")
    with pytest.raises(Torch2TRTError, match="either calibration_batches or calibration="):
        torch2trt_lite.quantize(model, digits["batches"], calibration=good)
    if importlib.util.find_spec("safetensors") is not None:
        from safetensors.torch import save_file

        plain = tmp_path / "plain.safetensors"
        save_file({"a": torch.ones(2)}, str(plain))
        with pytest.raises(Torch2TRTError, match="no torch2trt-lite metadata"):
            torch2trt_lite.quantize(model, None, calibration=plain)
        junk = write("junk.safetensors", "garbage bytes")
        with pytest.raises(Torch2TRTError, match="not a valid safetensors file"):
            torch2trt_lite.quantize(model, None, calibration=junk)


# ---------------------------------------------------------------------------- the API
def test_quantize_api(digits: dict[str, Any]) -> None:
    model = digits["model"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    qmodel = torch2trt_lite.quantize(model, [(b,) for b in digits["batches"][:2]], layers=["conv1", "conv2"],
                                     exclude=["conv1"], progress=False)
    assert qmodel.layers == ["conv2"]
    assert type(model.conv2) is nn.Conv2d  # the user's model is not changed
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    info = torch2trt_lite.quantization_info(qmodel)
    assert info is not None and info["dtype"] == "int8" and info["method"] == "max"
    assert info["num_layers"] == 1 and info["layers"] == ["conv2"]
    assert torch2trt_lite.quantization_info(model) is None
    by_class = torch2trt_lite.quantize(model, digits["batches"][:1], layers=[nn.Linear], progress=False)
    assert by_class.layers == ["fc"]
    with pytest.raises(Torch2TRTError, match="dtype must be one of"):
        torch2trt_lite.quantize(model, digits["batches"], dtype="int4")
    with pytest.raises(Torch2TRTError, match="method must be one of"):
        torch2trt_lite.quantize(model, digits["batches"], method="kl")
    with pytest.raises(Torch2TRTError, match="only convolutions"):
        torch2trt_lite.quantize(model, digits["batches"], layers=[nn.ReLU])
    with pytest.raises(Torch2TRTError, match="no module at that path"):
        torch2trt_lite.quantize(model, digits["batches"], layers=["head"])
    with pytest.raises(Torch2TRTError, match="progress= must be"):
        torch2trt_lite.quantize(model, digits["batches"], progress="yes")
    with pytest.raises(Torch2TRTError, match="held no batch"):
        torch2trt_lite.quantize(model, [], progress=False)
    with pytest.raises(Torch2TRTError, match="a calibration batch must be"):
        torch2trt_lite.quantize(model, [3], progress=False)


def test_progress_bar_is_drawn(digits: dict[str, Any], capsys: Any) -> None:
    torch2trt_lite.quantize(digits["model"], digits["batches"][:2], progress=True)
    assert "calibrating" in capsys.readouterr().err


def test_transposed_and_1d_layers() -> None:
    """ConvTranspose (weight axis 1) and Conv1d (run as 2D: the DQ'd kernel is reshaped)."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv1d(3, 6, 3), nn.ReLU(), nn.ConvTranspose1d(6, 4, 3, stride=2, padding=1, output_padding=1),
        nn.Flatten(), nn.Linear(4 * 24, 3),
    ).eval()
    batches = [torch.randn(4, 3, 14) for _ in range(2)]
    for dtype in DTYPES:
        qmodel = torch2trt_lite.quantize(model, batches, dtype=dtype, progress=False)
        assert qmodel.scales["2"].weight_axis == 1 and qmodel.scales["2"].weight_scale.numel() == 4
        x = torch.randn(2, 3, 14)
        engine = torch2trt_lite.convert(qmodel, [x], backend="sim")
        with torch.no_grad():
            want = qmodel(x)
        _assert_fake_quant_close(engine(x), want, atol=0.05)


# ------------------------------------------------------------------ NVIDIA Model Optimizer
def test_modelopt_tensor_quantizer() -> None:
    if importlib.util.find_spec("modelopt") is None:
        pytest.skip("NVIDIA Model Optimizer (nvidia-modelopt) is not installed")
    try:
        import modelopt.torch.quantization as mtq
    except Exception as e:  # noqa: BLE001 - any import failure of an optional package is a skip
        pytest.skip(f"modelopt.torch.quantization does not import here: {type(e).__name__}: {e}")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 4 * 4, 4)).eval()
    batches = [torch.randn(4, 3, 6, 6) for _ in range(2)]
    for cfg in (mtq.INT8_DEFAULT_CFG, mtq.FP8_DEFAULT_CFG):
        qmodel = mtq.quantize(__import__("copy").deepcopy(model), cfg, lambda m: [m(b) for b in batches])
        x = torch.randn(2, 3, 6, 6)
        d = torch2trt_lite.define_network(qmodel, [x], backend="sim")
        # the conv's and the linear's inputs and weights: weights too (constant -> Q -> DQ -> kernel)
        assert [t for _, t, _ in d.layers()].count("QUANTIZE") == 4
        engine = torch2trt_lite.convert(qmodel, [x], backend="sim")
        with torch.no_grad():
            want = qmodel(x)
        # modelopt computes x * (127 / amax) and divides back: float32 ulps apart from x / s, s * q
        _assert_fake_quant_close(engine(x), want, atol=0.05)


# ----------------------------------------------------------------------- real builder
def _rtx() -> Any:
    return pytest.importorskip("tensorrt_rtx", reason="the real-builder checks need TensorRT-RTX: pip install -e '.[rtx]'")


@pytest.mark.parametrize("dtype", DTYPES)
def test_digits_builds_on_tensorrt_rtx(digits: dict[str, Any], dtype: str) -> None:
    _rtx()
    qmodel = _quantized(digits, dtype, "entropy")
    x = digits["x_test"][:8]
    for cc in (None, ["sm89"]):
        engine = torch2trt_lite.convert(qmodel, [x], backend="tensorrt-rtx", compute_capabilities=cc, progress=False)
        assert engine.runnable is False or torch.cuda.is_available()


def test_resnet18_int8_builds_on_tensorrt_rtx() -> None:
    _rtx()
    torchvision = pytest.importorskip("torchvision", reason="needs torchvision")
    torch.manual_seed(0)
    model = torchvision.models.resnet18(weights=None).eval()
    batches = [torch.randn(2, 3, 64, 64) for _ in range(2)]
    qmodel = torch2trt_lite.quantize(model, batches, dtype="int8", progress=False)
    engine = torch2trt_lite.convert(qmodel, [batches[0][:1]], backend="tensorrt-rtx", progress=False)
    assert engine.runnable is False or torch.cuda.is_available()


def test_zz_report(capsys: Any) -> None:
    """Prints what the tests above measured (run with -s to see it)."""
    with capsys.disabled():
        print("\nquantization measurements:", json.dumps(MEASURED, indent=1, sort_keys=True))
