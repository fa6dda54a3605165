"""One call of an engine: inputs checked, an optimization profile chosen, shapes and addresses bound,
outputs allocated (output allocators for data-dependent shapes), the engine executed."""

from __future__ import annotations

import threading
from typing import Any

import torch

from torch2trt_lite.backends import Backend
from torch2trt_lite.errors import BackendUnavailableError, RuntimeExecutionError
from torch2trt_lite.runtime.loading import Loaded


def check_inputs(st: Loaded | None, inputs: tuple[Any, ...]) -> list[torch.Tensor]:
    """The engine's input tensors (contiguous), checked against its inputs: count, dtypes, one device
    (CUDA for a real engine), shapes within a range (or an optimization profile), and the dims the
    engine assumes equal (``equal_dims`` of its metadata: traced at the same size) equal."""
    if st is None or st.engine is None:
        if st is not None and st.plan:
            be = st.backend
            targets = st.meta.get("compute_capabilities")
            built_for = f" (built for {', '.join(targets)})" if isinstance(targets, list) and targets else ""
            raise BackendUnavailableError(
                f"this engine was built by {be.label}{built_for} and needs a supported NVIDIA GPU to run; "
                "this machine has none (torch.cuda.is_available() is False). It can still be written with "
                "save() or save_plan() and run on a GPU machine (torch2trt_lite.load, trtexec, Triton)"
            )
        raise RuntimeExecutionError("this TRTModule holds no engine: load one with torch2trt_lite.load")
    if len(inputs) != len(st.inputs):
        raise RuntimeExecutionError(
            f"expected {len(st.inputs)} input(s) ({', '.join(i['name'] for i in st.inputs)}), got {len(inputs)}"
        )
    device = None
    out = []
    real = st.backend.is_real
    for spec, dt, x in zip(st.inputs, st.in_dtypes, inputs, strict=True):
        name = spec["name"]
        if not isinstance(x, torch.Tensor):
            raise RuntimeExecutionError(f"input '{name}': expected a torch.Tensor, got {type(x).__name__}")
        if x.dtype != dt:
            raise RuntimeExecutionError(
                f"input '{name}': expected dtype {dt}, got {x.dtype}; convert with .to({dt})"
            )
        if device is None:
            device = x.device
        elif x.device != device:
            raise RuntimeExecutionError(f"inputs are on different devices: {device} and {x.device}")
        if real and x.device.type != "cuda":
            raise RuntimeExecutionError(
                f"input '{name}': TensorRT engines take CUDA tensors, got {x.device}; move it with .cuda()"
            )
        lo, hi = spec["min"], spec["max"]
        if "profiles" not in st.meta and (  # NOTE: with profiles, checked against each of them below
            x.dim() != len(lo) or not all(a <= d <= b for a, d, b in zip(lo, x.shape, hi, strict=True))
        ):
            rng = tuple(lo) if lo == hi else f"between {tuple(lo)} and {tuple(hi)}"
            raise RuntimeExecutionError(
                f"input '{name}': shape {tuple(x.shape)} is outside the engine's range {rng}; convert with "
                "an input of this shape (or a dynamic range that covers it)"
            )
        out.append(x if x.is_contiguous() else x.contiguous())
    if "profiles" in st.meta and _profile_for(st, out) is None:
        shapes = ", ".join(f"{i['name']} {tuple(x.shape)}" for i, x in zip(st.inputs, out, strict=True))
        raise RuntimeExecutionError(
            f"input shapes {shapes} are outside every optimization profile of the engine: "
            + "; ".join(f"profile {k}: {_ranges_text(p)}" for k, p in enumerate(st.meta["profiles"]))
            + ". Call it with shapes within one profile, or convert with a range that covers them"
        )
    for group in st.equal_dims:  # duck sizing: dims traced at the same size are one size for the engine
        k0, d0, n0 = group[0]
        s0 = out[k0].shape[d0]
        for k, d, n in group[1:]:
            if out[k].shape[d] != s0:
                raise RuntimeExecutionError(
                    f"input '{n0}' dim {d0} is {s0} but input '{n}' dim {d} is {out[k].shape[d]}: they were traced "
                    "at the same size, so the engine assumes they are equal; trace them at distinct sizes if they "
                    "can differ (convert again), or call the engine with them equal (the model's code decided a "
                    "branch or a size on their equality)"
                )
    return out


def bind(
    st: Loaded, ctx: Any, xs: list[torch.Tensor], device: torch.device,
) -> tuple[list[torch.Tensor | None], list[Any]]:
    """Set the input shapes and addresses, allocate the outputs of static shape (output allocators
    for the others: their entries are None)."""
    be = st.backend
    errors = st.log.errors
    errors.clear()
    if "profiles" in st.meta:
        k = _profile_for(st, xs)
        if k is None:
            raise RuntimeExecutionError("the input shapes are outside every optimization profile of the engine")
        if int(getattr(ctx, "active_optimization_profile", 0)) != k:
            if not ctx.set_optimization_profile_async(k, be.stream_handle(device)):
                raise RuntimeExecutionError(
                    f"selecting optimization profile {k} failed: " + ("; ".join(errors) or "no reason given")
                )
    for spec, x in zip(st.inputs, xs, strict=True):
        if not ctx.set_input_shape(spec["name"], tuple(x.shape)):
            raise RuntimeExecutionError(f"input '{spec['name']}': " + "; ".join(errors))
        if "values" in spec:  # a shape input: TensorRT reads its values on the host
            x = st.host_inputs[threading.get_ident(), spec["name"]] = _shape_input(spec, x)
        ctx.set_tensor_address(spec["name"], be.tensor_address(x))
    outs: list[torch.Tensor | None] = []
    allocators = []
    given = st.allocated.setdefault(id(ctx), set())  # outputs with an allocator set on this context
    for spec, dt in zip(st.outputs, st.out_dtypes, strict=True):
        shape = tuple(ctx.get_tensor_shape(spec["name"]))
        if -1 in shape or spec["name"] in given:
            # NOTE: an allocator set on a context stays set: an output that once had one (a data-dependent
            # size) keeps one, even where these input shapes fix its size (the buffer set instead is unused)
            given.add(spec["name"])
            alloc = _make_allocator(be, device, dt)
            ctx.set_output_allocator(spec["name"], alloc)
            allocators.append(alloc)
            outs.append(None)
            continue
        try:
            y = torch.empty(shape, dtype=dt, device=device)
        except (RuntimeError, MemoryError, ValueError) as e:
            raise RuntimeExecutionError(
                f"output '{spec['name']}': cannot allocate shape {shape} ({type(e).__name__}: {e})"
            ) from None
        ctx.set_tensor_address(spec["name"], be.tensor_address(y))
        outs.append(y)
    return outs, allocators


def execute(st: Loaded, ctx: Any, xs: list[torch.Tensor]) -> list[torch.Tensor]:
    """Run the engine on ``xs`` with execution context ``ctx`` (on the stream the backend gives)."""
    be = st.backend
    device = xs[0].device if xs else torch.device("cuda" if be.is_real else "cpu")
    outs, allocators = bind(st, ctx, xs, device)
    if not ctx.execute_async_v3(be.stream_handle(device)):
        raise RuntimeExecutionError("engine execution failed: " + ("; ".join(st.log.errors) or "no reason given"))
    it = iter(allocators)
    return [y if y is not None else next(it).result(spec["name"]) for y, spec in zip(outs, st.outputs, strict=True)]


def check_assertions(st: Loaded, leaves: list[torch.Tensor]) -> None:
    """Raise when a runtime check of the model (``torch._assert`` on values, ``torch._check_tensor_all``)
    failed in this run: its engine output is False."""
    for k, message in st.assertions:
        if not bool(leaves[k].all()):
            raise RuntimeExecutionError(
                f"a check in the model failed on these inputs: {message} (the engine evaluated it as its output "
                f"{st.outputs[k]['name']!r}; PyTorch checked it only on the traced inputs)"
            )


def _shape_input(spec: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
    """The host copy of shape input ``x`` (its values compute sizes), checked against the range its
    optimization profile was built for."""
    host = x.detach().to("cpu").contiguous()
    lo, hi = spec["values"]["min"], spec["values"]["max"]
    flat = host.reshape(-1).tolist()
    bad = [i for i, v in enumerate(flat) if not lo[i] <= v <= hi[i]]
    if bad:
        i = bad[0]
        raise RuntimeExecutionError(
            f"input '{spec['name']}': value {flat[i]} at {i} is outside [{lo[i]}, {hi[i]}], the range of values the "
            "engine was built for (its values compute sizes: convert with an Input whose low/high cover it)"
        )
    return host


def _profile_for(st: Loaded, xs: list[torch.Tensor]) -> int | None:
    """The index of the first optimization profile whose ranges cover the shapes of ``xs``."""
    for k, prof in enumerate(st.meta["profiles"]):
        if all(
            x.dim() == len(prof[i["name"]]["min"]) and all(
                a <= d <= b for a, d, b in zip(prof[i["name"]]["min"], x.shape, prof[i["name"]]["max"], strict=True)
            )
            for i, x in zip(st.inputs, xs, strict=True)
        ):
            return k
    return None


def _ranges_text(prof: dict[str, Any]) -> str:
    return ", ".join(f"{n} {tuple(r['min'])}..{tuple(r['max'])}" for n, r in prof.items())


def _make_allocator(be: Backend, device: torch.device, dtype: torch.dtype) -> Any:
    """An output allocator for outputs of data-dependent shape (their buffers are torch tensors)."""
    base = be.trt.IOutputAllocator
    sim = be.name == "sim"

    class _Allocator(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            base.__init__(self)
            self.buffers: dict[str, torch.Tensor] = {}
            self.shapes: dict[str, tuple[int, ...]] = {}

        def reallocate_output(self, tensor_name: str, memory: Any, size: int, alignment: int) -> Any:
            buf = torch.empty(max(int(size), 1), dtype=torch.uint8, device=device)
            self.buffers[tensor_name] = buf
            return buf if sim else buf.data_ptr()

        def reallocate_output_async(self, tensor_name: str, memory: Any, size: int, alignment: int, stream: int) -> Any:
            return self.reallocate_output(tensor_name, memory, size, alignment)

        def notify_shape(self, tensor_name: str, shape: Any) -> None:
            self.shapes[tensor_name] = tuple(shape)

        def result(self, name: str) -> torch.Tensor:
            shape = self.shapes[name]
            n = 1
            for d in shape:
                n *= d
            itemsize = torch.empty(0, dtype=dtype).element_size()
            return self.buffers[name][: n * itemsize].view(dtype).view(shape)

    return _Allocator()
