"""Per-layer sim-on-CPU vs sim-on-CUDA comparison (run on a GPU machine; prints JSON).

    python tools/device_diag.py > diag.json

Each small network runs through the sim on CPU tensors and on CUDA tensors; the report gives the
max abs difference per network, so a device-specific bug points at one layer.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from torch2trt_lite import sim
from torch2trt_lite.sim import torch_dtype

trt: Any = sim.api("10.16")


def run(build: Callable[[Any, Any], Any], x: torch.Tensor, device: str) -> torch.Tensor:
    b = trt.Builder(trt.Logger())
    net = b.create_network(0)
    t = net.add_input("x", trt.float32, tuple(x.shape))
    out = build(net, t)
    net.mark_output(out)
    plan = b.build_serialized_network(net, b.create_builder_config())
    eng = trt.Runtime(trt.Logger()).deserialize_cuda_engine(plan)
    ctx = eng.create_execution_context()
    xd = x.to(device)
    ctx.set_tensor_address("x", xd)
    name = eng.get_tensor_name(1)
    y = torch.empty(tuple(ctx.get_tensor_shape(name)), dtype=torch_dtype(eng.get_tensor_dtype(name)), device=device)
    ctx.set_tensor_address(name, y)
    assert ctx.execute_async_v3(0)
    if device == "cuda":
        torch.cuda.synchronize()
    return y.cpu()


def main() -> int:
    torch.manual_seed(0)
    x = torch.randn(2, 4, 9, 9)
    w = torch.randn(4, 4, 3, 3).numpy()

    def conv(net: Any, t: Any) -> Any:
        return net.add_convolution_nd(t, 4, (3, 3), w).get_output(0)

    def avgpool(net: Any, t: Any) -> Any:
        p = net.add_pooling_nd(t, trt.PoolingType.AVERAGE, (2, 2))
        p.padding_nd = (1, 1)
        return p.get_output(0)

    def maxpool(net: Any, t: Any) -> Any:
        return net.add_pooling_nd(t, trt.PoolingType.MAX, (3, 3)).get_output(0)

    def resize(mode: str) -> Callable[[Any, Any], Any]:
        def f(net: Any, t: Any) -> Any:
            r = net.add_resize(t)
            r.shape = (2, 4, 12, 12)
            r.resize_mode = getattr(trt.InterpolationMode, mode)
            return r.get_output(0)

        return f

    def groupnorm(net: Any, t: Any) -> Any:
        s = net.add_constant((1, 4, 1, 1), np.ones((1, 4, 1, 1), np.float32)).get_output(0)
        z = net.add_constant((1, 4, 1, 1), np.zeros((1, 4, 1, 1), np.float32)).get_output(0)
        n = net.add_normalization_v2(t, s, z, 0b1100)
        n.num_groups = 2
        return n.get_output(0)

    def softmax(net: Any, t: Any) -> Any:
        return net.add_softmax(t).get_output(0)

    cases = {
        "conv": conv, "avgpool_pad": avgpool, "maxpool": maxpool, "resize_nearest": resize("NEAREST"),
        "resize_linear": resize("LINEAR"), "resize_cubic": resize("CUBIC"), "groupnorm_v2": groupnorm,
        "softmax": softmax,
    }
    report: dict[str, Any] = {"device": torch.cuda.get_device_name() if torch.cuda.is_available() else None}
    for name, build in cases.items():
        try:
            a, c = run(build, x, "cpu"), run(build, x, "cuda")
            report[name] = {"max_abs_diff": float((a - c).abs().max()), "shape": list(a.shape)}
        except Exception as e:  # noqa: BLE001 - a diagnostic: report every failure, keep going
            report[name] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(report, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
