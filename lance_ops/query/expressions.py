"""The filter expression tree: immutable nodes every filter is read into, from SQL or Arrow.

A filter given as SQL text (:mod:`lance_ops.query.parser`) or as a ``pyarrow.compute.Expression``
(:mod:`lance_ops.query.substrait`) becomes one tree of these nodes; what is derived from a filter
(the pruning bounds, the columns it reads, its SQL text) is computed by the visitors of
:mod:`lance_ops.query.visitors`, never read back out of a printed string::

    "x > 5 AND name IS NOT NULL"
      -> And(Compare('gt', Column(('x',)), Literal(5)), Not(IsNull(Column(('name',)))))

Nodes hold operands as they were written: a literal keeps the type it was written with (``5`` is
int64, ``1.5`` float64, an Arrow literal its own type); typing against a schema happens when the
tree is bound. Negated forms are a :class:`Not` around the positive one (``x NOT IN (..)`` is
``Not(In(..))``), as sqlglot and Substrait both write them. A node parsed from SQL keeps the text
it was parsed from (``source``), so errors quote the filter in the user's words.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields, replace
from typing import Any

import pyarrow as pa

__all__ = [
    "COMPARISONS",
    "Arithmetic",
    "And",
    "Between",
    "Call",
    "Cast",
    "Column",
    "Compare",
    "Expr",
    "In",
    "IsNull",
    "Like",
    "Literal",
    "Neg",
    "Not",
    "Or",
    "children",
    "conjuncts",
    "transform",
]

# Comparison operators, and each one's mirror image (``5 < x`` is ``x > 5``).
COMPARISONS = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}
ARITHMETIC = ("+", "-", "*", "/", "%")


@dataclass(frozen=True)
class Expr:
    """Base of every node (frozen dataclasses compared by value).

    ``source`` is the SQL text the node was parsed from, as errors quote it (None for a node
    built otherwise); it takes no part in comparing nodes.
    """

    source: str | None = field(default=None, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Column(Expr):
    """A column, or a field inside struct columns: ``("a", "b")`` is ``a.b``."""

    path: tuple[str, ...]


@dataclass(frozen=True)
class Literal(Expr):
    """A constant of a given Arrow type (a null scalar of type ``null`` is SQL's ``NULL``)."""

    value: pa.Scalar

    def __eq__(self, other: object) -> bool:
        # Same type and value, a float's sign included (pa.Scalar's == is False for NaN, True
        # for -0.0 against 0.0).
        return isinstance(other, Literal) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self) -> tuple[str, str]:
        value = self.value.as_py()
        text = repr(math.copysign(1.0, value)) + repr(value) if isinstance(value, float) else repr(value)
        return str(self.value.type), text


@dataclass(frozen=True)
class Compare(Expr):
    """``left op right`` with ``op`` one of :data:`COMPARISONS` (``eq``, ``ne``, ``lt``, ...)."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise ValueError(f"unknown comparison {self.op!r}")


@dataclass(frozen=True)
class And(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Or(Expr):
    left: Expr
    right: Expr


@dataclass(frozen=True)
class Not(Expr):
    operand: Expr


@dataclass(frozen=True)
class In(Expr):
    """``value IN (items...)``."""

    value: Expr
    items: tuple[Expr, ...]


@dataclass(frozen=True)
class Between(Expr):
    """``value BETWEEN low AND high`` (both ends included)."""

    value: Expr
    low: Expr
    high: Expr


@dataclass(frozen=True)
class IsNull(Expr):
    value: Expr


@dataclass(frozen=True)
class Like(Expr):
    """``value LIKE pattern`` (``ILIKE`` when ``ignore_case``)."""

    value: Expr
    pattern: Expr
    ignore_case: bool = False


@dataclass(frozen=True)
class Call(Expr):
    """A scalar function by its lower-case SQL name (``lower``, ``isnan``, ``array_has``, ...)."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Cast(Expr):
    """``CAST(value AS to)``."""

    value: Expr
    to: pa.DataType


@dataclass(frozen=True)
class Arithmetic(Expr):
    """``left op right`` with ``op`` one of ``+ - * / %``."""

    op: str
    left: Expr
    right: Expr

    def __post_init__(self) -> None:
        if self.op not in ARITHMETIC:
            raise ValueError(f"unknown arithmetic operator {self.op!r}")


@dataclass(frozen=True)
class Neg(Expr):
    value: Expr


def children(node: Expr) -> Iterator[Expr]:
    """The operands of ``node``, in order."""
    for f in fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, Expr):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Expr))


def transform(node: Expr, visit: Callable[[Expr], Expr]) -> Expr:
    """``node`` rebuilt bottom-up with ``visit`` applied to every node (children first)."""
    changes: dict[str, Any] = {}
    for f in fields(node):  # type: ignore[arg-type]
        value = getattr(node, f.name)
        if isinstance(value, Expr):
            changes[f.name] = transform(value, visit)
        elif isinstance(value, tuple) and any(isinstance(v, Expr) for v in value):
            changes[f.name] = tuple(transform(v, visit) if isinstance(v, Expr) else v for v in value)
    return visit(replace(node, **changes) if changes else node)  # type: ignore[type-var]


def conjuncts(node: Expr) -> list[Expr]:
    """The operands of ``node``'s top-level ``AND`` chain (``[node]`` when it is not one)."""
    if isinstance(node, And):
        return conjuncts(node.left) + conjuncts(node.right)
    return [node]
