"""Replay the TensorRT 10.16 conformance cases (tests/data/trt_conformance) on the sim.

Each case is replayed the way a TensorRT client does it (see the README next to ``cases.json``):
the recorded API calls build the network, ``build_serialized_network`` gives a plan, which is
deserialized with ``Runtime.deserialize_cuda_engine``; an execution context gets the input shapes,
torch tensors as tensor addresses (output allocators for data-dependent output shapes), and
``execute_async_v3`` runs it. The outputs are compared with what real TensorRT 10.16 returned.

The cases are replayed on ``torch2trt_lite.sim.api(case["trt_version"])``: the namespace of the
TensorRT version that produced the expected outputs (its enums hold e.g. ``BuilderFlag.FP16``,
which 11.1 removed).

Run one family with ``pytest tests/sim/test_conformance.py -k Convolution``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.sim.netbuilder import output_allocator
from torch2trt_lite.sim import api, torch_dtype

CASES_PATH = Path(__file__).resolve().parents[1] / "data" / "trt_conformance" / "cases.json"
CASES: list[dict[str, Any]] = json.loads(CASES_PATH.read_text())

# Cases that do not pass yet: {case id: "reason: what is missing"}. Each is a strict xfail, so a
# case that starts passing fails the run until its entry is removed. Layer owners edit their own.
XFAIL: dict[str, str] = {}

# Tolerances (README "How to replay a case"): float32 relative 1e-5 plus a small absolute term
# (the log printed at most 8 decimals, and the GPU's results differ in the last float32 bits);
# float16 / bfloat16 relative 1e-3 (bfloat16: one bf16 ulp, 2**-7, since bf16 keeps 8 bits);
# integers and booleans exactly.
FLOAT32_RTOL, FLOAT32_ATOL = 1e-5, 2e-6
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (FLOAT32_RTOL, FLOAT32_ATOL),
    "float16": (1e-3, 1e-3),
    "bfloat16": (2**-7, 2**-7),
}
# Per-case float32 tolerance overrides, {case id: (rtol, atol, reason)}.
CASE_TOLERANCES: dict[str, tuple[float, float, str]] = {}

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

_REF = re.compile(r"^(t\d+|L\d+|S\d+|builder|network|config|profile|plan)$")
_ENUM = re.compile(r"^([A-Z][A-Za-z0-9]*(?:\.[A-Z][A-Za-z0-9]*)*)\.([A-Za-z0-9_]+)$")
_NP_DTYPES = {
    "float32": np.float32, "float16": np.float16, "int8": np.int8, "uint8": np.uint8,
    "int32": np.int32, "int64": np.int64, "bool": np.bool_,
}
_TORCH_DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int8": torch.int8,
    "uint8": torch.uint8, "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
}

# Output types numpy cannot hold; the cookbook printed them converted to float32 (FP4 and E8M0
# already travel in float32 tensors in the sim).
_PRINTED_AS_FLOAT32 = (torch.float8_e4m3fn,)

# ------------------------------------------------------------------------------ decoding
def _is_array(v: Any) -> bool:
    return isinstance(v, dict) and set(v) >= {"dtype", "shape", "values"}


def _float(v: Any) -> float:
    return float(v) if isinstance(v, str) else v  # "nan", "inf", "-inf" -> float


def to_numpy(arr: dict[str, Any]) -> np.ndarray:
    """A case array as numpy (bfloat16 as float32: numpy has no bfloat16)."""
    dt = arr["dtype"]
    values = [_float(v) for v in arr["values"]]
    np_dt = np.float32 if dt == "bfloat16" else _NP_DTYPES[dt]
    return np.array(values, dtype=np_dt).reshape(arr["shape"])


def to_torch(arr: dict[str, Any]) -> torch.Tensor:
    a = to_numpy(arr)
    t = torch.from_numpy(a.copy(order="C"))  # (np.ascontiguousarray would make 0-d arrays 1-d)
    return t.to(_TORCH_DTYPES[arr["dtype"]])


def _enum(trt: Any, text: str) -> Any:
    m = _ENUM.match(text)
    assert m is not None, text
    owner: Any = trt
    for part in m.group(1).split("."):
        owner = getattr(owner, part)
    return getattr(owner, m.group(2))


def decode(v: Any, refs: dict[str, Any], trt: Any) -> Any:
    if isinstance(v, str):
        if _REF.match(v):
            return refs[v]
        if _ENUM.match(v):
            return _enum(trt, v)
        return v
    if isinstance(v, list):
        return [decode(x, refs, trt) for x in v]
    if isinstance(v, dict):
        if "bitmask" in v:
            mask = 0
            for name in v["bitmask"]:
                mask |= 1 << int(_enum(trt, name))
            return mask
        if "str" in v and len(v) == 1:
            return v["str"]
        if _is_array(v):
            return to_numpy(v)
        return {k: decode(x, refs, trt) for k, x in v.items()}
    return v


# ------------------------------------------------------------------------------- running
def replay_network(case: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """Replay every call of ``case``; returns (the version namespace, refs)."""
    trt = api(case["trt_version"])
    refs: dict[str, Any] = {"builder": trt.Builder(trt.Logger())}
    for call in case["calls"]:
        obj = refs[call["obj"]]
        if call.get("query"):
            # Only printed by the script: call it where the API has it, ignore the result.
            fn = getattr(obj, call["method"], None)
            if fn is not None:
                fn(*[decode(a, refs, trt) for a in call["args"]])
            continue
        if "set" in call:
            setattr(obj, call["set"], decode(call["value"], refs, trt))
            continue
        args = [decode(a, refs, trt) for a in call["args"]]
        kwargs = {k: decode(a, refs, trt) for k, a in call.get("kwargs", {}).items()}
        result = getattr(obj, call["method"])(*args, **kwargs)
        if "ret" in call:
            refs[call["ret"]] = result
    return trt, refs


def run_engine(
    trt: Any, engine: Any, inputs: dict[str, dict[str, Any]], out_names: list[str]
) -> dict[str, torch.Tensor]:
    """One inference through an execution context; returns the named outputs on the CPU."""
    context = engine.create_execution_context()
    keep: list[torch.Tensor] = []
    for name, arr in inputs.items():
        t = to_torch(arr)
        t = t if engine.is_shape_inference_io(name) else t.to(DEVICE)
        t = t.contiguous()
        keep.append(t)
        assert context.set_input_shape(name, list(t.shape)), f"set_input_shape({name!r}) failed"
        assert context.set_tensor_address(name, t), f"set_tensor_address({name!r}) failed"
    allocator = None
    outputs: dict[str, torch.Tensor] = {}
    for name in out_names:
        dtype = torch_dtype(engine.get_tensor_dtype(name))
        shape = tuple(context.get_tensor_shape(name))
        alias = None
        try:
            alias = engine.get_aliased_input_tensor(name)
        except AttributeError:
            alias = None
        if alias:
            outputs[name] = dict(zip(inputs, keep, strict=True))[alias]
            context.set_tensor_address(name, outputs[name])
        elif any(d < 0 for d in shape):
            allocator = allocator or output_allocator(trt, DEVICE)
            assert context.set_output_allocator(name, allocator)
        else:
            outputs[name] = torch.empty(shape, dtype=dtype, device=DEVICE)
            context.set_tensor_address(name, outputs[name])
    assert context.execute_async_v3(0), "execute_async_v3 failed (see the logged error)"
    if DEVICE.type == "cuda":
        torch.cuda.synchronize()
    for name in out_names:
        if name in outputs:
            continue
        assert allocator is not None and name in allocator.shapes, f"no shape was notified for {name!r}"
        shape = allocator.shapes[name]
        dtype = torch_dtype(engine.get_tensor_dtype(name))
        n = int(np.prod(shape)) if shape else 1
        outputs[name] = allocator.buffers[name].view(dtype)[:n].reshape(shape)
    return {n: t.cpu() for n, t in outputs.items()}


def compare(case_id: str, got: torch.Tensor, expected: dict[str, Any], what: str) -> None:
    want = to_torch(expected)
    if got.dtype in _PRINTED_AS_FLOAT32 and expected["dtype"] == "float32":
        got = got.float()  # numpy has no FP8: the log shows these outputs converted to float32
    assert tuple(got.shape) == tuple(want.shape), f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if expected["dtype"] in TOLERANCES:
        rtol, atol = TOLERANCES[expected["dtype"]]
        if expected["dtype"] == "float32" and case_id in CASE_TOLERANCES:
            rtol, atol, _ = CASE_TOLERANCES[case_id]
        torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"{what}: {m}")
    else:
        assert torch.equal(got, want), f"{what}: integer/bool values differ:\n{got}\nexpected\n{want}"


def run_case(case: dict[str, Any]) -> None:
    trt, refs = replay_network(case)
    plan = refs["plan"]
    assert plan is not None, "build_serialized_network returned None (see the logged error)"
    engine = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan)
    assert engine is not None, "deserialize_cuda_engine returned None"
    # Compare through the marked tensors (the sim need not reproduce TensorRT's default names).
    names = [refs[m["tensor"]].name for m in case["marked_outputs"]]
    runs = [{"inputs": case["inputs"], "outputs": case["outputs"]}, *case.get("extra_runs", [])]
    for k, run in enumerate(runs):
        got = run_engine(trt, engine, run["inputs"], names)
        for m, name in zip(case["marked_outputs"], names, strict=True):
            compare(case["id"], got[name], run["outputs"][m["name"]], f"run {k}, output {m['name']!r}")


def _param(case: dict[str, Any]) -> Any:
    marks = []
    if case["id"] in XFAIL:
        marks.append(pytest.mark.xfail(reason=XFAIL[case["id"]], strict=True))
    return pytest.param(case, id=case["id"], marks=marks)


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_conformance(case: dict[str, Any]) -> None:
    run_case(case)


def test_case_ids_are_unique() -> None:
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) == 106


def test_xfail_entries_name_cases() -> None:
    ids = {c["id"] for c in CASES}
    assert set(XFAIL) <= ids, sorted(set(XFAIL) - ids)
    assert set(CASE_TOLERANCES) <= ids, sorted(set(CASE_TOLERANCES) - ids)
