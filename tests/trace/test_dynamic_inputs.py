"""Dynamic input shapes (issue 10, first part): ``Input`` ranges, ``max_batch_size=`` /
``dynamic_batch=`` / ``profiles=``, optimization profiles in the engine and its metadata, profile
selection in ``TRTModule``, and the sim check that refuses a network with a baked-in traced size."""

from __future__ import annotations

import json
import pathlib

import pytest
import torch

import torch2trt_lite
from torch2trt_lite import ConversionError, Input, RuntimeExecutionError, Torch2TRTError, cli

TOL = {"atol": 1e-5, "rtol": 1e-5}


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3)).eval()


class _CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.AdaptiveAvgPool2d(1),
        )
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.features(x), 1))


def _match_at(engine: torch2trt_lite.TRTModule, model: torch.nn.Module, rest: tuple[int, ...]) -> None:
    for b in (1, 3, 8):
        x = torch.randn(b, *rest)
        with torch.no_grad():
            want = model(x)
        got = engine(x)
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, **TOL)


# ------------------------------------------------------------------------------ validation
@pytest.mark.parametrize(("args", "kw", "msg"), [
    (((1, 4), (2, 4, 1), (8, 4)), {}, "same rank"),
    (((2, 4), (1, 4), (8, 4)), {}, "min <= opt <= max"),
    (((1, 4), (4, 4), (2, 4)), {}, "min <= opt <= max"),
    (((0, 4), (1, 4), (2, 4)), {}, "1 <= min"),
    (((1, 4), (2, 4), (8, 4)), {"example": torch.randn(9, 4)}, "outside the range"),
    (((1, 4), (2, 4), (8, 4)), {"example": torch.randn(2, 4).half()}, "dtype"),
    (((1, 4), (2, 4), (8, 4)), {"dtype": torch.float64}, "float64"),
    (((1, 4.0), (2, 4), (8, 4)), {}, "tuple of ints"),
])
def test_input_validation(args: tuple, kw: dict, msg: str) -> None:
    with pytest.raises(Torch2TRTError, match=msg):
        Input(*args, **kw)


def test_option_validation() -> None:
    m, x = _mlp(), torch.randn(4, 6)
    with pytest.raises(Torch2TRTError, match="at most one"):
        torch2trt_lite.convert(m, [x], backend="sim", max_batch_size=8, dynamic_batch=(1, 8))
    with pytest.raises(Torch2TRTError, match="outside the batch range"):
        torch2trt_lite.convert(m, [x], backend="sim", max_batch_size=2)
    with pytest.raises(Torch2TRTError, match="dynamic_batch must be"):
        torch2trt_lite.convert(m, [x], backend="sim", dynamic_batch=(4, 2))
    with pytest.raises(Torch2TRTError, match="same inputs"):
        torch2trt_lite.convert(m, [Input((1, 6), (2, 6), (4, 6))], backend="sim",
                               profiles=[[Input((1, 6), (2, 6), (4, 6))], [Input((1, 6, 1), (2, 6, 1), (4, 6, 1))]])


# ------------------------------------------------------------------------ metadata and runs
def test_max_batch_size_mlp_matches_eager() -> None:
    m = _mlp()
    e = torch2trt_lite.convert(m, [torch.randn(4, 6)], backend="sim", max_batch_size=8)
    spec = e.metadata["inputs"][0]
    assert (spec["min"], spec["opt"], spec["max"]) == ([1, 6], [4, 6], [8, 6])
    assert e.metadata["profiles"] == [{"input_0": {"min": [1, 6], "opt": [4, 6], "max": [8, 6]}}]
    assert e.metadata["outputs"][0]["shape"] == [-1, 3]
    _match_at(e, m, (6,))


def test_dynamic_batch_and_input_with_static_tensor() -> None:
    class Two(torch.nn.Module):
        def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
            return torch.relu(x) * 2 + bias

    m = Two().eval()
    bias = torch.randn(5)
    e = torch2trt_lite.convert(m, [Input((2, 5), (3, 5), (9, 5), name="x"), bias], backend="sim")
    ins = e.metadata["inputs"]
    assert [i["name"] for i in ins] == ["x", "input_1"]
    assert (ins[0]["min"], ins[0]["opt"], ins[0]["max"]) == ([2, 5], [3, 5], [9, 5])
    assert ins[1]["min"] == ins[1]["max"] == [5]
    for b in (2, 9):
        x = torch.randn(b, 5)
        torch.testing.assert_close(e(x, bias), m(x, bias), **TOL)
    e2 = torch2trt_lite.convert(_mlp(), [torch.randn(3, 6)], backend="sim", dynamic_batch=(2, 6))
    assert e2.metadata["profiles"][0]["input_0"] == {"min": [2, 6], "opt": [3, 6], "max": [6, 6]}
    with pytest.raises(RuntimeExecutionError, match=r"profile 0: input_0 \(2, 6\)..\(6, 6\)"):
        e2(torch.randn(1, 6))


def test_integer_input_traced_in_range() -> None:
    class Emb(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.emb = torch.nn.Embedding(10, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            return self.emb(ids) * 3

    m = Emb().eval()
    e = torch2trt_lite.convert(m, [Input((1, 3), (2, 3), (5, 3), dtype=torch.int64, low=0, high=10)], backend="sim")
    for b in (1, 5):
        ids = torch.randint(0, 10, (b, 3))
        torch.testing.assert_close(e(ids), m(ids), **TOL)


def test_cnn_and_resnet18_dynamic_batch_match_eager() -> None:
    m = _CNN().eval()
    e = torch2trt_lite.convert(m, [torch.randn(2, 3, 16, 16)], backend="sim", max_batch_size=8)
    _match_at(e, m, (3, 16, 16))
    torchvision = pytest.importorskip("torchvision", reason="resnet18 comes from torchvision")
    torch.manual_seed(0)
    r18 = torchvision.models.resnet18().eval()
    e = torch2trt_lite.convert(r18, [torch.randn(1, 3, 64, 64)], backend="sim", max_batch_size=8)
    assert e.metadata["outputs"][0]["shape"] == [-1, 1000]
    _match_at(e, r18, (3, 64, 64))


def test_two_profiles_select_and_outside_lists_ranges() -> None:
    m = _mlp()
    profs = [[Input((1, 6), (2, 6), (4, 6))], [Input((5, 6), (8, 6), (16, 6))]]
    e = torch2trt_lite.convert(m, [Input((1, 6), (2, 6), (4, 6))], backend="sim", profiles=profs)
    meta = e.metadata
    assert [p["input_0"]["max"] for p in meta["profiles"]] == [[4, 6], [16, 6]]
    assert (meta["inputs"][0]["min"], meta["inputs"][0]["max"]) == ([1, 6], [16, 6])
    ctx = e._context_here(e._st)
    for b, k in ((3, 0), (12, 1), (1, 0), (16, 1)):
        x = torch.randn(b, 6)
        torch.testing.assert_close(e(x), m(x), **TOL)
        assert ctx.active_optimization_profile == k
    with pytest.raises(RuntimeExecutionError, match=r"profile 0: input_0 \(1, 6\)..\(4, 6\); profile 1: input_0 \(5, 6\)..\(16, 6\)"):
        e(torch.randn(17, 6))


def test_engine_file_round_trip_and_info(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = _mlp()
    e = torch2trt_lite.convert(m, [torch.randn(4, 6)], backend="sim", max_batch_size=8)
    path = tmp_path / "mlp.engine"
    e.save(path)
    again = torch2trt_lite.load(path)
    _match_at(again, m, (6,))
    assert cli.main(["info", str(path)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["inputs"][0]["min"] == [1, 6] and info["inputs"][0]["opt"] == [4, 6] and info["inputs"][0]["max"] == [8, 6]
    assert info["profiles"][0]["input_0"]["max"] == [8, 6]


@pytest.mark.parametrize(("edit", "where"), [
    (lambda meta: meta["inputs"][0].update(opt=[9, 6]), "inputs[0].opt"),
    (lambda meta: meta["profiles"][0]["input_0"].update(max=[20, 6]), "profiles[0]"),
    (lambda meta: meta.update(profiles=[{"other": {}}]), "profiles[0]"),
    (lambda meta: meta.update(profiles=[]), "profiles"),
])
def test_metadata_validation(edit: object, where: str) -> None:
    e = torch2trt_lite.convert(_mlp(), [torch.randn(4, 6)], backend="sim", max_batch_size=8)
    meta = e.metadata
    edit(meta)  # type: ignore[operator]
    with pytest.raises(torch2trt_lite.EngineFileError, match=where.replace("[", r"\[")):
        torch2trt_lite.TRTModule(bytes(e.plan), meta)


# ------------------------------------------------------------------ refusing baked-in sizes
def test_baked_reshape_is_refused() -> None:
    class Flat(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.reshape(int(x.shape[0]) * x.shape[1])  # int(): the model itself bakes the traced size

    with pytest.raises(ConversionError, match="baked"):
        torch2trt_lite.convert(Flat().eval(), [torch.randn(2, 5)], backend="sim", max_batch_size=8)
    # static, the same model converts
    e = torch2trt_lite.convert(Flat().eval(), [torch.randn(2, 5)], backend="sim")
    x = torch.randn(2, 5)
    torch.testing.assert_close(e(x), x.reshape(10), **TOL)


def test_size_read_in_view_stays_symbolic() -> None:
    class View(_CNN):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = self.features(x)
            return self.fc(y.view(y.size(0), -1))

    m = View().eval()
    e = torch2trt_lite.convert(m, [torch.randn(2, 3, 16, 16)], backend="sim", max_batch_size=8)
    _match_at(e, m, (3, 16, 16))


@pytest.mark.rtx
def test_dynamic_mlp_builds_on_tensorrt_rtx() -> None:
    e = torch2trt_lite.convert(_mlp(), [torch.randn(4, 6)], backend="tensorrt-rtx", max_batch_size=8, progress=False)
    assert len(e.plan) > 0
    assert e.metadata["profiles"][0]["input_0"] == {"min": [1, 6], "opt": [4, 6], "max": [8, 6]}
