"""Harness cases: activations."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.converters.harness import Case, randn

CASES = [
    Case("relu_functional", F.relu, lambda: [randn(2, 3, 4)], targets=["torch.nn.functional.relu"]),
    Case("relu_torch", torch.relu, lambda: [randn(2, 3, 4)], targets=["torch.relu"]),
    Case("relu_method", lambda x: x.relu(), lambda: [randn(2, 3, 4)], targets=["torch.Tensor.relu"]),
    Case("relu_inplace", lambda x: (x * 1).relu_(), lambda: [randn(2, 3, 4)],
         targets=["torch.Tensor.relu_"], xfail="mul converter not written yet"),
    Case("relu_inplace_fn", lambda x: torch.relu_(x * 1), lambda: [randn(2, 3, 4)],
         targets=["torch.relu_"], xfail="mul converter not written yet"),
    Case("relu_module", torch.nn.ReLU, lambda: [randn(2, 3, 4)], is_module=True),
    Case("relu6", F.relu6, lambda: [randn(2, 3, 4) * 5], targets=["torch.nn.functional.relu6"]),
    Case("sigmoid", torch.sigmoid, lambda: [randn(2, 3, 4)],
         targets=["torch.sigmoid", "torch.nn.functional.sigmoid"]),
    Case("sigmoid_method", lambda x: x.sigmoid(), lambda: [randn(5)],
         targets=["torch.Tensor.sigmoid"]),
    Case("sigmoid_inplace", lambda x: x.sigmoid_(), lambda: [randn(5)], targets=["torch.Tensor.sigmoid_"]),
    Case("tanh", torch.tanh, lambda: [randn(2, 3, 4)], targets=["torch.tanh", "torch.nn.functional.tanh"]),
    Case("tanh_method", lambda x: x.tanh(), lambda: [randn(5)], targets=["torch.Tensor.tanh"]),
    Case("tanh_inplace", lambda x: x.tanh_(), lambda: [randn(5)], targets=["torch.Tensor.tanh_"]),
]
