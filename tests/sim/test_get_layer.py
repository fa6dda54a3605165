"""``INetworkDefinition.get_layer`` gives a base ``ILayer``, as TensorRT's Python API does.

Verified on TensorRT (tensorrt_rtx 1.7): after ``add_activation``, ``network.get_layer(0)`` is a
``tensorrt.ILayer`` whose ``.type`` is ``LayerType.ACTIVATION`` (the IActivationLayer itself has its
own ``type``, an ActivationType); ``network[i]`` and iterating the network give ILayers too; the same
object comes back while it is held. Subclass attributes are reached with the idiom
``layer.__class__ = trt.IActivationLayer`` (Polygraphy does this).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from tests.sim.netbuilder import Net, infer, trt
from torch2trt_lite.sim import _plan

L = trt.LayerType


def _x(net: Net) -> Any:
    return net.input("x", (2, 3))


# (LayerType, subclass, add the layer to net on input x)
LAYERS: list[tuple[Any, Any, Callable[[Net, Any], Any]]] = [
    (L.ACTIVATION, trt.IActivationLayer, lambda n, x: n.network.add_activation(x, trt.ActivationType.RELU)),
    (L.UNARY, trt.IUnaryLayer, lambda n, x: n.network.add_unary(x, trt.UnaryOperation.EXP)),
    (L.CAST, trt.ICastLayer, lambda n, x: n.network.add_cast(x, trt.int32)),
    (L.ELEMENTWISE, trt.IElementWiseLayer, lambda n, x: n.network.add_elementwise(x, x, trt.ElementWiseOperation.SUM)),
    (L.IDENTITY, trt.IIdentityLayer, lambda n, x: n.network.add_identity(x)),
    (L.SHUFFLE, trt.IShuffleLayer, lambda n, x: n.network.add_shuffle(x)),
    (L.SOFTMAX, trt.ISoftMaxLayer, lambda n, x: n.network.add_softmax(x)),
    (L.REDUCE, trt.IReduceLayer, lambda n, x: n.network.add_reduce(x, trt.ReduceOperation.SUM, 1, True)),
    (L.SHAPE, trt.IShapeLayer, lambda n, x: n.network.add_shape(x)),
]


@pytest.mark.parametrize(("layer_type", "cls", "add"), LAYERS, ids=[str(t).split(".")[-1] for t, _, _ in LAYERS])
def test_get_layer_is_a_base_ilayer_whose_type_is_the_layer_type(layer_type: Any, cls: Any, add: Any) -> None:
    net = Net()
    layer = add(net, _x(net))
    assert type(layer) is cls
    got = net.network.get_layer(0)
    assert type(got) is trt.ILayer and isinstance(got, trt.ILayer) and not isinstance(got, cls)
    assert got.type == layer_type and isinstance(got.type, trt.LayerType)
    assert got is not layer and got.name == layer.name and got.num_outputs == layer.num_outputs
    assert got.get_output(0) is layer.get_output(0) and got.get_input(0) is layer.get_input(0)
    assert got.get_output_type(0) == layer.get_output_type(0)
    assert type(net.network[0]) is trt.ILayer and net.network[0].type == layer_type
    assert [type(x) for x in net.network] == [trt.ILayer]


def test_activation_and_unary_type_attributes_stay_on_the_subclass() -> None:
    net = Net()
    act = net.network.add_activation(_x(net), trt.ActivationType.SIGMOID)
    un = net.network.add_unary(act.get_output(0), trt.UnaryOperation.ABS)
    assert act.type == trt.ActivationType.SIGMOID  # the subclass's own type (shadows ILayer.type)
    assert [net.network.get_layer(i).type for i in range(2)] == [L.ACTIVATION, L.UNARY]
    base = net.network.get_layer(0)
    with pytest.raises(AttributeError):
        base.alpha  # noqa: B018 - ILayer has no alpha: downcast first
    assert un.op == trt.UnaryOperation.ABS


def test_get_layer_downcast_by_class_assignment_reaches_the_layer() -> None:
    net = Net()
    x = _x(net)
    act = net.network.add_activation(x, trt.ActivationType.RELU)
    un = net.network.add_unary(act.get_output(0), trt.UnaryOperation.EXP)
    a, u = net.network.get_layer(0), net.network.get_layer(1)
    a.__class__ = trt.IActivationLayer
    u.__class__ = trt.IUnaryLayer
    assert a.type == trt.ActivationType.RELU and a.alpha == 0.0
    assert u.op == trt.UnaryOperation.EXP
    # settings written through the downcast object are the layer's, and reach the engine
    a.type, a.alpha = trt.ActivationType.LEAKY_RELU, 0.5
    u.op = trt.UnaryOperation.NEG
    assert act.type == trt.ActivationType.LEAKY_RELU and act.alpha == 0.5 and un.op == trt.UnaryOperation.NEG
    # after a downcast, get_layer gives a fresh base ILayer again (as pybind11 does)
    assert type(net.network.get_layer(0)) is trt.ILayer and net.network.get_layer(0).type == L.ACTIVATION
    v = torch.tensor([[-2.0, -1.0, 0.0], [1.0, 2.0, 3.0]])
    (got,) = infer(net.build(un.get_output(0)), {"x": v})
    torch.testing.assert_close(got, -torch.where(v >= 0, v, 0.5 * v))


def test_get_layer_gives_the_same_object_while_it_is_an_ilayer() -> None:
    net = Net()
    net.network.add_identity(_x(net))
    first = net.network.get_layer(0)
    assert net.network.get_layer(0) is first and net.network[0] is first
    assert net.network.get_layer(1) is None and net.network.get_layer(-1) is None


def test_name_metadata_and_precision_set_through_get_layer_reach_the_plan() -> None:
    net = Net()
    x = _x(net)
    act = net.network.add_activation(x, trt.ActivationType.RELU)
    cast = net.network.add_cast(act.get_output(0), trt.int32)
    for i, name in enumerate(["my_relu", "my_cast"]):
        layer = net.network.get_layer(i)
        layer.name, layer.metadata = name, f"meta {i}"
    net.network.get_layer(0).precision = trt.float16
    assert (act.name, cast.name) == ("my_relu", "my_cast")
    assert act.metadata == "meta 0" and act.precision_is_set and act.precision == trt.float16
    assert net.network.get_layer(0).name == "my_relu"
    plan = net.plan(cast.get_output(0))
    assert plan is not None
    header, _ = _plan.parse(plan)
    assert [rec["name"] for rec in header["layers"]] == ["my_relu", "my_cast"]
    engine = trt.Runtime(trt.Logger(trt.Logger.INTERNAL_ERROR)).deserialize_cuda_engine(plan)
    assert engine.num_layers == 2 and [layer.name for layer in engine._layers] == ["my_relu", "my_cast"]


def test_set_input_through_get_layer_rewires_the_layer() -> None:
    net = Net()
    x, w = _x(net), net.input("w", (2, 3))
    ew = net.network.add_elementwise(x, x, trt.ElementWiseOperation.SUM)
    net.network.get_layer(0).set_input(1, w)
    assert ew.get_input(1) is w
    down = net.network.get_layer(0)
    down.__class__ = trt.IElementWiseLayer
    down.op = trt.ElementWiseOperation.SUB
    assert ew.op == trt.ElementWiseOperation.SUB
    a, b = torch.arange(6.0).reshape(2, 3), torch.full((2, 3), 10.0)
    (got,) = infer(net.build(ew.get_output(0)), {"x": a, "w": b})
    torch.testing.assert_close(got, a - b)
    # the layer (not the get_layer object) is what its input tensors feed
    assert all(c is ew for c in x._consumers) and all(c is ew for c in w._consumers)
