"""A user-defined plugin, end to end: a torch.library custom op (and an nn.Module) -> one plugin layer.

    python samples/custom_plugin.py [--backend sim|tensorrt|auto]

What it shows:

1. a custom op, ``t2t_sample::swish(x, beta) = x * sigmoid(beta * x)``, written with
   ``torch.library.custom_op`` (TensorRT has no layer for it);
2. ``declare_plugin``: name and version, a typed attribute (``beta``), the shape rule, the torch
   reference, the CUDA source with its entry points and launch rule, and the targets it replaces:
   the custom op and an ``nn.Module`` (``Swish``, whose ``beta`` attribute is read from the module);
3. ``convert`` turning both calls into plugin layers; the sim runs the reference, TensorRT runs the
   kernel (compiled with NVRTC for the GPU at hand);
4. without TensorRT but with a GPU, the kernel runs on CUDA tensors through cuda-python; without a
   GPU, NVRTC still compiles it and reports registers and spills;
5. anywhere with g++, the host emulator runs the same kernel on the CPU against the reference.
"""

from __future__ import annotations

import argparse

import torch

import torch2trt_lite
from torch2trt_lite.errors import BackendUnavailableError
from torch2trt_lite.plugins import (
    F32,
    I64,
    CudaKernel,
    In,
    Launch,
    LaunchInfo,
    Out,
    cdiv,
    declare_plugin,
    float_attr,
)

SWISH_CU = r"""
#include <cuda_fp16.h>

__device__ __forceinline__ float swish(float v, float beta) { return v / (1.f + expf(-beta * v)); }

extern "C" __global__ void __launch_bounds__(256) swish_fp32(const float* __restrict__ x, float* __restrict__ y,
                                                             long long n, float beta) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = swish(x[i], beta);
}

extern "C" __global__ void __launch_bounds__(256) swish_fp16(const __half* __restrict__ x, __half* __restrict__ y,
                                                             long long n, float beta) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    y[i] = __float2half_rn(swish(__half2float(x[i]), beta));
}
"""


@torch.library.custom_op("t2t_sample::swish", mutates_args=())
def swish(x: torch.Tensor, beta: float) -> torch.Tensor:
    return x * torch.sigmoid(beta * x)


@swish.register_fake
def _(x: torch.Tensor, beta: float) -> torch.Tensor:
    return torch.empty_like(x)


class Swish(torch.nn.Module):
    def __init__(self, beta: float = 1.0) -> None:
        super().__init__()
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(self.beta * x)


def swish_reference(x: torch.Tensor, *, beta: float) -> torch.Tensor:
    """The torch implementation the sim runs (computed in fp32, returned in x's dtype)."""
    xf = x.float()
    return (xf * torch.sigmoid(beta * xf)).to(x.dtype)


def swish_launch(info: LaunchInfo) -> Launch:
    n = 1
    for d in info.inputs["x"]:
        n *= d
    kernel = "swish_fp16" if info.dtype == torch.float16 else "swish_fp32"
    return Launch(kernel, grid=min(cdiv(n, 256), 4096), block=256, args=(In("x"), Out(0), I64(n), F32(info.attrs.beta)))


SWISH = declare_plugin(
    "t2t_sample_swish",
    version="1",
    inputs=["x"],
    attrs={"beta": float_attr(1.0, doc="slope inside the sigmoid")},
    shape=lambda ins, a: [ins["x"]],  # elementwise: the output has the input's shape, dynamic dims included
    reference=swish_reference,
    cuda=CudaKernel(source=SWISH_CU, entry_points=("swish_fp32", "swish_fp16"), launch=swish_launch),
    targets=(swish, Swish),
    replace=True,  # NOTE: lets the sample be re-imported in one process
)


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.act = Swish(beta=0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(swish(x, 1.5))


def main(backend: str = "sim") -> float:
    torch.manual_seed(0)
    model = Model().eval()
    x = torch.randn(2, 16, 8, 8)
    trt_model = torch2trt_lite.convert(model, [x], backend=backend)
    device = "cuda" if trt_model.backend == "tensorrt" else "cpu"
    x = x.to(device)
    with torch.no_grad():
        err = (trt_model(x) - model.to(device)(x)).abs().max().item()
    print(f"backend={trt_model.backend}: max |converted - torch| = {err:.3g}")

    from torch2trt_lite.plugins import nvrtc

    try:
        if torch.cuda.is_available():
            xc = torch.randn(4096, device="cuda", dtype=torch.float16)
            (y,) = nvrtc.run_plugin(SWISH, [xc], {"beta": 1.5})
            kerr = (y.float() - swish_reference(xc, beta=1.5).float()).abs().max().item()
            print(f"CUDA kernel via cuda-python (fp16): max error vs reference = {kerr:.3g}")
        else:
            compiled = nvrtc.compile_kernel(SWISH.cuda, 90, ptxas_verbose=True)  # type: ignore[arg-type]
            for name, r in nvrtc.ptxas_resources(compiled.log).items():
                print(f"NVRTC {r.arch} {name}: {r.registers} registers, {r.spill_stores} bytes spilled")
    except BackendUnavailableError as e:
        print(f"(kernel check skipped: {e})")

    # No GPU needed: the host emulator compiles the same CUDA source for the CPU (g++) and runs it
    # with the plugin's own launch rule, so indexing and bounds are checked against the reference.
    from torch2trt_lite.plugins import host_emulator

    if host_emulator.compiler() is not None:
        xe = torch.randn(5000)
        (ye,) = host_emulator.emulate_plugin(SWISH, [xe], {"beta": 1.5})
        eerr = (ye - swish_reference(xe, beta=1.5)).abs().max().item()
        print(f"CUDA kernel on the CPU (host emulator, fp32): max error vs reference = {eerr:.3g}")
        err = max(err, eerr)
    return err


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="sim", choices=["sim", "tensorrt", "auto"])
    error = main(parser.parse_args().backend)
    raise SystemExit(0 if error < 1e-2 else 1)
