"""The model zoo in fp16 and bf16 (issue 11): every zoo model converts with ``precision="fp16"`` and
``"bf16"`` on the sim, matches eager PyTorch in the same precision, and stays near the fp32 output.

References, on the zoo's inputs (random weights made non-trivial as in tests/zoo/test_zoo.py):

* the same precision: eager PyTorch under ``torch.autocast("cpu", dtype)``. CPU autocast's lists
  are not the converter's (which follow CUDA autocast: softmax, normalization and large reductions
  in fp32), so the two are different roundings of the same model, compared within the family's
  ``same`` tolerance;
* fp32: the model in float32, within the family's ``fp32`` distance.

Each figure is ``max|engine - reference| / max|reference|`` over every output tensor. The measured
figures per model are committed in benchmarks/results/2026-12-02-precision-cpu/precision_zoo.md
(``benchmarks/bench_precision.py``); the tolerances below are about 3x the worst measured in each
family. Each engine must also compute in the target type (a layer with that output type), return
the user's output types, and give finite outputs.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

import torch2trt_lite
from tests.weights import nontrivial
from tests.zoo.test_zoo import ZOO, Zoo, _leaves

# family -> precision -> (same-precision tolerance, fp32 distance)
TOLERANCES: dict[str, dict[str, tuple[float, float]]] = {
    "cnn": {"fp16": (1e-2, 1e-2), "bf16": (6e-2, 6e-2)},  # worst measured: 3.5e-3 / 2.3e-2 (timm mobilenetv3)
    "transformer": {"fp16": (1e-2, 1e-2), "bf16": (6e-2, 6e-2)},  # worst: 2.2e-3 / 2.1e-2 (sam2 hiera)
    "recurrent": {"fp16": (1e-2, 1e-2), "bf16": (3e-2, 3e-2)},  # worst: 4.9e-4 / 7.2e-3
}

_TRANSFORMERS = ("vit", "swin", "maxvit", "deit", "eva", "beit", "mixer", "levit", "tiny_vit", "efficientvit",
                 "pvt", "sam2", "mobilevit", "poolformer")


def family(name: str) -> str:
    if name.startswith("hf_mamba") or name.startswith("lstm"):
        return "recurrent"
    if name.startswith("hf_") or any(k in name for k in _TRANSFORMERS):
        return "transformer"
    return "cnn"


def rel_err(got: dict[str, torch.Tensor], ref: dict[str, torch.Tensor], ints: bool = True) -> float | None:
    """The largest relative error over floating outputs; None when the reference is not finite (fp16
    overflow in eager PyTorch: there is nothing to compare with). Integer outputs must be equal
    (unless ``ints`` is False: see ``_ROUNDED_INDICES``)."""
    worst = 0.0
    for key, r in ref.items():
        if not r.is_floating_point():
            assert not ints or torch.equal(got[key], r), f"{key}: integer output differs"
            continue
        r32 = r.float()
        if not torch.isfinite(r32).all():
            return None
        g = got[key].float()
        assert torch.isfinite(g).all(), f"{key}: the engine's output is not finite"
        scale = r32.abs().max().item()
        err = (g - r32).abs().max().item()
        worst = max(worst, err / scale if scale > 0 else err)
    return worst


# Models whose outputs are decisions, not values: a reduced-precision score crossing a threshold or
# reordering two close scores changes which detections come out, so no tolerance compares them.
_DISCRETE = {
    "tv_ssdlite320_mobilenet_v3_large": (
        "detections (score thresholds, top-k, NMS) are discrete decisions that fp16/bf16 rounding changes; "
        "no tolerance applies"
    ),
}


# Models with integer outputs that are positions of float values (the index of a running maximum):
# rounding to fp16/bf16 makes near-equal values tie or swap, which moves the index; their float outputs
# are compared as usual, and the indices exactly in fp32 (tests/zoo/test_zoo.py).
_ROUNDED_INDICES = {
    "patch_time_series": "cummax indices of a forecast: bf16 rounding makes close values tie (the last wins)",
}


def _params() -> list[Any]:
    out = []
    for z in ZOO:
        if z.xfail:
            continue  # refused in fp32 already (tests/zoo/test_zoo.py says why)
        for precision in ("fp16", "bf16"):
            marks = [pytest.mark.skip(reason=_DISCRETE[z.name])] if z.name in _DISCRETE else []
            out.append(pytest.param(z, precision, id=f"{z.name}-{precision}", marks=marks))
    return out


@pytest.mark.parametrize("zoo,precision", _params())
def test_zoo_model_in_reduced_precision(zoo: Zoo, precision: str) -> None:
    torch.manual_seed(0)
    model = zoo.build().eval()
    nontrivial(model)
    xs = zoo.inputs()
    dtype = torch2trt_lite.trace.precision.PRECISIONS[precision]
    ref_low: dict[str, torch.Tensor] | None = None
    with torch.no_grad():
        ref32 = _leaves(model(*[x.clone() for x in xs]))
        try:
            with torch.autocast("cpu", dtype=dtype):
                ref_low = _leaves(model(*[x.clone() for x in xs]))
        except RuntimeError as e:
            # NOTE: PyTorch on CPU has no fp16 LSTM (oneDNN: "could not create a primitive descriptor"),
            # so that model has no same-precision eager reference: it is compared with fp32 only
            assert "LSTM" in str(e), e
    trt = torch2trt_lite.convert(model, [x.clone() for x in xs], backend="sim", precision=precision)
    got = _leaves(trt(*[x.clone() for x in xs]))
    assert list(got) == list(ref32)
    for key, r in ref32.items():
        assert got[key].shape == r.shape and got[key].dtype == r.dtype, key  # the user's types come back
    low = {"fp16": "HALF", "bf16": "BF16"}[precision]
    assert any(low in dts for _, _, dts in trt.layer_precisions()), "no layer computes in the target type"
    same, far = TOLERANCES[family(zoo.name)][precision]
    ints = zoo.name not in _ROUNDED_INDICES
    e32 = rel_err(got, ref32, ints)
    assert e32 is not None and e32 <= far, f"{precision} engine vs fp32 eager: {e32:.3g} > {far}"
    e_low = rel_err(got, ref_low, ints) if ref_low is not None else None
    if e_low is not None:  # None: eager autocast itself overflowed (its fp16 softmax/exp); the engine did not
        assert e_low <= same, f"{precision} engine vs eager autocast: {e_low:.3g} > {same}"
