"""A numpy evaluator for the simplest filters over integer columns, beside the Arrow one.

Row-level mutations select rows with filters such as ``id % 100 = 7`` or ``k >= 10 AND k < 20``
over a million-row fragment at a time. Arrow evaluates the bound expression through an Acero plan
(a plan per batch, its kernels one after the other, the batch handed to Arrow's thread pool);
numpy computes the same mask in one pass on the calling thread. :func:`compile_mask` accepts only
filters whose numpy meaning is exactly the Arrow one and returns None for anything else:

* top-level columns of a signed integer type (named exactly as stored), integer literals;
* comparisons (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``), ``BETWEEN``, ``IN (...)``,
  ``IS [NOT] NULL``, ``AND`` / ``OR`` / ``NOT``;
* ``+``, ``-``, ``*``, unary ``-`` (wrapping, as Arrow's unchecked kernels) and ``%`` by a non-zero literal
  (truncated, the sign following the dividend, as SQL's) over int64 operands only (narrower
  columns are promoted to int64 by the Arrow path, which numpy would not do).

The mask is computed only when no column it reads holds a null (SQL's three-valued logic then
reduces to numpy's booleans); otherwise :meth:`Mask.__call__` returns None and the caller uses the
Arrow path. :func:`selected` is that choice made once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lance_ops.errors import LanceOpsError
from lance_ops.query import expressions as ex
from lance_ops.query.predicate import Predicate

__all__ = ["Mask", "compile_mask", "selected"]

Columns = dict[str, np.ndarray]
_Eval = Callable[[Columns], np.ndarray]

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}
_ARITHMETIC: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "+": np.add,
    "-": np.subtract,
    "*": np.multiply,
}
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class _Unsupported(Exception):
    """The filter is outside what the numpy evaluator handles."""


@dataclass(frozen=True)
class Mask:
    """A compiled filter: the columns it reads and its numpy evaluation."""

    columns: tuple[str, ...]
    evaluate: _Eval

    def __call__(self, table: pa.Table) -> np.ndarray | None:
        """Where the filter is TRUE over ``table`` (a bool array), or None when a column it reads
        holds nulls (the Arrow path decides then)."""
        values: Columns = {}
        for name in self.columns:
            column = table.column(name)
            if column.null_count:
                return None
            values[name] = column.to_numpy()
        if not self.columns:
            return None
        result = self.evaluate(values)
        return np.broadcast_to(result, (table.num_rows,)).astype(bool, copy=False)


def compile_mask(filter_: object, schema: pa.Schema) -> Mask | None:
    """The numpy evaluator of a SQL filter over ``schema``, or None when the filter is not one it
    evaluates exactly as the Arrow path does (an Arrow expression is never compiled)."""
    if not isinstance(filter_, str):
        return None
    try:
        from lance_ops.query.parser import parse  # noqa: PLC0415 - sqlglot, on first use

        tree = parse(filter_)
        columns: set[str] = set()
        evaluate, kind = _compile(tree, schema, columns)
    except (_Unsupported, LanceOpsError):
        return None
    if kind != "bool" or not columns:
        return None
    return Mask(tuple(sorted(columns)), evaluate)


def selected(mask: Mask | None, predicate: Predicate, table: pa.Table) -> np.ndarray:
    """Where ``predicate`` (whose numpy form is ``mask``) is TRUE over ``table`` (NULL counts as
    FALSE): numpy when it applies, else the Arrow expression, evaluated on the calling thread."""
    if mask is not None:
        found = mask(table)
        if found is not None:
            return found
    from pyarrow import acero  # noqa: PLC0415 - imports pyarrow.dataset: not at startup

    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    project = acero.Declaration("project", acero.ProjectNodeOptions([predicate.expression], ["m"]))
    result = acero.Declaration.from_sequence([source, project]).to_table(use_threads=False).column("m")
    return np.asarray(pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool)


def _literal_int(node: ex.Expr) -> int | None:
    """The value of an integer literal (``-5`` is a negated literal), None for anything else."""
    negate = False
    while isinstance(node, ex.Neg):
        node, negate = node.value, not negate
    if (
        not isinstance(node, ex.Literal)
        or not pa.types.is_integer(node.value.type)
        or not node.value.is_valid
    ):
        return None
    value = int(node.value.as_py())
    value = -value if negate else value
    if not _INT64_MIN <= value <= _INT64_MAX:
        return None
    return value


def _compile(node: ex.Expr, schema: pa.Schema, columns: set[str]) -> tuple[_Eval, str]:
    """``(evaluate, kind)``: kind ``"bool"``, ``"int64"`` (an int64 value) or ``"int"`` (a
    narrower signed integer column, usable in comparisons only)."""
    literal = _literal_int(node)
    if literal is not None:
        constant = np.asarray(literal, dtype=np.int64)  # a 0-d array: broadcast against columns
        return (lambda _: constant), "int64"
    if isinstance(node, ex.Column):
        if len(node.path) != 1 or schema.get_field_index(node.path[0]) < 0:
            raise _Unsupported
        name = node.path[0]
        type_ = schema.field(name).type
        if not pa.types.is_signed_integer(type_):
            raise _Unsupported
        columns.add(name)
        return (lambda values: values[name]), "int64" if type_ == pa.int64() else "int"
    if isinstance(node, ex.Compare):
        left, _ = _number(node.left, schema, columns)
        right, _ = _number(node.right, schema, columns)
        compare = _COMPARE[node.op]
        return (lambda values: compare(left(values), right(values))), "bool"
    if isinstance(node, ex.Between):
        value, _ = _number(node.value, schema, columns)
        low, _ = _number(node.low, schema, columns)
        high, _ = _number(node.high, schema, columns)

        def between(values: Columns) -> np.ndarray:
            v = value(values)
            return (v >= low(values)) & (v <= high(values))

        return between, "bool"
    if isinstance(node, ex.In):
        value, _ = _number(node.value, schema, columns)
        items = [_literal_int(item) for item in node.items]
        if not items or any(item is None for item in items):
            raise _Unsupported
        listed = np.array(items, dtype=np.int64)
        return (lambda values: np.isin(value(values), listed)), "bool"
    if isinstance(node, ex.IsNull):
        value, _ = _number(node.value, schema, columns)  # the columns hold no null when evaluated
        return (lambda values: np.zeros(np.shape(value(values)), bool)), "bool"
    if isinstance(node, ex.And | ex.Or):
        left, right = _boolean(node.left, schema, columns), _boolean(node.right, schema, columns)
        combine = np.logical_and if isinstance(node, ex.And) else np.logical_or
        return (lambda values: combine(left(values), right(values))), "bool"
    if isinstance(node, ex.Not):
        operand = _boolean(node.operand, schema, columns)
        return (lambda values: np.logical_not(operand(values))), "bool"
    if isinstance(node, ex.Arithmetic):
        return _arithmetic(node, schema, columns), "int64"
    if isinstance(node, ex.Neg):
        value, kind = _number(node.value, schema, columns)
        if kind != "int64":
            raise _Unsupported

        def negated(values: Columns) -> np.ndarray:
            with np.errstate(over="ignore"):
                return np.negative(value(values))

        return negated, "int64"
    raise _Unsupported


def _number(node: ex.Expr, schema: pa.Schema, columns: set[str]) -> tuple[_Eval, str]:
    evaluate, kind = _compile(node, schema, columns)
    if kind == "bool":
        raise _Unsupported
    return evaluate, kind


def _boolean(node: ex.Expr, schema: pa.Schema, columns: set[str]) -> _Eval:
    evaluate, kind = _compile(node, schema, columns)
    if kind != "bool":
        raise _Unsupported
    return evaluate


def _arithmetic(node: ex.Arithmetic, schema: pa.Schema, columns: set[str]) -> _Eval:
    left, left_kind = _number(node.left, schema, columns)
    right, right_kind = _number(node.right, schema, columns)
    if left_kind != "int64" or right_kind != "int64":
        raise _Unsupported
    if node.op == "%":
        divisor = _literal_int(node.right)
        if not divisor:  # a column divisor may be 0 (the Arrow path raises); 0 itself raises
            raise _Unsupported
        if divisor == -1:  # INT64_MIN % -1 overflows in numpy's fmod; the remainder is always 0
            return lambda values: np.zeros(np.shape(left(values)), np.int64)
        constant = np.int64(divisor)
        return lambda values: np.fmod(left(values), constant)
    operation = _ARITHMETIC.get(node.op)
    if operation is None:
        raise _Unsupported

    def wrapping(values: Columns) -> np.ndarray:
        with np.errstate(over="ignore"):
            return operation(left(values), right(values))

    return wrapping
