"""A user-defined converter: teach torch2trt-lite a function it does not know.

Run: python samples/custom_converter.py
"""

from __future__ import annotations

import torch

import torch2trt_lite


def scaled_tanh(x: torch.Tensor, scale: float = 2.0) -> torch.Tensor:
    """Some function of your own package."""
    return scale * torch.tanh(x / scale)


@torch2trt_lite.converter(f"{__name__}.scaled_tanh")
def convert_scaled_tanh(ctx: torch2trt_lite.ConversionContext, call: torch2trt_lite.Call) -> object:
    x = ctx.itensor(call.arg(0, "x"))
    scale = float(call.arg(1, "scale", 2.0))
    layer = ctx.network.add_activation(x, ctx.trt.ActivationType.SCALED_TANH)
    layer.alpha, layer.beta = scale, 1.0 / scale  # alpha * tanh(beta * x)
    return layer.get_output(0)


class Model(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scaled_tanh(x, 3.0)


def main() -> None:
    model = Model().eval()
    x = torch.randn(4, 8)
    trt_model = torch2trt_lite.convert(model, [x], backend="sim")
    torch.testing.assert_close(trt_model(x), model(x), rtol=1e-5, atol=1e-6)
    print("custom converter: outputs match eager")


if __name__ == "__main__":
    main()
