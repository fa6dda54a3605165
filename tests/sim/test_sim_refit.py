"""The sim's refit API against TensorRT's documented rules (Refitter, set_weights_name, builder and
serialization flags): a network ``y = x + w`` with ``w`` a named constant, its outputs checked
against torch's ``x + w`` for the weights each rule says the engine holds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

import torch2trt_lite.sim as trt
from torch2trt_lite.backends import CapturingLogger


def _engine(*flags: Any, mark: bool = False) -> tuple[Any, Any, np.ndarray, CapturingLogger]:
    log = CapturingLogger(trt)
    builder = trt.Builder(log.logger)
    net = builder.create_network(0)
    x = net.add_input("x", trt.DataType.FLOAT, (2, 3))
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    c = net.add_constant((2, 3), w)
    net.mark_output(net.add_elementwise(x, c.get_output(0), trt.ElementWiseOperation.SUM).get_output(0))
    assert not net.set_weights_name(np.ones(6, np.float32), "w")  # weights no layer uses: False, logged
    assert net.set_weights_name(w, "w")
    if mark:
        assert net.mark_weights_refittable("w") and not net.mark_weights_refittable("nothing")
    config = builder.create_builder_config()
    for f in flags:
        config.set_flag(f)
    runtime = trt.Runtime(log.logger)
    return runtime.deserialize_cuda_engine(builder.build_serialized_network(net, config)), runtime, w, log


def _run(engine: Any) -> torch.Tensor:
    ctx = engine.create_execution_context()
    x, out = torch.ones(2, 3), torch.empty(2, 3)
    ctx.set_tensor_address("x", x.data_ptr())
    ctx.set_tensor_address(engine.get_tensor_name(1), out.data_ptr())
    assert ctx.execute_async_v3(0)
    return out


def test_refit_replaces_named_weights_and_checks_count_and_type() -> None:
    engine, _, w, log = _engine(trt.BuilderFlag.REFIT)
    assert engine.refittable
    refitter = trt.Refitter(engine, log.logger)
    assert refitter.get_all_weights() == ["w"] and refitter.get_missing_weights() == []
    torch.testing.assert_close(_run(engine), torch.ones(2, 3) + torch.from_numpy(w), rtol=0, atol=0)
    new = np.full((2, 3), 5, np.float32)
    assert not refitter.set_named_weights("w", np.ones(5, np.float32))  # another count
    assert not refitter.set_named_weights("w", np.ones(6, np.float16))  # another type
    assert not refitter.set_named_weights("v", new)  # no such name
    assert refitter.set_named_weights("w", new) and refitter.refit_cuda_engine()
    torch.testing.assert_close(_run(engine), torch.ones(2, 3) + torch.from_numpy(new), rtol=0, atol=0)


def test_an_engine_built_without_refit_is_not_refittable() -> None:
    engine, _, w, log = _engine()
    assert not engine.refittable
    assert not trt.Refitter(engine, log.logger).set_named_weights("w", w)


def test_stripped_weights_are_missing_until_set() -> None:
    engine, runtime, w, log = _engine(trt.BuilderFlag.REFIT, trt.BuilderFlag.STRIP_PLAN)
    ctx = engine.create_execution_context()
    x, out = torch.ones(2, 3), torch.empty(2, 3)
    ctx.set_tensor_address("x", x.data_ptr())
    ctx.set_tensor_address(engine.get_tensor_name(1), out.data_ptr())
    assert not ctx.execute_async_v3(0)  # no weights yet
    refitter = trt.Refitter(engine, log.logger)
    assert refitter.get_missing_weights() == ["w"] and not refitter.refit_cuda_engine()
    new = np.full((2, 3), 2, np.float32)
    assert refitter.set_named_weights("w", new) and refitter.get_missing_weights() == []
    assert refitter.refit_cuda_engine()
    torch.testing.assert_close(_run(engine), torch.ones(2, 3) + torch.from_numpy(new), rtol=0, atol=0)
    again = runtime.deserialize_cuda_engine(engine.serialize())  # serialized after the refit: with its weights
    torch.testing.assert_close(_run(again), torch.ones(2, 3) + torch.from_numpy(new), rtol=0, atol=0)


def test_exclude_weights_serialization_and_refit_identical() -> None:
    engine, runtime, w, log = _engine(trt.BuilderFlag.REFIT_IDENTICAL)
    config = engine.create_serialization_config()
    config.set_flag(trt.SerializationFlag.EXCLUDE_WEIGHTS)
    light = runtime.deserialize_cuda_engine(engine.serialize_with_config(config))
    refitter = trt.Refitter(light, log.logger)
    assert refitter.get_missing_weights() == ["w"]
    assert refitter.set_named_weights("w", w * 2) and not refitter.refit_cuda_engine()  # not the build's values
    assert "REFIT_IDENTICAL" in log.errors[-1]
    assert refitter.set_named_weights("w", w) and refitter.refit_cuda_engine()
    torch.testing.assert_close(_run(light), torch.ones(2, 3) + torch.from_numpy(w), rtol=0, atol=0)


def test_refit_individual_takes_only_marked_weights() -> None:
    engine, _, _, log = _engine(trt.BuilderFlag.REFIT_INDIVIDUAL, mark=True)
    assert trt.Refitter(engine, log.logger).get_all_weights() == ["w"]
    unmarked, _, _, log2 = _engine(trt.BuilderFlag.REFIT_INDIVIDUAL)
    assert trt.Refitter(unmarked, log2.logger).get_all_weights() == []
