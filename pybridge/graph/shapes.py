"""The op table of docs/graph-format.md: argument count, attributes and output-shape rule.

`OPS[op].rule(arg_shapes, attrs, node_shape)` returns the output shape the op's rule gives,
or raises `ShapeMismatch` with a message when the argument shapes are not allowed.
"""

from collections.abc import Callable
from dataclasses import dataclass
from math import prod

Shape = tuple[int, ...]


class ShapeMismatch(Exception):
    """Argument shapes that the op's row in the table does not allow (internal to the loader)."""


@dataclass(frozen=True)
class OpSpec:
    arity: int
    attrs: dict[str, str]  # attribute name -> "float" | "nat"
    rule: Callable[[list[Shape], dict, Shape], Shape]


def _need_rank(x: Shape, rank: int, what: str = "argument") -> None:
    if len(x) < rank:
        raise ShapeMismatch(f"{what} of shape {list(x)} needs at least {rank} axes")


def _same(x: Shape, y: Shape) -> Shape:
    if x != y:
        raise ShapeMismatch(f"argument shapes {list(x)} and {list(y)} differ (no broadcasting)")
    return x


def _last_reduced(x: Shape) -> Shape:
    _need_rank(x, 1)
    return x[:-1]


def _keep_last(x: Shape) -> Shape:
    _need_rank(x, 1)
    return x


def _exact_rank(x: Shape, rank: int, what: str) -> None:
    if len(x) != rank:
        raise ShapeMismatch(f"{what} must have {rank} axes, got {list(x)}")


def _vec_mat(x: Shape, w: Shape) -> Shape:
    _exact_rank(x, 1, "x")
    _exact_rank(w, 2, "W")
    if x[0] != w[0]:
        raise ShapeMismatch(f"x {list(x)} and W {list(w)} disagree on the inner axis")
    return (w[1],)


def _mat_mat(a: Shape, b: Shape) -> Shape:
    _exact_rank(a, 2, "A")
    _exact_rank(b, 2, "B")
    if a[1] != b[0]:
        raise ShapeMismatch(f"A {list(a)} and B {list(b)} disagree on the inner axis")
    return (a[0], b[1])


def _batched(a: Shape, b: Shape) -> Shape:
    _exact_rank(a, 3, "A")
    _exact_rank(b, 3, "B")
    if a[0] != b[0] or a[2] != b[1]:
        raise ShapeMismatch(f"A {list(a)} and B {list(b)} disagree on the batch or inner axis")
    return (a[0], a[1], b[2])


def _outer(x: Shape, y: Shape) -> Shape:
    _exact_rank(x, 1, "x")
    _exact_rank(y, 1, "y")
    return (x[0], y[0])


def _swap(x: Shape) -> Shape:
    _need_rank(x, 2)
    return (x[1], x[0], *x[2:])


def _reshape(x: Shape, out: Shape) -> Shape:
    if prod(x) != prod(out):
        raise ShapeMismatch(f"cannot reshape {list(x)} ({prod(x)} entries) to {list(out)} ({prod(out)} entries)")
    return out


def _concat0(x: Shape, y: Shape) -> Shape:
    _need_rank(x, 1, "x")
    _need_rank(y, 1, "y")
    if x[1:] != y[1:]:
        raise ShapeMismatch(f"x {list(x)} and y {list(y)} differ after the first axis")
    return (x[0] + y[0], *x[1:])


def _concat_last(x: Shape, y: Shape) -> Shape:
    _need_rank(x, 1, "x")
    _need_rank(y, 1, "y")
    if x[:-1] != y[:-1]:
        raise ShapeMismatch(f"x {list(x)} and y {list(y)} differ before the last axis")
    return (*x[:-1], x[-1] + y[-1])


def _rms_norm(x: Shape, g: Shape) -> Shape:
    _need_rank(x, 1, "x")
    if g != x[-1:]:
        raise ShapeMismatch(f"gain {list(g)} must be [{x[-1]}] for x {list(x)}")
    return x


_UNARY = OpSpec(1, {}, lambda s, a, out: s[0])
_BINARY = OpSpec(2, {}, lambda s, a, out: _same(s[0], s[1]))

OPS: dict[str, OpSpec] = {
    **{op: _UNARY for op in ("neg", "exp", "log", "tanh", "sqrt", "sigmoid", "erf")},
    **{op: _BINARY for op in ("add", "sub", "mul", "div")},
    "scale": OpSpec(1, {"c": "float"}, lambda s, a, out: s[0]),
    "broadcast": OpSpec(1, {"n": "nat"}, lambda s, a, out: (a["n"], *s[0])),
    "sumLast": OpSpec(1, {}, lambda s, a, out: _last_reduced(s[0])),
    "meanLast": OpSpec(1, {}, lambda s, a, out: _last_reduced(s[0])),
    "vecMatMul": OpSpec(2, {}, lambda s, a, out: _vec_mat(*s)),
    "matMul": OpSpec(2, {}, lambda s, a, out: _mat_mat(*s)),
    "batchedMatMul": OpSpec(2, {}, lambda s, a, out: _batched(*s)),
    "outer": OpSpec(2, {}, lambda s, a, out: _outer(*s)),
    "swapAxes01": OpSpec(1, {}, lambda s, a, out: _swap(s[0])),
    "reshape": OpSpec(1, {}, lambda s, a, out: _reshape(s[0], out)),
    "concat0": OpSpec(2, {}, lambda s, a, out: _concat0(*s)),
    "concatLast": OpSpec(2, {}, lambda s, a, out: _concat_last(*s)),
    "softmaxLast": OpSpec(1, {}, lambda s, a, out: _keep_last(s[0])),
    "rmsNormLast": OpSpec(2, {"eps": "float"}, lambda s, a, out: _rms_norm(*s)),
    "l2NormLast": OpSpec(1, {"eps": "float"}, lambda s, a, out: _keep_last(s[0])),
}
