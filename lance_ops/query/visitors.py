"""What is derived from a filter's expression tree: its SQL text, the columns it reads, and the
simple conditions (:class:`Bound`) statistics and scalar indices can prune with.

The Arrow expression is the fourth derivation: :mod:`lance_ops.query.arrow` translates the
tree with DataFusion's semantics.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from lance_ops.query import expressions as ex

__all__ = ["Bound", "bounds", "bounds_are_exact", "columns", "disjunctions", "to_sql"]


@dataclass(frozen=True)
class Bound:
    """A condition every selected row meets, on one top-level column: what statistics can prune with.

    ``op`` is ``eq``, ``lt``, ``le``, ``gt``, ``ge`` (one value), ``in`` (the values), ``null`` or
    ``not_null`` (no value); values have the column's type and are never null or NaN.
    """

    column: str
    op: str
    values: tuple[pa.Scalar, ...] = ()


def to_sql(node: ex.Expr) -> str:
    """The tree's SQL text in Lance's dialect (:func:`lance_ops.query.parser.to_sql`; the parser,
    and sqlglot with it, is loaded on the first call)."""
    from lance_ops.query.parser import to_sql as parser_to_sql  # noqa: PLC0415 - sqlglot, on first use

    return parser_to_sql(node)


def columns(node: ex.Expr) -> list[tuple[str, ...]]:
    """The column paths the tree reads, in first-use order, each once."""
    found: dict[tuple[str, ...], None] = {}

    def visit(n: ex.Expr) -> None:
        if isinstance(n, ex.Column):
            found.setdefault(n.path)
        for child in ex.children(n):
            visit(child)

    visit(node)
    return list(found)


# Resolves a column node to the column (a top-level one for statistics, a dotted struct field path
# for indices) the bounds are on (None: not one they can use).
Resolve = Callable[[ex.Column], str | None]
# A constant operand as a value of the column's type (None: not a non-null, non-NaN constant).
Constant = Callable[[ex.Expr, str], pa.Scalar | None]


def bounds(node: ex.Expr, column: Resolve, constant: Constant) -> list[Bound]:
    """The bounds the conjuncts of ``node``'s top-level ``AND`` imply."""
    return [b for part in ex.conjuncts(node) for b in _conjunct_bounds(part, column, constant)]


def disjunctions(node: ex.Expr, column: Resolve, constant: Constant) -> list[tuple[tuple[Bound, ...], ...]]:
    """For each conjunct of ``node``'s top-level ``AND`` that is an ``OR`` (``a = 1 OR (a >= 5 AND
    a < 9)``): the bounds each of its alternatives (the operands of its ``OR`` chain) implies, in
    order; an ``OR`` with an alternative that implies none (every row may meet it) is left out."""
    found = []
    for part in ex.conjuncts(node):
        if not isinstance(part, ex.Or):
            continue
        alternatives = tuple(tuple(bounds(alt, column, constant)) for alt in _disjuncts(part))
        if all(alternatives):
            found.append(alternatives)
    return found


def _disjuncts(node: ex.Expr) -> list[ex.Expr]:
    if isinstance(node, ex.Or):
        return _disjuncts(node.left) + _disjuncts(node.right)
    return [node]


def bounds_are_exact(node: ex.Expr, column: Resolve, constant: Constant) -> bool:
    """Whether ``node`` is exactly the ``AND`` of its bounds: every conjunct of its top-level
    ``AND`` is a comparison (not ``!=``), ``BETWEEN``, ``IN``, ``IS NULL`` or ``IS NOT NULL`` of a
    column with constants that :func:`bounds` turns whole into bounds (a row then meets the filter
    if and only if it meets every bound)."""
    for part in ex.conjuncts(node):
        found = _conjunct_bounds(part, column, constant)
        if not found or (isinstance(part, ex.Between) and len(found) != 2):
            return False
    return True


def _plain(node: ex.Expr, column: Resolve) -> str | None:
    return column(node) if isinstance(node, ex.Column) else None


def _conjunct_bounds(node: ex.Expr, column: Resolve, constant: Constant) -> list[Bound]:
    if isinstance(node, ex.Compare) and node.op != "ne":
        op, left, right = node.op, node.left, node.right
        name = _plain(left, column)
        if name is None:
            name, left, right, op = _plain(right, column), right, left, ex.COMPARISONS[op]
        value = None if name is None else constant(right, name)
        return [] if name is None or value is None else [Bound(name, op, (value,))]
    if isinstance(node, ex.Between) and (name := _plain(node.value, column)) is not None:
        ends = (("ge", constant(node.low, name)), ("le", constant(node.high, name)))
        return [Bound(name, op, (v,)) for op, v in ends if v is not None]
    if isinstance(node, ex.In) and (name := _plain(node.value, column)) is not None:
        values = [constant(item, name) for item in node.items]
        present = tuple(v for v in values if v is not None)
        return [Bound(name, "in", present)] if len(present) == len(values) else []
    if isinstance(node, ex.IsNull) and (name := _plain(node.value, column)) is not None:
        return [Bound(name, "null")]
    if (
        isinstance(node, ex.Not)
        and isinstance(node.operand, ex.IsNull)
        and (name := _plain(node.operand.value, column)) is not None
    ):
        return [Bound(name, "not_null")]
    return []
