"""Symbolic sizes: the size algebra and the layers that compute sizes (issue 10).

When ``convert`` has dynamic inputs, reading a size of a traced tensor (``x.shape[i]``,
``x.size(i)``, ``x.size()``, ``len(x)``, ``x.numel()``) gives, for each dim the optimization profile
lets vary (a ``-1`` dim of the network tensor), a :class:`SymSize`: a subclass of ``int`` whose value
is the traced size (eager PyTorch accepts it wherever it takes an int) and which records its
arithmetic (``+ - * // %`` with ints and other sizes, unary ``-``, :func:`sym_min` / :func:`sym_max`)
lazily. Static dims stay plain ints, and a static conversion never sees a :class:`SymSize`: its
context has no symbolic sizes (``ctx.symbolic`` is None, see ``torch2trt_lite.trace.symbolic``, which
makes them) and pays nothing. ``x.dim()`` stays an int.

A converter that takes a size turns a :class:`SymSize` into a shape-tensor expression with
:func:`to_itensor` / :func:`shape_tensor` (an ``IShapeLayer`` of the source tensor, a gather of the
dim, INT64 elementwise layers). A converter that reads the value as a plain int (``int(n)``,
``operator.index(n)``) while it runs is refused with a :class:`~torch2trt_lite.errors.ConverterRefusal`
naming the op and the dynamic size, so no traced size is baked in silently.

Guards (the choice made for issue 10's item 2, in the spirit of ``torch.export``): a comparison
or truth test of a dynamic size in the model's code (``if x.size(0) > 4:``, ``bool(n == 3)``)
is answered only when its result is the same for every size the profile allows (a network input's
dim has its profile's range; a size of a computed tensor that no converter recorded is a symbol of
its own, only known to be >= 0; a data-dependent count has its own symbol too), or when both sides
have the same normal form (``x.size(0) == x.size(0)``, ``(n + 1) - 1 == n``: :mod:`.size_exprs`),
or under duck sizing's assumption that dynamic input dims traced at the same size are equal, which
is then recorded and checked on every engine call (``SymbolicSizes.duck_sizing``). Otherwise it raises
:class:`~torch2trt_lite.errors.DynamicSizeGuardError` naming the user's line and the dim: the engine
would take the branch of the traced size for every size. Comparisons made inside torch's own code
while a converted call runs (argument checks of the op itself) use the traced value. The guards
find the running conversion through the hook of :mod:`.active` (they are handed no ``ctx``).

Floats (issue 10's item 2: refused, not made symbolic): a Python float made from a dynamic size
(``n / 2``, ``2 / n``, ``n * 0.5``, ``n ** 0.5``, ``float(n)``, ``math.sqrt(n)`` and the other ``math``
functions, which call ``float()``) would be the traced value for every size, so in the model's code it
raises :class:`~torch2trt_lite.errors.DynamicSizeGuardError` naming the line, the size and its range,
and in a converter it is a :class:`~torch2trt_lite.errors.ConverterRefusal`. It is answered where the
result is the same for every size of the range (``n / n``, ``0 / n``, a size of one value). Integer
results stay symbolic: ``n ** 2`` (``n * n``), ``divmod``, ``math.ceil/floor/trunc`` and ``round`` of
a size are the size. Symbolic floats would only help converters that take a float (interpolate's
``scale_factor``), which take sizes (``size=``) instead; a size used in a tensor op
(``x / x.size(1)``) stays symbolic as a shape-tensor value. Python cannot see a float on the left of
an operator (``0.5 * n`` is ``float.__mul__``, which reads the int's value directly): that one stays
the traced value.

``torch2trt_lite.check`` on dynamic inputs traces with a collecting tracer: each failed guard is
recorded (op, module path, location, reason) and answered with the traced value, so every one is
listed (:func:`guard_problem`). :func:`specialize_guard` lets third-party code's branches that are
provably equal be answered (converters/zoo_transformers.py: transformers' SDPA ``q_length`` branches).

Why not torch's symbolic shapes (issue 22, item 2: ``ShapeEnv``, sympy, ``bound_sympy``): they are private
APIs (``torch.utils._sympy``, ``fx.experimental.symbolic_shapes``) that change between releases, sympy
costs tens of microseconds an operation (a size is made for every reshape of a traced model), and their
guards and unbacked-symbol rules would have to be reconciled with ours (the refusal naming the user's
line, ``check``'s collection, the network tensor of each size). Sizes need integer polynomials over
symbols (min, max, non-exact ``//`` and ``%`` as atoms) and intervals: :mod:`.size_exprs`, a targeted
fix of the existing algebra (normal forms, bounds that survive products, ``//`` and min/max).

``torch2trt_lite.trace.symbolic`` re-exports the user-facing names (:class:`SymSize`, :func:`sym_min`,
:func:`sym_max`, :func:`is_sym`, :func:`has_sym`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from torch2trt_lite.errors import ConversionError, ConverterRefusal, DynamicSizeGuardError

from . import size_exprs as X
from .active import active, specialize_guard, specialized, user_location
from .size_exprs import Dim, Value
from .size_exprs import Op as _Op

if TYPE_CHECKING:
    from torch2trt_lite.trace.context import ConversionContext
    from torch2trt_lite.trace.symbolic import SymbolicSizes

    from .active import ActiveConversion

_INF = X.INF


# ------------------------------------------------------------------------------ expressions
_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "floordiv": "//", "mod": "%"}


def _describe(v: Any) -> str:
    if not isinstance(v, SymSize):
        return str(v)
    e = v._expr
    if isinstance(e, Dim):
        return e.label
    if e.op == "neg":
        return f"-({_describe(e.a)})"
    if e.op in ("min", "max"):
        return f"{e.op}({_describe(e.a)}, {_describe(e.b)})"
    return f"({_describe(e.a)} {_SYMBOLS[e.op]} {_describe(e.b)})"


def normal(v: Any, subs: dict[Any, Any] | None = None) -> tuple[X.Poly, X.Atoms]:
    """The normal form of ``v`` (an int or a :class:`SymSize`) and its atoms (each the size that is
    it, for its bounds; every symbol ``v`` depends on is one), see :mod:`.size_exprs`; cached on the
    size. ``subs``: symbols taken for other sizes (duck sizing's stand-ins, see :func:`_assumed`)."""
    if not isinstance(v, SymSize):
        return X.constant(v), {}
    if v._nf is not None and subs is None:
        return v._nf  # type: ignore[no-any-return]
    e = v._expr
    p: X.Poly | None
    if isinstance(e, Dim):
        alt = subs.get(e.key) if subs else None
        p, atoms = ({(e.key,): 1}, {e.key: v}) if alt is None else ({(alt._expr.key,): 1}, {e.key: v, alt._expr.key: alt})
    else:
        pa, aa = normal(e.a, subs)
        pb, ab = normal(e.b, subs) if e.b is not None else ({}, {})
        atoms = {**aa, **ab}
        p = None
        if e.op in ("add", "sub", "neg"):
            p = X.add(pa, pb, -1) if e.op == "sub" else X.add({}, pa, -1) if e.op == "neg" else X.add(pa, pb)
        elif e.op == "mul":
            p = X.mul(pa, pb)
        elif e.op in ("floordiv", "mod"):
            q = X.divide(pa, pb, atoms)
            p = None if q is None else q[0] if e.op == "floordiv" else q[1]
        elif e.op in ("min", "max"):  # decided by the bounds of the difference: one of the two
            lo, hi = X.bounds(X.add(pa, pb, -1), atoms)
            p = (pa if (hi <= 0) == (e.op == "min") else pb) if hi <= 0 or lo >= 0 else None
        if p is None:  # an atom of its own, keyed by its operands' normal forms
            key = (e.op, X.canon(pa), X.canon(pb))
            if e.op in ("min", "max"):
                key = (e.op, *sorted((X.canon(pa), X.canon(pb)), key=repr))
            p, atoms = {(key,): 1}, {**atoms, key: v}
    if subs is None:
        v._nf = (p, atoms)
    return p, atoms


def size_key(v: Any) -> Any:
    """A key of ``v``'s normal form: equal keys are the same size for every input shape."""
    return X.canon(normal(v)[0])


def _v(v: Any) -> Any:
    """The plain value of an int, a :class:`SymSize` (without the value-read check) or a float."""
    return int.__int__(v) if isinstance(v, SymSize) else v


def bounds(v: Any) -> tuple[float, float]:
    """The smallest and largest value of ``v`` (an int: itself) for every size the profiles allow."""
    if isinstance(v, SymSize):
        return v._lo, v._hi
    return v, v


def diff_bounds(a: Any, b: Any) -> tuple[float, float]:
    """The bounds of ``a - b`` (ints or sizes): their operations' intervals and the difference's
    normal form (``m - 2 * n`` with ``m`` and ``n`` one symbol is ``-n``)."""
    (pa, aa), (pb, ab) = normal(a), normal(b)
    return X.intersect(X.interval("sub", bounds(a), bounds(b)), X.bounds(X.add(pa, pb, -1), {**aa, **ab}))


def symbol(v: Any) -> Any:
    """The symbol (key) of ``v`` when it is a dim of a network tensor (not a value read), else None."""
    e = v._expr if isinstance(v, SymSize) else None
    return e.key if isinstance(e, Dim) and not isinstance(e, Value) else None


def _assumed(a: Any, b: Any) -> tuple[float, float, Any] | None:
    """The bounds of ``a - b`` with the input dims of duck groups taken for their groups' one size
    (``SymbolicSizes.duck_sizing``), and the keys so taken; None where no duck group is involved."""
    tracer = active()
    state = getattr(getattr(tracer, "ctx", None), "symbolic", None)
    if state is None:
        return None
    subs = state.duck_groups({**normal(a)[1], **normal(b)[1]})
    if not subs:
        return None
    (pa, aa), (pb, ab) = normal(a, subs), normal(b, subs)
    lo, hi = X.bounds(X.add(pa, pb, -1), {**aa, **ab})
    return lo, hi, set(subs)


def _interval(op: str, a: Any, b: Any) -> tuple[float, float]:
    return X.interval(op, bounds(a), bounds(b) if b is not None else (0, 0))


def _fixed(v: Any) -> bool:
    """Is ``v`` the same number for every size of its range (a plain number, or a size of one value)?"""
    return not isinstance(v, SymSize) or v._lo == v._hi


def guard_problem(tracer: ActiveConversion | None, op: str, message: str, traced: Callable[[], Any]) -> Any:
    """A guard that fails in the model's code: raise :class:`DynamicSizeGuardError`; in
    ``torch2trt_lite.check`` (the tracer collects problems) record it and go on with the traced
    answer ``traced()``, so that every such guard of the model is reported."""
    if getattr(tracer, "collect", False):
        tracer.unsupported(op, message)  # type: ignore[union-attr]
        dynamic = getattr(tracer, "dynamic", None)
        if isinstance(dynamic, list):
            dynamic.append(tracer.problems[-1])  # type: ignore[union-attr]
        return traced()
    raise DynamicSizeGuardError(message)


class SymSize(int):
    """A dynamic size read while tracing: an ``int`` holding the traced value that also records how
    it was computed (see the module docstring). ``describe()`` names it, e.g. ``input_0.size(0)``."""

    _expr: Any
    _lo: float
    _hi: float
    _nf: Any  # its normal form (see normal()), computed when first needed

    def __new__(cls, value: int, expr: Any, lo: float, hi: float) -> SymSize:
        obj = int.__new__(cls, value)
        obj._expr, obj._lo, obj._hi, obj._nf = expr, lo, hi, None
        return obj

    @classmethod
    def of(cls, value: int, expr: Any, lo: float, hi: float) -> Any:
        """The size ``expr`` (an :class:`_Op`), its bounds ``[lo, hi]`` tightened by its normal form's;
        a plain int where the normal form is a constant (``(n + 1) - n``)."""
        obj = cls(value, expr, lo, hi)
        p, atoms = normal(obj)
        if not p or list(p) == [()]:
            return p.get((), 0)
        if len(p) == 1 and next(iter(p.values())) == 1:
            (mono,) = p
            if len(mono) == 1 and atoms[mono[0]] is not obj:  # (n + 1) - 1 is n
                return atoms[mono[0]]
        obj._lo, obj._hi = X.intersect((lo, hi), X.bounds(p, atoms))
        return obj

    def describe(self) -> str:
        return _describe(self)

    def __repr__(self) -> str:
        return int.__repr__(self)

    __str__ = __repr__

    def __reduce__(self) -> Any:  # copies and pickles are plain ints: the expression is the tracer's
        return (int, (int.__int__(self),))

    # ----------------------------------------------------------------------- arithmetic
    def _op(self, op: str, other: Any, swap: bool = False) -> Any:
        if isinstance(other, float):  # Python would make it a float of the traced value
            a, b = (other, self) if swap else (self, other)
            return self._float_read(f"{_describe(a)} {_SYMBOLS[op]} {_describe(b)}",
                                    lambda: getattr(operator, op)(_v(a), _v(b)), fixed=_fixed(a) and _fixed(b))
        if isinstance(other, bool) or not isinstance(other, int):
            return NotImplemented
        a, b = (other, self) if swap else (self, other)
        value = getattr(operator, op)(_v(a), _v(b))
        if not isinstance(b, SymSize):  # identities keep the expression short
            if (op in ("add", "sub") and b == 0) or (op in ("mul", "floordiv") and b == 1):
                return a
        if not isinstance(a, SymSize) and op in ("add", "mul") and a == (0 if op == "add" else 1):
            return b
        if isinstance(a, SymSize) and isinstance(b, SymSize) and size_key(a) == size_key(b):
            if op == "sub" or (op == "mod" and a._lo > 0):
                return 0
            if op == "floordiv" and a._lo > 0:
                return 1
        lo, hi = _interval(op, a, b)
        return SymSize.of(value, _Op(op, a, b), lo, hi)

    def __add__(self, o: Any) -> Any:
        return self._op("add", o)

    def __radd__(self, o: Any) -> Any:
        return self._op("add", o, True)

    def __sub__(self, o: Any) -> Any:
        return self._op("sub", o)

    def __rsub__(self, o: Any) -> Any:
        return self._op("sub", o, True)

    def __mul__(self, o: Any) -> Any:
        return self._op("mul", o)

    def __rmul__(self, o: Any) -> Any:
        return self._op("mul", o, True)

    def __floordiv__(self, o: Any) -> Any:
        return self._op("floordiv", o)

    def __rfloordiv__(self, o: Any) -> Any:
        return self._op("floordiv", o, True)

    def __mod__(self, o: Any) -> Any:
        return self._op("mod", o)

    def __rmod__(self, o: Any) -> Any:
        return self._op("mod", o, True)

    def __truediv__(self, o: Any) -> Any:
        return self._truediv(self, o)

    def __rtruediv__(self, o: Any) -> Any:
        return self._truediv(o, self)

    def _truediv(self, a: Any, b: Any) -> Any:
        if isinstance(a, bool) or isinstance(b, bool) or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
            return NotImplemented
        if isinstance(a, SymSize) and isinstance(b, SymSize) and size_key(a) == size_key(b) and a._lo > 0:
            return 1.0  # n / n is 1.0 for every size
        if not isinstance(a, SymSize) and a == 0 and b._lo > 0:  # type: ignore[union-attr]
            return 0.0
        return self._float_read(f"{_describe(a)} / {_describe(b)}", lambda: _v(a) / _v(b),
                                fixed=_fixed(a) and _fixed(b))

    def __pow__(self, o: Any, mod: Any = None) -> Any:
        if mod is None and isinstance(o, int) and not isinstance(o, (bool, SymSize)) and o >= 0:
            out: Any = 1
            for _ in range(o):  # n ** 2 is n * n: stays symbolic
                out = out * self
            return out
        if mod is not None or isinstance(o, bool) or not isinstance(o, (int, float)):
            return NotImplemented
        return self._float_read(f"{self.describe()} ** {_describe(o)}", lambda: _v(self) ** _v(o),
                                fixed=_fixed(o) and _fixed(self))

    def __rpow__(self, o: Any, mod: Any = None) -> Any:
        if mod is not None or isinstance(o, bool) or not isinstance(o, (int, float)):
            return NotImplemented
        if o == 1:
            return o
        return self._float_read(f"{_describe(o)} ** {self.describe()}", lambda: _v(o) ** _v(self), fixed=_fixed(self))

    def __divmod__(self, o: Any) -> Any:
        return self // o, self % o

    def __rdivmod__(self, o: Any) -> Any:
        return o // self, o % self

    # math.ceil/floor/trunc and round() of an int are the int itself (int's own would give a plain int)
    def __ceil__(self) -> Any:
        return self

    def __floor__(self) -> Any:
        return self

    def __trunc__(self) -> Any:
        return self

    def __round__(self, ndigits: Any = None) -> Any:
        if ndigits is None or (isinstance(ndigits, int) and ndigits >= 0):
            return self
        return self._float_read(f"round({self.describe()}, {ndigits})", lambda: round(_v(self), ndigits),
                                fixed=_fixed(self))

    def __neg__(self) -> Any:
        lo, hi = _interval("neg", self, None)
        return SymSize.of(-int.__int__(self), _Op("neg", self), lo, hi)

    def __pos__(self) -> Any:
        return self

    def __abs__(self) -> Any:
        if self._lo >= 0:
            return self
        return self._value_read("abs()")

    # ------------------------------------------------------------------ reads and guards
    def _value_read(self, what: str) -> int:
        tracer = active()
        if tracer is not None and tracer.converting is not None:
            raise ConverterRefusal(
                f"{tracer.converting} cannot take a dynamic size: its converter needs the value of "
                f"{self.describe()} (traced as {int.__int__(self)}) as a Python number ({what}), which would bake the "
                f"traced size into the engine; {fix_advice(self)}"
            )
        return int.__int__(self)

    def __int__(self) -> int:
        return self._value_read("int()")

    def __index__(self) -> int:
        return self._value_read("operator.index()")

    def __float__(self) -> float:
        return self._float_read(f"float({self.describe()})", lambda: float(int.__int__(self)),  # type: ignore[no-any-return]
                                fixed=_fixed(self))

    def _float_read(self, what: str, value: Callable[[], Any], fixed: bool = False) -> Any:
        """A float made from this size (``float(n)``, ``n / 2``, ``n * 0.5``, ``math.sqrt(n)``): the
        traced value where it is the same for every size of the range (``fixed``), inside torch's own
        code while a converted call runs, or outside a conversion; refused in a converter (a
        :class:`ConverterRefusal`) and in the model's code (a :class:`DynamicSizeGuardError` naming the
        line, the dim and its range), since a Python float is one number for every size."""
        tracer = active()
        if tracer is not None and tracer.converting is not None and not fixed:
            self._value_read(what)
        if fixed or tracer is None or tracer.busy:
            return value()
        rng = range_text(self)
        message = (
            f"the model makes a Python float of the dynamic size {self.describe()} (traced as {int.__int__(self)}, "
            f"range {rng}) at {user_location(3)}: `{what}` is a float (true division, a float operand, float() or a "
            "math function), which would be the traced value for every size the profile allows. Keep sizes "
            "integer (//, %, *, + stay symbolic), use the size in a tensor op instead (x / x.size(1) and "
            "x * x.size(1) stay symbolic), or make the dim static (a range of one size)"
        )
        return guard_problem(tracer, f"float of a dynamic size ({what})", message, value)

    def _guard(self, op: str, other: Any, answer: bool | None) -> bool:
        concrete = bool(getattr(operator, op)(int.__int__(self), _v(other)))
        tracer = active()
        if tracer is None or tracer.busy or answer is not None:
            return concrete if answer is None else answer
        sym = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}[op]
        special = specialized(__file__, self, op, other, concrete)
        if special is not None:
            return special
        rng = range_text(self)
        message = (
            f"the model compares the dynamic size {self.describe()} (traced as {int.__int__(self)}, range {rng}) at "
            f"{user_location(3)}: `{self.describe()} {sym} {_describe(other)}` is {concrete} at the traced "
            "size but not for every size the profile allows, and the engine cannot take a Python branch per "
            "call. " + ("The size depends on the input's values, so no static shape fixes the answer: compute"
                        if value_dependent([self, other]) else
                        "Make the dim static (a range of one size), narrow the range so the answer is fixed, or compute")
            + " without the branch (e.g. torch.where, torch2trt_lite.converters.impl.sizes.sym_min/sym_max; "
            "a skip of work on an empty selection can simply go: ops on zero-size tensors convert)"
        )
        return guard_problem(tracer, f"`{self.describe()} {sym} {_describe(other)}`", message, lambda: concrete)  # type: ignore[no-any-return]

    def _compare(self, op: str, other: Any) -> Any:
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        if isinstance(other, int) and size_key(self) == size_key(other):
            return op in ("eq", "le", "ge")
        lo, hi = diff_bounds(self, other) if isinstance(other, int) else _interval("sub", self, other)
        answer = X.decide(op, lo, hi)
        if answer is None and isinstance(other, int):  # decided if duck sizing's equalities are assumed?
            tracer = active()
            alt = _assumed(self, other) if tracer is not None and not tracer.busy else None
            if alt is not None:
                answer = X.decide(op, alt[0], alt[1])
                if answer is not None:
                    tracer.ctx.symbolic.assume(alt[2])  # type: ignore[union-attr]  # checked on every engine call
        return self._guard(op, other, answer)

    def __eq__(self, o: object) -> Any:
        return self._compare("eq", o)

    def __ne__(self, o: object) -> Any:
        return self._compare("ne", o)

    def __lt__(self, o: Any) -> Any:
        return self._compare("lt", o)

    def __le__(self, o: Any) -> Any:
        return self._compare("le", o)

    def __gt__(self, o: Any) -> Any:
        return self._compare("gt", o)

    def __ge__(self, o: Any) -> Any:
        return self._compare("ge", o)

    __hash__ = int.__hash__

    def __bool__(self) -> bool:
        return self._compare("ne", 0)  # type: ignore[no-any-return]


def _fmt(v: float) -> str:
    return "inf" if v == _INF else "-inf" if v == -_INF else str(int(v))


def range_text(v: Any) -> str:
    """``[lo, hi]``: the range of ``v`` (see :func:`bounds`) for messages."""
    lo, hi = bounds(v)
    return f"[{_fmt(lo)}, {_fmt(hi)}]"


def is_sym(v: Any) -> bool:
    return isinstance(v, SymSize)


def has_sym(values: Any) -> bool:
    """Does a size argument (an int, a sequence of them, nested once) hold a :class:`SymSize`?"""
    if isinstance(values, SymSize):
        return True
    if isinstance(values, slice):
        return has_sym((values.start, values.stop, values.step))
    if isinstance(values, (list, tuple)):
        return any(isinstance(v, SymSize) or (isinstance(v, (list, tuple, slice)) and has_sym(v)) for v in values)
    return False


def sym_min(a: int, b: int) -> int:
    """``min(a, b)`` that stays symbolic (Python's ``min`` compares, which a dynamic size refuses)."""
    return _minmax("min", a, b)


def sym_max(a: int, b: int) -> int:
    """``max(a, b)`` that stays symbolic."""
    return _minmax("max", a, b)


def _minmax(op: str, a: int, b: int) -> int:
    if not (isinstance(a, SymSize) or isinstance(b, SymSize)):
        return min(a, b) if op == "min" else max(a, b)
    if size_key(a) == size_key(b):
        return a
    lo, hi = diff_bounds(a, b)
    if hi <= 0:  # the bounds of a - b decide
        return a if op == "min" else b
    if lo >= 0:
        return b if op == "min" else a
    value = (min if op == "min" else max)(_v(a), _v(b))
    lo, hi = _interval(op, a, b)
    return SymSize.of(value, _Op(op, a, b), lo, hi)  # type: ignore[no-any-return]


# ------------------------------------------------------------------------ into the network
def _const(ctx: ConversionContext, values: Sequence[int]) -> Any:
    return ctx.constant(np.asarray([int.__int__(v) if isinstance(v, SymSize) else int(v) for v in values],
                                   dtype=np.int64).reshape(len(values)))


_EW = {"add": "SUM", "sub": "SUB", "mul": "PROD", "floordiv": "FLOOR_DIV", "min": "MIN", "max": "MAX"}


def _state(ctx: ConversionContext) -> SymbolicSizes:
    state = ctx.symbolic
    if state is None:
        raise ConversionError("a dynamic size was used outside the conversion that read it")
    return state


def to_itensor(ctx: ConversionContext, v: Any) -> Any:
    """A 1-D INT64 network tensor of one element holding ``v`` (a :class:`SymSize` or an int)."""
    if not isinstance(v, SymSize):
        return _const(ctx, [v])
    state = _state(ctx)
    hit = state.size_tensors.get(id(v))
    if hit is not None and hit[0] is v:
        return hit[1]
    net = ctx.network
    e = v._expr
    if isinstance(e, Value):
        layer = net.add_shuffle(ctx.cast(e.it, torch.int64))
        layer.reshape_dims = (1,)
        out = layer.get_output(0)
        state.mark_used(v)
    elif isinstance(e, Dim):
        shape = state.shape_of(e.it)
        out = net.add_gather(shape, _const(ctx, [e.index]), 0).get_output(0)
    elif e.op == "neg":
        out = net.add_elementwise(_const(ctx, [0]), to_itensor(ctx, e.a),
                                  ctx.trt.ElementWiseOperation.SUB).get_output(0)
    elif e.op == "mod":  # Python's floor modulo: a - (a // b) * b
        a, b = to_itensor(ctx, e.a), to_itensor(ctx, e.b)
        ew = ctx.trt.ElementWiseOperation
        q = net.add_elementwise(a, b, ew.FLOOR_DIV).get_output(0)
        qb = net.add_elementwise(q, b, ew.PROD).get_output(0)
        out = net.add_elementwise(a, qb, ew.SUB).get_output(0)
    else:
        out = net.add_elementwise(to_itensor(ctx, e.a), to_itensor(ctx, e.b),
                                  getattr(ctx.trt.ElementWiseOperation, _EW[e.op])).get_output(0)
    state.size_tensors[id(v)] = (v, out)
    return out


def scalar(ctx: ConversionContext, v: Any, dtype: torch.dtype = torch.int64) -> Any:
    """A 0-D network tensor of ``dtype`` holding ``v`` (for a size used as a tensor value)."""
    it = to_itensor(ctx, v)
    layer = ctx.network.add_shuffle(it)
    layer.reshape_dims = ()
    return ctx.cast(layer.get_output(0), dtype)


def shape_tensor(ctx: ConversionContext, dims: Sequence[Any]) -> Any:
    """A 1-D INT64 shape tensor of ``dims``: ints, -1, :class:`SymSize` and 1-element INT64 network
    tensors (a dim read from another tensor's shape) mixed."""
    parts: list[Any] = []
    static: list[int] = []
    for d in dims:
        if isinstance(d, (int, np.integer)) and not isinstance(d, SymSize):
            static.append(int(d))
        else:
            if static:
                parts.append(_const(ctx, static))
                static = []
            parts.append(to_itensor(ctx, d) if isinstance(d, SymSize) else d)
    if static:
        parts.append(_const(ctx, static))
    if len(parts) == 1:
        return parts[0]
    layer = ctx.network.add_concatenation(parts)
    layer.axis = 0
    return layer.get_output(0)


def arange(ctx: ConversionContext, n: Any, rank: int = 1, dim: int = 0, dtype: torch.dtype = torch.float32) -> Any:
    """``0, 1, .., n - 1`` along ``dim`` of a rank-``rank`` tensor (size 1 elsewhere) for a dynamic
    ``n``: an IFillLayer LINSPACE whose dims are a shape tensor."""
    work = torch.float32 if dtype.is_floating_point else torch.int64
    layer = ctx.network.add_fill((0,) * rank, ctx.trt.FillOperation.LINSPACE, ctx.trt_dtype(work))
    layer.set_input(0, shape_tensor(ctx, [n if i == dim else 1 for i in range(rank)]))
    layer.set_input(1, ctx.constant(torch.zeros((), dtype=work)))
    layer.set_input(2, ctx.constant(torch.tensor([1 if i == dim else 0 for i in range(rank)], dtype=work)))
    return ctx.cast(layer.get_output(0), dtype)


def value_dependent(sizes: Any) -> bool:
    """Does any of ``sizes`` depend on the input's values (a count of nonzero/unique/NMS, a number read
    with ``.item()``), which no static shape fixes?"""
    keys = [k for v in _flat(sizes) if isinstance(v, SymSize) for k in normal(v)[1]]
    return any(isinstance(k, tuple) and k and k[0] in ("dds", "value") for k in keys)


def fix_advice(sizes: Any) -> str:
    """What a user can do about a refused dynamic size: a static shape for an input's dim, other
    advice for a :func:`value_dependent` one."""
    if value_dependent(sizes):
        return ("this size depends on the input's values, which no static shape fixes: compute on a tensor of "
                "fixed size instead (a mask with torch.where, top-k with a fixed k), or run this part outside "
                "the engine (torch.compile(model, backend='torch2trt_lite') leaves it to PyTorch)")
    return "convert with a static shape for this dim"


def refuse(op: str, values: Any, why: str = "") -> None:
    """Raise the refusal of a converter that cannot take the dynamic sizes in ``values``."""
    syms = [v for v in _flat(values) if isinstance(v, SymSize)]
    if not syms:
        return
    names = ", ".join(s.describe() for s in syms[:3])
    raise ConverterRefusal(f"{op} cannot take a dynamic size ({names}){': ' + why if why else ''}; {fix_advice(syms)}")


def _flat(values: Any) -> list[Any]:
    if isinstance(values, (list, tuple)):
        out: list[Any] = []
        for v in values:
            out += _flat(v)
        return out
    return [values]


def dynamic(ctx: ConversionContext) -> bool:
    """Is ``ctx`` converting a network with dynamic dims (sizes may be symbolic)?"""
    return ctx.symbolic is not None


def sizes_of(ctx: ConversionContext, t: Any) -> tuple[Any, ...]:
    """``t``'s sizes, with a :class:`SymSize` for each dynamic dim of a traced tensor (for converters,
    which see plain ints in ``t.shape``)."""
    state = ctx.symbolic
    if state is not None and isinstance(t, torch.Tensor) and ctx.is_traced(t):
        sizes = state.sizes(t)
        if sizes is not None:
            return sizes
    return tuple(int(d) for d in t.shape)


def network_sizes(ctx: ConversionContext, it: Any) -> tuple[Any, ...]:
    """The sizes of network tensor ``it``: a :class:`SymSize` for each dynamic (-1) dim, so that
    builders can compute output sizes of dynamic tensors with Python arithmetic and
    :func:`shape_tensor`. Plain ints when ``ctx`` converts no dynamic network."""
    state = ctx.symbolic
    if state is not None:
        sizes = state.itensor_sizes(it)
        if sizes is not None:
            return sizes
    return tuple(int(d) for d in it.shape)


def dim_of(ctx: ConversionContext, it: Any, v: Any, pos: int) -> int | None:
    """The dim of network tensor ``it`` that is the dynamic size ``v`` (the same dim, or one of the same
    size by duck sizing once ``it``'s sizes were read with their traced values), preferring ``pos``;
    None when there is none (a reshape or expand can then copy that dim instead of computing ``v``)."""
    if not isinstance(v, SymSize):
        return None
    e = v._expr
    if isinstance(e, Dim) and e.it is it:
        return e.index
    state = ctx.symbolic
    recorded = state.recorded_sizes(it) if state is not None else None
    if not recorded:
        return None
    key = size_key(v)
    found = [j for j, d in enumerate(recorded) if isinstance(d, SymSize) and size_key(d) == key]
    return pos if pos in found else found[0] if found else None


__all__ = [
    "Dim", "SymSize", "Value", "arange", "bounds", "diff_bounds", "dim_of", "dynamic", "guard_problem", "normal", "symbol",
    "has_sym", "is_sym", "network_sizes", "range_text", "refuse", "scalar", "shape_tensor", "size_key", "sizes_of",
    "specialize_guard", "sym_max", "sym_min", "to_itensor",
]
