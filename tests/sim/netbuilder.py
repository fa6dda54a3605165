"""Shared scaffolding for the sim's layer tests: build a network through a plan and run it.

``Net`` wraps a builder, a network, a builder config and (on demand) one optimization profile;
``Net.build()`` serializes the network with ``build_serialized_network`` and deserializes it with
``Runtime.deserialize_cuda_engine``, so every test round-trips its layers through a plan.
``infer()`` runs an engine through an execution context; outputs whose shape is still unknown once
the input shapes are set (data-dependent) go through an IOutputAllocator.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from torch2trt_lite.sim import api, torch_dtype

trt = api("10.16")


class Net:
    """A builder, a network, a config and (on demand) one optimization profile."""

    def __init__(self, ns: Any = trt, flags: int = 0) -> None:
        self.ns = ns
        self.builder = ns.Builder(ns.Logger(ns.Logger.INTERNAL_ERROR))
        self.network = self.builder.create_network(flags)
        self.config = self.builder.create_builder_config()
        self.profile: Any = None

    # -- tensors
    def input(self, name: str, shape: Sequence[int], dtype: Any = None) -> Any:
        return self.network.add_input(name, dtype if dtype is not None else self.ns.float32, list(shape))

    def const(self, arr: np.ndarray | torch.Tensor, shape: Sequence[int] | None = None) -> Any:
        """A constant holding ``arr`` (``shape`` overrides its dimensions)."""
        a = arr.numpy() if isinstance(arr, torch.Tensor) else np.asarray(arr)
        dims = list(a.shape) if shape is None else list(shape)
        return self.network.add_constant(dims, np.ascontiguousarray(a)).get_output(0)

    def ints(self, values: Sequence[int], dtype: Any = np.int32) -> Any:
        return self.const(np.array(values, dtype=dtype))

    def scalar(self, value: int | float | bool) -> Any:
        """A 0-D constant: int32 for ints, bool for bools, float32 otherwise."""
        dt = np.int32 if isinstance(value, int) and not isinstance(value, bool) else (
            np.bool_ if isinstance(value, bool) else np.float32)
        return self.network.add_constant([], np.array([value], dtype=dt)).get_output(0)

    def ew(self, a: Any, b: Any, op: str) -> Any:
        return self.network.add_elementwise(a, b, getattr(self.ns.ElementWiseOperation, op)).get_output(0)

    # -- optimization profile
    def _profile(self) -> Any:
        if self.profile is None:
            self.profile = self.builder.create_optimization_profile()
        return self.profile

    def dynamic(self, name: str, mn: Sequence[int], opt: Sequence[int], mx: Sequence[int]) -> None:
        self._profile().set_shape(name, mn, opt, mx)

    def shape_values(self, name: str, mn: Sequence[int], opt: Sequence[int], mx: Sequence[int]) -> None:
        self._profile().set_shape_input(name, mn, opt, mx)

    # -- building
    def plan(self, *outputs: Any) -> Any:
        for o in outputs:
            self.network.mark_output(o)
        if self.profile is not None:
            self.config.add_optimization_profile(self.profile)
        return self.builder.build_serialized_network(self.network, self.config)

    def build(self, *outputs: Any) -> Any:
        plan = self.plan(*outputs)
        assert plan is not None, "build_serialized_network failed"
        engine = self.ns.Runtime(self.ns.Logger(self.ns.Logger.INTERNAL_ERROR)).deserialize_cuda_engine(plan)
        assert engine is not None
        return engine

    def build_fails(self, *outputs: Any) -> bool:
        return self.plan(*outputs) is None


def output_allocator(ns: Any = trt, device: str | torch.device = "cpu") -> Any:
    """An ``ns.IOutputAllocator`` that receives data-dependent outputs as byte buffers on ``device``."""

    class Allocator(ns.IOutputAllocator):  # type: ignore[misc, name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.buffers: dict[str, torch.Tensor] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(self, tensor_name: str, memory: int, size: int, alignment: int) -> int:
            self.buffers[tensor_name] = torch.empty(max(int(size), 1), dtype=torch.uint8, device=device)
            return int(self.buffers[tensor_name].data_ptr())

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(int(d) for d in shape)

    return Allocator()


def infer(engine: Any, feeds: dict[str, torch.Tensor], device: str | torch.device = "cpu", *,
          ns: Any = trt, context: Any = None) -> list[torch.Tensor]:
    """Run ``engine`` on ``feeds``; returns the outputs in engine order (on the CPU).

    Inputs and outputs live on ``device`` (shape inputs stay on the host); ``context`` reuses an
    execution context instead of creating one. Outputs whose shape is still unknown after the input
    shapes are set (data-dependent) go through an ``ns.IOutputAllocator``.
    """
    ctx = context or engine.create_execution_context()
    keep = []
    for name, t in feeds.items():
        t = t.contiguous() if engine.is_shape_inference_io(name) else t.to(device).contiguous()
        keep.append(t)
        assert ctx.set_input_shape(name, list(t.shape))
        assert ctx.set_tensor_address(name, t)
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    names = [n for n in names if engine.get_tensor_mode(n) == ns.TensorIOMode.OUTPUT]
    alloc = output_allocator(ns, device)
    outs: dict[str, torch.Tensor] = {}
    for name in names:
        shape = tuple(ctx.get_tensor_shape(name))
        if any(d < 0 for d in shape):
            assert ctx.set_output_allocator(name, alloc)
            continue
        outs[name] = torch.empty(shape, dtype=torch_dtype(engine.get_tensor_dtype(name)), device=device)
        assert ctx.set_tensor_address(name, outs[name])
    assert ctx.execute_async_v3(0), "execute_async_v3 failed"
    result = []
    for name in names:
        if name not in outs:
            shape = alloc.shapes[name]
            dt = torch_dtype(engine.get_tensor_dtype(name))
            n = int(np.prod(shape)) if shape else 1
            nbytes = n * torch.empty(0, dtype=dt).element_size()
            outs[name] = alloc.buffers[name][:nbytes].view(dt).reshape(shape)
        result.append(outs[name].cpu())
    return result
