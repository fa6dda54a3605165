"""Reduced precision: ``convert(..., precision="fp16" | "bf16")``, ``precision_overrides=`` and models
traced under ``torch.autocast``.

TensorRT 11 and TensorRT-RTX are strongly typed: no FP16 builder flag lets TensorRT pick each layer's
type, every tensor's type is the one the network gives it. So the converter decides, with a policy
that follows ``torch.autocast``'s op lists, applied while the model is traced:

* **lower precision** (:data:`LOWER`): convolutions, linear layers, matrix multiplies, attention,
  and embedding lookups (their tables are then stored in the target type). Their floating inputs, weights included, are cast to the target type before the
  call: weights are stored in it and the layer computes in it.
* **float32** (:data:`FP32`): the numerically sensitive ops of autocast's float32 list, softmax,
  normalization statistics (layer norm, group norm, RMS norm), large reductions (sum, mean, var, std,
  norm, prod, cumsum, logsumexp), exp/log/pow chains, distances and losses, and recurrent layers
  (LSTM, GRU, RNN: their state accumulates over time steps). Their floating inputs are cast to float32.
* **everything else** runs in its inputs' types, with torch's type promotion where they mix (an
  activation after a fp16 convolution is fp16; a residual add of fp16 and fp32 is fp32), as under
  autocast.

Each cast is a named Cast layer, ``<module path>/<op>_in_<type>`` (e.g. ``layer1.0.conv1/conv2d_in_fp16``).
The traced PyTorch run computes with the same casts, so every traced tensor has the type of its
network tensor. Inputs and outputs keep the user's types: floating outputs are cast back to the
floating inputs' type (float32 when the model takes none) unless ``io_dtype=`` says otherwise.

``precision_overrides`` maps module paths (``"backbone.layer4"``: that module and everything inside),
module classes (``torch.nn.LayerNorm``) and ops (``F.softmax``, or a registered qualname such as
``"torch.nn.functional.softmax"``) to a precision. Inside an overridden module every op computes in
the override's type, except the float32 ops, which stay float32 unless the op itself is overridden;
an op override applies wherever the op is called. The innermost module override wins. A call is inside a
module when it is made in the module's ``forward`` or in any other of its methods (``self.quantizer.encode(z)``,
which module hooks do not see: :meth:`Policy.scope`), and its layers are named under that module's path.

A model traced under ``torch.autocast(device_type, dtype=...)`` converts with autocast's own lists for
that device (:data:`AUTOCAST_LOWER`, :data:`AUTOCAST_FP32`), so the engine computes what eager
PyTorch computed under autocast.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten
from torch.utils.weak import WeakIdKeyDictionary

from torch2trt_lite.errors import Torch2TRTError

PRECISIONS: dict[str, torch.dtype] = {
    "fp32": torch.float32, "float32": torch.float32, "float": torch.float32,
    "fp16": torch.float16, "float16": torch.float16, "half": torch.float16,
    "bf16": torch.bfloat16, "bfloat16": torch.bfloat16,
}
SHORT = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


def short_name(dtype: torch.dtype) -> str:
    """``fp32``/``fp16``/``bf16`` (other types: torch's name without ``torch.``), as in cast layer names."""
    return SHORT.get(dtype, str(dtype).replace("torch.", ""))

_T = "torch.Tensor."
_F = "torch.nn.functional."

# autocast's lower-precision list (CUDA), as the callables torch2trt-lite converts
LOWER: frozenset[str] = frozenset({
    "torch.conv1d", "torch.conv2d", "torch.conv3d", "torch.conv_transpose1d", "torch.conv_transpose2d",
    "torch.conv_transpose3d", "torch.conv_tbc", "torch.prelu", _T + "prelu",
    _F + "linear", "torch.bilinear", _F + "bilinear",
    "torch.matmul", _T + "matmul", _T + "__matmul__", _T + "__rmatmul__", "torch.mm", _T + "mm",
    "torch.bmm", _T + "bmm", "torch.baddbmm", _T + "baddbmm", "torch.addmm", _T + "addmm", "torch.addbmm",
    "torch.mv", _T + "mv", "torch.addmv", "torch.addr", "torch.chain_matmul", "torch.linalg.multi_dot",
    "torch.functional.einsum", "torch.einsum", "torch.linalg.vecdot",
    _F + "scaled_dot_product_attention", _F + "multi_head_attention_forward",
    "torch.nn.modules.activation.MultiheadAttention",
    # NOTE: not on autocast's list: embedding tables are stored in the target type too (a lookup does
    # no arithmetic; BERT-base's tables are 94 MB in fp32)
    _F + "embedding", _F + "embedding_bag",
    # NOTE: fake quantization feeds a lower-precision layer: Q/DQ in the target type, so the DQ output goes
    # straight into the layer (the form TensorRT fuses into an INT8/FP8 kernel), not through a Cast
    "torch.fake_quantize_per_tensor_affine", "torch.fake_quantize_per_channel_affine",
    "torch2trt_lite.quantization.fake.fake_quantize_fp8", "torch2trt_lite.quantization.fake.fake_quantize_weight",
})

# autocast's float32 list (CUDA), plus the reductions the policy keeps in float32
FP32: frozenset[str] = frozenset({
    *(p + n for n in ("softmax", "log_softmax") for p in ("torch.", _T, _F, "torch.special.")),
    _F + "softmin", _F + "layer_norm", _F + "group_norm", _F + "rms_norm", _F + "instance_norm",
    _F + "local_response_norm", _F + "normalize", _F + "softplus", _F + "cosine_similarity",
    "torch.cosine_similarity", _F + "pairwise_distance", "torch.pairwise_distance", "torch.pdist",
    "torch.functional.cdist", "torch.cdist", "torch.dist", "torch.renorm",
    *(p + n for n in ("sum", "nansum", "mean", "nanmean", "prod", "cumsum", "cumprod", "var", "std",
                      "norm", "logsumexp", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "pow",
                      "reciprocal", "rsqrt", "acos", "asin", "cosh", "sinh", "tan", "erfinv")
      for p in ("torch.", _T)),
    "torch.var_mean", "torch.std_mean", "torch.linalg.norm", "torch.linalg.vector_norm",
    "torch.functional.norm", "torch.special.logsumexp", "torch.special.expm1", "torch.special.exp2",
    "torch.special.log1p", "torch.special.erfinv", _T + "__pow__", _T + "__rpow__",
    # NOTE: recurrent layers stay fp32 (autocast's CUDA list has their cells in fp16): their state
    # accumulates over the time steps, and PyTorch on CPU has no fp16 LSTM to trace with
    "torch.nn.modules.rnn.LSTM", "torch.nn.modules.rnn.GRU", "torch.nn.modules.rnn.RNN",
    *(_F + n for n in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "nll_loss",
                       "cross_entropy", "binary_cross_entropy_with_logits", "poisson_nll_loss",
                       "hinge_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
                       "multilabel_margin_loss", "multi_margin_loss", "cosine_embedding_loss",
                       "triplet_margin_loss")),
})

# autocast's promote list (CUDA): floating inputs cast to the widest floating type among them
PROMOTE: frozenset[str] = frozenset({
    "torch.addcdiv", _T + "addcdiv", "torch.addcmul", _T + "addcmul", "torch.atan2", _T + "atan2",
    "torch.arctan2", _T + "arctan2", "torch.cross", "torch.linalg.cross", "torch.dot", _T + "dot",
    _F + "grid_sample", "torch.index_put", _T + "index_put", "torch.scatter_add", _T + "scatter_add",
    "torch.functional.tensordot", "torch.tensordot", "torch.cat", "torch.concat", "torch.concatenate",
    "torch.stack", "torch.where", _T + "where", "torch.lerp", _T + "lerp",
})

# torch.autocast's own lists, per device type (torch/csrc/autograd/autocast_mode.cpp)
AUTOCAST_LOWER: dict[str, frozenset[str]] = {
    "cuda": (LOWER - {_F + "multi_head_attention_forward", _F + "embedding", _F + "embedding_bag",
                      "torch.fake_quantize_per_tensor_affine", "torch.fake_quantize_per_channel_affine",
                      "torch2trt_lite.quantization.fake.fake_quantize_fp8",
                      "torch2trt_lite.quantization.fake.fake_quantize_weight"}) | {
        "torch.nn.modules.rnn.LSTM", "torch.nn.modules.rnn.GRU", "torch.nn.modules.rnn.RNN",
    },
    "cpu": frozenset({
        "torch.conv1d", "torch.conv2d", "torch.conv3d", "torch.conv_transpose1d", "torch.conv_transpose2d",
        "torch.conv_transpose3d", "torch.conv_tbc", "torch.prelu", _T + "prelu", _F + "linear",
        "torch.matmul", _T + "matmul", _T + "__matmul__", _T + "__rmatmul__", "torch.mm", _T + "mm",
        "torch.bmm", _T + "bmm", "torch.baddbmm", _T + "baddbmm", "torch.addmm", _T + "addmm",
        "torch.addbmm", "torch.linalg.vecdot", _F + "scaled_dot_product_attention",
        "torch.nn.modules.rnn.LSTM",
    }),
}
AUTOCAST_FP32: dict[str, frozenset[str]] = {
    "cuda": FP32 - {
        "torch.nn.modules.rnn.LSTM", "torch.nn.modules.rnn.GRU", "torch.nn.modules.rnn.RNN",
        *(p + n for n in ("mean", "nanmean", "var", "std", "logsumexp", "nansum", "exp2")
          for p in ("torch.", _T)),
        "torch.var_mean", "torch.std_mean", _F + "rms_norm", _F + "instance_norm", _F + "local_response_norm",
        "torch.special.logsumexp", "torch.special.exp2", "torch.linalg.norm", "torch.linalg.vector_norm",
        _F + "pairwise_distance", "torch.pairwise_distance",
    },
    "cpu": frozenset({
        _F + "avg_pool3d", _F + "max_pool3d", _F + "adaptive_avg_pool3d", "torch.prod", _T + "prod",
        "torch.functional.cdist", "torch.cdist", "torch.pdist", _F + "grid_sample",
        *(_F + n for n in ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "kl_div", "nll_loss",
                           "cross_entropy", "binary_cross_entropy_with_logits", "poisson_nll_loss",
                           "hinge_embedding_loss", "margin_ranking_loss", "soft_margin_loss",
                           "multilabel_margin_loss", "multi_margin_loss", "cosine_embedding_loss",
                           "triplet_margin_loss")),
    }),
}

WIDEST = torch.float64  # marker for Policy.target: the widest floating type among the call's inputs
_FLOATS = frozenset({torch.bfloat16, torch.float16, torch.float32})

# calls whose arguments the policy never casts: explicit conversions (in-place writes, the tracer's
# _is_inplace, never reach it)
_NEVER = frozenset({_T + n for n in ("to", "type", "type_as", "half", "float", "bfloat16", "double", "view_as")})


def precision_dtype(value: Any, what: str = "precision") -> torch.dtype:
    """``"fp16"``, ``"bf16"``, ``"fp32"`` (or a torch float dtype) as a torch dtype."""
    if isinstance(value, torch.dtype) and value in SHORT:
        return value
    if isinstance(value, str) and value.lower() in PRECISIONS:
        return PRECISIONS[value.lower()]
    quantized = {"int8": "int8", "fp8": "fp8", "float8": "fp8", "float8_e4m3fn": "fp8"}
    name = str(value).lower().replace("torch.", "")
    if name in quantized and what == "precision":
        raise Torch2TRTError(
            f"precision={value!r}: INT8 and FP8 are explicit quantization, not a precision: calibrate first with "
            f"qmodel = torch2trt_lite.quantize(model, calibration_batches, dtype={quantized[name]!r}), then "
            f"convert(qmodel, inputs) (also with precision='fp16' for the layers it leaves unquantized)"
        )
    raise Torch2TRTError(f"{what} must be 'fp32', 'fp16' or 'bf16' (or torch.float32/float16/bfloat16), got {value!r}")


@dataclass
class Policy:
    """The types a traced call computes in (see the module docstring)."""

    dtype: torch.dtype | None  # the lower precision of ``LOWER`` ops; None: only overrides apply
    lower: frozenset[str] = LOWER
    fp32: frozenset[str] = FP32
    modules: dict[str, torch.dtype] = field(default_factory=dict)  # module path -> override in effect
    ops: dict[str, torch.dtype] = field(default_factory=dict)  # qualname -> override
    source: str = "precision"  # "precision" or "autocast"
    described: dict[str, str] = field(default_factory=dict)  # the user's overrides, as text (engine metadata)
    _casts: Any = field(default_factory=WeakIdKeyDictionary, repr=False)
    owners: dict[int, str] = field(default_factory=dict, repr=False)  # id(module) -> path, with module overrides

    def scope(self, path: str) -> str:
        """The module a call is made in, for module overrides: the innermost module of the model with a
        method on the stack, so a call in ``self.quantizer.encode(z)`` is inside ``quantizer`` (module hooks,
        which give ``path``, see ``forward`` called through ``__call__`` only); ``path`` where none is."""
        if not self.owners:
            return path
        frame: Any = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            if code.co_argcount and code.co_varnames[0] == "self":
                owner = self.owners.get(id(frame.f_locals.get("self")))
                if owner is not None:
                    return owner
            frame = frame.f_back
        return path

    def target(self, qualname: str, module_path: str) -> torch.dtype | None:
        """The type every floating input of this call is cast to; None: left as they are;
        :data:`WIDEST`: the widest floating type among them."""
        if qualname in _NEVER:
            return None
        o = self.ops.get(qualname)
        if o is not None:
            return o
        if qualname in self.fp32:
            return torch.float32 if self.dtype is not None or self.modules else None
        m = self.modules.get(module_path) if self.modules else None
        if m is not None:
            return m
        if qualname in self.lower:
            return self.dtype if self.dtype is not None else torch.float32  # NOTE: fp32 outside an fp16 island
        if qualname in PROMOTE or self.source == "precision":
            # NOTE: under precision=, an op the lists do not name that meets fp16 and fp32 inputs (the
            # policy's doing) computes in the wider type, as torch's type promotion does for elementwise ops
            return WIDEST
        return None



def settings(policy: Policy | None, io_dtype: torch.dtype | None) -> dict[str, Any]:
    """What engine files record of a conversion's precision (``policy`` None: plain fp32; an engine
    written before this record reads as that too)."""
    return {
        "precision": SHORT[policy.dtype] if policy is not None and policy.dtype is not None else "fp32",
        "source": policy.source if policy is not None else "precision",
        "overrides": dict(policy.described) if policy is not None else {},
        "io_dtype": SHORT[io_dtype] if io_dtype is not None else None,
    }


def make_policy(
    model: Any, precision: Any, overrides: Mapping[Any, Any] | None, inputs: list[torch.Tensor],
) -> Policy | None:
    """The policy of a conversion (None: plain fp32, nothing cast). A model traced under
    ``torch.autocast`` gets autocast's lists."""
    dtype = precision_dtype(precision)
    auto = _autocast(inputs)
    source = "precision"
    lower, fp32 = LOWER, FP32
    if auto is not None:
        device, adt = auto
        if dtype != torch.float32 and dtype != adt:
            raise Torch2TRTError(
                f"convert was called under torch.autocast({device!r}, dtype={adt}) with precision={SHORT[dtype]!r}; "
                "give one of the two (autocast alone converts with autocast's casts)"
            )
        dtype, source = adt, "autocast"
        lower, fp32 = AUTOCAST_LOWER.get(device, AUTOCAST_LOWER["cuda"]), AUTOCAST_FP32.get(device, AUTOCAST_FP32["cuda"])
    low = None if dtype == torch.float32 else dtype
    if low is not None and low not in (torch.float16, torch.bfloat16):
        raise Torch2TRTError(f"autocast dtype {dtype} is not one TensorRT computes in; use float16 or bfloat16")
    modules, ops, described = _overrides(model, overrides or {})
    if low is None and not modules and not ops:
        return None
    owners = {id(m): p for p, m in model.named_modules()} if modules and isinstance(model, torch.nn.Module) else {}
    return Policy(low, lower, fp32, modules, ops, source, described, owners=owners)


def _autocast(inputs: list[torch.Tensor]) -> tuple[str, torch.dtype] | None:
    devices = {x.device.type for x in inputs} or {"cpu"}
    for device in sorted(devices | {"cpu", "cuda"}, key=lambda d: d not in devices):
        try:
            on = torch.is_autocast_enabled(device)
        except (RuntimeError, TypeError):
            continue
        if on:
            return device, torch.get_autocast_dtype(device)
    return None


def _overrides(
    model: Any, overrides: Mapping[Any, Any],
) -> tuple[dict[str, torch.dtype], dict[str, torch.dtype], dict[str, str]]:
    """(module path -> dtype in effect, for every path under an override; op qualname -> dtype;
    the overrides as text)."""
    from torch2trt_lite.registry import REGISTRY, load_builtin_converters

    if not isinstance(overrides, Mapping):
        raise Torch2TRTError(
            "precision_overrides must be a dict, e.g. {'backbone.layer4': 'fp32', torch.nn.LayerNorm: 'fp32', "
            f"F.softmax: 'fp32'}}; got {type(overrides).__name__}"
        )
    if not overrides:
        return {}, {}, {}
    load_builtin_converters()
    named = dict(model.named_modules()) if isinstance(model, torch.nn.Module) else {}
    paths: dict[str, torch.dtype] = {}
    classes: list[tuple[type, torch.dtype]] = []
    ops: dict[str, torch.dtype] = {}
    described: dict[str, str] = {}
    records = REGISTRY.records()
    for key, value in overrides.items():
        dt = precision_dtype(value, f"precision_overrides[{key!r}]")
        if isinstance(key, type) and issubclass(key, torch.nn.Module):
            if not any(isinstance(m, key) for m in named.values()):
                raise Torch2TRTError(f"precision_overrides: the model has no {key.__qualname__} module")
            classes.append((key, dt))
            described[f"{key.__module__}.{key.__qualname__}"] = SHORT[dt]
            continue
        if isinstance(key, str) and key in named:
            paths[key] = dt
            described[key or "<model>"] = SHORT[dt]
            continue
        quals = [r.qualname for r in records if r.target is key or r.qualname == key]
        if not quals and callable(key):
            from torch2trt_lite.registry import owners_of_function

            quals = [q for _, _, q in owners_of_function(key)]
            quals = [q for q in quals if REGISTRY.get(q) is not None]
        if not quals:
            hint = ""
            if isinstance(key, str):
                near = sorted(p for p in named if p and (p.startswith(key.rsplit(".", 1)[0]) or key in p))[:5]
                hint = f"; module paths of this model include {near or sorted(p for p in named if p)[:5]}"
            raise Torch2TRTError(
                f"precision_overrides: {key!r} is neither a module path of the model, an nn.Module class, nor a "
                f"converted op (a function like torch.nn.functional.softmax or its qualname){hint}"
            )
        for q in quals:
            ops[q] = dt
        described[quals[0] if not isinstance(key, str) else key] = SHORT[dt]
    modules: dict[str, torch.dtype] = {}
    for path, mod in named.items():  # NOTE: named_modules lists parents before children
        parent = path.rsplit(".", 1)[0] if "." in path else ("" if path else None)
        dt_in = modules.get(parent) if parent is not None else None
        for cls, dt in classes:
            if isinstance(mod, cls):
                dt_in = dt
        if path in paths:
            dt_in = paths[path]
        if dt_in is not None:
            modules[path] = dt_in
    return modules, ops, described


class _Swap:
    """A module's floating parameters (its submodules' too) replaced by copies in ``dtype`` for one
    call: a module converter, e.g. nn.MultiheadAttention's, reads them from the module."""

    def __init__(self, module: torch.nn.Module, dtype: torch.dtype) -> None:
        self.module = module
        self.dtype = dtype
        self.saved: list[tuple[torch.nn.Module, str, Any]] = []

    def __enter__(self) -> None:
        for m in self.module.modules():  # NOTE: with submodules (MultiheadAttention's out_proj)
            for name, p in list(m._parameters.items()):
                if p is not None and p.is_floating_point() and p.dtype != self.dtype:
                    self.saved.append((m, name, p))
                    # NOTE: setattr, not the dict: nn.LSTM refreshes its flat weight list on setattr
                    setattr(m, name, torch.nn.Parameter(p.detach().to(self.dtype), requires_grad=False))

    def __exit__(self, *exc: Any) -> None:
        while self.saved:
            m, name, p = self.saved.pop()
            setattr(m, name, p)


def cast_call(
    policy: Policy, ctx: Any, qualname: str, kind: str, module_path: str, args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[tuple[Any, ...], dict[str, Any], _Swap | None]:
    """The call's arguments with their floating tensors cast as the policy says (traced tensors through
    named Cast layers, constants and weights as torch tensors of the new type), and for a module
    converter the swap of its parameters (a context manager) or None."""
    dt = policy.target(qualname, module_path)
    if dt is None:
        return args, kwargs, None
    leaves, spec = tree_flatten((args, kwargs))
    only_traced = False
    if dt is WIDEST:
        # NOTE: two different floating types always promote to float32 (fp16 with bf16 too). An op off
        # the promote list looks at its traced inputs only: batch norm takes fp16 activations with its
        # fp32 statistics, as under autocast.
        only_traced = qualname not in PROMOTE
        floats = {x.dtype for x in leaves if isinstance(x, torch.Tensor) and x.dtype in _FLOATS
                  and (not only_traced or ctx.is_traced(x))}
        if len(floats) < 2:
            return args, kwargs, None
        dt = torch.float32
    swap = None
    if kind == "module" and args and isinstance(args[0], torch.nn.Module):
        swap = _Swap(args[0], dt)
    changed = False
    op = qualname.rsplit(".", 1)[-1].strip("_")
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dt:
            if x.dtype not in _FLOATS and x.dtype != torch.float64:
                continue  # fp8 and other storage types are only ever cast explicitly
            if only_traced and not ctx.is_traced(x):
                continue
            leaves[i] = _cast(policy, ctx, x, dt, op, module_path)
            changed = True
    if not changed:
        return args, kwargs, swap
    new_args, new_kwargs = tree_unflatten(leaves, spec)
    return tuple(new_args), dict(new_kwargs), swap


def _cast(policy: Policy, ctx: Any, x: torch.Tensor, dt: torch.dtype, op: str, module_path: str) -> torch.Tensor:
    cached = policy._casts.get(x)
    if cached is not None:
        hit = cached.get(dt)
        if hit is not None and hit[1] == x._version:
            return hit[0]  # type: ignore[no-any-return]
    y = x.detach().to(dt)  # NOTE: tracing runs under no_grad
    if ctx.is_traced(x):
        start = ctx.num_layers()
        ctx.set_itensor(y, ctx.cast(ctx.itensor(x), dt))
        ctx.name_layers(start, module_path, f"{op}_in_{SHORT[dt]}")
    policy._casts.setdefault(x, {})[dt] = (y, x._version)
    return y


__all__ = ["AUTOCAST_FP32", "AUTOCAST_LOWER", "FP32", "LOWER", "PRECISIONS", "Policy", "make_policy", "precision_dtype"]


_HALF_KERNEL_MISSING = ("not implemented for 'Half'", "not implemented for 'BFloat16'")


def call_eager(original: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``original(*args, **kwargs)`` (an out-of-place op the tracer runs eagerly); where CPU torch has no
    float16/bfloat16 kernel for it (``avg_pool3d``, so ``AvgPool3d``, ``LPPool3d``, ``local_response_norm``
    of 3-D; ``cdist``; antialiased ``interpolate``), computed in float32 and rounded to the half type, as
    TensorRT (and the sim) compute halves: the engine's layers are the same, only the traced value needs it."""
    try:
        return original(*args, **kwargs)
    except NotImplementedError as e:
        if not any(s in str(e) for s in _HALF_KERNEL_MISSING):
            raise
        leaves, spec = tree_flatten((args, kwargs))
        halves = {t.dtype for t in leaves if isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16)}
        if len(halves) != 1 or any(isinstance(t, torch.Tensor) and t.device.type != "cpu" for t in leaves):
            raise
        low = halves.pop()
        up_args, up_kwargs = tree_unflatten(
            [t.float() if isinstance(t, torch.Tensor) and t.dtype == low else t for t in leaves], spec)
        out = original(*up_args, **up_kwargs)
    out_leaves, out_spec = tree_flatten(out)
    return tree_unflatten([t.to(low) if isinstance(t, torch.Tensor) and t.dtype == torch.float32 else t
                           for t in out_leaves], out_spec)
