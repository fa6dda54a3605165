"""Reduced precision: precision="fp16"/"bf16", fp16_mode, precision_overrides, io_dtype, autocast models,
layer_precisions() and the engine file's record (torch2trt_lite/precision.py).

References are PyTorch computing the same thing by hand in the same types (weights cast, fp32
softmax), so the tolerances are those of fp16/bf16 rounding differences between two correct
computations, not of precision loss."""

from __future__ import annotations

import json
import logging
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch2trt_lite
from torch2trt_lite.cli import main as cli_main

FP16_TOL = {"rtol": 2e-3, "atol": 2e-3}  # two fp16 computations of the same ops: a few half ulps apart
BF16_TOL = {"rtol": 2e-2, "atol": 2e-2}  # bf16 has 8 mantissa bits: ulp 2**-7 relative


class Net(nn.Module):
    """conv -> relu -> linear -> layer norm -> softmax: lower-precision, elementwise and fp32 ops."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4 * 6 * 6, 10)
        self.norm = nn.LayerNorm(10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.conv(x)).flatten(1)
        return F.softmax(self.norm(self.fc(y)), dim=-1)


def _net() -> Net:
    torch.manual_seed(0)
    m = Net().eval()
    with torch.no_grad():
        m.norm.weight.uniform_(0.5, 1.5)
        m.norm.bias.uniform_(-0.5, 0.5)
    return m


def _by_hand(m: Net, x: torch.Tensor, dt: torch.dtype) -> torch.Tensor:
    """The policy's computation written out in PyTorch: conv and linear in dt, layer norm and softmax in fp32."""
    y = F.relu(F.conv2d(x.to(dt), m.conv.weight.to(dt), m.conv.bias.to(dt))).flatten(1)
    y = F.linear(y, m.fc.weight.to(dt), m.fc.bias.to(dt))
    y = F.layer_norm(y.float(), (10,), m.norm.weight, m.norm.bias, m.norm.eps)
    return F.softmax(y, dim=-1)


def _types(trt: torch2trt_lite.TRTModule) -> dict[str, tuple[str, list[str]]]:
    return {name: (kind, dts) for name, kind, dts in trt.layer_precisions()}


@pytest.mark.parametrize("precision,dt,tol,name", [
    ("fp16", torch.float16, FP16_TOL, "HALF"), ("bf16", torch.bfloat16, BF16_TOL, "BF16"),
])
def test_precision_computes_in_the_target_type_with_fp32_islands(precision: str, dt: torch.dtype, tol: dict[str, float], name: str) -> None:
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision=precision)
    got = trt(x)
    assert got.dtype == torch.float32  # the user's fp32 in and out
    torch.testing.assert_close(got, _by_hand(m, x, dt), **tol)
    # it is not the fp32 computation: the conv/linear rounding shows
    assert not torch.equal(got, m(x))
    types = _types(trt)
    conv = [k for k, (kind, _) in types.items() if kind == "CONVOLUTION"]
    assert len(conv) == 1 and types[conv[0]][1] == [name]
    mm = [k for k, (kind, _) in types.items() if kind == "MATRIX_MULTIPLY"]
    assert mm and all(types[k][1] == [name] for k in mm)
    assert [types[k][1] for k, (kind, _) in types.items() if kind in ("NORMALIZATION", "SOFTMAX")] == [["FLOAT"]] * 2
    # the casts are named layers: the input into the conv's type, the linear's output up to fp32 for layer norm
    short = precision
    assert f"conv/conv2d_in_{short}" in types and types[f"conv/conv2d_in_{short}"][0] == "CAST"
    assert any(k.startswith("norm/layer_norm_in_fp32") for k in types)
    # weights are stored in the target type
    consts = [dts for kind, dts in types.values() if kind == "CONSTANT"]
    assert [name] in consts
    assert trt.precision["precision"] == precision and trt.precision["source"] == "precision"


def test_fp16_mode_is_torch2trts_name_for_fp16() -> None:
    m = _net()
    x = torch.randn(1, 3, 8, 8)
    a = torch2trt_lite.convert(m, [x], backend="sim", fp16_mode=True)
    b = torch2trt_lite.convert(m, [x], backend="sim", precision="fp16")
    assert a.precision == b.precision and a.precision["precision"] == "fp16"
    assert a.layer_precisions() == b.layer_precisions()
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="fp16_mode=True .* conflicts with precision='bf16'"):
        torch2trt_lite.convert(m, [x], backend="sim", fp16_mode=True, precision="bf16")


def test_bad_precision_values_are_refused() -> None:
    m = _net()
    x = torch.randn(1, 3, 8, 8)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="precision must be 'fp32', 'fp16' or 'bf16'"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="int4")
    for value, dtype in (("int8", "'int8'"), (torch.int8, "'int8'"), ("fp8", "'fp8'")):  # quantize() is the way
        with pytest.raises(torch2trt_lite.Torch2TRTError,
                           match=rf"explicit quantization.*torch2trt_lite\.quantize\(model, calibration_batches, dtype={dtype}\)"):
            torch2trt_lite.convert(m, [x], backend="sim", precision=value)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="io_dtype must be"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="fp16", io_dtype=torch.int8)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="'backbone' is neither a module path.*module paths of this model include"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="fp16", precision_overrides={"backbone": "fp32"})
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="the model has no BatchNorm2d module"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="fp16", precision_overrides={nn.BatchNorm2d: "fp32"})
    with pytest.raises(torch2trt_lite.Torch2TRTError, match=r"precision_overrides\['fc'\] must be"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="fp16", precision_overrides={"fc": "fp8"})


def test_overrides_by_module_path_class_and_op() -> None:
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    trt = torch2trt_lite.convert(
        m, [x], backend="sim", precision="fp16",
        precision_overrides={"fc": "fp32", nn.LayerNorm: "fp16", F.softmax: "fp16"},
    )
    types = _types(trt)
    mm = [dts for kind, dts in types.values() if kind == "MATRIX_MULTIPLY"]
    assert mm and all(d == ["FLOAT"] for d in mm)  # fc in fp32
    # layer norm is on the fp32 list: a module override alone does not move it, only an op override would
    assert [dts for kind, dts in types.values() if kind == "NORMALIZATION"] == [["FLOAT"]]
    assert [dts for kind, dts in types.values() if kind == "SOFTMAX"] == [["HALF"]]
    dt = torch.float16
    y = F.relu(F.conv2d(x.to(dt), m.conv.weight.to(dt), m.conv.bias.to(dt))).flatten(1).float()
    y = F.layer_norm(F.linear(y, m.fc.weight, m.fc.bias), (10,), m.norm.weight, m.norm.bias, m.norm.eps)
    ref = F.softmax(y.half(), dim=-1).float()
    torch.testing.assert_close(trt(x), ref, **FP16_TOL)
    assert trt.precision["overrides"] == {
        "fc": "fp32", "torch.nn.modules.normalization.LayerNorm": "fp16", "torch.nn.functional.softmax": "fp16",
    }


def test_override_makes_part_of_an_fp32_model_fp16() -> None:
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision_overrides={"conv": "fp16"})
    types = _types(trt)
    assert [dts for kind, dts in types.values() if kind == "CONVOLUTION"] == [["HALF"]]
    assert all(dts == ["FLOAT"] for kind, dts in types.values() if kind == "MATRIX_MULTIPLY")
    y = F.relu(F.conv2d(x.half(), m.conv.weight.half(), m.conv.bias.half())).flatten(1).float()
    ref = F.softmax(m.norm(m.fc(y)), dim=-1)
    torch.testing.assert_close(trt(x), ref, **FP16_TOL)


def test_io_dtype_fp16_takes_and_returns_half() -> None:
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision="fp16", io_dtype="fp16")
    assert trt.metadata["inputs"][0]["dtype"] == "float16"
    got = trt(x.half())
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, _by_hand(m, x.half(), torch.float16).half(), **FP16_TOL)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="float16"):
        trt(x)  # the engine takes fp16 now: a dtype cast is the caller's to make


def test_half_model_keeps_half_outputs() -> None:
    """A model already in fp16 (model.half(), fp16 inputs) gets fp16 outputs: outputs follow the inputs' type."""
    m = _net().half()
    x = torch.randn(2, 3, 8, 8).half()
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision="fp16")
    got = trt(x)
    assert got.dtype == torch.float16
    with torch.no_grad():
        y = F.relu(m.conv(x)).flatten(1)
        ref = F.softmax(F.layer_norm(m.fc(y).float(), (10,), m.norm.weight.float(), m.norm.bias.float(), m.norm.eps), dim=-1)
    torch.testing.assert_close(got.float(), ref, **FP16_TOL)


class Attn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 2, batch_first=True)
        self.ln = nn.LayerNorm(16)
        self.lstm = nn.LSTM(16, 8, batch_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, _ = self.mha(x, x, x, need_weights=False)
        out, _ = self.lstm(self.ln(x + a))
        return out


def test_module_converters_compute_in_the_target_type() -> None:
    """nn.MultiheadAttention reads its weights from the module: those are cast for the call (and put
    back); nn.LSTM is on the fp32 list."""
    torch.manual_seed(0)
    m = Attn().eval()
    x = torch.randn(2, 5, 16)
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision="fp16")
    with torch.no_grad():
        ref32 = m(x)
        h = m.mha
        q, k, v = F.linear(x.half(), h.in_proj_weight.half(), h.in_proj_bias.half()).chunk(3, dim=-1)
        heads = [t.unflatten(-1, (2, 8)).transpose(1, 2) for t in (q, k, v)]
        a = F.scaled_dot_product_attention(*[t.float() for t in heads]).half()  # fp32 attention, as torch's math path
        a = F.linear(a.transpose(1, 2).flatten(2), h.out_proj.weight.half(), h.out_proj.bias.half())
        ref, _ = m.lstm(m.ln(x + a.float()))
    got = trt(x)
    torch.testing.assert_close(got, ref, **FP16_TOL)
    torch.testing.assert_close(got, ref32, rtol=1e-2, atol=1e-2)
    assert not torch.equal(got, ref32)
    types = _types(trt)
    assert any(d == ["HALF"] for kind, d in types.values() if kind == "MATRIX_MULTIPLY")
    assert all(d == ["FLOAT"] for name, (kind, d) in types.items() if name.startswith("lstm/") and kind == "MATRIX_MULTIPLY")
    assert m.mha.in_proj_weight.dtype == torch.float32 and m.lstm.weight_ih_l0.dtype == torch.float32  # restored


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_model_traced_under_autocast_converts_with_autocasts_casts(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 10)).eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.autocast("cpu", dtype=dtype):
        trt = torch2trt_lite.convert(m, [x], backend="sim")
        with torch.no_grad():
            ref = m(x)
    got = trt(x)
    assert got.dtype == ref.dtype == dtype  # autocast's own output type
    tol = FP16_TOL if dtype == torch.float16 else BF16_TOL
    torch.testing.assert_close(got, ref, **tol)
    assert trt.precision["source"] == "autocast"
    assert trt.precision["precision"] == {torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]
    with torch.autocast("cpu", dtype=torch.bfloat16), pytest.raises(torch2trt_lite.Torch2TRTError, match="give one of the two"):
        torch2trt_lite.convert(m, [x], backend="sim", precision="fp16")


def test_precision_is_in_the_engine_file_and_info(tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]) -> None:
    m = _net()
    x = torch.randn(1, 3, 8, 8)
    trt = torch2trt_lite.convert(m, [x], backend="sim", precision="bf16", precision_overrides={"fc": "fp32"})
    path = os.path.join(os.fspath(tmp_path), "m.engine")
    trt.save(path)
    again = torch2trt_lite.load(path)
    assert again.precision == trt.precision == {
        "precision": "bf16", "source": "precision", "overrides": {"fc": "fp32"}, "io_dtype": "fp32",
    }
    assert again.layer_precisions() == trt.layer_precisions()
    torch.testing.assert_close(again(x), trt(x), rtol=0, atol=0)
    assert cli_main(["info", path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["precision"]["precision"] == "bf16"
    assert out["layer_output_types"]["BF16"] > 0 and "layers" not in out
    assert cli_main(["info", path, "--layers"]) == 0
    assert len(json.loads(capsys.readouterr().out)["layers"]) == trt.num_layers


def test_cli_convert_precision(tmp_path: os.PathLike[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = os.path.join(os.fspath(tmp_path), "r.engine")
    rc = cli_main(["convert", "torchvision:resnet18", "--shape", "1x3x64x64", "--backend", "sim", "--precision",
                   "fp16", "-o", path, "--json"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["precision"] == "fp16"
    assert report["max_rel_err"] < 5e-3  # fp16 vs the fp32 eager model: measured 1e-3 on the zoo
    assert torch2trt_lite.load(path).precision["precision"] == "fp16"


def test_compare_in_fp16_reports_each_layer() -> None:
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    report = torch2trt_lite.compare(m, [x], backend="sim", precision="fp16", tolerance=5e-3)
    assert report.ok, str(report)
    assert report.entries




@pytest.mark.rtx
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_precision_networks_build_on_tensorrt_rtx(precision: str) -> None:
    """The same strongly typed network TensorRT-RTX builds: layer types equal the sim's."""
    m = _net()
    x = torch.randn(2, 3, 8, 8)
    trt = torch2trt_lite.convert(m, [x], backend="tensorrt-rtx", precision=precision, progress=False)
    sim = torch2trt_lite.convert(m, [x], backend="sim", precision=precision)
    assert len(trt.plan) > 0
    assert trt.layer_precisions() == sim.layer_precisions()


def _rtx_models() -> list[tuple[str, torch.nn.Module, list[torch.Tensor]]]:
    torchvision = pytest.importorskip("torchvision")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    mask = torch.ones(1, 32, dtype=torch.long)
    mask[0, -4:] = 0  # padding: transformers then applies the mask (an all-ones mask it would skip)
    return [
        ("resnet50", torchvision.models.resnet50().eval(), [torch.randn(1, 3, 64, 64)]),
        ("vit_b_16", torchvision.models.vit_b_16().eval(), [torch.randn(1, 3, 224, 224)]),
        ("BertModel", transformers.BertModel(transformers.BertConfig()).eval(),
         [torch.randint(0, 30000, (1, 32)), mask]),
    ]


@pytest.mark.rtx
@pytest.mark.parametrize("index", [0, 1, 2], ids=["resnet50", "vit_b_16", "BertModel"])
def test_fp16_and_bf16_variants_of_the_named_models_build_on_tensorrt_rtx(index: int) -> None:
    """Issue 11: every precision variant of resnet50, vit_b_16 and BertModel builds on the real builder
    (the full-size models; resnet50 at 64x64 to keep CI short: the same layers)."""
    name, model, xs = _rtx_models()[index]
    for precision, low in (("fp16", "HALF"), ("bf16", "BF16")):
        trt = torch2trt_lite.convert(model, xs, backend="tensorrt-rtx", precision=precision, progress=False)
        assert len(trt.plan) > 0 and trt.precision["precision"] == precision
        types = [d for _, kind, dts in trt.layer_precisions() for d in dts if kind in ("CONVOLUTION", "MATRIX_MULTIPLY")]
        assert types and all(d == low for d in types), f"{name} {precision}: {sorted(set(types))}"


def test_compare_in_fp16_finds_an_injected_wrong_layer() -> None:
    """The debugger in fp16: a GELU converter that scales its output by 1.01 is the first bad tensor,
    the fp16 layers before it are within fp16's tolerance."""
    from tests.tools.test_compare import GeluNet
    from torch2trt_lite.registry import REGISTRY

    qual = "torch.nn.functional.gelu"
    original = REGISTRY.get(qual)
    assert original is not None

    def wrong_gelu(ctx, call):  # type: ignore[no-untyped-def]
        it = original.converter(ctx, call)
        scale = ctx.constant(torch.full([1] * len(it.shape), 1.01, dtype=call.output.dtype))
        return ctx.network.add_elementwise(it, scale, ctx.trt.ElementWiseOperation.PROD).get_output(0)

    torch.manual_seed(0)
    model, x = GeluNet().eval(), torch.randn(3, 8)
    try:
        torch2trt_lite.converter(F.gelu, override=True)(wrong_gelu)
        report = torch2trt_lite.compare(model, [x], backend="sim", precision="fp16", tolerance=3e-3)
    finally:
        REGISTRY.add(original, override=True)
    bad = report.first_bad
    assert bad is not None and bad.op == qual and bad.module_path == "block", str(report)
    assert bad.max_rel == pytest.approx(0.01, rel=0.1)
    assert all(e.ok for e in report.entries[: bad.index])
    assert torch2trt_lite.compare(model, [x], backend="sim", precision="fp16", tolerance=3e-3).ok


@pytest.mark.rtx
@pytest.mark.parametrize("dtype", ["int8", "fp8"])
def test_quantized_resnet50_builds_on_tensorrt_rtx_alone_and_with_fp16(dtype: str) -> None:
    """INT8/FP8 Q/DQ (torch2trt_lite.quantize) builds on the real builder, in fp32 and with
    precision="fp16", where every convolution's inputs come from a DQ of the convolution's own type (the
    form TensorRT fuses into an INT8/FP8 kernel). vit_b_16 and BertModel: benchmarks/bench_precision_rtx.py."""
    name, model, xs = _rtx_models()[0]
    q = torch2trt_lite.quantize(model, [xs[0]] * 2, dtype=dtype, method="max", progress=False)
    for precision, low in (("fp32", "FLOAT"), ("fp16", "HALF")):
        trt = torch2trt_lite.convert(q, xs, backend="tensorrt-rtx", precision=precision, progress=False)
        assert len(trt.plan) > 0 and trt.precision["quantization"]["dtype"] == dtype
        layers = trt.layer_precisions()
        quant = {"int8": "INT8", "fp8": "FP8"}[dtype]
        assert sum(kind == "QUANTIZE" and dts == [quant] for _, kind, dts in layers) == 2 * 54  # inputs + weights
        assert all(dts == [low] for _, kind, dts in layers if kind in ("DEQUANTIZE", "CONVOLUTION"))


def test_int8_mode_is_torch2trts_name_for_quantize() -> None:
    """torch2trt's int8_mode=True (with int8_calib_dataset) gives the same engine as quantize() + convert."""
    m = _net()
    x = torch.randn(4, 3, 8, 8)
    data = [(torch.randn(4, 3, 8, 8),) for _ in range(3)]
    a = torch2trt_lite.convert(m, [x], backend="sim", int8_mode=True, int8_calib_dataset=data, int8_calib_algorithm="max")
    q = torch2trt_lite.quantize(m, data, dtype="int8", method="max", progress=False)
    b = torch2trt_lite.convert(q, [x], backend="sim")
    assert a.precision["quantization"]["dtype"] == "int8" and a.precision["quantization"]["method"] == "max"
    assert a.layer_precisions() == b.layer_precisions()
    torch.testing.assert_close(a(x), b(x), rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(a(x), q(x), rtol=1e-3, atol=1e-3)  # the engine is the fake-quant model's
    c = torch2trt_lite.convert(m, [x], backend="sim", int8_mode=True)  # calibrated on the example, entropy
    assert c.precision["quantization"]["method"] == "entropy"
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="go with int8_mode=True"):
        torch2trt_lite.convert(m, [x], backend="sim", int8_calib_dataset=data)
    with pytest.raises(torch2trt_lite.Torch2TRTError, match="int8_calib_algorithm="):
        torch2trt_lite.convert(m, [x], backend="sim", int8_mode=True, int8_calib_algorithm="legacy")


def test_fp16_with_a_dynamic_batch() -> None:
    """Precision and dynamic shapes together: batch 1..6, fp16 compute, fp16 engine inputs (io_dtype)."""
    m = _net()
    x = torch.randn(3, 3, 8, 8)
    spec = torch2trt_lite.Input((1, 3, 8, 8), (3, 3, 8, 8), (6, 3, 8, 8), dtype=torch.float32, example=x)
    trt = torch2trt_lite.convert(m, [spec], backend="sim", precision="fp16")
    io = torch2trt_lite.convert(m, [spec], backend="sim", precision="fp16", io_dtype="fp16")
    for b in (1, 6):
        xb = torch.randn(b, 3, 8, 8)
        torch.testing.assert_close(trt(xb), _by_hand(m, xb, torch.float16), **FP16_TOL)
        torch.testing.assert_close(io(xb.half()).float(), _by_hand(m, xb.half(), torch.float16), **FP16_TOL)


def test_int8_mode_with_nothing_to_quantize_converts_in_float(caplog: pytest.LogCaptureFixture) -> None:
    """torch2trt builds a model with no conv/linear layer in int8_mode too: here it converts in float
    precision, with one warning that nothing was quantized (issue 27)."""

    class Norms(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(8)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.norm(x)) * 2

    m = Norms().eval()
    x = torch.randn(2, 8)
    with caplog.at_level(logging.WARNING, logger="torch2trt_lite"):
        trt = torch2trt_lite.convert(m, [x], backend="sim", int8_mode=True)
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "nothing was quantized" in warned[0], warned
    with torch.no_grad():
        torch.testing.assert_close(trt(x), m(x), rtol=1e-4, atol=1e-5)
