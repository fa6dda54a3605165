"""Dynamic input shapes: :class:`Input` (a min/opt/max range per input) and the optimization
profiles ``convert`` builds from them (``max_batch_size=``, ``dynamic_batch=``, ``profiles=``).

The model is still traced once, at one shape (the ``example``, else a random tensor of
``opt_shape``). Sizes of the dynamic dims stay symbolic while tracing (:mod:`torch2trt_lite.trace.symbolic`:
``x.size(0)`` and its arithmetic become shape-tensor layers, converters refuse a dynamic size they
cannot take), but a size the model itself turns into a plain number (``int(x.size(0))``) or a
converter that reads ``call.output``'s traced shape still bakes the traced value in. ``convert``
therefore also checks a dynamic engine on the sim at other shapes than the traced ones, per profile, against
eager PyTorch and refuses it when the output shapes differ (see :func:`verify`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from torch2trt_lite.errors import ConversionError, Torch2TRTError

Shape = tuple[int, ...]
Range = tuple[Shape, Shape, Shape]  # (min, opt, max)


def _shape(what: str, v: Any) -> Shape:
    if isinstance(v, torch.Size):
        v = tuple(v)
    if not isinstance(v, (list, tuple)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise Torch2TRTError(f"Input: {what} must be a tuple of ints, e.g. (1, 3, 224, 224); got {v!r}")
    return tuple(int(d) for d in v)


class Input:
    """One engine input whose shape ranges from ``min_shape`` to ``max_shape`` (TensorRT builds its
    optimization profile for ``opt_shape``). Pass it to ``convert`` in place of an example tensor;
    plain tensors stay static. The model is traced on ``example`` (a tensor within the range) or on
    a random tensor of ``opt_shape`` (``torch.randn``; integer dtypes: ``torch.randint(low, high)``,
    bool: random booleans).

        convert(model, [Input((1, 3, 224, 224), (4, 3, 224, 224), (8, 3, 224, 224))])
    """

    def __init__(
        self, min_shape: Sequence[int], opt_shape: Sequence[int], max_shape: Sequence[int],
        dtype: torch.dtype = torch.float32, name: str | None = None, example: torch.Tensor | None = None,
        low: int = 0, high: int = 100,
    ) -> None:
        mn, op, mx = _shape("min_shape", min_shape), _shape("opt_shape", opt_shape), _shape("max_shape", max_shape)
        if not len(mn) == len(op) == len(mx):
            raise Torch2TRTError(
                f"Input: min_shape {mn}, opt_shape {op} and max_shape {mx} must have the same rank "
                f"(got {len(mn)}, {len(op)}, {len(mx)})"
            )
        bad = [i for i, (a, b, c) in enumerate(zip(mn, op, mx, strict=True)) if not 0 < a <= b <= c]
        if bad:
            i = bad[0]
            raise Torch2TRTError(
                f"Input: dim {i} must satisfy 1 <= min <= opt <= max, got min {mn[i]}, opt {op[i]}, max {mx[i]} "
                f"(min_shape {mn}, opt_shape {op}, max_shape {mx})"
            )
        if not isinstance(dtype, torch.dtype):
            raise Torch2TRTError(f"Input: dtype must be a torch.dtype, got {dtype!r}")
        if dtype == torch.float64:
            raise Torch2TRTError("Input: TensorRT has no float64; use dtype=torch.float32")
        if name is not None and not (isinstance(name, str) and name):
            raise Torch2TRTError(f"Input: name must be a non-empty string or None, got {name!r}")
        if example is not None:
            if not isinstance(example, torch.Tensor):
                raise Torch2TRTError(f"Input: example must be a torch.Tensor, got {type(example).__name__}")
            if example.dtype != dtype:
                raise Torch2TRTError(
                    f"Input: example has dtype {example.dtype}, the Input says {dtype}; pass dtype={example.dtype}"
                )
            if not covers((mn, op, mx), tuple(example.shape)):
                raise Torch2TRTError(
                    f"Input: example of shape {tuple(example.shape)} is outside the range min {mn} .. max {mx}; "
                    "give an example within it (or widen the range)"
                )
        if isinstance(low, bool) or isinstance(high, bool) or not (isinstance(low, int) and isinstance(high, int)) \
                or low >= high:
            raise Torch2TRTError(f"Input: need integers low < high for random integer examples, got {low!r}, {high!r}")
        self.min_shape, self.opt_shape, self.max_shape = mn, op, mx
        self.dtype, self.name, self.example, self.low, self.high = dtype, name, example, low, high

    @property
    def range(self) -> Range:
        return (self.min_shape, self.opt_shape, self.max_shape)

    @property
    def dynamic(self) -> bool:
        return self.min_shape != self.max_shape

    def make_example(self) -> torch.Tensor:
        if self.example is not None:
            return self.example
        return random_tensor(self.opt_shape, self.dtype, self.low, self.high)

    def __repr__(self) -> str:
        name = f", name={self.name!r}" if self.name else ""
        return f"Input(min={self.min_shape}, opt={self.opt_shape}, max={self.max_shape}, dtype={self.dtype}{name})"


def random_tensor(shape: Sequence[int], dtype: torch.dtype, low: int = 0, high: int = 100,
                  generator: torch.Generator | None = None) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=generator).bool()
    if dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=generator).to(dtype)
    return torch.randint(low, high, tuple(shape), generator=generator, dtype=dtype)


def covers(rng: Range, shape: Shape) -> bool:
    mn, _, mx = rng
    return len(shape) == len(mn) and all(a <= d <= b for a, d, b in zip(mn, shape, mx, strict=True))


def network_shape(ranges: Sequence[Range]) -> Shape:
    """The shape a network input gets: -1 in each dim whose range (over every profile) is not one value."""
    mn, _, mx = ranges[0]
    return tuple(
        a if all(r[0][i] == a and r[2][i] == a for r in ranges) else -1 for i, a in enumerate(mn)
    )


@dataclass
class Resolved:
    """What ``convert`` traces and builds: one example per input, one name per ``Input`` that named
    itself (else None), and per profile one (min, opt, max) per input (static inputs: their shape)."""

    examples: list[torch.Tensor]
    names: list[str | None]
    profiles: list[list[Range]]
    bounds: list[tuple[int, int]] | None = None  # (low, high) of random integer inputs, per input
    ranged: list[bool] | None = None  # per input: given as an Input (whose low/high bound its values)

    @property
    def dynamic(self) -> bool:
        return any(r[0] != r[2] for p in self.profiles for r in p) or len(self.profiles) > 1


def _static(x: torch.Tensor) -> Range:
    s = tuple(x.shape)
    return (s, s, s)


def resolve(
    inputs: list[Any], *, max_batch_size: int | None = None, dynamic_batch: Any = None,
    profiles: Sequence[Sequence[Any]] | None = None,
) -> Resolved:
    """Examples, names and profiles from ``convert``'s inputs (tensors and :class:`Input`) and options."""
    given = sum(v is not None for v in (max_batch_size, dynamic_batch, profiles))
    if given > 1:
        raise Torch2TRTError("give at most one of max_batch_size=, dynamic_batch= and profiles=")
    if profiles is not None:
        return _resolve_profiles(inputs, profiles)
    examples: list[torch.Tensor] = []
    names: list[str | None] = []
    ranges: list[Range] = []
    for x in inputs:
        if isinstance(x, Input):
            examples.append(x.make_example())
            names.append(x.name)
            ranges.append(x.range)
        else:
            examples.append(x)
            names.append(None)
            ranges.append(_static(x))
    if max_batch_size is not None or dynamic_batch is not None:
        if any(isinstance(x, Input) for x in inputs):
            raise Torch2TRTError(
                "max_batch_size= / dynamic_batch= set the batch range of example tensors; with Input(...) "
                "give the range in the Input itself instead"
            )
        lo, hi = _batch_range(max_batch_size, dynamic_batch)
        new = []
        for i, (x, r) in enumerate(zip(examples, ranges, strict=True)):
            if x.dim() == 0:
                raise Torch2TRTError(f"input {i} is a scalar: it has no batch dim for max_batch_size= / dynamic_batch=")
            b = int(x.shape[0])
            if not lo <= b <= hi:
                raise Torch2TRTError(
                    f"input {i}: the example's batch {b} is outside the batch range [{lo}, {hi}]; give an example "
                    "whose batch is within it (it is the optimization profile's opt batch)"
                )
            s = r[1]
            new.append(((lo, *s[1:]), s, (hi, *s[1:])))
        ranges = new
    bounds = [(x.low, x.high) if isinstance(x, Input) else (0, 100) for x in inputs]
    return Resolved(examples, names, [ranges], bounds, [isinstance(x, Input) for x in inputs])


def _batch_range(max_batch_size: Any, dynamic_batch: Any) -> tuple[int, int]:
    if max_batch_size is not None:
        if isinstance(max_batch_size, bool) or not isinstance(max_batch_size, int) or max_batch_size < 1:
            raise Torch2TRTError(f"max_batch_size must be an int >= 1, got {max_batch_size!r}")
        return 1, max_batch_size
    ok = isinstance(dynamic_batch, (tuple, list)) and len(dynamic_batch) == 2 and all(
        isinstance(v, int) and not isinstance(v, bool) for v in dynamic_batch)
    if not ok or not 1 <= dynamic_batch[0] <= dynamic_batch[1]:
        raise Torch2TRTError(f"dynamic_batch must be (lo, hi) with 1 <= lo <= hi, e.g. (1, 8); got {dynamic_batch!r}")
    return int(dynamic_batch[0]), int(dynamic_batch[1])


def _resolve_profiles(inputs: list[Any], profiles: Sequence[Sequence[Any]]) -> Resolved:
    if not isinstance(profiles, (list, tuple)) or not profiles:
        raise Torch2TRTError("profiles= must be a non-empty list of profiles, each a list with one Input per model input")
    n = len(inputs)
    out: list[list[Range]] = []
    for k, prof in enumerate(profiles):
        if not isinstance(prof, (list, tuple)) or len(prof) != n:
            raise Torch2TRTError(
                f"profiles[{k}] must be a list of {n} entries (one Input or tensor per model input), got {prof!r:.80}"
            )
        ranges = []
        for i, (p, x) in enumerate(zip(prof, inputs, strict=True)):
            r = p.range if isinstance(p, Input) else _static(p) if isinstance(p, torch.Tensor) else None
            if r is None:
                raise Torch2TRTError(f"profiles[{k}][{i}] must be an Input or a tensor, got {type(p).__name__}")
            dt = p.dtype
            want_dt = x.dtype
            want_rank = len(x.min_shape) if isinstance(x, Input) else x.dim()
            if dt != want_dt or len(r[0]) != want_rank:
                raise Torch2TRTError(
                    f"profiles[{k}][{i}] has dtype {dt} and rank {len(r[0])}; input {i} has dtype {want_dt} and "
                    f"rank {want_rank}: every profile must describe the same inputs"
                )
            pname = p.name if isinstance(p, Input) else None
            xname = x.name if isinstance(x, Input) else None
            if pname is not None and xname is not None and pname != xname:
                raise Torch2TRTError(f"profiles[{k}][{i}] is named {pname!r}, input {i} is {xname!r}: names must agree")
            ranges.append(r)
        out.append(ranges)
    base = resolve(inputs)
    for i, x in enumerate(base.examples):
        if not any(covers(p[i], tuple(x.shape)) for p in out):
            raise Torch2TRTError(
                f"input {i}: the traced example's shape {tuple(x.shape)} is in no profile; give an example within one"
            )
    return Resolved(base.examples, base.names, out, base.bounds, base.ranged)


def corner_shapes(profiles: list[list[Range]], traced: Sequence[Shape] | None = None,
                  equal: Sequence[Sequence[tuple[int, int]]] = ()) -> list[tuple[int, str, list[Shape]]]:
    """(profile index, "check", the shapes of every input) at which :func:`verify` runs: one set of
    shapes per profile, each dynamic dim at its min, or at its max where the min is the traced size
    (so every dynamic dim differs from the traced one, and the run is as small as that allows).
    ``equal``: groups of (input index, dim) the engine takes for one size (duck sizing): each group
    gets one size, the min (or max) of the ranges' intersection."""
    seen: set[tuple[Shape, ...]] = set()
    out = []
    for k, prof in enumerate(profiles):
        shapes = []
        for i, (mn, _, mx) in enumerate(prof):
            t = traced[i] if traced is not None else None
            shapes.append(tuple(
                lo if t is None or lo != t[d] else hi for d, (lo, hi) in enumerate(zip(mn, mx, strict=True))
            ))
        for group in equal:
            lo = max(prof[i][0][d] for i, d in group)
            hi = min(prof[i][2][d] for i, d in group)
            i0, d0 = group[0]
            size = lo if traced is None or lo != traced[i0][d0] or lo > hi else hi
            for i, d in group:
                shapes[i] = tuple(size if j == d else v for j, v in enumerate(shapes[i]))
        if tuple(shapes) not in seen:
            seen.add(tuple(shapes))
            out.append((k, "check", shapes))
    return out


# The most input memory the verify run allocates at one profile's shapes (its inputs are made and
# passed to the engine contiguous, whatever the example's strides: an expand()-ed example included).
VERIFY_MAX_INPUT_BYTES = 4 << 30


def _check_verify_memory(k: int, shapes: Sequence[Shape], examples: Sequence[torch.Tensor],
                         passed_on: list[ConversionError] | None) -> None:
    """Refuse, before allocating anything, a verify run whose inputs would pass the limit (the error
    is also put in ``passed_on``)."""
    sizes = []
    for s, x in zip(shapes, examples, strict=True):
        n = x.element_size()
        for d in s:
            n *= int(d)
        sizes.append(n)
    if sum(sizes) > VERIFY_MAX_INPUT_BYTES:
        err = ConversionError(
            f"the dynamic verify run would allocate {sum(sizes) / 2**30:.1f} GiB of inputs at shapes {list(shapes)} "
            f"(profile {k}; inputs are made contiguous, an expand()-ed example too), over its limit of "
            f"{VERIFY_MAX_INPUT_BYTES >> 30} GiB: convert with verify=False to skip the run (the engine is then not "
            "checked at other sizes than the traced ones), or with a smaller range or smaller static dims"
        )
        if passed_on is not None:
            passed_on.append(err)
        raise err


def verify(model: Any, engine: Any, resolved: Resolved, passed_on: list[ConversionError] | None = None) -> None:
    """Run ``engine`` (a sim TRTModule of a dynamic network) and ``model`` once per profile, with every
    dynamic dim at another size than the traced one (:func:`corner_shapes`); raise
    :class:`ConversionError` when an output's shape differs (a converter read a size while tracing
    and baked the traced value in), or, before allocating them, when the inputs of a run would take
    more than ``VERIFY_MAX_INPUT_BYTES`` (that error is also put in ``passed_on``)."""
    from torch.utils._pytree import tree_flatten

    gen = torch.Generator().manual_seed(0)
    dev = resolved.examples[0].device if resolved.examples else torch.device("cpu")
    names = [str(i["name"]) for i in getattr(engine, "metadata", {}).get("inputs", [])]
    equal = [[(names.index(n), int(d)) for n, d in g["dims"]]
             for g in getattr(engine, "metadata", {}).get("equal_dims", ()) if all(n in names for n, _ in g["dims"])]
    for k, _, shapes in corner_shapes(resolved.profiles, [tuple(x.shape) for x in resolved.examples], equal):
        _check_verify_memory(k, shapes, resolved.examples, passed_on)
        xs = []
        bounds = resolved.bounds or [(0, 100)] * len(shapes)
        for x, s, (lo, hi) in zip(resolved.examples, shapes, bounds, strict=True):
            xs.append(x if tuple(x.shape) == s else random_tensor(s, x.dtype, lo, hi, generator=gen).to(dev))
        with torch.no_grad():
            want = [t for t in tree_flatten(model(*[x.clone() for x in xs]))[0] if isinstance(t, torch.Tensor)]
            try:
                got = [t for t in tree_flatten(engine(*xs))[0] if isinstance(t, torch.Tensor)]
            except Torch2TRTError as e:
                raise ConversionError(
                    f"the dynamic-shape engine fails at input shapes {shapes} (profile {k}): {e}. A converter "
                    "probably baked a size of the traced example into the network (a size read as a plain "
                    "number while tracing): convert with static shapes, or a range this model supports"
                ) from None
        for j, (w, g) in enumerate(zip(want, got, strict=True)):
            if tuple(w.shape) != tuple(g.shape):
                raise ConversionError(
                    f"output {j} has shape {tuple(g.shape)} in the engine but {tuple(w.shape)} in PyTorch at "
                    f"input shapes {shapes} (profile {k}): a converter baked a size of the traced "
                    "example into the network (a size read as a plain number while tracing). Convert with static "
                    "shapes, or with a range this model supports"
                )


__all__ = ["Input", "Range", "Resolved", "corner_shapes", "covers", "network_shape", "random_tensor", "resolve", "verify"]
