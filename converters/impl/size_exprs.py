"""The expressions of symbolic sizes (:mod:`.sizes`): their nodes, normal forms and bounds.

A :class:`~.sizes.SymSize` records how it was computed: a :class:`Dim` (a dim of a network tensor,
``key`` naming its symbol), a :class:`Value` (a size read from values) or an :class:`Op` of sizes.
Two sizes are the same size for every input when their *normal forms* are equal: a polynomial with
integer coefficients over *atoms* (the symbols, and the operations a polynomial cannot hold:
non-exact floor divisions and moduli, min and max, each an atom keyed by its operands' normal forms).
So ``(n + 1) - n`` is 1, ``n * 4 // 4`` is ``n`` and ``2 * n - n`` is ``n``.

Bounds: each size has an interval (:func:`interval` of its operation's operands, an atom its own),
tightened by the bounds of its normal form (each monomial's interval product, summed: exact for
linear forms, where independent symbols reach their bounds together). A comparison is decided on
the bounds of the difference's normal form (``m < 2 * n`` with ``m`` and ``n`` the same symbol is
``-n < 0``, decided by ``n >= 1``).

Why not torch's symbolic shapes (sympy expressions, ``ShapeEnv``, ``bound_sympy``): decided for
issue 22. torch's unbacked symbols and guards live in a ``ShapeEnv`` driven by fake-tensor tracing;
this tracer runs the model on real tensors through patched callables, and every size here must also
be *emitted* as shape layers, so its leaves carry network tensors that a sympy symbol cannot hold.
What the tracer decides (sums, products, exact and floor division, min/max, interval bounds) is the
small normal form below, with no sympy import on the conversion path; a sympy build plus
``bound_sympy`` of ``(4 * n) // 4 - n`` alone costs about 50 µs here, and models ask thousands.
"""

from __future__ import annotations

import math
from typing import Any

INF = math.inf

Poly = dict[tuple[Any, ...], int]  # monomial (atom keys, sorted by repr, repeated for powers) -> coefficient
Atoms = dict[Any, Any]  # atom key -> the size that is that atom (its bounds: _lo, _hi)


class Dim:
    """Dim ``index`` of the network tensor ``it`` (``label`` names it in messages; ``key`` names its
    symbol: dims of equal keys are the same size, see ``SymbolicSizes.itensor_sizes``)."""

    __slots__ = ("index", "it", "key", "label")

    def __init__(self, it: Any, index: int, label: str, key: Any) -> None:
        self.it, self.index, self.label, self.key = it, index, label, key


class Value(Dim):
    """The value of the 1-element integer network tensor ``it`` read as a size (``int(n.item())``):
    computed by the network from shape tensors (see ``torch2trt_lite.trace.symbolic.value_read``)."""

    __slots__ = ()


class Op:
    """``op(a, b)`` of sizes (``b`` None for a unary op)."""

    __slots__ = ("a", "b", "op")

    def __init__(self, op: str, a: Any, b: Any = None) -> None:
        self.op, self.a, self.b = op, a, b


# ------------------------------------------------------------------------------- intervals
def mul_bounds(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    vals = [0.0 if (x == 0 or y == 0) else x * y for x in a for y in b]
    return min(vals), max(vals)


def _floordiv(x: float, y: float) -> float:
    if math.isinf(y):
        return 0.0 if x >= 0 else -1.0
    if math.isinf(x):
        return x if y > 0 else -x
    return float(x // y)


def interval(op: str, a: tuple[float, float], b: tuple[float, float] = (0, 0)) -> tuple[float, float]:
    """The bounds of ``op`` of sizes of bounds ``a`` and ``b``."""
    (alo, ahi), (blo, bhi) = a, b
    if op == "add":
        return alo + blo, ahi + bhi
    if op == "sub":
        return alo - bhi, ahi - blo
    if op == "mul":
        return mul_bounds(a, b)
    if op == "neg":
        return -ahi, -alo
    if op == "min":
        return min(alo, blo), min(ahi, bhi)
    if op == "max":
        return max(alo, blo), max(ahi, bhi)
    if op == "floordiv" and blo > 0:  # monotone in a, and in b for a of one sign: the corners decide
        corners = [_floordiv(x, y) for x in (alo, ahi) for y in (blo, bhi)]
        return min(corners), max(corners)
    if op == "mod" and blo > 0:  # Python's modulo of a positive divisor
        return 0, min(bhi - 1, ahi) if alo >= 0 else bhi - 1
    return -INF, INF


def intersect(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    lo, hi = max(a[0], b[0]), min(a[1], b[1])
    return (lo, hi) if lo <= hi else a  # NOTE: never empty (both hold the traced value); kept sound


def decide(op: str, lo: float, hi: float) -> bool | None:
    """``d op 0`` (``op``: eq, ne, lt, le, gt, ge) for every ``d`` in ``[lo, hi]``; None: not decided."""
    if op in ("eq", "ne"):
        if lo > 0 or hi < 0:
            return op == "ne"
        return op == "eq" if lo == hi == 0 else None
    if op in ("lt", "ge"):
        answer = True if hi < 0 else False if lo >= 0 else None
        return None if answer is None else answer if op == "lt" else not answer
    answer = True if hi <= 0 else False if lo > 0 else None  # le, gt
    return None if answer is None else answer if op == "le" else not answer


# ---------------------------------------------------------------------------- normal forms
def canon(p: Poly) -> tuple[Any, ...]:
    """A hashable, order-independent key of polynomial ``p``."""
    return tuple(sorted(p.items(), key=repr))


def constant(v: int) -> Poly:
    return {(): int(v)} if v else {}


def _mono(keys: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(sorted(keys, key=repr))


def add(p: Poly, q: Poly, scale: int = 1) -> Poly:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, 0) + scale * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def mul(p: Poly, q: Poly) -> Poly:
    out: Poly = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            out = add(out, {_mono(m1 + m2): c1 * c2})
    return out


def divide(p: Poly, q: Poly, atoms: Atoms) -> tuple[Poly, Poly] | None:
    """``(p // q, p % q)`` where they are polynomials for every value: ``q`` one monomial that divides
    each monomial of ``p`` (coefficients included) and is never 0, or a positive constant ``d`` that
    divides every coefficient of ``p`` but the constant ``c``: then ``(p - c) / d + c // d`` and
    ``c % d`` (``(2 * n + 1) // 2`` is ``n``); else None."""
    if len(q) != 1:
        return None
    (mq, cq), = q.items()
    lo, hi = bounds(q, atoms)
    if cq == 0 or lo <= 0 <= hi:
        return None
    rest = p.get((), 0) if mq == () and cq > 0 else 0
    out: Poly = {}
    for m, c in p.items():
        if m == () and rest:
            continue
        left = list(m)
        for k in mq:
            if k not in left:
                return None
            left.remove(k)
        if c % cq:
            return None
        out[tuple(left)] = c // cq
    return add(out, constant(rest // cq)), constant(rest % cq)


def bounds(p: Poly, atoms: Atoms) -> tuple[float, float]:
    """The bounds of polynomial ``p`` whose atoms have the bounds ``atoms``."""
    lo = hi = 0.0
    for m, c in p.items():
        b: tuple[float, float] = (float(c), float(c))
        for k in m:
            atom = atoms.get(k)
            b = mul_bounds(b, (atom._lo, atom._hi) if atom is not None else (-INF, INF))
        lo, hi = lo + b[0], hi + b[1]
    return lo, hi


__all__ = [
    "INF", "Atoms", "Dim", "Op", "Poly", "Value", "add", "bounds", "canon", "constant", "decide", "divide", "interval",
    "intersect", "mul", "mul_bounds",
]
