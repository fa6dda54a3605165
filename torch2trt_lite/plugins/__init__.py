"""Custom ops as CUDA plugins: declare once, convert to one plugin layer, run anywhere.

    from torch2trt_lite.plugins import CudaKernel, Input, Launch, declare_plugin, float_attr

A declaration (:func:`declare_plugin`) carries the contract (inputs, typed attributes, shape and
dtype rules), the torch reference the sim runs, and the CUDA kernel that TensorRT runs through a
Python ``IPluginV3`` (``trt_plugin``), compiled at run time with NVRTC (``nvrtc``). Built-in plugins
(``torch2trt_lite.plugins_cuda``: deform_conv2d, roi_align) load with :func:`load_builtin_plugins`.
Nothing here imports TensorRT or cuda-python until it is used.
"""

from __future__ import annotations

from .api import (
    DEFAULT_NAMESPACE,
    F32,
    F64,
    I32,
    I64,
    REQUIRED,
    Attr,
    Attrs,
    CudaKernel,
    In,
    Input,
    Launch,
    LaunchInfo,
    Out,
    PluginCall,
    PluginDef,
    Shapes,
    Workspace,
    add_plugin,
    bind_call,
    bool_attr,
    cdiv,
    declare_plugin,
    dmax,
    dmin,
    find_plugin,
    float_attr,
    floats_attr,
    get_plugin,
    int_attr,
    ints_attr,
    load_builtin_plugins,
    prepare_backend,
    registered_plugins,
    str_attr,
)

__all__ = [
    "DEFAULT_NAMESPACE", "F32", "F64", "I32", "I64", "REQUIRED", "Attr", "Attrs", "CudaKernel", "In", "Input",
    "Launch", "LaunchInfo", "Out", "PluginCall", "PluginDef", "Shapes", "Workspace", "add_plugin", "bind_call",
    "bool_attr", "cdiv", "declare_plugin", "dmax", "dmin", "find_plugin", "float_attr", "floats_attr",
    "get_plugin", "int_attr", "ints_attr", "load_builtin_plugins", "prepare_backend", "registered_plugins",
    "str_attr",
]
