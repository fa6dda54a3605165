"""Declaring a plugin: one custom op, one TensorRT plugin node, a CUDA kernel and a torch reference.

A declaration (:func:`declare_plugin`) states the plugin's contract once:

* identity: ``name``, ``version``, ``namespace`` (the key TensorRT's plugin registry uses);
* inputs (:class:`Input`: name, rank, fixed dtype or the plugin's float type ``T``, optional inputs
  present when a bool attribute says so) and output names;
* typed attributes (:func:`int_attr`, :func:`float_attr`, ...), taken from the call;
* the output shape rule, written with ordinary arithmetic on input dimensions (``+ - * //`` and
  :func:`cdiv`, :func:`dmax`, :func:`dmin`), so it is evaluated on ints by the sim and turned into
  TensorRT dimension expressions for dynamic shapes;
* the output dtype rule (default: every output has the type ``T`` of the float inputs);
* the torch reference implementation (run by the sim, and the ground truth of the kernel tests),
  called as ``reference(*inputs, **attrs)`` with None for an absent optional input and without
  the presence attributes;
* the CUDA source with its entry points and launch configuration (:class:`CudaKernel`);
* the torch callables it replaces (``targets``): a function or ``torch.library`` op, an
  ``nn.Module`` subclass or an ``autograd.Function`` subclass. A converter is registered for each,
  so ``convert`` turns those calls into one plugin layer.

This module declares plugins and converts their calls; the contract's pieces live in
:mod:`~torch2trt_lite.plugins.spec`, the declaration and the registry of declarations in
:mod:`~torch2trt_lite.plugins.declaration` (all re-exported here). The registry maps (name, version,
namespace) to declarations; the sim's plugin registry and the TensorRT plugin creators are both
views of it (:func:`prepare_backend`), and a saved engine finds its plugin again by that key in the
loading process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..errors import ConversionError, ConverterRefusal, PluginError
from .declaration import (
    DEFAULT_NAMESPACE,
    FLOAT_TYPES,
    PluginCall,
    PluginDef,
    add_declaration,
    attrs_from_json,
    attrs_to_json,
    decode_fields,
    encode_fields,
    field_array,
    field_type,
    find_plugin,
    get_plugin,
    load_builtin_plugins,
    numel,
    on_declare,
    registered_plugins,
)
from .spec import (
    F32,
    F64,
    I32,
    I64,
    REQUIRED,
    Arg,
    Attr,
    Attrs,
    CudaKernel,
    Dim,
    In,
    Input,
    Launch,
    LaunchInfo,
    Out,
    Shapes,
    SymbolicDim,
    Workspace,
    bool_attr,
    cdiv,
    dmax,
    dmin,
    float_attr,
    floats_attr,
    int_attr,
    ints_attr,
    str_attr,
)

if TYPE_CHECKING:
    from ..trace.context import ConversionContext


# --------------------------------------------------------------------------------- declaring
def declare_plugin(
    name: str,
    *,
    inputs: Sequence[Input | str],
    shape: Callable[[Shapes, Attrs], Sequence[Sequence[Dim]]],
    reference: Callable[..., Any],
    outputs: Sequence[str] = ("output",),
    attrs: Mapping[str, Attr] | None = None,
    version: str = "1",
    namespace: str = DEFAULT_NAMESPACE,
    dtypes: Sequence[torch.dtype] = FLOAT_TYPES,
    dtype: Callable[[torch.dtype, Attrs], Sequence[torch.dtype]] | None = None,
    cuda: CudaKernel | None = None,
    targets: Sequence[Any] = (),
    bind: Callable[[Any], PluginCall] | None = None,
    validate: Callable[[Shapes, Attrs], str | None] | None = None,
    convert: Callable[[Any, Any, PluginDef], Any] | None = None,
    doc: str = "",
    replace: bool = False,
) -> PluginDef:
    """Declare a plugin and register a converter for each of ``targets``.

    ``bind(call)`` maps a traced call to a :class:`PluginCall`; without it, positional and keyword
    arguments are matched to input names then attribute names, and for an ``nn.Module`` target
    missing attributes and inputs are read from the module (``module.stride``, ``module.weight``).
    ``validate(shapes, attrs)`` returns a reason string when input shapes break the contract (dims
    not yet known are -1). ``convert(ctx, call, pdef)`` replaces the generic converter body when a
    call needs network layers before the plugin (it ends with :func:`add_plugin`).
    Declaring the same (name, version, namespace) twice is an error unless ``replace=True``.
    """
    if not name or not isinstance(name, str):
        raise PluginError("a plugin needs a non-empty name")
    ins = tuple(Input(i) if isinstance(i, str) else i for i in inputs)
    attr_specs = dict(attrs or {})
    for i in ins:
        if i.present is not None and (i.present not in attr_specs or attr_specs[i.present].kind != "bool"):
            raise PluginError(
                f"plugin '{name}': optional input '{i.name}' names presence attribute '{i.present}', "
                "which must be declared as a bool_attr"
            )
    names = [i.name for i in ins] + list(outputs)
    if len(set(names)) != len(names):
        raise PluginError(f"plugin '{name}': input and output names must be unique, got {names}")
    for d in dtypes:
        if d not in (torch.float32, torch.float16, torch.bfloat16):
            raise PluginError(f"plugin '{name}': float type {d} is not supported (float32, float16, bfloat16)")
    pdef = PluginDef(
        name=name, version=str(version), namespace=namespace, inputs=ins, outputs=tuple(outputs),
        attrs=attr_specs, shape=shape, reference=reference, dtypes=tuple(dtypes), dtype=dtype, cuda=cuda,
        targets=tuple(targets), bind=bind, validate=validate, convert=convert, doc=doc,
    )
    listeners = add_declaration(pdef, replace)
    register_targets(pdef, pdef.targets, replace)
    for fn in listeners:
        fn(pdef)
    return pdef


def register_targets(pdef: PluginDef, targets: Sequence[Any], replace: bool = False) -> None:
    """Register the plugin converter of ``pdef`` for each of ``targets``. A target given by dotted
    name whose top-level package is not imported yet (``"torchvision.ops.roi_align.roi_align"``) is
    registered once the user imports that package (``registry.when_imported``): declaring a plugin
    never imports a heavy optional package itself."""
    import sys

    from .. import registry  # NOTE: imported here: the registry may import converters that declare plugins

    for t in targets:
        root = t.split(".", 1)[0] if isinstance(t, str) else ""
        if root and root not in sys.modules:
            registry.when_imported(root, functools.partial(_register_converter, pdef, t, replace))
        else:
            _register_converter(pdef, t, replace)


# ---------------------------------------------------------------------------------- conversion
def _is_module_class(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, torch.nn.Module)


def default_binder(pdef: PluginDef, target: Any) -> Callable[[Any], PluginCall]:
    module_target = _is_module_class(target)
    in_names = [i.name for i in pdef.inputs]
    presence = {i.present for i in pdef.inputs if i.present}
    attr_names = [a for a in pdef.attrs if a not in presence]

    def bind(call: Any) -> PluginCall:
        args = list(call.args)
        module = args.pop(0) if module_target and args else None
        values: dict[str, Any] = {}
        order = in_names + attr_names
        if len(args) > len(order):
            raise ConversionError(
                f"{pdef.label}: the call passes {len(args)} positional arguments, the plugin declares "
                f"{len(order)} ({order})"
            )
        values.update(zip(order, args, strict=False))
        for k, v in dict(call.kwargs).items():
            if k not in in_names and k not in attr_names:
                raise ConversionError(f"{pdef.label}: the call passes '{k}=', which is no input or attribute")
            values[k] = v
        if module is not None:
            for k in attr_names:
                if k not in values and hasattr(module, k):
                    values[k] = getattr(module, k)
            for k in in_names:
                if values.get(k) is None and isinstance(getattr(module, k, None), torch.Tensor):
                    values[k] = getattr(module, k)
        return PluginCall([values.get(k) for k in in_names], {k: values[k] for k in attr_names if k in values})

    return bind


def bind_call(pdef: PluginDef, call: Any, target: Any = None) -> tuple[list[Any], Attrs]:
    """Inputs (one per declared input, None when absent) and resolved attributes of a call."""
    binder = pdef.bind or default_binder(pdef, target if target is not None else getattr(call, "target", None))
    bound = binder(call)
    inputs = list(bound.inputs)
    if len(inputs) != len(pdef.inputs):
        raise ConversionError(
            f"{pdef.label}: the binder returned {len(inputs)} inputs for {len(pdef.inputs)} declared "
            f"({[i.name for i in pdef.inputs]})"
        )
    values = dict(bound.attrs)
    for spec, x in zip(pdef.inputs, inputs, strict=True):
        if spec.present is not None:
            values[spec.present] = x is not None
        elif x is None:
            raise ConversionError(f"{pdef.label}: input '{spec.name}' is required but the call has none")
    return inputs, pdef.resolve_attrs(values)


def add_plugin(ctx: ConversionContext, pdef: PluginDef, inputs: Sequence[Any], attrs: Mapping[str, Any]) -> Any:
    """Add one plugin layer for ``pdef`` to ``ctx.network``; returns its output ITensor(s).

    ``inputs`` has one entry per declared input (torch tensors, ITensors or None for an absent
    optional input). The plugin object comes from the backend's plugin registry, so the same code
    serves the sim and TensorRT.
    """
    add_plugin_v3 = getattr(ctx.network, "add_plugin_v3", None)  # TensorRT-RTX has no plugin layers
    if add_plugin_v3 is None or not getattr(ctx, "has_plugins", True):
        raise ConverterRefusal(
            f"{pdef.label} is a plugin layer, and TensorRT-RTX has no plugin API (no add_plugin_v3): a model "
            "that needs a plugin converts with backend='tensorrt' (or 'sim')"
        )
    resolved = attrs if isinstance(attrs, Attrs) else pdef.resolve_attrs(attrs)
    present = pdef.present(resolved, inputs)
    torch_inputs = [x for x in present if isinstance(x, torch.Tensor)]
    if len(torch_inputs) == len(present):
        pdef.float_type(resolved, [x.dtype for x in torch_inputs])
        pdef.check_shapes(resolved, [tuple(x.shape) for x in torch_inputs])
    itensors = [ctx.itensor(x) if isinstance(x, (torch.Tensor, bool, int, float)) else x for x in present]
    plugin = create_backend_plugin(ctx.trt, getattr(ctx, "backend_name", "sim"), pdef, resolved)
    layer = add_plugin_v3(itensors, [], plugin)
    if layer is None:
        raise ConversionError(f"{pdef.label}: the network refused the plugin layer (see the log above)")
    outs = [layer.get_output(j) for j in range(len(pdef.outputs))]
    return outs[0] if len(outs) == 1 else tuple(outs)


def create_backend_plugin(trt: Any, backend_name: str, pdef: PluginDef, attrs: Attrs) -> Any:
    """A plugin object for ``trt`` (the sim namespace or ``tensorrt``), via its plugin registry."""
    if backend_name == "tensorrt":
        from . import trt_plugin

        trt_plugin.precompile(pdef)
        return trt_plugin.create_plugin(pdef, attrs, trt)
    prepare_backend(trt, backend_name)
    creator = trt.get_plugin_registry().get_creator(pdef.name, pdef.version, pdef.namespace)
    if creator is None:
        raise PluginError(f"{pdef.label}: no plugin creator is registered with the {backend_name} plugin registry")
    fc = trt.PluginFieldCollection(encode_fields(trt, pdef, attrs))
    plugin = creator.create_plugin(pdef.name, fc, trt.TensorRTPhase.BUILD)
    if plugin is None:
        raise PluginError(f"{pdef.label}: the plugin creator returned no plugin")
    return plugin


def prepare_backend(trt: Any, backend_name: str) -> None:
    """Make this process's declared plugins known to a backend, before it deserializes an engine that
    uses them: TensorRT gets a creator per plugin in its plugin registry (``trt_plugin``); the sim's
    plugin registry gets this registry to look declarations up in (once; built-ins load on demand).
    TensorRT-RTX has no plugins: nothing to do."""
    if backend_name == "tensorrt":
        from . import trt_plugin

        trt_plugin.register_creators(trt)
    elif backend_name == "sim":
        _install_sim_lookup()


class _SimLookup:
    """The declarations as the sim's plugin registry looks them up (``sim.layers.plugin``)."""

    find = staticmethod(find_plugin)
    get = staticmethod(get_plugin)

    @staticmethod
    def declared() -> list[PluginDef]:
        load_builtin_plugins()
        return registered_plugins()


@functools.cache
def _install_sim_lookup() -> None:
    from ..sim.layers.plugin import set_declared_plugins

    set_declared_plugins(_SimLookup())


def _register_converter(pdef: PluginDef, target: Any, replace: bool) -> None:
    from .. import registry  # NOTE: imported here: the registry may import converters that declare plugins

    where: Any = target
    if isinstance(target, str) and not target.startswith("torch.ops."):
        target = registry.resolve_target(target)[3]  # the object: binders tell modules from functions

    def convert(ctx: Any, call: Any) -> Any:
        if pdef.convert is not None:
            return pdef.convert(ctx, call, pdef)
        inputs, attrs = bind_call(pdef, call, target)
        return add_plugin(ctx, pdef, inputs, attrs)

    def check(call: Any) -> str | None:
        try:
            inputs, attrs = bind_call(pdef, call, target)
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            present = pdef.present(attrs, inputs)
            if len(tensors) == len(present):
                pdef.float_type(attrs, [x.dtype for x in tensors])
                pdef.check_shapes(attrs, [tuple(x.shape) for x in tensors])
        except (PluginError, ConversionError) as e:
            return str(e)
        return None

    convert.__name__ = convert.__qualname__ = f"convert_plugin_{pdef.name}"
    convert.__doc__ = f"Converts calls of {getattr(target, '__qualname__', target)!r} to {pdef.label}."
    init_fn = getattr(target, "_init_fn", None)
    if not isinstance(where, str) and type(target).__name__ == "CustomOpDef" and init_fn is not None:
        # NOTE: a torch.library.custom_op object has no __name__; the registry patches it where it
        # was defined, by dotted name (the decorator rebinds the function's name to the op object).
        where = f"{init_fn.__module__}.{init_fn.__name__}"
    registry.converter(where, check=check, override=replace)(convert)



__all__ = [
    "DEFAULT_NAMESPACE", "FLOAT_TYPES", "REQUIRED", "Arg", "Attr", "Attrs", "CudaKernel", "Dim", "F32", "F64",
    "I32", "I64", "In", "Input", "Launch", "LaunchInfo", "Out", "PluginCall", "PluginDef", "Shapes",
    "SymbolicDim", "Workspace", "add_plugin", "attrs_from_json", "attrs_to_json", "bind_call", "bool_attr",
    "cdiv", "create_backend_plugin", "declare_plugin", "decode_fields", "default_binder", "dmax", "dmin",
    "encode_fields", "field_array", "field_type", "find_plugin", "float_attr", "floats_attr", "get_plugin",
    "int_attr", "ints_attr", "load_builtin_plugins", "numel", "on_declare", "prepare_backend",
    "register_targets", "registered_plugins", "str_attr",
]
