"""The real-builder tier: every network the suite makes is also built by NVIDIA's TensorRT-RTX builder.

TensorRT-RTX (``pip install -e '.[rtx]'``, ``import tensorrt_rtx``) is TensorRT 11's network API
without plugins, and its builder runs on a machine with no GPU. So every converter harness case,
every zoo model and every conformance network is traced (or replayed) twice, once into a sim
network and once into a real TensorRT-RTX network, and then:

* every layer of the two networks has the same type, and every layer output the same shape and
  dtype (TensorRT infers these while the network is defined);
* the verdicts agree: the sim builds the network exactly when the real builder does (a network
  refused at construction is refused by both). Where the real builder refuses what the sim
  accepts, the case is in ``RTX_REFUSES`` with the builder's own words, and only for rules that
  are TensorRT-RTX's and not TensorRT's (the sim follows TensorRT 10.16/11.1);
* a model that needs a plugin layer is refused by ``convert(backend="tensorrt-rtx")`` naming the
  op (TensorRT-RTX has no plugin API).

Engines are not executed here (no GPU): ``tools/device_check.sh`` does that on a lent GPU.
Without TensorRT-RTX installed, this module is skipped.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch

import torch2trt_lite
from torch2trt_lite.build.define import network_layers
from torch2trt_lite.errors import Torch2TRTError

rtx = pytest.importorskip("tensorrt_rtx", reason="the real-builder tier needs TensorRT-RTX: pip install -e '.[rtx]'")

from tests.converters.harness import Case  # noqa: E402
from tests.converters.test_converters import CASES  # noqa: E402

PLUGIN_REFUSAL = "TensorRT-RTX has no plugin API"

# Harness cases and zoo models the real builder refuses although the sim builds them:
# {name: the real builder's message (a substring of its error)}. Only limits of TensorRT-RTX
# itself belong here, never a rule TensorRT documents (those the sim must refuse too).
RTX_REFUSES: dict[str, str] = {}

# Layers TensorRT-RTX 1.7's CPU-only ahead-of-time builder has no implementation of (measured: "<layer
# name> has no runners that implement it"; TensorRT 10.16 documents and builds them): a network holding
# one is expected to be refused there, with those words, while every layer still defines alike.
RTX_NO_RUNNERS = frozenset({"NON_ZERO", "NMS"})
_NO_RUNNERS = "has no runners that implement it"


@dataclass
class Verdict:
    built: bool
    error: str = ""
    layers: list[tuple[str, str, list[tuple[tuple[int, ...], str]]]] | None = None
    plugins: bool = False


def _quiet_logger(trt: Any) -> Any:
    """A logger that keeps the errors (``.errors``) and reaches TensorRT even when another logger was
    registered first in this process (TensorRT keeps only the first one)."""
    from torch2trt_lite.backends import CapturingLogger

    return CapturingLogger(trt)


def verdict(model: Any, xs: list[Any], backend: str) -> Verdict:
    """Trace ``model`` into a network of ``backend`` and build it; never raises a project error."""
    try:
        d = torch2trt_lite.define_network(model, [x.clone() for x in xs], backend=backend)
    except Torch2TRTError as e:
        return Verdict(False, f"{type(e).__name__}: {e}")
    layers = d.layers()
    plugins = any(t == "PLUGIN_V3" for _, t, _ in layers)
    config = d.builder.create_builder_config()
    plan = d.builder.build_serialized_network(d.network, config)
    if plan is None:
        return Verdict(False, "build: " + "; ".join(d.logger.errors), layers, plugins)
    return Verdict(True, "", layers, plugins)


# Totals of one run, written as JSON to $T2TL_TIER_SUMMARY when that is set (for the notes).
TOTALS = {"networks": 0, "layers": 0, "layer_outputs": 0, "built_by_both": 0, "refused_by_both": 0,
          "plugin_refused_on_rtx": 0}


@pytest.fixture(scope="module", autouse=True)
def _write_totals() -> Any:
    yield
    path = os.environ.get("T2TL_TIER_SUMMARY")
    if path:
        with open(path, "w") as f:
            json.dump(TOTALS, f, indent=1)


def layer_mismatches(sim: Verdict, real: Verdict) -> list[str]:
    a, b = sim.layers or [], real.layers or []
    TOTALS["networks"] += 1
    TOTALS["layers"] += len(b)
    TOTALS["layer_outputs"] += sum(len(o) for _, _, o in b)
    if len(a) != len(b):
        return [f"{len(a)} layers on the sim, {len(b)} on TensorRT-RTX"]
    out = []
    for i, ((name, ta, oa), (_, tb, ob)) in enumerate(zip(a, b, strict=True)):
        if ta != tb or oa != ob:
            out.append(f"layer {i} '{name}': sim {ta} {oa} vs TensorRT-RTX {tb} {ob}")
    return out


def check_both(name: str, model: Any, xs: list[Any]) -> tuple[Verdict, Verdict]:
    torch.manual_seed(0)
    sim = verdict(model, xs, "sim")
    torch.manual_seed(0)
    real = verdict(model, xs, "tensorrt-rtx")
    if sim.plugins:
        assert not real.built and PLUGIN_REFUSAL in real.error, (
            f"a plugin model must be refused on TensorRT-RTX naming the op, got: {real.error or 'built'}")
        TOTALS["plugin_refused_on_rtx"] += 1
        return sim, real
    if sim.layers is not None and real.layers is not None:
        bad = layer_mismatches(sim, real)
        assert not bad, "layer shapes/dtypes differ:\n" + "\n".join(bad[:20])
    if sim.built and any(t in RTX_NO_RUNNERS for _, t, _ in sim.layers or []):
        assert not real.built and _NO_RUNNERS in real.error, (
            f"{name}: TensorRT-RTX {'built' if real.built else 'refused'} a network with "
            f"{sorted(RTX_NO_RUNNERS)} layers ({real.error}); update RTX_NO_RUNNERS")
        TOTALS["no_runners_on_rtx"] = TOTALS.get("no_runners_on_rtx", 0) + 1
        pytest.xfail(f"TensorRT-RTX's CPU-only builder: NonZero/NMS {_NO_RUNNERS}")
    if name in RTX_REFUSES:
        assert sim.built, f"{name}: the sim refuses it too ({sim.error}); remove it from RTX_REFUSES"
        assert not real.built, f"{name}: TensorRT-RTX builds it now; remove it from RTX_REFUSES"
        assert RTX_REFUSES[name] in real.error, real.error
        pytest.xfail(f"TensorRT-RTX refuses it: {RTX_REFUSES[name]}")
    TOTALS["built_by_both" if sim.built and real.built else "refused_by_both"] += sim.built == real.built
    assert sim.built == real.built, (
        f"verdicts differ: the sim {'built it' if sim.built else 'refused: ' + sim.error}; TensorRT-RTX "
        f"{'built it' if real.built else 'refused: ' + real.error}")
    return sim, real


# ------------------------------------------------------------------------ harness cases
def _case_param(c: Case) -> Any:
    marks = []
    if c.extra.get("needs_cuda"):
        marks.append(pytest.mark.skip(reason="eager .cuda() needs a CUDA GPU"))
    return pytest.param(c, id=c.name, marks=marks)


@pytest.mark.parametrize("case", [_case_param(c) for c in CASES])
def test_harness_case_on_real_builder(case: Case) -> None:
    torch.manual_seed(0)
    model = case.build()
    xs = list(case.inputs())
    sim, real = check_both(case.name, model, xs)
    if case.xfail:
        assert not sim.built, f"{case.name} is an xfail of the harness but builds on the sim"


# ------------------------------------------------------------------------------ the zoo
def _zoo() -> list[Any]:
    try:
        from tests.zoo import test_zoo
    except pytest.skip.Exception:  # the zoo's own libraries are missing
        return []
    return [pytest.param(z, id=z.name) for z in test_zoo.ZOO]


@pytest.mark.parametrize("zoo", _zoo())
def test_zoo_model_on_real_builder(zoo: Any) -> None:
    from tests.weights import nontrivial

    torch.manual_seed(0)
    model = zoo.build().eval()
    nontrivial(model)
    sim, real = check_both(zoo.name, model, zoo.inputs())
    if zoo.xfail:
        assert not sim.built, f"{zoo.name} is an xfail of the zoo but builds on the sim"


# --------------------------------------------------------------------- conformance cases
# Conformance cases that call TensorRT 10.16 API forms TensorRT-RTX 1.7 does not have.
_QDQ_2ARG = ("calls add_quantize/add_dequantize(input, scale) without output_type; TensorRT-RTX (like TensorRT "
             "11) requires output_type")
CONFORMANCE_API_DIFFERS: dict[str, str] = {
    "Convolution/case_int8qdq": _QDQ_2ARG,
    "Deconvolution/case_int8qdq": _QDQ_2ARG,
    "Normalization/case_layer_normalization": (
        "sets INormalizationLayer.compute_precision, which TensorRT 11 and TensorRT-RTX removed"),
}


def _conformance() -> list[Any]:
    from tests.sim import test_conformance

    params = []
    for case in test_conformance.CASES:
        text = repr(case["calls"])
        marks = []
        missing = [n for n in ("BuilderFlag.FP16", "BuilderFlag.INT8") if n in text]
        if missing:
            marks.append(pytest.mark.skip(reason=f"uses {', '.join(missing)}, which TensorRT-RTX does not have "
                                                 "(strongly typed networks only)"))
        elif case["id"] in CONFORMANCE_API_DIFFERS:
            marks.append(pytest.mark.skip(reason=CONFORMANCE_API_DIFFERS[case["id"]]))
        params.append(pytest.param(case, id=case["id"], marks=marks))
    return params


# Conformance networks the real builder refuses: {case id: its message}. TensorRT-RTX's CPU-only
# ahead-of-time build has no implementation of some layers; the networks are TensorRT 10.16's own.
_NONZERO = "[NonZero] has no runners that implement it"
CONFORMANCE_RTX_REFUSES: dict[str, str] = {
    # TensorRT 10.16 built and ran it (the case's outputs are its own): a TensorRT-RTX limit
    "Deconvolution/case_stride_dilation_pad": "Strided & Dilated Deconv are currently not supported",
    "Fill/case_dds": _NONZERO,
    "Gather/case_gather_nonzeros": _NONZERO,
    "NonZero/case_simple": _NONZERO,
    "NonZero/case_deprecated": _NONZERO,
}


@pytest.mark.parametrize("case", _conformance())
def test_conformance_network_on_real_builder(case: dict[str, Any]) -> None:
    from tests.sim import test_conformance

    _, sim_refs = test_conformance.replay_network(case)
    logger = _quiet_logger(rtx)
    real_refs = replay_on(rtx, case, logger)
    sim = Verdict(sim_refs["plan"] is not None, "", network_layers(sim_refs["network"]))
    real = Verdict(real_refs["plan"] is not None, "; ".join(logger.errors), network_layers(real_refs["network"]))
    bad = layer_mismatches(sim, real)
    assert not bad, "layer shapes/dtypes differ:\n" + "\n".join(bad[:20])
    cid = case["id"]
    if cid in CONFORMANCE_RTX_REFUSES:
        assert not real.built, f"{cid}: TensorRT-RTX builds it now; remove it from CONFORMANCE_RTX_REFUSES"
        assert CONFORMANCE_RTX_REFUSES[cid] in real.error, real.error
        pytest.xfail(f"TensorRT-RTX refuses it: {CONFORMANCE_RTX_REFUSES[cid]}")
    assert sim.built and real.built, f"sim built: {sim.built}; TensorRT-RTX: {real.error or 'built'}"


def _empty_weights(trt: Any, v: Any) -> Any:
    """TensorRT's bindings refuse an empty numpy array as weights (non-null pointer, count 0): pass
    typed empty Weights, as a TensorRT client must."""
    if isinstance(v, np.ndarray) and v.size == 0:
        from torch2trt_lite.sim import _dtypes

        return trt.Weights(getattr(trt.DataType, _dtypes.from_torch(torch.from_numpy(v).dtype).name))
    return v


def replay_on(trt: Any, case: dict[str, Any], logger: Any) -> dict[str, Any]:
    """Replay a conformance case's API calls on ``trt`` (the decoded weights are kept alive)."""
    from tests.sim import test_conformance

    decode = test_conformance.decode
    refs: dict[str, Any] = {"builder": trt.Builder(logger.logger)}
    keep: list[Any] = []
    for call in case["calls"]:
        obj = refs[call["obj"]]
        if call.get("query"):
            continue
        if "set" in call:
            value = decode(call["value"], refs, trt)
            keep.append(value)
            setattr(obj, call["set"], value)
            continue
        args = [_empty_weights(trt, decode(a, refs, trt)) for a in call["args"]]
        kwargs = {k: _empty_weights(trt, decode(a, refs, trt)) for k, a in call.get("kwargs", {}).items()}
        keep.append((args, kwargs))
        result = getattr(obj, call["method"])(*args, **kwargs)
        if "ret" in call:
            refs[call["ret"]] = result
    refs["_keep"] = keep
    return refs


# ------------------------------------------------------------------ the backend itself
def test_convert_builds_without_gpu_and_refuses_to_run(tmp_path: Any) -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.LazyLinear(4))
    x = torch.randn(1, 3, 8, 8)
    model(x)
    model.eval()
    trt_model = torch2trt_lite.convert(model, [x], backend="tensorrt-rtx")
    assert trt_model.backend == "tensorrt-rtx"
    assert trt_model.metadata["trt_version"] == rtx.__version__
    assert trt_model.num_layers >= 4
    trt_model.save(tmp_path / "m.engine")
    trt_model.save_plan(tmp_path / "m.plan")
    plan = (tmp_path / "m.plan").read_bytes()
    assert plan == bytes(trt_model.plan) and len(plan) > 1000
    again = torch2trt_lite.load(tmp_path / "m.engine")
    assert bytes(again.plan) == plan and again.backend == "tensorrt-rtx"
    if not torch.cuda.is_available():
        assert not trt_model.runnable
        with pytest.raises(torch2trt_lite.BackendUnavailableError, match="needs a supported NVIDIA GPU"):
            trt_model(x)


def test_compute_capabilities_option() -> None:
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    m = torch2trt_lite.convert(model, [x], backend="tensorrt-rtx", compute_capabilities=["sm86", "8.9"])
    assert m.metadata["compute_capabilities"] == ["sm86", "sm89"]
    assert torch2trt_lite.convert(model, [x], backend="tensorrt-rtx").metadata["compute_capabilities"] == "default"
    with pytest.raises(torch2trt_lite.BackendUnavailableError, match="sm75"):
        torch2trt_lite.convert(model, [x], backend="tensorrt-rtx", compute_capabilities="sm90")
    with pytest.raises(Torch2TRTError, match="TensorRT-RTX option"):
        torch2trt_lite.convert(model, [x], backend="sim", compute_capabilities="sm86")


def test_turing_refusal_is_the_builders() -> None:
    """TensorRT-RTX has no FP32 GEMM for Turing: the BuildError carries the builder's message, also
    after other builders (TensorRT keeps the first logger of a process and ignores later ones)."""
    for _ in range(2):
        torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2)], backend="tensorrt-rtx")
    model = torch.nn.Linear(8, 4).eval()
    with pytest.raises(torch2trt_lite.BuildError, match="Turing") as e:
        torch2trt_lite.convert(model, [torch.randn(2, 8)], backend="tensorrt-rtx", compute_capabilities="sm75")
    # led by what to do (the builder's own text follows)
    assert str(e.value).startswith("building the engine failed: TensorRT-RTX cannot compile float32 matrix "
                                   "multiplications") and "precision='fp16'" in str(e.value)
    with pytest.raises(torch2trt_lite.BuildError, match=r"cannot compile bfloat16 for Turing GPUs \(sm75"):
        torch2trt_lite.convert(model, [torch.randn(2, 8)], backend="tensorrt-rtx", compute_capabilities="sm75",
                               precision="bf16")
    torch2trt_lite.convert(model, [torch.randn(2, 8)], backend="tensorrt-rtx", compute_capabilities="sm75",
                           precision="fp16")  # what the message advises builds


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without a GPU")
def test_current_compute_capability_without_a_gpu_is_a_clear_error() -> None:
    with pytest.raises(torch2trt_lite.BackendUnavailableError, match=r"'current' means the GPU of this machine"):
        torch2trt_lite.convert(torch.nn.ReLU().eval(), [torch.randn(2)], backend="tensorrt-rtx",
                               compute_capabilities="current")


def test_plugin_model_is_refused_naming_the_op() -> None:
    torchvision = pytest.importorskip("torchvision")

    class Roi(torch.nn.Module):
        def forward(self, x: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
            return torchvision.ops.roi_align(x, boxes, (2, 2))

    x = torch.randn(1, 4, 8, 8)
    boxes = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    with pytest.raises(torch2trt_lite.UnsupportedOperatorError, match=PLUGIN_REFUSAL) as info:
        torch2trt_lite.convert(Roi().eval(), [x, boxes], backend="tensorrt-rtx")
    assert "roi_align" in str(info.value) and "test_real_builder.py" in str(info.value)


def test_engine_from_another_backend_version_is_refused(tmp_path: Any) -> None:
    from torch2trt_lite.runtime import engine_file

    model = torch.nn.ReLU().eval()
    m = torch2trt_lite.convert(model, [torch.randn(2, 3)], backend="tensorrt-rtx")
    meta = dict(m.metadata)
    meta["trt_version"] = "1.5.0.1"
    engine_file.write(tmp_path / "old.engine", meta, m.plan)
    with pytest.raises(torch2trt_lite.EngineFileError, match=r"TensorRT-RTX 1\.5\.0\.1.*convert the model again"):
        torch2trt_lite.load(tmp_path / "old.engine")


def test_cli_convert_on_rtx(tmp_path: Any) -> None:
    from torch2trt_lite import cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = cli.main(["convert", "torchvision:squeezenet1_1", "--shape", "1x3x64x64", "--backend", "tensorrt-rtx",
                       "--compute-capability", "sm86,sm89", "-o", str(tmp_path / "s.engine"), "--json"])
    assert rc == 0, out.getvalue()
    text = out.getvalue()
    assert '"backend": "tensorrt-rtx"' in text and "sm89" in text
    assert torch2trt_lite.load(tmp_path / "s.engine").backend == "tensorrt-rtx"
